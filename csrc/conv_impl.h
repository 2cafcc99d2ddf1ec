/* conv_impl.h — the pieces conv.c shares with conv_weight.c (internal). */
#ifndef AMPY_CONV_IMPL_H
#define AMPY_CONV_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/conv.h"
#include "ampy/parallel.h"

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

/* conv_direct.c: copy images [0, nb) of x (strides xs, element size es;
 * N x C x H x W) to dst[n][Hp][Wp][Cp] channels-last, image pixel (ih, iw)
 * at row pt + ih, column pl + iw, zeros elsewhere (padding rows/columns,
 * channels C..Cp-1); pixels past Hp / Wp are left out. es is 2 or 4.
 * Threaded over (image, row). */
void ampy_conv_pad_nhwc(const char *x, const int64_t *xs, size_t es, int64_t nb, int64_t C,
                        int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp, int64_t Wp,
                        int64_t Cp, char *dst);

/* conv_direct.c: fn over items [0, items) on the thread pool, one item per
 * call: thread k takes the k-th equal run of items from its front, then the
 * other runs' items from their back (for kernels whose item results do not
 * depend on the thread that computes them). */
void ampy_conv_parallel_steal(int64_t items, ampy_range_fn fn, void *ctx);

/* conv_direct.c: whether the direct (implicit-GEMM) forward takes this
 * convolution (ungrouped, any stride, N*OH*OW >= 64; float32 at AMPY_CPU_AVX512 and up,
 * bfloat16 at AMPY_CPU_AVX512_BF16), and that forward (the contract of
 * ampy_conv2d_forward, geometry already checked, N*O*P > 0). */
int ampy_conv_direct_ok(const ampy_conv2d_geom *g, ampy_dtype dtype);
ampy_status ampy_conv_forward_direct(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                     const int64_t *xs, const void *w, const void *bias,
                                     void *y);

/* conv_direct_x86.c: one tile of CONV_DIRECT_MR output positions x 32
 * output channels into out (CONV_DIRECT_MR rows of 32 float32). Row r of
 * tap t reads the channels at a + roff[r] + offs[t] (elements); b is the
 * tile's B panel (conv_direct.c's layout), C channels (bfloat16: `pairs`
 * channel pairs, offsets even) per tap. Only called on CPUs with the
 * kernel's ISA. */
#define CONV_DIRECT_MR 14
/* Transpose of an ni x nj block (1 <= ni, nj <= 16) of es-byte elements (es
 * 2 or 4): element (i, j) of src (at src + i * ss + j * cs elements, cs 1 or
 * 2) to dst + j * ds + i; nothing else is written, nothing outside the block
 * read. AVX-512 CPUs only. */
void ampy_conv_direct_t16(const void *src, int64_t ss, int64_t cs, size_t es, int64_t ni,
                          int64_t nj, void *dst, int64_t ds);
/* The tile's first `len` rows, channels [0, on), plus bias (on floats, or
 * NULL) rounded once to float32 / bfloat16 (bf) into y's planes: row r,
 * channel o to y[o * P + r] (elements of the dtype). */
void ampy_conv_direct_store(const float *tile, const float *bias, int bf, int64_t len,
                            int64_t on, char *y, int64_t P);
void ampy_conv_direct_tile_f32(const float *a, const int64_t *roff, const int64_t *offs,
                               int64_t taps, int64_t C, const float *b, float *out);
void ampy_conv_direct_tile_bf16(const uint16_t *a, const int64_t *roff, const int64_t *offs,
                                int64_t taps, int64_t pairs, const uint16_t *b, float *out);

/* conv_dgrad.c: whether the phase-decomposed direct input gradient takes
 * this convolution (ungrouped, any stride and dilation; float32 at
 * AMPY_CPU_AVX512 and up, bfloat16 at AMPY_CPU_AVX512_BF16), and that input
 * gradient (the contract of ampy_conv2d_backward_input, geometry checked,
 * N*C*H*W > 0). */
int ampy_conv_dgrad_phase_ok(const ampy_conv2d_geom *g, ampy_dtype dtype);
ampy_status ampy_conv_dgrad_phase(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *dy,
                                  const void *w, const void *bias, void *dx);

#endif /* AMPY_CONV_IMPL_H */
