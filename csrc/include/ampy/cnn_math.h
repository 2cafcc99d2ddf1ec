/* ampy/cnn_math.h — what every cnn kernel (csrc/cnn_*.c) computes alike:
 * element loads and stores in the compute type, the window and index
 * formulas of the pools and interpolation (torch's
 * aten/src/ATen/native/Pool.h, AdaptivePooling.h, UpSample.h, restated), and
 * the output-size rule of a pooling dim. AMPY_ELEM: host and device.
 * Unit tests: tests/c/test_cnn_math.c.
 */
#ifndef AMPY_CNN_MATH_H
#define AMPY_CNN_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"

/* Element i of a float32 / float16 / bfloat16 array as float. */
AMPY_ELEM float ampy_cnn_ldf(const void *p, int dt, int64_t i)
{
    if (dt == AMPY_FLOAT32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
}

/* v rounded once into element i of a float32 / float16 / bfloat16 array. */
AMPY_ELEM void ampy_cnn_stf(void *p, int dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
}

/* Output length of a pooling dim (torch's pooling_output_shape):
 * floor or ceil of (n + 2p - d(k-1) - 1) / s, plus 1; in ceil mode the last
 * window must start inside the input or its left padding. Negative when
 * the window does not fit (the caller raises). */
AMPY_ELEM int64_t ampy_cnn_pool_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d,
                                    int ceil_mode)
{
    int64_t num = n + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t q = num >= 0 ? num / s : -((-num + s - 1) / s); /* floor division */
    int64_t out = q + 1;
    if (ceil_mode && (out - 1) * s >= n + p)
        out--;
    return out;
}

/* First and one-past-last input index of adaptive window o of n_out over n:
 * floor(o n / n_out) and ceil((o + 1) n / n_out), in integers. */
AMPY_ELEM int64_t ampy_cnn_adaptive_start(int64_t o, int64_t n_out, int64_t n)
{
    return (o / n_out) * n + ((o % n_out) * n) / n_out;
}

AMPY_ELEM int64_t ampy_cnn_adaptive_end(int64_t o, int64_t n_out, int64_t n)
{
    return 1 + ((o + 1) * n - 1) / n_out;
}

/* The ratio an interpolation dim maps destination to source indices with
 * (torch's area_pixel_compute_scale, in float32 for float32 and half data,
 * in float64 for float64 data): align_corners: (n - 1) / (n_out - 1), 0 for
 * n_out <= 1; otherwise 1 / scale for a user scale factor (> 0), else
 * n / n_out. */
AMPY_ELEM double ampy_cnn_interp_ratio(int64_t n, int64_t n_out, int align_corners, double scale,
                                       int f64)
{
    if (align_corners) {
        if (n_out <= 1)
            return 0.0;
        return f64 ? (double)(n - 1) / (double)(n_out - 1)
                   : (double)((float)(n - 1) / (float)(n_out - 1));
    }
    if (scale > 0.0)
        return f64 ? 1.0 / scale : (double)(float)(1.0 / scale);
    return f64 ? (double)n / (double)n_out : (double)((float)n / (float)n_out);
}

/* Nearest source index (torch's nearest_idx, float32 for every dtype): the
 * identity and halving shortcuts, else min(floor(o * ratio), n - 1). */
AMPY_ELEM int64_t ampy_cnn_nearest_src(int64_t o, int64_t n, int64_t n_out, double scale)
{
    if (n_out == n)
        return o;
    if (n_out == 2 * n)
        return o >> 1;
    float r = scale > 0.0 ? (float)(1.0 / scale) : (float)n / (float)n_out;
    int64_t i = (int64_t)floorf((float)o * r);
    return i < n - 1 ? i : n - 1;
}

/* Bilinear neighbours i0, i1 and lambdas l0, l1 of destination index o
 * (torch's compute_source_index_and_lambda with the ratio above; the
 * half-pixel source index is one fused multiply-add, as torch's compiled
 * kernel computes it). f64 selects float64 arithmetic, else float32. */
AMPY_ELEM void ampy_cnn_linear_src(int64_t o, int64_t n, int64_t n_out, double ratio,
                                   int align_corners, int f64, int64_t *i0, int64_t *i1,
                                   double *l0, double *l1)
{
    if (n_out == n) {
        *i0 = *i1 = o;
        *l0 = 1.0;
        *l1 = 0.0;
        return;
    }
    double real, lam;
    if (f64) {
        real = align_corners ? ratio * (double)o : fma(ratio, (double)o + 0.5, -0.5);
    } else {
        float r = (float)ratio;
        real = align_corners ? (double)(r * (float)o) : (double)fmaf(r, (float)o + 0.5f, -0.5f);
    }
    if (!align_corners && real < 0.0)
        real = 0.0;
    int64_t k = (int64_t)floor(real);
    if (k > n - 1)
        k = n - 1;
    lam = f64 ? real - (double)k : (double)((float)real - (float)k);
    lam = lam < 0.0 ? 0.0 : (lam > 1.0 ? 1.0 : lam);
    *i0 = k;
    *i1 = k + (k < n - 1 ? 1 : 0);
    *l1 = lam;
    *l0 = f64 ? 1.0 - lam : (double)(1.0f - (float)lam);
}

/* Source index of padded output index o of a dim of n with left pad lo, or
 * -1 for the constant fill (mode as ampy_cnn_pad_mode). */
AMPY_ELEM int64_t ampy_cnn_pad_src(int64_t o, int64_t n, int64_t lo, int mode)
{
    int64_t i = o - lo;
    switch (mode) {
    case 1: /* reflect */
        if (i < 0)
            i = -i;
        if (i >= n)
            i = 2 * (n - 1) - i;
        return i;
    case 2: /* replicate */
        return i < 0 ? 0 : (i >= n ? n - 1 : i);
    case 3: /* circular */
        i %= n;
        return i < 0 ? i + n : i;
    default:
        return i >= 0 && i < n ? i : -1;
    }
}

#endif /* AMPY_CNN_MATH_H */
