/* ampy/cast.h — dtype conversion between tensors.
 *
 * Rounding (elem.h): float -> float16/bfloat16 round once to nearest-even,
 * overflow to inf, subnormals kept; float16 NaNs keep their payload as in
 * NumPy, bfloat16 NaNs become 0x7FC0 as in torch; float64 -> half rounds once.
 * float -> integer truncates toward zero (NaN / out of range -> INT64_MIN
 * then wrapped to the target width); anything -> bool is `x != 0`.
 *
 * Contiguous casts use SIMD (F16C/AVX2, AVX-512) when ampy_cpu_level_get()
 * allows, give the same bits as the portable path, and split large arrays
 * across ampy_get_num_threads() threads.
 */
#ifndef AMPY_CAST_H
#define AMPY_CAST_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Contiguous conversions of n elements (n >= 0). src and dst must not
 * overlap. Return AMPY_OK, or AMPY_ERR_VALUE for n < 0. */
ampy_status ampy_cast_f32_to_f16(const float *src, uint16_t *dst, int64_t n);
ampy_status ampy_cast_f32_to_bf16(const float *src, uint16_t *dst, int64_t n);
ampy_status ampy_cast_f16_to_f32(const uint16_t *src, float *dst, int64_t n);
ampy_status ampy_cast_bf16_to_f32(const uint16_t *src, float *dst, int64_t n);

/* General strided conversion (a bit copy when the dtypes match).
 *   ndim, shape          the shape of dst (0 <= ndim <= AMPY_MAX_DIMS)
 *   src, src_strides     in: element strides, ndim entries; 0 broadcasts
 *   dst, dst_strides     out: element strides, ndim entries
 * dst must not partially overlap src (identical memory with identical
 * strides is fine: the element is read before it is written).
 * Returns AMPY_OK, AMPY_ERR_DTYPE for an invalid dtype code, AMPY_ERR_VALUE
 * for a bad ndim. */
ampy_status ampy_cast(int ndim, const int64_t *shape, const void *src,
                      const int64_t *src_strides, ampy_dtype src_dtype, void *dst,
                      const int64_t *dst_strides, ampy_dtype dst_dtype);

/* ---- internal: SIMD kernels (cast_x86.c); single-threaded, contiguous ---- */
typedef void (*ampy_cast_kernel)(const void *src, void *dst, int64_t n);
/* NULL when the level has no kernel for the pair. */
ampy_cast_kernel ampy_cast_simd_kernel(int level, ampy_dtype src, ampy_dtype dst);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CAST_H */
