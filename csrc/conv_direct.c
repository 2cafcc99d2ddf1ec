/* conv_direct.c — the ungrouped convolution as an implicit GEMM over a
 * zero-padded channels-last copy of the input (contracts in ampy/conv.h;
 * routed here by conv.c for float32 on AVX-512 and bfloat16 on AVX512-BF16;
 * the unit-stride input gradient is this forward of dy with the flipped
 * kernel, conv.c's bwd_input_as_conv).
 *
 * A block of images (about L2's size, DIRECT_XP_BYTES) is copied to
 * xp[n][Hp][Wp][Cp] (Hp = (OH-1)*sh + (KH-1)*dh + 1, likewise Wp, the image
 * at row pt, column pl, zeros around it; Cp = C, or C rounded up to even for
 * the bfloat16 channel pairs), NCHW planes transposed 16 x 16 with AVX-512.
 * Output position (n, oh, ow) reads, for tap (kh, kw), the row
 * n*Hp*Wp + (oh*sh + kh*dh)*Wp + ow*sw + kw*dw of xp (a row is Cp elements),
 * so the convolution is one GEMM
 *     Y[i][o] = sum over taps t, channels c of xp[row_t(i)][c] * w[o][c][t]
 * whose A rows are addressed by offset, never copied (the implicit GEMM of
 * direct convolution; Georganas et al., "Anatomy of High-Performance Deep
 * Learning Convolutions on SIMD Architectures", SC 2018). A tile's 14 rows
 * are 14 consecutive positions of the block, across image boundaries, so
 * small outputs (7 x 7 = 49 positions) fill whole tiles too. The weights are
 * packed once per call into B panels of 32 output channels
 * (conv_direct_x86.c's layout).
 *
 * Work items are (chunk of position tiles, panel of 32 output channels),
 * split over the threads; a tile is accumulated in registers over all taps
 * and channels (float32 FMAs, or vdpbf16ps), then bias[o] is added in
 * float32 and the sum rounded ONCE to the output dtype, transposed into y's
 * NCHW planes. The sum order per output is taps in (kh, kw) order, channels
 * ascending (bfloat16: channel pairs, odd first, fused), so the numerics are
 * conv.h's: float32 accumulation, one rounding.
 */
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/conv.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "conv_impl.h"

#define CONV_DIRECT_MIN_P 64               /* fewer positions (N*OH*OW): patch path */
#define DIRECT_NR 32                      /* output channels per B panel */
#define DIRECT_CHUNK 8                    /* position tiles per work item */
#define DIRECT_XP_BYTES ((int64_t)2 << 20)  /* padded copy per image block: ~L2 */

/* ---- the padded channels-last copy ---------------------------------------- */
typedef struct {
    const char *x;
    int64_t xs[4];
    size_t es;
    int64_t C, H, W, pt, pl, Hp, Wp, Cp;
    char *dst;
    int vec; /* AVX-512 16 x 16 transposes (column stride 1 or 2) */
} pad_ctx;

