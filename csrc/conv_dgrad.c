/* conv_dgrad.c — the input gradient of an ungrouped convolution of any
 * stride as s_h * s_w stride-1 correlations over the output phases, run on
 * the direct forward's register tiles (conv_direct_x86.c); routed here by
 * conv.c's ampy_conv2d_backward_input.
 *
 *   dx[n][c][ih][iw] = sum over o, taps (kh, kw) with ih = oh*sh - pt + kh*dh
 *                      (iw likewise) of dy[n][o][oh][ow] * w[o][c][kh][kw].
 * Write ih = sh * a + rh (rh in [0, sh)): a tap reaches the phase rh iff
 * kh*dh - pt = rh (mod sh), and then oh = a - e_kh with the integer
 * e_kh = (kh*dh - pt - rh) / sh. So phase (rh, rw) of dx is a stride-1
 * correlation of dy with that phase's taps, tap (kh, kw) reading dy at the
 * uniform shift (-e_kh, -e_kw): no unfolded columns, no col2im scatter of
 * float32 sums, and each dx element is one register sum, rounded once.
 *
 * dy is copied once per block of images to a zero-padded channels-last
 * buffer (conv_direct.c's ampy_conv_pad_nhwc), Pt rows and Pl columns
 * before the image so that every shift lands inside it; the weights are
 * packed per phase into the B panels of the tile kernels (32 input channels
 * c per panel, the O output channels of the forward as the reduction). The
 * positions (n, a, b) of a phase in the block are numbered flat and cut into
 * tiles of CONV_DIRECT_MR rows that run across rows and images (each row's
 * offset is its own), so small maps (7 x 7) waste no rows. A tile is summed
 * over the phase's taps in (kh, kw) order, output channels ascending
 * (bfloat16: pairs, as the forward), then bias[c] is added in float32 and
 * the sum rounded once into dx at (sh*a + rh, sw*b + rw). Phases with no
 * tap are dx = bias (or 0).
 */
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/conv.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "conv_impl.h"

#define DG_NR 32                          /* input channels per B panel  */
#define DG_CHUNK 8                        /* tiles per work item          */
#define DG_XP_BYTES ((int64_t)16 << 20)   /* padded dy per image block    */

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

typedef struct {
    int64_t taps, t0;        /* the phase's taps: tap_k[t0 .. t0 + taps)  */
    int64_t Ha, Wa;          /* its positions (rows, columns of dx)       */
    int64_t tiles;           /* tiles of the block's nb images             */
} dg_phase;

typedef struct {
    const ampy_conv2d_geom *g;
    int bf;
    int64_t Op, Wp, Hp, img;  /* padded dy: channels, columns, rows, per image */
    int64_t Pt, Pl;
    int64_t nph, nob, nchunk_max;
    dg_phase *ph;            /* sh * sw phases, rh major                   */
    int64_t *tap_k, *offs;   /* per phase-ordered tap: kh * KW + kw, shift  */
    char *wp;                /* B panels: phase t0 block, panel ob          */
    const float *bias;       /* float32 or NULL                            */
    const char *dyp;         /* the block's padded dy                      */
    char *dx;                /* image n0 of dx                             */
    int64_t nb;
} dg_plan;

/* The phase of dx index i's tap k: (k*d - p) mod s, and its e. */
static int64_t tap_phase(int64_t k, int64_t d, int64_t p, int64_t s)
{
    int64_t v = k * d - p;
    return v - floor_div(v, s) * s;
}

static int64_t tap_shift(int64_t k, int64_t d, int64_t p, int64_t s)
{
    return floor_div(k * d - p, s);
}

