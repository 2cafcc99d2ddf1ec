/* ampy/finite.h — multi-tensor non-finite check + unscale (the first half of
 * GradScaler.unscale_/step).
 *
 * One call walks a list of contiguous gradient tensors of mixed dtypes
 * (float32, float16, bfloat16, float64) in place, with the semantics of torch's
 * _amp_foreach_non_finite_check_and_unscale_:
 *
 *     for every element x of every tensor:
 *         v = to_f32(x)                                  (float64: v = x)
 *         if inv_scale != 1:  x = from_f32(v * inv_scale)   (rounded once;
 *                              float64: x * (double)inv_scale, in double)
 *         if the value now held is inf or NaN:  *found_inf = 1.0f
 *
 * Beyond torch: with inv_scale != 1 the test is made on the value actually
 * stored, so a finite gradient that only overflows when unscaled (possible
 * when the loss scale is below 1, or a float16 product above 65504) is
 * flagged too; every non-finite input stays non-finite after the multiply,
 * so nothing torch flags is missed. With inv_scale == 1 nothing is written.
 *
 * Memory traffic: one read of every element, plus one write when
 * inv_scale != 1. Large totals are split across ampy_parallel_for() as one
 * flat range over all tensors (tensor boundaries do not matter).
 *
 * CPU paths (see cpu.h): portable C (elem.h conversions) and AVX-512
 * (csrc/finite_x86.c), chosen at run time by ampy_cpu_level_get(); both give
 * the same bits for every input, including NaN payloads after a multiply.
 */
#ifndef AMPY_FINITE_H
#define AMPY_FINITE_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check every element of `ntensors` tensors for inf/NaN and multiply it by
 * *inv_scale in place.
 *   ntensors   in      number of tensors (>= 0; 0 does nothing)
 *   data       in      data[i]: first element of tensor i, contiguous, dtype
 *                      dtype[i]; may be NULL only when numel[i] == 0. The
 *                      tensors must not overlap one another.
 *   numel      in      numel[i] >= 0, elements
 *   dtype      in      AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16 or AMPY_FLOAT64
 *                      (ampy_dtype; float64 always takes the portable loop)
 *   found_inf  in,out  one float32: set to 1.0f when a non-finite value is
 *                      seen, never cleared (zeroing it is the caller's job,
 *                      as in torch); may not alias any tensor
 *   inv_scale  in      one float32, read once before any element; 1.0f means
 *                      "check only". Any value is allowed (an inf
 *                      inv_scale makes every stored value non-finite or 0;
 *                      a NaN one makes every value NaN: a NaN element keeps
 *                      its own payload, the others take inv_scale's, quieted).
 * Returns AMPY_OK; AMPY_ERR_VALUE (ntensors < 0, a negative numel, a NULL
 * pointer) or AMPY_ERR_DTYPE (another dtype) before touching any memory. */
ampy_status ampy_finite_check_unscale(int64_t ntensors, void *const *data, const int64_t *numel,
                                      const int *dtype, float *found_inf, const float *inv_scale);

/* ---- internal: shared by finite.c and optim.c, and by the C tests --------
 * Multi-tensor walk: calls fn(t, begin, end, ctx) on element ranges of
 * tensor t so that the flat space [0, offsets[ntensors]) (offsets: prefix
 * sums of the numels, ntensors + 1 entries, offsets[0] == 0) is covered
 * exactly once, split across ampy_parallel_for() in chunks of at least
 * `grain` elements. fn must be safe to call concurrently on disjoint ranges. */
typedef void (*ampy_mt_fn)(int64_t t, int64_t begin, int64_t end, void *ctx);
void ampy_mt_parallel(int64_t ntensors, const int64_t *offsets, int64_t grain, ampy_mt_fn fn,
                      void *ctx);

/* Per-path kernels, exported for the test suite.
 * Both process elements [0, n) of one tensor and return 1 when a stored (or,
 * with inv == 1, read) value is non-finite, else 0. `x86` variants exist
 * only on x86-64 builds and require ampy_cpu_level_get() >= AMPY_CPU_AVX512. */
int ampy_finite_run_portable(void *data, int64_t n, int dtype, float inv);
int ampy_finite_run_avx512(void *data, int64_t n, int dtype, float inv);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_FINITE_H */
