/* conv_weight.h — the shifted-view weight gradient of conv_weight_x86.c
 * (internal to conv_weight.c).
 *
 * For an ungrouped convolution, every kernel tap (kh, kw) of the weight
 * gradient is a product over output positions of dy with x shifted by that
 * tap (with stride s: one of the s_h * s_w phases of x shifted); with the
 * phases laid out in a zero-padded flat position space this is one uniform
 * shift per tap, so no unfolded (im2col) copy is built. */
#ifndef AMPY_CONV_WEIGHT_H
#define AMPY_CONV_WEIGHT_H

#include "ampy/conv.h"

/* Whether ampy_conv_wgrad_shifted takes this problem: groups == 1, any
 * stride and dilation, float32 on the AVX-512 level or above, or bfloat16 on the
 * AVX512-BF16 level (not AMX, where the GEMM's tiles are faster); N, C, O,
 * OH, OW all > 0. */
int ampy_conv_wgrad_shifted_ok(const ampy_conv2d_geom *g, ampy_dtype dtype);

/* The contract of ampy_conv2d_backward_weight for such a problem (geometry
 * checked). Sums are float32, each dw element rounded once. When x holds an
 * inf or NaN the zero-filled junk positions of the flat space could pair a
 * zero dy with it, so then *fallback is set to 1, dw is not written and the
 * caller must run its general path; otherwise *fallback is 0.
 * Returns AMPY_OK or AMPY_ERR_NOMEM. */
ampy_status ampy_conv_wgrad_shifted(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                    const int64_t *xs, const void *dy, void *dw, int *fallback);

#endif /* AMPY_CONV_WEIGHT_H */
