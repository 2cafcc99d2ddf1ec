/* conv_patch.c — the ungrouped forward convolution as a GEMM over patch rows
 * (contracts in ampy/conv.h; routed here by conv.c).
 *
 * The input is read channels-last (x itself when it is a channels-last view,
 * else a copy xh[n][h][w][c]), so the patch of output position i (image n,
 * row oh, column ow) is KH * KW runs of C contiguous elements; one row of
 * the patch matrix holds them in the order (kh, kw, c), Kt = KH * KW * C
 * elements, and with unit dilation the KW runs of one kernel row are a
 * single copy. Then, a block of R positions at a time,
 *     T[R x O] = patches[R x Kt] @ wp^T + bias      (wp: w as O x (kh, kw, c))
 * and T is transposed into y's channel planes. Positions run across image
 * boundaries, so a block is sized for the caches, not for the image. In this
 * orientation the long dimension is the GEMM's M and both operands are read
 * along their rows, which the GEMM runs faster than w @ im2col (M = O). The
 * sums are the GEMM's (float32 accumulation, one rounding; the bias is added
 * in float32 before it), so the numerics are conv.h's.
 */
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/conv.h"
#include "ampy/conv_math.h"
#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "conv_impl.h"

#define PATCH_BLOCK_BYTES ((int64_t)32 << 20) /* patch rows per GEMM call */
#define PATCH_ROW_ALIGN 64

typedef struct {
    const ampy_conv2d_geom *g;
    const char *x;
    int64_t xs[4];
    char *dst;
    size_t es;
} nhwc_ctx;

#define TO_NHWC(T)                                                                                \
    static void to_nhwc_##T(const T *x, const int64_t *xs, const ampy_conv2d_geom *g, int64_t n,  \
                            int64_t h, T *dst)                                                    \
    {                                                                                             \
        const T *xr = x + n * xs[0] + h * xs[2];                                                  \
        for (int64_t c0 = 0; c0 < g->C; c0 += 16) {                                               \
            int64_t cn = g->C - c0 < 16 ? g->C - c0 : 16;                                         \
            const T *xc = xr + c0 * xs[1];                                                        \
            for (int64_t w = 0; w < g->W; w++) {                                                  \
                T *d = dst + w * g->C + c0;                                                       \
                const T *s = xc + w * xs[3];                                                      \
                for (int64_t c = 0; c < cn; c++)                                                  \
                    d[c] = s[c * xs[1]];                                                          \
            }                                                                                     \
        }                                                                                         \
    }
TO_NHWC(uint16_t)
TO_NHWC(uint32_t)

/* Items are (image, input row) pairs. */
static void nhwc_range(int64_t begin, int64_t end, void *vctx)
{
    const nhwc_ctx *c = vctx;
    const ampy_conv2d_geom *g = c->g;
    for (int64_t it = begin; it < end; it++) {
        int64_t n = it / g->H, h = it % g->H;
        char *d = c->dst + (size_t)(it * g->W * g->C) * c->es;
        if (c->es == 2)
            to_nhwc_uint16_t((const uint16_t *)c->x, c->xs, g, n, h, (uint16_t *)d);
        else
            to_nhwc_uint32_t((const uint32_t *)c->x, c->xs, g, n, h, (uint32_t *)d);
    }
}

typedef struct {
    const ampy_conv2d_geom *g;
    const char *xh;         /* channels-last input: element (n, h, w, c) at  */
    int64_t bs, hs;         /*   n * bs + h * hs + w * C + c                 */
    char *pat;              /* patch rows of the block                       */
    int64_t i0;             /* the block's first position                    */
    size_t es;
} patch_ctx;