/* Orders the taps by phase, fills the phases, the pads and the sizes. */
static void make_phases(dg_plan *p)
{
    const ampy_conv2d_geom *g = p->g;
    int64_t n = 0, emaxh = 0, emaxw = 0, eminh = 0, eminw = 0, Hamax = 0, Wamax = 0;
    for (int64_t rh = 0; rh < g->sh; rh++)
        for (int64_t rw = 0; rw < g->sw; rw++) {
            dg_phase *f = &p->ph[rh * g->sw + rw];
            f->t0 = n;
            for (int64_t kh = 0; kh < g->KH; kh++)
                for (int64_t kw = 0; kw < g->KW; kw++)
                    if (tap_phase(kh, g->dh, g->pt, g->sh) == rh &&
                        tap_phase(kw, g->dw, g->pl, g->sw) == rw)
                        p->tap_k[n++] = kh * g->KW + kw;
            f->taps = n - f->t0;
            f->Ha = g->H > rh ? (g->H - rh + g->sh - 1) / g->sh : 0;
            f->Wa = g->W > rw ? (g->W - rw + g->sw - 1) / g->sw : 0;
            Hamax = f->Ha > Hamax ? f->Ha : Hamax;
            Wamax = f->Wa > Wamax ? f->Wa : Wamax;
        }
    for (int64_t k = 0; k < g->KH; k++) {
        int64_t e = tap_shift(k, g->dh, g->pt, g->sh);
        emaxh = e > emaxh ? e : emaxh, eminh = e < eminh ? e : eminh;
    }
    for (int64_t k = 0; k < g->KW; k++) {
        int64_t e = tap_shift(k, g->dw, g->pl, g->sw);
        emaxw = e > emaxw ? e : emaxw, eminw = e < eminw ? e : eminw;
    }
    p->Pt = emaxh, p->Pl = emaxw;
    p->Hp = g->OH + p->Pt > Hamax + p->Pt - eminh ? g->OH + p->Pt : Hamax + p->Pt - eminh;
    p->Wp = g->OW + p->Pl > Wamax + p->Pl - eminw ? g->OW + p->Pl : Wamax + p->Pl - eminw;
    p->img = p->Hp * p->Wp * p->Op;
    for (int64_t t = 0; t < n; t++) {
        int64_t kh = p->tap_k[t] / g->KW, kw = p->tap_k[t] % g->KW;
        int64_t eh = tap_shift(kh, g->dh, g->pt, g->sh), ew = tap_shift(kw, g->dw, g->pl, g->sw);
        p->offs[t] = ((p->Pt - eh) * p->Wp + (p->Pl - ew)) * p->Op;
    }
}

/* ---- weight panels ------------------------------------------------------------ */
typedef struct {
    dg_plan *p;
    const char *w;
} dg_pack_ctx;

/* Items are panels ob: for every phase, float32 [tap][o][32], bfloat16
 * [tap][o/2][32][2] (the pair of output channels 2q, 2q+1 for input channel
 * j in word j), taps in the phase order; zeros past C and O. */
static void pack_range(int64_t begin, int64_t end, void *vctx)
{
    const dg_pack_ctx *pc = vctx;
    const dg_plan *p = pc->p;
    const ampy_conv2d_geom *g = p->g;
    int64_t kk = g->KH * g->KW, ntaps = p->ph[p->nph - 1].t0 + p->ph[p->nph - 1].taps;
    int64_t per = ntaps * p->Op * DG_NR;
    for (int64_t ob = begin; ob < end; ob++) {
        char *d0 = p->wp + (size_t)(ob * per) * (p->bf ? 2 : 4);
        memset(d0, 0, (size_t)per * (p->bf ? 2 : 4));
        for (int64_t t = 0; t < ntaps; t++)
            for (int64_t o = 0; o < g->O; o++)
                for (int64_t j = 0; j < DG_NR && ob * DG_NR + j < g->C; j++) {
                    int64_t src = (o * g->C + ob * DG_NR + j) * kk + p->tap_k[t];
                    if (p->bf)
                        ((uint16_t *)d0)[(t * (p->Op / 2) + o / 2) * 64 + j * 2 + o % 2] =
                            ((const uint16_t *)pc->w)[src];
                    else
                        ((float *)d0)[(t * p->Op + o) * DG_NR + j] = ((const float *)pc->w)[src];
                }
    }
}

/* ---- the tiles ------------------------------------------------------------------ */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "simd.h"
#include "simd_half.h"

/* Rows r < len of the tile (channels [0, on)) plus bias, rounded once (a
 * row of 32 at a time), to dx plane offsets pos[r] of channel planes HW
 * apart. */
