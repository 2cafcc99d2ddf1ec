/* conv_direct.c — the ungrouped unit-stride convolution as an implicit GEMM
 * over a zero-padded channels-last copy of the input (contracts in
 * ampy/conv.h; routed here by conv.c for float32 on AVX-512 and bfloat16 on
 * AVX512-BF16; the unit-stride input gradient is this forward of dy with the
 * flipped kernel, conv.c's bwd_input_as_conv).
 *
 * A block of images is copied once to xp[n][Hp][Wp][Cp] (Hp = OH + (KH-1)*dh,
 * Wp = OW + (KW-1)*dw, the image at row pt, column pl, zeros around it; Cp =
 * C, or C rounded up to even for the bfloat16 channel pairs). In the flat
 * space of one padded image, output position i = oh * Wp + ow reads, for tap
 * (kh, kw), the row i + kh*dh*Wp + kw*dw of xp (a row is Cp elements). So
 * every tap is a matrix of consecutive rows, and the convolution is one GEMM
 *     Y[i][o] = sum over taps t, channels c of xp[i + off_t][c] * w[o][c][t]
 * whose A rows are addressed by offset, never copied (the implicit GEMM of
 * direct convolution; Georganas et al., "Anatomy of High-Performance Deep
 * Learning Convolutions on SIMD Architectures", SC 2018). Positions with
 * ow >= OW fall into the padding columns: they are computed (the tile runs
 * straight across them) and not stored. The weights are packed once per
 * call into B panels of 32 output channels (conv_direct_x86.c's layout).
 *
 * Work items are (image, chunk of position tiles, panel of 32 output
 * channels), split over the threads; a tile is accumulated in registers
 * over all taps and channels (float32 FMAs, or vdpbf16ps), then bias[o] is
 * added in float32 and the sum rounded ONCE to the output dtype, transposed
 * into y's NCHW planes. The sum order per output is taps in (kh, kw) order,
 * channels ascending (bfloat16: channel pairs, odd first, fused), so the
 * numerics are conv.h's: float32 accumulation, one rounding.
 */
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/conv.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "conv_impl.h"

#define CONV_DIRECT_MIN_P 64               /* fewer positions: patch path */
#define DIRECT_NR 32                      /* output channels per B panel */
#define DIRECT_CHUNK 8                    /* position tiles per work item */
#define DIRECT_XP_BYTES ((int64_t)16 << 20) /* padded copy per image block */

/* ---- the padded channels-last copy ---------------------------------------- */
typedef struct {
    const char *x;
    int64_t xs[4];
    size_t es;
    int64_t C, H, W, pt, pl, Hp, Wp, Cp;
    char *dst;
} pad_ctx;

#define PAD_ROW(T)                                                                                \
    static void pad_row_##T(const pad_ctx *p, const T *xr, T *d)                                  \
    {                                                                                             \
        int64_t lead = p->pl < p->Wp ? p->pl : p->Wp;                                             \
        int64_t w_end = p->W < p->Wp - lead ? p->W : p->Wp - lead;                                \
        memset(d, 0, (size_t)(lead * p->Cp) * sizeof(T));                                         \
        for (int64_t c0 = 0; c0 < p->C; c0 += 16) {                                               \
            int64_t cn = p->C - c0 < 16 ? p->C - c0 : 16;                                         \
            const T *xc = xr + c0 * p->xs[1];                                                     \
            for (int64_t w = 0; w < w_end; w++) {                                                 \
                T *o = d + (p->pl + w) * p->Cp + c0;                                              \
                const T *s = xc + w * p->xs[3];                                                   \
                for (int64_t c = 0; c < cn; c++)                                                  \
                    o[c] = s[c * p->xs[1]];                                                       \
            }                                                                                     \
        }                                                                                         \
        if (p->Cp > p->C)                                                                         \
            for (int64_t w = 0; w < w_end; w++)                                                   \
                memset(d + (p->pl + w) * p->Cp + p->C, 0, (size_t)(p->Cp - p->C) * sizeof(T));    \
        int64_t used = lead + w_end;                                                              \
        memset(d + used * p->Cp, 0, (size_t)((p->Wp - used) * p->Cp) * sizeof(T));              \
    }