/* Patch row of global position i into out (Kt elements). */
static void patch_row(const patch_ctx *c, int64_t i, char *out)
{
    const ampy_conv2d_geom *g = c->g;
    int64_t P = g->OH * g->OW, n = i / P, oh = (i % P) / g->OW, ow = i % g->OW;
    size_t es = c->es, run = (size_t)g->C * es;
    const char *xn = c->xh + (size_t)(n * c->bs) * es;
    for (int64_t kh = 0; kh < g->KH; kh++) {
        char *o = out + (size_t)(kh * g->KW) * run;
        int64_t ih = ampy_conv_in_index(oh, kh, g->sh, g->pt, g->dh);
        if (ih < 0 || ih >= g->H) {
            memset(o, 0, (size_t)g->KW * run);
            continue;
        }
        const char *xr = xn + (size_t)(ih * c->hs) * es;
        int64_t iw0 = ampy_conv_in_index(ow, 0, g->sw, g->pl, g->dw);
        if (g->dw == 1 && iw0 >= 0 && iw0 + g->KW <= g->W) {
            memcpy(o, xr + (size_t)(iw0 * g->C) * es, (size_t)g->KW * run);
            continue;
        }
        for (int64_t kw = 0; kw < g->KW; kw++) {
            int64_t iw = iw0 + kw * g->dw;
            if (iw < 0 || iw >= g->W)
                memset(o + (size_t)kw * run, 0, run);
            else
                memcpy(o + (size_t)kw * run, xr + (size_t)(iw * g->C) * es, run);
        }
    }
}

static void patch_range(int64_t begin, int64_t end, void *vctx)
{
    const patch_ctx *c = vctx;
    size_t row = (size_t)(c->g->KH * c->g->KW * c->g->C) * c->es;
    for (int64_t r = begin; r < end; r++)
        patch_row(c, c->i0 + r, c->pat + (size_t)r * row);
}

typedef struct {
    int64_t O, P, i0, rows;
    const char *t;          /* rows x O */
    char *y;                /* N x O x P */
    size_t es;
} unstage_ctx;

#define UNSTAGE(T)                                                                                \
    static void unstage_##T(const unstage_ctx *c, int64_t r0, int64_t r1)                         \
    {                                                                                             \
        const T *t = (const T *)c->t;                                                             \
        T *y = (T *)c->y;                                                                         \
        int64_t i = c->i0 + r0, n = i / c->P, p = i % c->P;                                       \
        for (int64_t r = r0; r < r1;) {                                                           \
            int64_t len = c->P - p < r1 - r ? c->P - p : r1 - r;                                  \
            T *yn = y + n * c->O * c->P + p;                                                      \
            for (int64_t o = 0; o < c->O; o++) {                                                  \
                const T *src = t + r * c->O + o;                                                  \
                T *dst = yn + o * c->P;                                                           \
                for (int64_t q = 0; q < len; q++)                                                 \
                    dst[q] = src[q * c->O];                                                       \
            }                                                                                     \
            r += len, n++, p = 0;                                                                 \
        }                                                                                         \
    }
UNSTAGE(uint16_t)
UNSTAGE(uint32_t)

/* Items are tiles of 16 staged rows: each moves its rows into y's planes. */
static void unstage_range(int64_t begin, int64_t end, void *vctx)
{
    const unstage_ctx *c = vctx;
    int64_t r0 = begin * 16, r1 = end * 16 < c->rows ? end * 16 : c->rows;
    if (c->es == 2)
        unstage_uint16_t(c, r0, r1);
    else
        unstage_uint32_t(c, r0, r1);
}

/* wp[o][(kh * KW + kw) * C + c] = w[o][c][kh][kw]. */
static void permute_weight(const ampy_conv2d_geom *g, const char *w, size_t es, char *wp)
{
    int64_t kk = g->KH * g->KW, Kt = kk * g->C;
    for (int64_t o = 0; o < g->O; o++)
        for (int64_t c = 0; c < g->C; c++)
            for (int64_t k = 0; k < kk; k++)
                memcpy(wp + (size_t)(o * Kt + k * g->C + c) * es,
                       w + (size_t)((o * g->C + c) * kk + k) * es, es);
}