AMPY_TARGET_AVX512 static void store_tile(const float *tile, const float *bias, int bf,
                                          int64_t len, int64_t on, const int64_t *pos,
                                          int64_t HW, char *dx)
{
    __mmask16 m0 = on >= 16 ? 0xFFFF : (__mmask16)((1u << on) - 1);
    __mmask16 m1 = on >= 32 ? 0xFFFF : on <= 16 ? 0 : (__mmask16)((1u << (on - 16)) - 1);
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    if (bf) {
        uint16_t t[CONV_DIRECT_MR * DG_NR], *d = (uint16_t *)dx;
        for (int64_t r = 0; r < len; r++) {
            __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(tile + r * DG_NR), b0);
            __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(tile + r * DG_NR + 16), b1);
            _mm256_storeu_si256((__m256i *)(t + r * DG_NR), ampy_x86_f32_to_half16(v0, 1, 1));
            _mm256_storeu_si256((__m256i *)(t + r * DG_NR + 16), ampy_x86_f32_to_half16(v1, 1, 1));
        }
        for (int64_t o = 0; o < on; o++, d += HW)
            for (int64_t r = 0; r < len; r++)
                d[pos[r]] = t[r * DG_NR + o];
        return;
    }
    float t[CONV_DIRECT_MR * DG_NR], *d = (float *)dx;
    for (int64_t r = 0; r < len; r++) {
        _mm512_storeu_ps(t + r * DG_NR, _mm512_add_ps(_mm512_loadu_ps(tile + r * DG_NR), b0));
        _mm512_storeu_ps(t + r * DG_NR + 16,
                         _mm512_add_ps(_mm512_loadu_ps(tile + r * DG_NR + 16), b1));
    }
    for (int64_t o = 0; o < on; o++, d += HW)
        for (int64_t r = 0; r < len; r++)
            d[pos[r]] = t[r * DG_NR + o];
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* Items are (chunk of DG_CHUNK tiles, phase, panel), the panel fastest and
 * the phases interleaved so that the threads' runs share the work of the
 * unequal phases alike; tile tl of a phase
 * holds its flat positions tl * MR + r of the block (past the last one the
 * rows repeat it, computed and not stored). */
static void tile_range(int64_t begin, int64_t end, void *vctx)
{
    const dg_plan *p = vctx;
    const ampy_conv2d_geom *g = p->g;
    int64_t HW = g->H * g->W, per = (p->ph[p->nph - 1].t0 + p->ph[p->nph - 1].taps) * p->Op;
    float tile[CONV_DIRECT_MR * DG_NR];
    int64_t roff[CONV_DIRECT_MR], pos[CONV_DIRECT_MR];
    for (int64_t it = begin; it < end; it++) {
        int64_t ob = it % p->nob, rest = it / p->nob;
        int64_t ph = rest % p->nph, t0 = rest / p->nph * DG_CHUNK;
        const dg_phase *f = &p->ph[ph];
        int64_t rh = ph / g->sw, rw = ph % g->sw, P = f->Ha * f->Wa, tot = p->nb * P;
        int64_t t1 = t0 + DG_CHUNK < f->tiles ? t0 + DG_CHUNK : f->tiles;
        int64_t c0 = ob * DG_NR, on = g->C - c0 < DG_NR ? g->C - c0 : DG_NR;
        for (int64_t tl = t0; tl < t1; tl++) {
            int64_t j0 = tl * CONV_DIRECT_MR;
            int64_t len = tot - j0 < CONV_DIRECT_MR ? tot - j0 : CONV_DIRECT_MR;
            for (int64_t r = 0; r < CONV_DIRECT_MR; r++) {
                int64_t j = j0 + (r < len ? r : len - 1), n = j / P, a = j % P / f->Wa;
                int64_t b = j % f->Wa;
                roff[r] = n * p->img + (a * p->Wp + b) * p->Op;
                pos[r] = (n * g->C + c0) * HW + (a * g->sh + rh) * g->W + b * g->sw + rw;
            }
            if (p->bf)
                ampy_conv_direct_tile_bf16((const uint16_t *)p->dyp, roff, p->offs + f->t0,
                                           f->taps, p->Op / 2,
                                           (const uint16_t *)p->wp + ob * per * DG_NR +
                                               f->t0 * p->Op * DG_NR, tile);
            else
                ampy_conv_direct_tile_f32((const float *)p->dyp, roff, p->offs + f->t0, f->taps,
                                          p->Op,
                                          (const float *)p->wp + ob * per * DG_NR +
                                              f->t0 * p->Op * DG_NR, tile);
            store_tile(tile, p->bias ? p->bias + c0 : NULL, p->bf, len, on, pos, HW, p->dx);
        }
    }
}

#else
static void tile_range(int64_t begin, int64_t end, void *vctx)
{
    (void)begin, (void)end, (void)vctx; /* never routed here: ampy_conv_dgrad_phase_ok is 0 */
}
#endif

/* ---- the input gradient ----------------------------------------------------------- */
int ampy_conv_dgrad_phase_ok(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (g->groups != 1 || g->C <= 0 || g->O <= 0)
        return 0;
    ampy_cpu_level lv = ampy_cpu_level_get();
    if (dtype == AMPY_FLOAT32)
        return lv >= AMPY_CPU_AVX512;
    return dtype == AMPY_BFLOAT16 && lv == AMPY_CPU_AVX512_BF16 &&
           (ampy_cpu_features() & AMPY_CPU_HAS_AVX512BF16);
#else
    (void)g, (void)dtype;
    return 0;
#endif
}

