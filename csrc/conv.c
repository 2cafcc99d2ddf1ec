/* conv.c — 2-d convolution as im2col + ampy_gemm_batched (contracts in
 * ampy/conv.h).
 *
 * A block of nb images is unfolded into one column buffer `col` of
 * (C * KH * KW) rows and nb * OH * OW columns (image n's positions start at
 * column n * OH * OW), so one buffer serves all three products:
 *   forward       y[n, g]  = w[g] @ col[g][:, n]          (batch: nb x groups;
 *                 outputs under CONV_WIDE_P positions: one GEMM per block)
 *   input grad    col[g][:, n] = w[g]^T @ dy[n, g]       (then col2im; with
 *                 unit stride: the forward of dy with the flipped kernel)
 *   weight grad   dw[g]^T += col[g] @ dy[g][:, block]^T  (K = nb * OH * OW,
 *                 conv_weight.c)
 * The GEMM reads every operand through its strides (w^T, col^T in place) and
 * takes the AMX / AVX512-BF16 paths for halves. The buffers are bounded by
 * CONV_COL_BYTES, so the batch is walked in blocks. A 1x1 kernel with unit
 * stride and no padding reads x in place (its im2col is x itself); with a
 * larger stride it is that 1x1 convolution of the view x[:, :, ::sh, ::sw]. The
 * forward of an ungrouped float32 / half convolution (and so the unit-stride
 * input gradient) runs instead as patch rows @ w^T over a channels-last
 * unfold (conv_patch.c), the orientation the GEMM runs faster. This is
 * the unfold-then-GEMM formulation of Chellapilla et al., "High Performance
 * Convolutional Neural Networks for Document Processing" (2006).
 */
#include <stdlib.h>
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/conv.h"
#include "ampy/conv_math.h"
#include "ampy/elem.h"
#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "conv_impl.h"

#define CONV_COL_BYTES ((int64_t)32 << 20)
#define CONV_GRAIN_ELEMS 32768
#define CONV_WIDE_P 1024 /* outputs of fewer positions take one GEMM per block */

static int conv_dtype_ok(ampy_dtype dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16 ||
           dt == AMPY_FLOAT64;
}

/* ---- im2col ---------------------------------------------------------------- */
typedef struct {
    const ampy_conv2d_geom *g;
    const char *x;          /* image n0 */
    int64_t xs[4];
    char *col;
    int64_t ld;             /* columns of col */
    size_t es;              /* element size   */
} im2col_ctx;

#define IM2COL_ROW(T)                                                                             \
    static void im2col_row_##T(const T *xc, int64_t xsh, int64_t xsw, const ampy_conv2d_geom *g,  \
                               int64_t kh, int64_t kw, T *out)                                    \
    {                                                                                             \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                  \
            int64_t ih = ampy_conv_in_index(oh, kh, g->sh, g->pt, g->dh);                         \
            T *o = out + oh * g->OW;                                                              \
            if (ih < 0 || ih >= g->H) {                                                           \
                memset(o, 0, (size_t)g->OW * sizeof(T));                                          \
                continue;                                                                         \
            }                                                                                     \
            const T *xr = xc + ih * xsh;                                                          \
            int64_t iw0 = ampy_conv_in_index(0, kw, g->sw, g->pl, g->dw);                         \
            /* [lo, hi): the output columns whose input column is inside the row */               \
            int64_t lo = iw0 >= 0 ? 0 : (-iw0 + g->sw - 1) / g->sw;                               \
            int64_t hi = g->W - 1 - iw0 < 0 ? 0 : (g->W - 1 - iw0) / g->sw + 1;                   \
            lo = lo < g->OW ? lo : g->OW;                                                         \
            hi = hi < lo ? lo : (hi < g->OW ? hi : g->OW);                                        \
            for (int64_t ow = 0; ow < lo; ow++)                                                   \
                o[ow] = 0;                                                                        \
            if (g->sw == 1 && xsw == 1)                                                           \
                memcpy(o + lo, xr + iw0 + lo, (size_t)(hi - lo) * sizeof(T));                     \
            else                                                                                  \
                for (int64_t ow = lo; ow < hi; ow++)                                              \
                    o[ow] = xr[(iw0 + ow * g->sw) * xsw];                                         \
            for (int64_t ow = hi; ow < g->OW; ow++)                                               \
                o[ow] = 0;                                                                        \
        }                                                                                         \
    }