#define PAD_ROW(T)                                                                                \
    static void pad_row_##T(const pad_ctx *p, const T *xr, T *d)                                  \
    {                                                                                             \
        int64_t lead = p->pl < p->Wp ? p->pl : p->Wp;                                             \
        int64_t w_end = p->W < p->Wp - lead ? p->W : p->Wp - lead;                                \
        memset(d, 0, (size_t)(lead * p->Cp) * sizeof(T));                                         \
        for (int64_t c0 = 0; c0 < p->C; c0 += 16) {                                               \
            int64_t cn = p->C - c0 < 16 ? p->C - c0 : 16, w0 = 0;                                 \
            const T *xc = xr + c0 * p->xs[1];                                                     \
            for (; p->vec && w0 < w_end; w0 += 16)                                                \
                ampy_conv_direct_t16(xc + w0 * p->xs[3], p->xs[1], p->xs[3], sizeof(T), cn,       \
                                     w_end - w0 < 16 ? w_end - w0 : 16,                           \
                                     d + (p->pl + w0) * p->Cp + c0, p->Cp);                       \
            for (int64_t w = w0; w < w_end; w++) {                                                \
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
    pad_ctx p = {x, {xs[0], xs[1], xs[2], xs[3]}, es, C, H, W, pt, pl, Hp, Wp, Cp, dst, 0};
#if defined(__x86_64__) && defined(__GNUC__)
    p.vec = (xs[3] == 1 || xs[3] == 2) && ampy_cpu_level_get() >= AMPY_CPU_AVX512;
#endif
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
 * channels 2q, 2q+1 of output j in word j); zeros past O and C. The loops
 * read the 32 rows of w as 32 sequential streams. */
#define PACK(T, name)                                                                             \
    static void name(const ampy_conv2d_geom *g, const T *w, int64_t ob, int64_t Cp, int bf, T *d) \
    {                                                                                             \
        int64_t taps = g->KH * g->KW, on = g->O - ob * DIRECT_NR;                                 \
        on = on < DIRECT_NR ? on : DIRECT_NR;                                                     \
        if (on < DIRECT_NR || Cp > g->C)                                                          \
            memset(d, 0, (size_t)(taps * Cp * DIRECT_NR) * sizeof(T));                            \
        const T *wo = w + ob * DIRECT_NR * g->C * taps;                                           \
        for (int64_t c = 0; c < g->C; c++)                                                        \
            for (int64_t t = 0; t < taps; t++) {                                                  \
                T *dc = bf ? d + (t * Cp + c / 2 * 2) * DIRECT_NR + c % 2                         \
                           : d + (t * Cp + c) * DIRECT_NR;                                        \
                const T *s = wo + c * taps + t;                                                   \
                for (int64_t j = 0; j < on; j++)                                                  \
                    dc[j << bf] = s[j * g->C * taps];                                             \
            }                                                                                     \
    }
PACK(uint16_t, pack_u16)
PACK(float, pack_f32)

static void pack_range(int64_t begin, int64_t end, void *vctx)
{
    const pack_ctx *p = vctx;
    int64_t per = p->g->KH * p->g->KW * p->Cp * DIRECT_NR;
    for (int64_t ob = begin; ob < end; ob++) {
        if (p->bf)
            pack_u16(p->g, (const uint16_t *)p->w, ob, p->Cp, 1, (uint16_t *)p->wp + ob * per);
        else
            pack_f32(p->g, (const float *)p->w, ob, p->Cp, 0, (float *)p->wp + ob * per);
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
    const int64_t *offs;    /* per run, in elements                 */
    int64_t runs, run;      /* runs of consecutive elements per row */
    const float *bias;      /* float32, or NULL                     */
    char *y;                /* image n0 of y                        */
    int64_t total, tiles;   /* the block's positions, their tiles   */
    int64_t chunks;         /* runs of about DIRECT_CHUNK tiles     */
} direct_ctx;

/* Rows of position tile tl: the block's positions j = tl * MR + r run across
 * image boundaries (j = n * P + oh * OW + ow); past the block's last
 * position a row repeats the last one (computed, not stored). */
static void tile_rows(const direct_ctx *c, int64_t tl, int64_t *roff)
{
    const ampy_conv2d_geom *g = c->g;
    int64_t P = g->OH * g->OW, j0 = tl * CONV_DIRECT_MR;
    int64_t n = j0 / P, oh = j0 % P / g->OW, ow = j0 % g->OW; /* stepped, not divided */
    for (int64_t r = 0; r < CONV_DIRECT_MR; r++) {
        roff[r] = n * c->img + (oh * g->sh * c->Wp + ow * g->sw) * c->Cp;
        if (j0 + r + 1 >= c->total)
            continue; /* the last position repeats */
        if (++ow == g->OW && (ow = 0, ++oh == g->OH))
            oh = 0, n++;
    }
}

/* The tile's rows into y's planes, one run per image they cover. */
static void tile_store(const direct_ctx *c, const float *tile, int64_t tl, int64_t o0, int64_t on)
{
    const ampy_conv2d_geom *g = c->g;
    int64_t P = g->OH * g->OW, j0 = tl * CONV_DIRECT_MR;
    int64_t j1 = j0 + CONV_DIRECT_MR < c->total ? j0 + CONV_DIRECT_MR : c->total;
    size_t es = c->bf ? 2 : 4;
    for (int64_t j = j0; j < j1;) {
        int64_t n = j / P, p = j % P, len = P - p < j1 - j ? P - p : j1 - j;
        ampy_conv_direct_store(tile + (j - j0) * DIRECT_NR, c->bias ? c->bias + o0 : NULL, c->bf,
                               len, on, c->y + (size_t)((n * g->O + o0) * P + p) * es, P);
        j += len;
    }
}

/* Items are (chunk of position tiles, panel), panels fastest; the tiles
 * are dealt to the chunks evenly (chunk k: [k * tiles / chunks, (k + 1) *
 * tiles / chunks)), so that the threads' equal runs of items get equal
 * work (a 7 x 7 block's 42 tiles as 8+8+8+8+8+2 gave one thread 24, the
 * other 18). A tile's sums do not depend on the chunk it falls in. */
static void direct_range(int64_t begin, int64_t end, void *vctx)
{
    const direct_ctx *c = vctx;
    const ampy_conv2d_geom *g = c->g;
    float tile[CONV_DIRECT_MR * DIRECT_NR];
    int64_t roff[CONV_DIRECT_MR];
    for (int64_t it = begin; it < end; it++) {
        int64_t ob = it % c->nob, ci = it / c->nob;
        int64_t t0 = ci * c->tiles / c->chunks, t1 = (ci + 1) * c->tiles / c->chunks;
        int64_t o0 = ob * DIRECT_NR, on = g->O - o0 < DIRECT_NR ? g->O - o0 : DIRECT_NR;
        for (int64_t tl = t0; tl < t1; tl++) {
            tile_rows(c, tl, roff);
            if (c->bf)
                ampy_conv_direct_tile_bf16((const uint16_t *)c->xp, roff, c->offs, c->runs,
                                           c->run / 2, (const uint16_t *)c->wp + ob * c->pstride,
                                           tile);
            else
                ampy_conv_direct_tile_f32((const float *)c->xp, roff, c->offs, c->runs, c->run,
                                          (const float *)c->wp + ob * c->pstride, tile);
            tile_store(c, tile, tl, o0, on);
        }
    }
}

/* ---- the split over the threads --------------------------------------------- */
/* Thread k owns the k-th equal run of items (neighbouring positions: its
 * half of the padded block in its own L2) and takes them from the front;
 * when its run is done it takes the others' items from their back, so a
 * thread that starts late (woken late, or descheduled on a loaded machine)
 * leaves no tail for the rest to wait on. Which thread computes an item
 * does not change its sums. A span packs lo (low 32 bits) and hi. */
static int span_take(uint64_t *span, int front, int64_t *item)
{
    uint64_t v = __atomic_load_n(span, __ATOMIC_RELAXED);
    for (;;) {
        uint64_t lo = v & 0xFFFFFFFFu, hi = v >> 32;
        if (lo >= hi)
            return 0;
        uint64_t nv = front ? (hi << 32) | (lo + 1) : ((hi - 1) << 32) | lo;
        if (__atomic_compare_exchange_n(span, &v, nv, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            *item = (int64_t)(front ? lo : hi - 1);
            return 1;
        }
    }
}

typedef struct {
    ampy_range_fn fn;
    void *ctx;
    uint64_t *spans;
    int64_t ns;
} steal_ctx;

static void steal_range(int64_t begin, int64_t end, void *vctx)
{
    steal_ctx *c = vctx;
    int64_t it;
    for (int64_t k = begin; k < end; k++) {
        while (span_take(&c->spans[k], 1, &it))
            c->fn(it, it + 1, c->ctx);
        for (int64_t j = 1; j < c->ns; j++)
            while (span_take(&c->spans[(k + j) % c->ns], 0, &it))
                c->fn(it, it + 1, c->ctx);
    }
}

#define DIRECT_MAX_SPANS 256

void ampy_conv_parallel_steal(int64_t items, ampy_range_fn fn, void *ctx)
{
    uint64_t spans[DIRECT_MAX_SPANS];
    int64_t ns = ampy_get_num_threads();
    ns = ns < items ? ns : items;
    ns = ns < DIRECT_MAX_SPANS ? ns : DIRECT_MAX_SPANS;
    if (ns <= 1 || items >= ((int64_t)1 << 31)) {
        ampy_parallel_for(items, 1, fn, ctx);
        return;
    }
    for (int64_t k = 0; k < ns; k++)
        spans[k] = ((uint64_t)((k + 1) * items / ns) << 32) | (uint64_t)(k * items / ns);
    steal_ctx sc = {fn, ctx, spans, ns};
    ampy_parallel_for(ns, 1, steal_range, &sc);
}

/* ---- the forward ------------------------------------------------------------- */
int ampy_conv_direct_ok(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* Shape rule (bench_conv.py --split, ResNet-18 at batch 32, 1 thread):
     * with tiles running across images the direct forward was faster than
     * the patch-row GEMM on every layer, the 7 x 7 outputs included
     * (512x7x7 float32: 1.17 vs 1.39 x torch; bfloat16 1.12 vs 1.35); below
     * 64 positions in all, the tiles would mostly repeat rows. */
    if (g->groups != 1 || g->C <= 0 || g->N * g->OH * g->OW < CONV_DIRECT_MIN_P)
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
    /* With dw = 1 the KW taps of a kernel row read KW * Cp consecutive
     * elements of a row of xp, in the panel's (kw, c) order: one run. */
    c->runs = g->dw == 1 ? g->KH : taps, c->run = g->dw == 1 ? g->KW * c->Cp : c->Cp;
    for (int64_t t = 0; t < c->runs; t++)
        b->offs[t] = g->dw == 1 ? t * g->dh * c->Wp * c->Cp
                                : ((t / g->KW) * g->dh * c->Wp + (t % g->KW) * g->dw) * c->Cp;
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
    int64_t NB = DIRECT_XP_BYTES / (c.img * (int64_t)es);
    NB = NB < 1 ? 1 : (NB < g->N ? NB : g->N);
    direct_bufs b = {0};
    ampy_status s = setup(&c, &b, dtype, w, bias, NB);
    for (int64_t n0 = 0; n0 < g->N && s == AMPY_OK; n0 += NB) {
        int64_t nb = g->N - n0 < NB ? g->N - n0 : NB;
        ampy_conv_pad_nhwc((const char *)x + (size_t)(n0 * xs[0]) * es, xs, es, nb, g->C, g->H,
                           g->W, g->pt, g->pl, Hp, c.Wp, c.Cp, b.xp);
        c.y = (char *)y + (size_t)(n0 * g->O * g->OH * g->OW) * es;
        c.total = nb * g->OH * g->OW;
        c.tiles = (c.total + CONV_DIRECT_MR - 1) / CONV_DIRECT_MR;
        c.chunks = (c.tiles + DIRECT_CHUNK - 1) / DIRECT_CHUNK;
        ampy_conv_parallel_steal(c.chunks * c.nob, direct_range, &c);
    }
    free_bufs(&b);
    return s;
}
