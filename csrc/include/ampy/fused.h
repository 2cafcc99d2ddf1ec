/* fused.h — small kernels for the training hot path (ampy/nn, ampy/autograd).
 *
 * Each one is a specialisation of a general kernel elsewhere in libampy that
 * gives the same bits for the cases it takes, without the general kernel's
 * per-element dtype dispatch:
 *   - ampy_fused_zero: memset of n bytes (what filling a fresh float tensor
 *     with +0.0 through copy_ produces: all-zero bits for every float dtype);
 *   - ampy_fused_mse_{fwd,bwd}_f32: ampy_nn_mse_{fwd,bwd} of nn.h for
 *     contiguous float32 inputs, the same operations in the same order
 *     (the forward's double sum stays sequential, so it is bit-identical).
 */
#ifndef AMPY_FUSED_H
#define AMPY_FUSED_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

ampy_status ampy_fused_zero(void *p, int64_t nbytes);

/* reduction: 0 none (out has n elements), 1 mean, 2 sum (out has 1). */
ampy_status ampy_fused_mse_fwd_f32(int64_t n, const float *x, const float *y, int reduction,
                                   float *out);
/* dout: n elements for reduction 0, else 1; dx / dy may be NULL. */
ampy_status ampy_fused_mse_bwd_f32(int64_t n, const float *x, const float *y, int reduction,
                                   const float *dout, float *dx, float *dy);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_FUSED_H */