IM2COL_ROW(uint16_t)
IM2COL_ROW(uint32_t)
IM2COL_ROW(uint64_t)

/* Items are (image, channel) pairs of the block: each writes KH * KW rows. */
static void im2col_range(int64_t begin, int64_t end, void *vctx)
{
    const im2col_ctx *c = vctx;
    const ampy_conv2d_geom *g = c->g;
    int64_t kk = g->KH * g->KW, P = g->OH * g->OW;
    for (int64_t it = begin; it < end; it++) {
        int64_t n = it / g->C, ch = it % g->C;
        const char *xc = c->x + (size_t)(n * c->xs[0] + ch * c->xs[1]) * c->es;
        for (int64_t k = 0; k < kk; k++) {
            char *out = c->col + (size_t)((ch * kk + k) * c->ld + n * P) * c->es;
            int64_t kh = k / g->KW, kw = k % g->KW;
            if (c->es == 2)
                im2col_row_uint16_t((const uint16_t *)xc, c->xs[2], c->xs[3], g, kh, kw,
                                    (uint16_t *)out);
            else if (c->es == 4)
                im2col_row_uint32_t((const uint32_t *)xc, c->xs[2], c->xs[3], g, kh, kw,
                                    (uint32_t *)out);
            else
                im2col_row_uint64_t((const uint64_t *)xc, c->xs[2], c->xs[3], g, kh, kw,
                                    (uint64_t *)out);
        }
    }
}

static int64_t grain_for(int64_t per_item)
{
    return per_item >= CONV_GRAIN_ELEMS ? 1 : CONV_GRAIN_ELEMS / (per_item > 0 ? per_item : 1);
}

void ampy_conv_im2col_block(const ampy_conv2d_geom *g, const char *x, const int64_t *xs, size_t es,
                         int64_t nb, char *col, int64_t ld)
{
    im2col_ctx c = {g, x, {xs[0], xs[1], xs[2], xs[3]}, col, ld, es};
    ampy_parallel_for(nb * g->C, grain_for(g->KH * g->KW * g->OH * g->OW), im2col_range, &c);
}

/* Images per block: the column buffer (C*KH*KW x nb*P elements) within
 * CONV_COL_BYTES, at least one image. */
int64_t ampy_conv_block_images(const ampy_conv2d_geom *g, size_t es)
{
    int64_t per = g->C * g->KH * g->KW * g->OH * g->OW * (int64_t)es;
    int64_t nb = per > 0 ? CONV_COL_BYTES / per : g->N;
    if (nb < 1)
        nb = 1;
    return nb < g->N ? nb : (g->N > 0 ? g->N : 1);
}

/* A 1x1 kernel, unit stride, no padding, output = input size, and x's H, W
 * dims flattening into one stride: col is x itself. */
static int is_pointwise(const ampy_conv2d_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
           g->OH == g->H && g->OW == g->W;
}

/* A 1x1 kernel, no padding, a stride past 1, and the output torch's size
 * (OH = (H - 1) / sh + 1): output (oh, ow) reads input (oh * sh, ow * sw). */
static int strided_pointwise(const ampy_conv2d_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->pt == 0 && g->pl == 0 && (g->sh > 1 || g->sw > 1) &&
           g->H >= 1 && g->W >= 1 && g->OH <= (g->H - 1) / g->sh + 1 &&
           g->OW <= (g->W - 1) / g->sw + 1;
}

/* y (or any N x O x P output) prefilled with bias[o], for a beta = 1 GEMM. */
static void fill_bias(void *y, const void *bias, int64_t N, int64_t O, int64_t P, size_t es)
{
    char *p = y;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            const char *b = (const char *)bias + (size_t)o * es;
            for (int64_t i = 0; i < P; i++, p += es)
                memcpy(p, b, es);
        }
}