int ampy_conv_patch_ok(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    return g->groups == 1 && dtype != AMPY_FLOAT64 && g->C > 0;
}

static int64_t block_rows(int64_t Kt, size_t es, int64_t total)
{
    int64_t r = PATCH_BLOCK_BYTES / (Kt * (int64_t)es);
    r = r / PATCH_ROW_ALIGN * PATCH_ROW_ALIGN;
    if (r < PATCH_ROW_ALIGN)
        r = PATCH_ROW_ALIGN;
    return r < total ? r : total;
}

static ampy_status run_blocks(const ampy_conv2d_geom *g, ampy_dtype dtype, patch_ctx *pc,
                              const char *wp, const void *bias, void *y, char *tst, int64_t R)
{
    size_t es = pc->es;
    int64_t P = g->OH * g->OW, total = g->N * P, Kt = g->KH * g->KW * g->C;
    int64_t grain = Kt >= 4096 ? 1 : 4096 / Kt;
    ampy_status s = AMPY_OK;
    for (int64_t i0 = 0; i0 < total && s == AMPY_OK; i0 += R) {
        int64_t rows = total - i0 < R ? total - i0 : R;
        pc->i0 = i0;
        ampy_parallel_for(rows, grain, patch_range, pc);
        s = ampy_gemm_bias(1, rows, g->O, Kt, 1.0, pc->pat, dtype, 0, Kt, 1, wp, dtype, 0, 1, Kt,
                           0.0, tst, dtype, 0, g->O, 1, bias, dtype, 1);
        if (s != AMPY_OK)
            break;
        unstage_ctx uc = {g->O, P, i0, rows, tst, y, es};
        int64_t tiles = (rows + 15) / 16, per = 16 * g->O;
        ampy_parallel_for(tiles, per >= 16384 ? 1 : 16384 / per, unstage_range, &uc);
    }
    return s;
}

ampy_status ampy_conv_forward_patches(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                      const int64_t *xs, const void *w, const void *bias,
                                      void *y)
{
    size_t es = ampy_dtype_size(dtype);
    int64_t P = g->OH * g->OW, Kt = g->KH * g->KW * g->C;
    int64_t R = block_rows(Kt, es, g->N * P);
    int cl = xs[1] == 1 && (g->W <= 1 || xs[3] == g->C) && (g->H <= 1 || xs[2] == g->W * g->C);
    size_t xbytes = cl ? 0 : (size_t)(g->N * g->H * g->W * g->C) * es;
    size_t wbytes = (size_t)(g->O * Kt) * es, pbytes = (size_t)(R * Kt) * es;
    size_t tbytes = (size_t)(R * g->O) * es;
    char *xh = xbytes ? ampy_alloc(xbytes) : NULL, *wp = ampy_alloc(wbytes);
    char *pat = ampy_alloc(pbytes), *tst = ampy_alloc(tbytes);
    ampy_status s = AMPY_OK;
    if ((xbytes && !xh) || !wp || !pat || !tst) {
        s = ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes",
                       xbytes + wbytes + pbytes + tbytes);
        goto done;
    }
    permute_weight(g, w, es, wp);
    patch_ctx pc = {g, x, xs[0], xs[2], pat, 0, es};
    if (!cl) {
        nhwc_ctx nc = {g, x, {xs[0], xs[1], xs[2], xs[3]}, xh, es};
        int64_t per = g->W * g->C;
        ampy_parallel_for(g->N * g->H, per >= 16384 ? 1 : 16384 / per, nhwc_range, &nc);
        pc.xh = xh, pc.bs = g->H * g->W * g->C, pc.hs = g->W * g->C;
    }
    s = run_blocks(g, dtype, &pc, wp, bias, y, tst, R);
done:
    ampy_free(xh, xbytes);
    ampy_free(wp, wbytes);
    ampy_free(pat, pbytes);
    ampy_free(tst, tbytes);
    return s;
}