PAD_ROW(uint16_t)
PAD_ROW(uint32_t)

/* Items are (image, padded row) pairs. */
static void pad_range(int64_t begin, int64_t end, void *vctx)
{
    const pad_ctx *p = vctx;
    size_t row = (size_t)(p->Wp * p->Cp) * p->es;
    for (int64_t it = begin; it < end; it++) {
        int64_t n = it / p->Hp, ih = it % p->Hp - p->pt;
        char *d = p->dst + (size_t)it * row;
        if (ih < 0 || ih >= p->H) {
            memset(d, 0, row);
            continue;
        }
        const char *xr = p->x + (size_t)(n * p->xs[0] + ih * p->xs[2]) * p->es;
        if (p->es == 2)
            pad_row_uint16_t(p, (const uint16_t *)xr, (uint16_t *)d);
        else
            pad_row_uint32_t(p, (const uint32_t *)xr, (uint32_t *)d);
    }
}

void ampy_conv_pad_nhwc(const char *x, const int64_t *xs, size_t es, int64_t nb, int64_t C,
                        int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t Hp, int64_t Wp,
                        int64_t Cp, char *dst)
{
    pad_ctx p = {x, {xs[0], xs[1], xs[2], xs[3]}, es, C, H, W, pt, pl, Hp, Wp, Cp, dst};
    int64_t per = Wp * Cp;
    ampy_parallel_for(nb * Hp, per >= 16384 ? 1 : 16384 / per, pad_range, &p);
}

/* ---- weight panels ----------------------------------------------------------- */
typedef struct {
    const ampy_conv2d_geom *g;
    const char *w;
    int bf;
    int64_t Cp;
    char *wp;
} pack_ctx;

/* Panel ob: float32 [tap][c][32]; bfloat16 [tap][c/2][32][2] (the pair of
 * channels 2q, 2q+1 of output j in word j); zeros past O and C. */
static void pack_range(int64_t begin, int64_t end, void *vctx)
{
    const pack_ctx *p = vctx;
    const ampy_conv2d_geom *g = p->g;
    int64_t taps = g->KH * g->KW, per = taps * p->Cp * DIRECT_NR;
    for (int64_t ob = begin; ob < end; ob++) {
        if (p->bf) {
            uint16_t *d = (uint16_t *)p->wp + ob * per;
            const uint16_t *w = (const uint16_t *)p->w;
            memset(d, 0, (size_t)per * 2);
            for (int64_t j = 0; j < DIRECT_NR && ob * DIRECT_NR + j < g->O; j++)
                for (int64_t c = 0; c < g->C; c++)
                    for (int64_t t = 0; t < taps; t++)
                        d[(t * (p->Cp / 2) + c / 2) * 64 + j * 2 + c % 2] =
                            w[((ob * DIRECT_NR + j) * g->C + c) * taps + t];
        } else {
            float *d = (float *)p->wp + ob * per;
            const float *w = (const float *)p->w;
            memset(d, 0, (size_t)per * 4);
            for (int64_t j = 0; j < DIRECT_NR && ob * DIRECT_NR + j < g->O; j++)
                for (int64_t c = 0; c < g->C; c++)
                    for (int64_t t = 0; t < taps; t++)
                        d[(t * p->Cp + c) * DIRECT_NR + j] =
                            w[((ob * DIRECT_NR + j) * g->C + c) * taps + t];
        }
    }
}

/* ---- the tiles ---------------------------------------------------------------- */
typedef struct {
    const ampy_conv2d_geom *g;
    int bf;
    const char *xp;         /* the block's padded copy              */
    int64_t Wp, Cp, img;    /* padded row, channels; per image      */
    const char *wp;
    int64_t pstride, nob;   /* elements per panel, panels           */
    const int64_t *offs;    /* per tap, in elements                 */
    const float *bias;      /* float32, or NULL                     */
    char *y;                /* image n0 of y                        */
    int64_t tiles, nchunks; /* position tiles per image, chunks     */
} direct_ctx;