typedef struct {
    size_t xbytes, wbytes, tbytes, pbytes, bbytes;
    char *xp, *wp;
    int64_t *taps;
    dg_phase *ph;
    float *bias;
} dg_bufs;

static void free_bufs(dg_bufs *b)
{
    ampy_free(b->xp, b->xbytes);
    ampy_free(b->wp, b->wbytes);
    ampy_free(b->taps, b->tbytes);
    ampy_free(b->ph, b->pbytes);
    ampy_free(b->bias, b->bbytes);
}

/* Allocates everything but the padded copy, plans the phases, packs the
 * panels and the float32 bias. */
static ampy_status setup(dg_plan *p, dg_bufs *b, const void *w, const void *bias)
{
    const ampy_conv2d_geom *g = p->g;
    size_t es = p->bf ? 2 : 4;
    int64_t kk = g->KH * g->KW;
    b->tbytes = (size_t)(2 * kk) * sizeof(int64_t);
    b->pbytes = (size_t)p->nph * sizeof(dg_phase);
    b->wbytes = (size_t)(p->nob * kk * p->Op * DG_NR) * es;
    b->bbytes = bias ? (size_t)g->C * sizeof(float) : 0;
    b->taps = ampy_alloc(b->tbytes), b->ph = ampy_alloc(b->pbytes), b->wp = ampy_alloc(b->wbytes);
    b->bias = bias ? ampy_alloc(b->bbytes) : NULL;
    if (!b->taps || !b->ph || !b->wp || (bias && !b->bias))
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes",
                          b->tbytes + b->pbytes + b->wbytes + b->bbytes);
    p->tap_k = b->taps, p->offs = b->taps + kk, p->ph = b->ph, p->wp = b->wp;
    make_phases(p);
    for (int64_t c = 0; bias && c < g->C; c++)
        b->bias[c] = p->bf ? ampy_bf16_to_f32(((const uint16_t *)bias)[c])
                           : ((const float *)bias)[c];
    p->bias = b->bias;
    dg_pack_ctx pc = {p, w};
    ampy_parallel_for(p->nob, 1, pack_range, &pc);
    return AMPY_OK;
}

ampy_status ampy_conv_dgrad_phase(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *dy,
                                  const void *w, const void *bias, void *dx)
{
    dg_plan p = {0};
    p.g = g, p.bf = dtype == AMPY_BFLOAT16;
    size_t es = p.bf ? 2 : 4;
    p.Op = p.bf ? (g->O + 1) / 2 * 2 : g->O;
    p.nph = g->sh * g->sw;
    p.nob = (g->C + DG_NR - 1) / DG_NR;
    dg_bufs b = {0};
    ampy_status s = setup(&p, &b, w, bias);
    int64_t NB = s == AMPY_OK ? DG_XP_BYTES / (p.img * (int64_t)es) : 1;
    NB = NB < 1 ? 1 : (NB < g->N ? NB : g->N);
    b.xbytes = (size_t)(NB * p.img) * es;
    if (s == AMPY_OK && !(b.xp = ampy_alloc(b.xbytes)))
        s = ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes", b.xbytes);
    int64_t ys[4] = {g->O * g->OH * g->OW, g->OH * g->OW, g->OW, 1};
    for (int64_t n0 = 0; n0 < g->N && s == AMPY_OK; n0 += NB) {
        p.nb = g->N - n0 < NB ? g->N - n0 : NB;
        ampy_conv_pad_nhwc((const char *)dy + (size_t)(n0 * ys[0]) * es, ys, es, p.nb, g->O,
                           g->OH, g->OW, p.Pt, p.Pl, p.Hp, p.Wp, p.Op, b.xp);
        p.dyp = b.xp;
        p.dx = (char *)dx + (size_t)(n0 * g->C * g->H * g->W) * es;
        p.nchunk_max = 0;
        for (int64_t i = 0; i < p.nph; i++) {
            dg_phase *f = &p.ph[i];
            f->tiles = (p.nb * f->Ha * f->Wa + CONV_DIRECT_MR - 1) / CONV_DIRECT_MR;
            int64_t nc = (f->tiles + DG_CHUNK - 1) / DG_CHUNK;
            p.nchunk_max = nc > p.nchunk_max ? nc : p.nchunk_max;
        }
        ampy_conv_parallel_steal(p.nchunk_max * p.nph * p.nob, tile_range, &p);
    }
    free_bufs(&b);
    return s;
}
