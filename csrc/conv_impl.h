/* conv_impl.h — the pieces conv.c shares with conv_weight.c (internal). */
#ifndef AMPY_CONV_IMPL_H
#define AMPY_CONV_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/conv.h"

/* Unfold images [0, nb) of x (strides xs, element size es) into col:
 * row (c * KH + kh) * KW + kw, column n * OH * OW + oh * OW + ow, ld columns
 * per row; zeros where the window is outside the image. Threaded. */
void ampy_conv_im2col_block(const ampy_conv2d_geom *g, const char *x, const int64_t *xs,
                            size_t es, int64_t nb, char *col, int64_t ld);

/* Images per block so that a column buffer of elements of es bytes stays
 * within the bound of conv.c (at least 1). */
int64_t ampy_conv_block_images(const ampy_conv2d_geom *g, size_t es);

/* conv_patch.c: whether the patch-row forward takes this convolution
 * (ungrouped, float32 / float16 / bfloat16, C > 0), and that forward (the
 * contract of ampy_conv2d_forward, geometry already checked, N*O*P > 0). */
int ampy_conv_patch_ok(const ampy_conv2d_geom *g, ampy_dtype dtype);
ampy_status ampy_conv_forward_patches(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                      const int64_t *xs, const void *w, const void *bias,
                                      void *y);

#endif /* AMPY_CONV_IMPL_H */