/* Items are (image, chunk of DIRECT_CHUNK tiles, panel). Tile tl of an
 * image holds the output positions j = tl * MR + r (j = oh * OW + ow, the
 * index in y's plane); past the last position its rows repeat the last one
 * (computed, not stored). */
static void direct_range(int64_t begin, int64_t end, void *vctx)
{
    const direct_ctx *c = vctx;
    const ampy_conv2d_geom *g = c->g;
    int64_t taps = g->KH * g->KW, P = g->OH * g->OW;
    size_t es = c->bf ? 2 : 4;
    float tile[CONV_DIRECT_MR * DIRECT_NR];
    int64_t roff[CONV_DIRECT_MR];
    for (int64_t it = begin; it < end; it++) {
        int64_t ob = it % c->nob, rest = it / c->nob;
        int64_t n = rest / c->nchunks, t0 = rest % c->nchunks * DIRECT_CHUNK;
        int64_t t1 = t0 + DIRECT_CHUNK < c->tiles ? t0 + DIRECT_CHUNK : c->tiles;
        int64_t o0 = ob * DIRECT_NR, on = g->O - o0 < DIRECT_NR ? g->O - o0 : DIRECT_NR;
        const char *xn = c->xp + (size_t)(n * c->img) * es;
        char *yn = c->y + (size_t)((n * g->O + o0) * P) * es;
        for (int64_t tl = t0; tl < t1; tl++) {
            int64_t j0 = tl * CONV_DIRECT_MR, len = P - j0 < CONV_DIRECT_MR ? P - j0 : CONV_DIRECT_MR;
            for (int64_t r = 0; r < CONV_DIRECT_MR; r++) {
                int64_t j = j0 + (r < len ? r : len - 1), oh = j / g->OW, ow = j % g->OW;
                roff[r] = (oh * g->sh * c->Wp + ow * g->sw) * c->Cp;
            }
            if (c->bf)
                ampy_conv_direct_tile_bf16((const uint16_t *)xn, roff, c->offs, taps, c->Cp / 2,
                                           (const uint16_t *)c->wp + ob * c->pstride, tile);
            else
                ampy_conv_direct_tile_f32((const float *)xn, roff, c->offs, taps, c->Cp,
                                          (const float *)c->wp + ob * c->pstride, tile);
            ampy_conv_direct_store(tile, c->bias ? c->bias + o0 : NULL, c->bf, len, on,
                                   yn + (size_t)j0 * es, P);
        }
    }
}

/* ---- the forward ------------------------------------------------------------- */
int ampy_conv_direct_ok(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* Shape rule (bench_conv.py, ResNet-18 at batch 32, 1 thread): on the
     * 7 x 7 outputs (P = 49, 4 tiles of 14 with 7 rows repeated) the
     * patch-row GEMM was faster (512x7x7: 1.45 vs 1.50 x torch forward);
     * from 14 x 14 up the direct forward was as fast or faster. */
    if (g->groups != 1 || g->C <= 0 || g->OH * g->OW < CONV_DIRECT_MIN_P)
        return 0;
    ampy_cpu_level lv = ampy_cpu_level_get();
    if (dtype == AMPY_FLOAT32)
        return lv >= AMPY_CPU_AVX512;
    /* On AMX CPUs the patch-row GEMM runs bfloat16 on tiles, several times
     * the vdpbf16ps rate: the direct kernel is the AVX512-BF16 level's. */
    return dtype == AMPY_BFLOAT16 && lv == AMPY_CPU_AVX512_BF16;
#else
    (void)g, (void)dtype;
    return 0;
#endif
}

typedef struct {
    char *xp, *wp;
    int64_t *offs;
    float *bias;
    size_t xbytes, wbytes, obytes, bbytes;
} direct_bufs;

