/* cnn_half.h — half rows widened to float32 and rounded back for the CNN
 * kernels (pools, pads, interpolation), which work on float32 planes: the
 * vector cast of the current CPU level, or the scalar conversion of
 * cnn_math.h where the level has none (the same bits either way). */
#ifndef AMPY_CNN_HALF_H
#define AMPY_CNN_HALF_H

#include <stdint.h>

#include "ampy/cast.h"
#include "ampy/cnn_math.h"
#include "ampy/cpu.h"

static inline void cnn_widen_half(int dt, const uint16_t *h, float *f, int64_t n)
{
    ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), (ampy_dtype)dt,
                                               AMPY_FLOAT32);
    if (k)
        k(h, f, n);
    else
        for (int64_t i = 0; i < n; i++)
            f[i] = ampy_cnn_ldf(h, dt, i);
}

static inline void cnn_narrow_half(int dt, const float *f, uint16_t *h, int64_t n)
{
    ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), AMPY_FLOAT32,
                                               (ampy_dtype)dt);
    if (k)
        k(f, h, n);
    else
        for (int64_t i = 0; i < n; i++)
            ampy_cnn_stf(h, dt, i, f[i]);
}

#endif /* AMPY_CNN_HALF_H */
