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

/* Backward rules of ampy/autograd/_rules_math.py in one pass, for
 * contiguous operands of one dtype (float32, float16 or bfloat16; halves
 * computed in float32 and rounded once into dx of the same dtype):
 *   gelu (approximate="none"): dx = g * (Phi(x) + x * phi(x)), the rule's
 *     float operations in its order (erff/expf);
 *   relu, from the output y: dx = y > 0 ? g : +0 (exact);
 *   softmax over the last dim, rows of N from the output y:
 *     dx = y * (g - sum(g * y)), the sum accumulated in double. */
ampy_status ampy_fused_gelu_bwd(int64_t n, const void *x, const void *g, int dtype, void *dx);
/* out[j] = sum over i of x[i, j] for a contiguous (M, N) matrix, in double,
 * rounded once to dtype (float32/float16/bfloat16): ampy_reduce's sum(0) bits */
ampy_status ampy_fused_colsum(int64_t M, int64_t N, const void *x, int dtype, void *out);
ampy_status ampy_fused_relu_bwd(int64_t n, const void *y, const void *g, int dtype, void *dx);
ampy_status ampy_fused_softmax_bwd(int64_t M, int64_t N, const void *y, const void *g,
                                   int dtype, void *dx);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_FUSED_H */