static void free_bufs(direct_bufs *b)
{
    ampy_free(b->xp, b->xbytes);
    ampy_free(b->wp, b->wbytes);
    ampy_free(b->offs, b->obytes);
    ampy_free(b->bias, b->bbytes);
}

/* Allocates the buffers and fills the panels, the tap offsets and the
 * float32 bias; c->xp is the padded block of NB images. */
static ampy_status setup(direct_ctx *c, direct_bufs *b, ampy_dtype dtype, const void *w,
                         const void *bias, int64_t NB)
{
    const ampy_conv2d_geom *g = c->g;
    size_t es = ampy_dtype_size(dtype);
    int64_t taps = g->KH * g->KW;
    b->xbytes = (size_t)(NB * c->img) * es;
    b->wbytes = (size_t)(c->nob * c->pstride) * es;
    b->obytes = (size_t)taps * sizeof(int64_t);
    b->bbytes = bias ? (size_t)g->O * sizeof(float) : 0;
    b->xp = ampy_alloc(b->xbytes), b->wp = ampy_alloc(b->wbytes), b->offs = ampy_alloc(b->obytes);
    b->bias = bias ? ampy_alloc(b->bbytes) : NULL;
    if (!b->xp || !b->wp || !b->offs || (bias && !b->bias))
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes",
                          b->xbytes + b->wbytes + b->obytes + b->bbytes);
    for (int64_t t = 0; t < taps; t++)
        b->offs[t] = ((t / g->KW) * g->dh * c->Wp + (t % g->KW) * g->dw) * c->Cp;
    for (int64_t o = 0; bias && o < g->O; o++)
        b->bias[o] = c->bf ? ampy_bf16_to_f32(((const uint16_t *)bias)[o])
                           : ((const float *)bias)[o];
    pack_ctx pc = {g, w, c->bf, c->Cp, b->wp};
    ampy_parallel_for(c->nob, 1, pack_range, &pc);
    c->xp = b->xp, c->wp = b->wp, c->offs = b->offs, c->bias = b->bias;
    return AMPY_OK;
}

ampy_status ampy_conv_forward_direct(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                     const int64_t *xs, const void *w, const void *bias,
                                     void *y)
{
    size_t es = ampy_dtype_size(dtype);
    direct_ctx c = {0};
    c.g = g, c.bf = dtype == AMPY_BFLOAT16;
    c.Cp = c.bf ? (g->C + 1) / 2 * 2 : g->C;
    c.Wp = (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1;
    int64_t Hp = (g->OH - 1) * g->sh + (g->KH - 1) * g->dh + 1;
    c.img = Hp * c.Wp * c.Cp;
    c.nob = (g->O + DIRECT_NR - 1) / DIRECT_NR;
    c.pstride = g->KH * g->KW * c.Cp * DIRECT_NR;
    c.tiles = (g->OH * g->OW + CONV_DIRECT_MR - 1) / CONV_DIRECT_MR;
    c.nchunks = (c.tiles + DIRECT_CHUNK - 1) / DIRECT_CHUNK;
    int64_t NB = DIRECT_XP_BYTES / (c.img * (int64_t)es);
    NB = NB < 1 ? 1 : (NB < g->N ? NB : g->N);
    direct_bufs b = {0};
    ampy_status s = setup(&c, &b, dtype, w, bias, NB);
    for (int64_t n0 = 0; n0 < g->N && s == AMPY_OK; n0 += NB) {
        int64_t nb = g->N - n0 < NB ? g->N - n0 : NB;
        ampy_conv_pad_nhwc((const char *)x + (size_t)(n0 * xs[0]) * es, xs, es, nb, g->C, g->H,
                           g->W, g->pt, g->pl, Hp, c.Wp, c.Cp, b.xp);
        c.y = (char *)y + (size_t)(n0 * g->O * g->OH * g->OW) * es;
        ampy_parallel_for(nb * c.nchunks * c.nob, 1, direct_range, &c);
    }
    free_bufs(&b);
    return s;
}