/* ---- forward ------------------------------------------------------------------ */
ampy_status ampy_conv2d_forward(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                const int64_t *xs, const void *w, const void *bias, void *y)
{
    ampy_status s = ampy_conv2d_check(g);
    if (s != AMPY_OK)
        return s;
    if (!conv_dtype_ok(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "conv2d: unsupported dtype");
    size_t es = ampy_dtype_size(dtype);
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, P = g->OH * g->OW;
    int64_t Kg = Cg * g->KH * g->KW;
    if (g->N * g->O * P == 0)
        return AMPY_OK;
    if (strided_pointwise(g)) {
        /* y reads x[:, :, ::sh, ::sw]: the same 1x1 convolution of that view at unit stride */
        ampy_conv2d_geom u = *g;
        u.H = g->OH, u.W = g->OW, u.sh = u.sw = u.dh = u.dw = 1;
        int64_t us[4] = {xs[0], xs[1], xs[2] * g->sh, xs[3] * g->sw};
        return ampy_conv2d_forward(&u, dtype, x, us, w, bias, y);
    }
    int inplace = is_pointwise(g) && (g->H <= 1 || xs[2] == g->W * xs[3] || g->W == 1);
    if (!inplace && ampy_conv_direct_ok(g, dtype))
        return ampy_conv_forward_direct(g, dtype, x, xs, w, bias, y);
    if (!inplace && ampy_conv_patch_ok(g, dtype))
        return ampy_conv_forward_patches(g, dtype, x, xs, w, bias, y);
    if (bias)
        fill_bias(y, bias, g->N, g->O, P, es);
    double beta = bias ? 1.0 : 0.0;
    int64_t a_bs[2] = {0, Og * Kg}, c_bs[2] = {g->O * P, Og * P};
    if (inplace) {
        int64_t pstride = g->W == 1 ? xs[2] : xs[3];
        int64_t shape[2] = {g->N, G}, b_bs[2] = {xs[0], Cg * xs[1]};
        return ampy_gemm_batched(2, shape, Og, P, Kg, 1.0, w, dtype, a_bs, Kg, 1, x, dtype,
                                 b_bs, xs[1], pstride, beta, y, dtype, c_bs, P, 1);
    }
    int64_t NB = ampy_conv_block_images(g, es);
    /* Small outputs: one GEMM over the whole block (N = nb * P) into a
     * staging buffer, copied to y; a GEMM per image would be too narrow. */
    int wide = P < CONV_WIDE_P && NB > 1;
    size_t bytes = (size_t)(g->C * g->KH * g->KW) * (size_t)(NB * P) * es;
    size_t tbytes = wide ? (size_t)(g->O * NB * P) * es : 0;
    char *col = ampy_alloc(bytes), *tmp = wide ? ampy_alloc(tbytes) : NULL;
    if (!col || (wide && !tmp)) {
        ampy_free(col, bytes);
        ampy_free(tmp, tbytes);
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes", bytes + tbytes);
    }
    for (int64_t n0 = 0; n0 < g->N && s == AMPY_OK; n0 += NB) {
        int64_t nb = g->N - n0 < NB ? g->N - n0 : NB, ld = nb * P;
        char *yb = (char *)y + (size_t)(n0 * g->O * P) * es;
        ampy_conv_im2col_block(g, (const char *)x + (size_t)(n0 * xs[0]) * es, xs, es, nb, col, ld);
        if (wide) {
            if (bias)
                fill_bias(tmp, bias, 1, g->O, ld, es);
            int64_t shape[1] = {G}, wa[1] = {Og * Kg}, wb[1] = {Kg * ld}, wc[1] = {Og * ld};
            s = ampy_gemm_batched(1, shape, Og, ld, Kg, 1.0, w, dtype, wa, Kg, 1, col, dtype, wb,
                                  ld, 1, beta, tmp, dtype, wc, ld, 1);
            for (int64_t n = 0; n < nb && s == AMPY_OK; n++)
                for (int64_t o = 0; o < g->O; o++)
                    memcpy(yb + (size_t)((n * g->O + o) * P) * es,
                           tmp + (size_t)(o * ld + n * P) * es, (size_t)P * es);
            continue;
        }
        int64_t shape[2] = {nb, G}, b_bs[2] = {P, Kg * ld};
        s = ampy_gemm_batched(2, shape, Og, P, Kg, 1.0, w, dtype, a_bs, Kg, 1, col, dtype, b_bs,
                              ld, 1, beta, yb, dtype, c_bs, P, 1);
    }
    ampy_free(col, bytes);
    ampy_free(tmp, tbytes);
    return s;
}

/* ---- input gradient: col = w^T @ dy, then col2im ------------------------------ */
typedef struct {
    const ampy_conv2d_geom *g;
    const void *col;        /* float or double, ld columns */
    int64_t ld;
    ampy_dtype dtype;
    const void *bias;
    char *dx;               /* image n0 */
    float *scratch;         /* halves: a float32 plane per item, else NULL */
} col2im_ctx;

#define COL2IM_PLANE(T)                                                                           \
    static void col2im_plane_##T(const T *col, int64_t ld, const ampy_conv2d_geom *g,             \
                                 int64_t ch, int64_t n, T *plane)                                 \
    {                                                                                             \
        int64_t kk = g->KH * g->KW, P = g->OH * g->OW;                                            \
        memset(plane, 0, (size_t)(g->H * g->W) * sizeof(T));                                      \
        for (int64_t k = 0; k < kk; k++) {                                                        \
            int64_t kh = k / g->KW, kw = k % g->KW;                                               \
            const T *src = col + (ch * kk + k) * ld + n * P;                                      \
            for (int64_t oh = 0; oh < g->OH; oh++) {                                              \
                int64_t ih = ampy_conv_in_index(oh, kh, g->sh, g->pt, g->dh);                     \
                if (ih < 0 || ih >= g->H)                                                         \
                    continue;                                                                     \
                T *pr = plane + ih * g->W;                                                        \
                const T *sr = src + oh * g->OW;                                                   \
                int64_t iw0 = ampy_conv_in_index(0, kw, g->sw, g->pl, g->dw);                     \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                          \
                    int64_t iw = iw0 + ow * g->sw;                                                \
                    if (iw >= 0 && iw < g->W)                                                     \
                        pr[iw] += sr[ow];                                                         \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }
COL2IM_PLANE(float)
COL2IM_PLANE(double)

/* Round a float32 plane (+ bias) into the output dtype. */
static void store_plane_f32(const float *plane, int64_t n, float b, ampy_dtype dt, void *out)
{
    if (dt == AMPY_FLOAT16) {
        uint16_t *o = out;
        for (int64_t i = 0; i < n; i++)
            o[i] = ampy_f32_to_f16(plane[i] + b);
    } else if (dt == AMPY_BFLOAT16) {
        uint16_t *o = out;
        for (int64_t i = 0; i < n; i++)
            o[i] = ampy_f32_to_bf16(plane[i] + b);
    } else {
        float *o = out;
        for (int64_t i = 0; i < n; i++)
            o[i] = plane[i] + b;
    }
}

static float half_value(const void *p, int64_t i, ampy_dtype dt)
{
    if (dt == AMPY_FLOAT16)
        return ampy_f16_to_f32(((const uint16_t *)p)[i]);
    if (dt == AMPY_BFLOAT16)
        return ampy_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* Items are (image, channel) planes of dx; halves accumulate in float32
 * scratch planes (float32 and float64 in dx itself). */
static void col2im_range(int64_t begin, int64_t end, void *vctx)
{
    const col2im_ctx *c = vctx;
    const ampy_conv2d_geom *g = c->g;
    int64_t HW = g->H * g->W;
    size_t es = ampy_dtype_size(c->dtype);
    for (int64_t it = begin; it < end; it++) {
        int64_t n = it / g->C, ch = it % g->C;
        char *out = c->dx + (size_t)(it * HW) * es;
        if (c->dtype == AMPY_FLOAT64) {
            double *o = (double *)out;
            col2im_plane_double(c->col, c->ld, g, ch, n, o);
            if (c->bias) {
                double b = ((const double *)c->bias)[ch];
                for (int64_t i = 0; i < HW; i++)
                    o[i] += b;
            }
            continue;
        }
        float *plane = c->scratch ? c->scratch + it * HW : (float *)out;
        col2im_plane_float(c->col, c->ld, g, ch, n, plane);
        float b = c->bias ? half_value(c->bias, ch, c->dtype) : 0.0f;
        if (c->scratch || c->bias)
            store_plane_f32(plane, HW, b, c->dtype, out);
    }
}

static ampy_status bwd_input_pointwise(const ampy_conv2d_geom *g, ampy_dtype dtype,
                                       const void *dy, const void *w, const void *bias, void *dx)
{
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, P = g->OH * g->OW;
    if (bias)
        fill_bias(dx, bias, g->N, g->C, P, ampy_dtype_size(dtype));
    int64_t shape[2] = {g->N, G}, a_bs[2] = {0, Og * Cg}, b_bs[2] = {g->O * P, Og * P};
    int64_t c_bs[2] = {g->C * P, Cg * P};
    return ampy_gemm_batched(2, shape, Cg, P, Og, 1.0, w, dtype, a_bs, 1, Cg, dy, dtype, b_bs, P,
                             1, bias ? 1.0 : 0.0, dx, dtype, c_bs, P, 1);
}

#define FLIP(T, name)                                                                             \
    static void name(const T *src, int64_t n, T *dst)                                             \
    {                                                                                             \
        for (int64_t i = 0; i < n; i++)                                                           \
            dst[i] = src[n - 1 - i];                                                              \
    }
FLIP(uint16_t, flip_u16)
FLIP(uint32_t, flip_u32)
FLIP(uint64_t, flip_u64)

typedef struct {
    const ampy_conv2d_geom *g;
    size_t es;
    const void *w;
    void *wf;
} flip_ctx;

/* Items are output channels o (all groups): w[o][c] flipped to wf[c][o]
 * per group. */
static void flip_range(int64_t begin, int64_t end, void *vctx)
{
    const flip_ctx *f = vctx;
    const ampy_conv2d_geom *g = f->g;
    int64_t Cg = g->C / g->groups, Og = g->O / g->groups, kk = g->KH * g->KW;
    for (int64_t go = begin; go < end; go++) {
        int64_t gr = go / Og, o = go % Og;
        for (int64_t c = 0; c < Cg; c++) {
            int64_t src = (go * Cg + c) * kk, dst = ((gr * Cg + c) * Og + o) * kk;
            if (f->es == 2)
                flip_u16((const uint16_t *)f->w + src, kk, (uint16_t *)f->wf + dst);
            else if (f->es == 4)
                flip_u32((const uint32_t *)f->w + src, kk, (uint32_t *)f->wf + dst);
            else
                flip_u64((const uint64_t *)f->w + src, kk, (uint64_t *)f->wf + dst);
        }
    }
}

/* Unit stride: dx is the convolution of dy with the kernel flipped in both
 * dims and its channel axes swapped (per group), padded by d*(k-1) - p
 * before; the forward path then writes dx in its dtype directly (one
 * rounding, no float32 columns, no scatter). */
static ampy_status bwd_input_as_conv(const ampy_conv2d_geom *g, ampy_dtype dtype,
                                     const void *dy, const void *w, const void *bias, void *dx)
{
    int64_t Cg = g->C / g->groups, kk = g->KH * g->KW;
    size_t es = ampy_dtype_size(dtype), bytes = (size_t)(g->O * Cg * kk) * es;
    char *wf = ampy_alloc(bytes);
    if (!wf)
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes", bytes);
    flip_ctx fc = {g, es, w, wf};
    int64_t per = Cg * kk;
    ampy_parallel_for(g->O, per >= 16384 ? 1 : 16384 / per, flip_range, &fc);
    ampy_conv2d_geom t = {g->N, g->O, g->OH, g->OW, g->C, g->KH, g->KW, g->H, g->W, 1, 1,
                          g->dh * (g->KH - 1) - g->pt, g->dw * (g->KW - 1) - g->pl, g->dh,
                          g->dw, g->groups};
    int64_t ys[4] = {g->O * g->OH * g->OW, g->OH * g->OW, g->OW, 1};
    ampy_status s = ampy_conv2d_forward(&t, dtype, dy, ys, wf, bias, dx);
    ampy_free(wf, bytes);
    return s;
}

/* ---- the input-gradient path choice -------------------------------------------- */
enum { DG_POINTWISE, DG_PHASE, DG_AS_CONV, DG_COL2IM };
static const char *const dg_names[] = {"pointwise", "phase", "as_conv", "col2im"};
static int dg_choice = 0; /* 0 auto, 1 the GEMM paths only, 2 phase where it runs */

ampy_status ampy_conv_dgrad_set_path(const char *name)
{
    static const char *const choices[] = {"auto", "gemm", "phase"};
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, choices[i]) == 0) {
            dg_choice = i;
            return AMPY_OK;
        }
    return ampy_error(AMPY_ERR_VALUE, "conv2d: unknown input-gradient path '%s' (expected "
                      "auto, gemm or phase)", name ? name : "(null)");
}

/* Where the phase kernel beat the GEMM paths (1 thread, ResNet-18 layers at
 * batch 32, bench_conv.py --split): strides above 1 with a spatial kernel
 * (64x56x56 -> 128, 3x3 / 2: float32 23 vs 30 ms, bfloat16 16 vs 29 ms);
 * not the 1x1 / 2 (three phases of four are empty there; the GEMM and
 * col2im took 5.9 vs 9.6 ms); at unit stride only the maps under 64
 * positions, where the forward is not the direct kernel (512x7x7, 3x3:
 * float32 38.7 vs 50.3 ms, bfloat16 21.2 vs 24.2 ms); from 14x14 up the
 * forward of the flipped kernel was as fast or faster (its store is
 * contiguous). */
static int phase_wins(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    (void)dtype;
    if (g->C < 32)
        return 0; /* a panel is 32 channels of dx: 3 -> 64, 7x7 / 2 took 3x the GEMM's time */
    if (g->sh > 1 || g->sw > 1)
        return g->KH * g->KW > 1;
    return g->H * g->W < 64;
}

static int dgrad_path(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    if (is_pointwise(g))
        return DG_POINTWISE;
    if (dg_choice != 1 && ampy_conv_dgrad_phase_ok(g, dtype) &&
        (dg_choice == 2 || phase_wins(g, dtype)))
        return DG_PHASE;
    if (g->sh == 1 && g->sw == 1 && g->pt <= g->dh * (g->KH - 1) &&
        g->pl <= g->dw * (g->KW - 1))
        return DG_AS_CONV;
    return DG_COL2IM;
}

const char *ampy_conv_dgrad_path(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    return dg_names[dgrad_path(g, dtype)];
}

ampy_status ampy_conv2d_backward_input(const ampy_conv2d_geom *g, ampy_dtype dtype,
                                       const void *dy, const void *w, const void *bias,
                                       void *dx)
{
    ampy_status s = ampy_conv2d_check(g);
    if (s != AMPY_OK)
        return s;
    if (!conv_dtype_ok(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "conv2d: unsupported dtype");
    if (g->N * g->C * g->H * g->W == 0)
        return AMPY_OK;
    switch (dgrad_path(g, dtype)) {
    case DG_POINTWISE: return bwd_input_pointwise(g, dtype, dy, w, bias, dx);
    case DG_PHASE: return ampy_conv_dgrad_phase(g, dtype, dy, w, bias, dx);
    case DG_AS_CONV: return bwd_input_as_conv(g, dtype, dy, w, bias, dx);
    default: break;
    }
    ampy_dtype acc = dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    size_t es = ampy_dtype_size(dtype), as = ampy_dtype_size(acc);
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, P = g->OH * g->OW;
    int64_t Kg = Cg * g->KH * g->KW;
    int64_t NB = ampy_conv_block_images(g, as);
    size_t bytes = (size_t)(g->C * g->KH * g->KW) * (size_t)(NB * P) * as;
    size_t sbytes = ampy_dtype_is_half(dtype) ? (size_t)(NB * g->C * g->H * g->W) * 4 : 0;
    char *col = ampy_alloc(bytes);
    float *scratch = sbytes ? ampy_alloc(sbytes) : NULL;
    if (!col || (sbytes && !scratch)) {
        ampy_free(col, bytes);
        ampy_free(scratch, sbytes);
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes", bytes + sbytes);
    }
    for (int64_t n0 = 0; n0 < g->N && s == AMPY_OK; n0 += NB) {
        int64_t nb = g->N - n0 < NB ? g->N - n0 : NB, ld = nb * P;
        int64_t shape[2] = {nb, G}, a_bs[2] = {0, Og * Kg}, b_bs[2] = {g->O * P, Og * P};
        int64_t c_bs[2] = {P, Kg * ld};
        s = ampy_gemm_batched(2, shape, Kg, P, Og, 1.0, w, dtype, a_bs, 1, Kg,
                              (const char *)dy + (size_t)(n0 * g->O * P) * es, dtype, b_bs, P, 1,
                              0.0, col, acc, c_bs, ld, 1);
        if (s != AMPY_OK)
            break;
        col2im_ctx c = {g, col, ld, dtype, bias,
                        (char *)dx + (size_t)(n0 * g->C * g->H * g->W) * es, scratch};
        ampy_parallel_for(nb * g->C, grain_for(g->KH * g->KW * P), col2im_range, &c);
    }
    ampy_free(col, bytes);
    ampy_free(scratch, sbytes);
    return s;
}
