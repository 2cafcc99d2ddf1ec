/* ampy/clip.h — multi-tensor norm and scale: the two passes of
 * torch.nn.utils.clip_grad_norm_ over every gradient at once.
 *
 * ampy_clip_norms reads every element of every tensor once and returns one
 * p-norm per tensor (clip_math.h: double accumulation). The flat element
 * space is cut into blocks of AMPY_CLIP_BLOCK elements that never cross a
 * tensor; each block's partial is computed by one thread and the partials of
 * a tensor are merged in block order, so the result does not depend on the
 * thread count. ampy_clip_scale multiplies every element by one coefficient
 * in place (float32 / float16 / bfloat16 in float32 with (float)coef and one
 * rounding; float64 in double), as torch's `grad.mul_(clip_coef)` does.
 */
#ifndef AMPY_CLIP_H
#define AMPY_CLIP_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPY_CLIP_BLOCK ((int64_t)1 << 15) /* elements per partial */

/* Per-tensor p-norms.
 *   ntensors  in   number of tensors (>= 0)
 *   data      in   data[i]: tensor i, contiguous; NULL only when numel[i] == 0
 *   numel     in   numel[i] >= 0, elements
 *   dtype     in   AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16 or AMPY_FLOAT64
 *   p         in   the order: any double but NaN (+-inf, 0, or finite)
 *   norms     out  ntensors doubles (caller-allocated): the norm of tensor i
 *                  (0 for an empty tensor, +inf for p = -inf)
 * Returns AMPY_OK, AMPY_ERR_VALUE (bad counts, NULL, NaN p), AMPY_ERR_DTYPE
 * or AMPY_ERR_NOMEM; nothing is written to `norms` on an error. */
ampy_status ampy_clip_norms(int64_t ntensors, const void *const *data, const int64_t *numel,
                            const int *dtype, double p, double *norms);

/* The total norm of clip_grad_norm_: the p-norm of the per-tensor norms of
 * ampy_clip_norms, each rounded to its tensor's dtype, computed in double
 * and stored, rounded once, as one element of `out_dtype` at `out` (the
 * promoted dtype of the tensors, ampy_norm_promote; 0 for no tensors).
 * Arguments and statuses as ampy_clip_norms. */
ampy_status ampy_clip_total_norm(int64_t ntensors, const void *const *data, const int64_t *numel,
                                 const int *dtype, double p, int out_dtype, void *out);

/* x *= coef for every element of every tensor, in place (arguments as above;
 * the tensors must not overlap). */
ampy_status ampy_clip_scale(int64_t ntensors, void *const *data, const int64_t *numel,
                            const int *dtype, double coef);

/* The CUDA twins (cuda/clip.cu, reached through the ampy_cuda_api table):
 * tensors, `out` and `coef` on `device`, work queued on its stream, no host
 * wait. The block partials (AMPY_CLIP_BLOCK elements, as on the CPU) are
 * merged in block order by one thread, so the bits do not depend on the
 * launch. `coef` is one element of float dtype coef_dtype, read on the
 * device (torch's clip coefficient stays a device tensor). */
ampy_status ampy_clip_total_norm_cuda(int device, int64_t ntensors, const void *const *data,
                                      const int64_t *numel, const int *dtype, double p,
                                      int out_dtype, void *out);
ampy_status ampy_clip_scale_cuda(int device, int64_t ntensors, void *const *data,
                                 const int64_t *numel, const int *dtype, const void *coef,
                                 int coef_dtype);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CLIP_H */
