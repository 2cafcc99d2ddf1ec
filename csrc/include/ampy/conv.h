/* ampy/conv.h — 2-d convolution (forward, input gradient, weight gradient,
 * bias gradient) as im2col + the batched GEMM of gemm.h.
 *
 * The convolution (cross-correlation, as torch's conv2d):
 *   y[n, o, oh, ow] = bias[o] + sum_{c, kh, kw} w[o, c, kh, kw] *
 *                     x[n, g*Cg + c, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw]
 * with g = o / Og, Cg = C / groups, Og = O / groups, and x read as 0 outside
 * the image (zero padding). conv1d is the case H = KH = 1; conv_transpose2d
 * is the input gradient of the convolution whose weight it is given (its
 * input in the place of dy), plus its bias.
 *
 * Numerics: every product is summed by ampy_gemm: in float32 for float32,
 * float16 and bfloat16 (halves take the AMX / AVX512-BF16 paths), in double
 * for float64. The overlapping sums of the input gradient (col2im) and the
 * batch sum of the weight gradient are also accumulated in float32 (double),
 * and each result element is rounded ONCE to the tensors' dtype; the bias is
 * added in float32 before that rounding. Work is done a block of images at a
 * time: the im2col buffer of one block is bounded (about 32 MiB), whatever
 * the batch. Threads: ampy_parallel_for for im2col/col2im, the GEMM's own.
 *
 * All tensors are of one dtype (float32, float16, bfloat16 or float64);
 * strides and sizes are in ELEMENTS. Outputs are contiguous and written
 * whole; inputs are never written. No output may overlap an input.
 */
#ifndef AMPY_CONV_H
#define AMPY_CONV_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The geometry of one convolution. The weight is O x (C / groups) x KH x KW;
 * pt/pl are the zero rows/columns before the image (top, left); the output
 * size OH x OW is given (padding after the image is implied by it, so the
 * asymmetric padding of padding="same" needs no copy). */
typedef struct ampy_conv2d_geom {
    int64_t N, C, H, W;     /* input                                     */
    int64_t O, KH, KW;      /* output channels, kernel size              */
    int64_t OH, OW;         /* output size                               */
    int64_t sh, sw;         /* stride, >= 1                              */
    int64_t pt, pl;         /* padding before the image, >= 0            */
    int64_t dh, dw;         /* dilation, >= 1                            */
    int64_t groups;         /* >= 1, divides C and O                     */
} ampy_conv2d_geom;

/* Check *g: sizes >= 0 (N, C, H, W, O, OH, OW may be 0; KH, KW >= 1),
 * stride/dilation >= 1, padding >= 0, groups dividing C and O, and element
 * counts that fit in int64. Any OH/OW is memory-safe (every index is bounds
 * checked against H and W); the caller computes them with torch's formula.
 * Returns AMPY_OK or AMPY_ERR_VALUE naming the field. Defined in
 * conv_math.h (static inline, shared with the CUDA twin):
 *   ampy_status ampy_conv2d_check(const ampy_conv2d_geom *g); */

/* y = conv(x, w) + bias.
 *   x, xs[4]  in: N x C x H x W, any element strides (channels-last views
 *             are read in place).
 *   w         in: contiguous O x C/groups x KH x KW.
 *   bias      in: O contiguous elements, or NULL.
 *   y         out: contiguous N x O x OH x OW.
 * Returns AMPY_OK, AMPY_ERR_DTYPE, AMPY_ERR_VALUE (geometry), AMPY_ERR_NOMEM. */
ampy_status ampy_conv2d_forward(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                const int64_t *xs, const void *w, const void *bias, void *y);

/* dx = the gradient of conv(x, w) with respect to x, for dy; plus bias[c]
 * on every element of channel c when bias is not NULL (conv_transpose2d).
 *   dy        in: contiguous N x O x OH x OW.
 *   w         in: contiguous O x C/groups x KH x KW.
 *   bias      in: C contiguous elements, or NULL.
 *   dx        out: contiguous N x C x H x W.
 * Returns as ampy_conv2d_forward. */
ampy_status ampy_conv2d_backward_input(const ampy_conv2d_geom *g, ampy_dtype dtype,
                                       const void *dy, const void *w, const void *bias,
                                       void *dx);

/* dw = the gradient of conv(x, w) with respect to w, for dy (summed over the
 * batch in float32 / double, rounded once).
 *   x, xs[4]  in: as for ampy_conv2d_forward.
 *   dy        in: contiguous N x O x OH x OW.
 *   dw        out: contiguous O x C/groups x KH x KW.
 * Returns as ampy_conv2d_forward. */
ampy_status ampy_conv2d_backward_weight(const ampy_conv2d_geom *g, ampy_dtype dtype,
                                        const void *x, const int64_t *xs, const void *dy,
                                        void *dw);

/* Which weight-gradient path ampy_conv2d_backward_weight takes where the
 * shifted-view kernel (conv_weight_x86.c) is possible (any stride,
 * ungrouped, its CPU level): "auto" (the shape rule in conv_weight.c),
 * "im2col" (always the unfold + GEMM) or "shifted" (always that kernel).
 * Process-wide, for tests and benchmarks. Returns AMPY_OK or AMPY_ERR_VALUE. */
ampy_status ampy_conv_wgrad_set_path(const char *name);

/* The path, "im2col" or "shifted", that the setting above and the CPU level
 * give g in dtype. */
const char *ampy_conv_wgrad_path(const ampy_conv2d_geom *g, ampy_dtype dtype);

/* Which input-gradient path ampy_conv2d_backward_input takes: "auto" (the
 * shape rule in conv.c), "gemm" (never the phase kernel of conv_dgrad.c) or
 * "phase" (that kernel wherever its dtype and CPU level allow). Process-wide,
 * for tests and benchmarks. Returns AMPY_OK or AMPY_ERR_VALUE. */
ampy_status ampy_conv_dgrad_set_path(const char *name);

/* The path that setting and the CPU level give g in dtype: "pointwise",
 * "phase", "as_conv" (the forward of dy with the flipped kernel) or
 * "col2im". */
const char *ampy_conv_dgrad_path(const ampy_conv2d_geom *g, ampy_dtype dtype);

/* db[o] = sum over n and the P positions of dy[n, o, :] (double sums,
 * rounded once).
 *   dy        in: contiguous N x O x P.
 *   db        out: O elements.
 * Returns AMPY_OK, AMPY_ERR_DTYPE or AMPY_ERR_VALUE (negative size). */
ampy_status ampy_conv_backward_bias(int64_t N, int64_t O, int64_t P, ampy_dtype dtype,
                                    const void *dy, void *db);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CONV_H */
