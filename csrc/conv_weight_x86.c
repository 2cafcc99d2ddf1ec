/* conv_weight_x86.c — the weight gradient of an ungrouped convolution of
 * any stride without an unfolded copy of x (contract in conv_weight.h).
 *
 * dw[o][c][kh][kw] = sum over n, oh, ow of
 *     dy[n][o][oh][ow] * x[n][c][oh*sh + kh*dh - pt][ow*sw + kw*dw - pl].
 * Padded x (X = ih + pt, Y = iw + pl) is split into its phases: phase
 * (fh, fw) is the sub-image of elements (sh * A + fh, sw * B + fw), and tap
 * (kh, kw) with kh*dh = sh * jh + fh, kw*dw = sw * jw + fw reads phase
 * (fh, fw) at (oh + jh, ow + jw): in its phase every tap is a unit-stride
 * shift (with unit stride there is one phase, padded x itself). Output
 * positions are numbered in a flat space q = (n * Hs + oh) * Wr + ow whose
 * rows (Wr wide) and images (Hs rows) also hold the zero padding of the
 * phases: phase element (n, A, B) sits at flat index (n * Hs + A) * Wr + B,
 * so the tap reads its phase at q + jh*Wr + jw, one shift for all positions.
 * Wr and Hs are the smallest sizes at which every phase's data fits and a
 * read that runs past a row (an image) lands in the next row's (image's)
 * zero padding, which two neighbours share. Positions with ow >= OW or
 * oh >= OH are junk: dy is zero there, so they add nothing (a finite x times
 * zero; an inf or NaN in x sends the call back to the general path, which
 * never forms those products).
 *
 * x is copied once into that flat space, xf[c][phase][flat index] (channel
 * count rounded up to 8 with zero planes); the flat space is then walked in
 * chunks of KC positions (an image's junk rows below OH left out), and per
 * chunk
 *   dq[ob][s][32]  = dy of output channels [32 ob, 32 ob + 32) at step s,
 *                    transposed from dy's planes: float32 one position per
 *                    step, bfloat16 the pair (q0 + 2s, q0 + 2s + 1) in one
 *                    32-bit word (vdpbf16ps's layout);
 * and an 8 (c) x 32 (o) tile of each tap's dw lives in 16 zmm accumulators
 * over the chunk: per step two dy vectors are loaded and, per c row, the
 * 32-bit word of xf at the tap's shift is broadcast (a float32, or the
 * bfloat16 pair of the same two positions, read at any parity) into two
 * FMAs (vdpbf16ps). Accumulators are float32 in a buffer of tiles; threads
 * take disjoint runs of chunks into their own buffers, summed at the end in
 * thread order, and each dw element is rounded once.
 */
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "conv_weight.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define WG_MR 8                   /* c rows of a tile                      */
#define WG_NR 32                  /* o columns of a tile                   */
#define WG_TILE (WG_MR * WG_NR)
#define WG_CHUNK_BYTES (448 << 10) /* x and dy of one chunk                */
#define WG_KC_MIN 64
#ifndef WG_PF
#define WG_PF 1024               /* dy prefetch distance, bytes */
#endif

typedef struct {
    const ampy_conv2d_geom *g;
    int bf;                       /* 1: bfloat16, 0: float32               */
    size_t es;
    const char *x;
    int64_t xs[4];
    const char *dy;
    int64_t Wr, Hs, Cp, nob, taps, kc, nch, xl;
    int64_t nph, xlp;             /* phases of x, elements per phase plane  */
    const int64_t *phs;           /* phase k: its (row, column) residues as
                                     fh * sw + fw                         */
    int64_t seg, ext, nsmax;      /* positions per image, x run past a
                                     segment, segments per chunk at most  */
    const int64_t *off;           /* taps shifts                           */
    char *xf;                     /* x in the flat space: channel c, phase k
                                     at (c * xl + k * xlp) elements        */
} wg_plan;

/* A chunk's segments (its pieces within one image): segment i has sst[i]
 * steps and its x runs start xo[i] elements into each channel's plane. */
typedef struct {
    char *dt, *dq;
    float *acc;
    int64_t *sst, *xo, ns;
} wg_work;

/* ---- packing ---------------------------------------------------------------- */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
/* dst[i] = src[2 * i], i < n, for 32-bit (es 4) or 16-bit elements; reads
 * no element past src[2 * (n - 1)]. The tail is scalar: masked vector
 * tails ran several times slower here (Zen 5) than the scalar loop. */
static void copy_even(const char *src, int64_t n, size_t es, char *dst)
{
    int64_t i = 0;
    if (es == 4) {
        const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                              28, 30);
        const float *s = (const float *)src;
        for (; i + 16 < n; i += 16)
            _mm512_storeu_ps((float *)dst + i,
                             _mm512_permutex2var_ps(_mm512_loadu_ps(s + 2 * i), idx,
                                                    _mm512_loadu_ps(s + 2 * i + 16)));
        for (; i < n; i++)
            ((float *)dst)[i] = s[2 * i];
        return;
    }
    const __m512i idx = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36,
                                         34, 32, 30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                         4, 2, 0);
    const uint16_t *s = (const uint16_t *)src;
    for (; i + 32 < n; i += 32)
        _mm512_storeu_si512((uint16_t *)dst + i,
                            _mm512_permutex2var_epi16(_mm512_loadu_si512(s + 2 * i), idx,
                                                      _mm512_loadu_si512(s + 2 * i + 32)));
    for (; i < n; i++)
        ((uint16_t *)dst)[i] = s[2 * i];
}
#pragma GCC pop_options

static void copy_strided(const char *src, int64_t stride, int64_t n, size_t es, char *dst)
{
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * es);
    } else if (stride == 2) {
        copy_even(src, n, es, dst);
    } else if (es == 2) {
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i * stride];
    } else {
        for (int64_t i = 0; i < n; i++)
            ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i * stride];
    }
}

/* The columns [*b0, *b1) of phase residue f (stride s, padding pad) that
 * hold data of an image row of W columns. */
static void data_cols(int64_t f, int64_t s, int64_t pad, int64_t W, int64_t *b0, int64_t *b1)
{
    *b0 = pad - f <= 0 ? 0 : (pad - f + s - 1) / s;
    *b1 = pad + W - f <= 0 ? 0 : (pad + W - f + s - 1) / s;
}

/* out[j] = phase k of padded x, channel c, at flat index f0 + j, j < len:
 * element (n, A, B) is padded x (n, sh * A + fh, sw * B + fw). */
static void fill_x_plane(const wg_plan *p, int64_t c, int64_t k, int64_t f0, int64_t len,
                         char *out)
{
    const ampy_conv2d_geom *g = p->g;
    size_t es = p->es;
    int64_t fh = p->phs[k] / g->sw, fw = p->phs[k] % g->sw, ba, bb;
    data_cols(fw, g->sw, g->pl, g->W, &ba, &bb);
    for (int64_t f = f0; f < f0 + len;) {
        int64_t R = f / p->Wr, y0 = f % p->Wr;
        int64_t seg = (R + 1) * p->Wr < f0 + len ? (R + 1) * p->Wr - f : f0 + len - f;
        int64_t n = R / p->Hs, ih = R % p->Hs * g->sh + fh - g->pt;
        char *o = out + (size_t)(f - f0) * es;
        if (n >= g->N || ih < 0 || ih >= g->H) {
            memset(o, 0, (size_t)seg * es);
            f += seg;
            continue;
        }
        /* [a, b): the part of the segment's columns that are data */
        int64_t a = y0 > ba ? y0 : ba, b = bb < y0 + seg ? bb : y0 + seg;
        if (b < a)
            a = b = y0 + seg;
        memset(o, 0, (size_t)(a - y0) * es);
        const char *src = p->x + (size_t)(n * p->xs[0] + c * p->xs[1] + ih * p->xs[2] +
                                          (a * g->sw + fw - g->pl) * p->xs[3]) * es;
        copy_strided(src, g->sw * p->xs[3], b - a, es, o + (size_t)(a - y0) * es);
        memset(o + (size_t)(b - y0) * es, 0, (size_t)(y0 + seg - b) * es);
        f += seg;
    }
}

/* out[j] = dy of channel o at flat position q0 + j (zero at junk), j < len. */
static void fill_dy_plane(const wg_plan *p, int64_t o, int64_t q0, int64_t len, char *out)
{
    const ampy_conv2d_geom *g = p->g;
    size_t es = p->es;
    int64_t P = g->OH * g->OW;
    for (int64_t q = q0; q < q0 + len;) {
        int64_t R = q / p->Wr, y0 = q % p->Wr;
        int64_t seg = (R + 1) * p->Wr < q0 + len ? (R + 1) * p->Wr - q : q0 + len - q;
        int64_t n = R / p->Hs, oh = R % p->Hs;
        char *d = out + (size_t)(q - q0) * es;
        int64_t v = n < g->N && oh < g->OH && y0 < g->OW ? (g->OW - y0 < seg ? g->OW - y0 : seg)
                                                          : 0;
        if (v)
            memcpy(d, p->dy + (size_t)((n * g->O + o) * P + oh * g->OW + y0) * es,
                   (size_t)v * es);
        memset(d + (size_t)v * es, 0, (size_t)(seg - v) * es);
        q += seg;
    }
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#define WG_INL inline __attribute__((always_inline))

/* dst[s * ld + r] = src[r * ls + s] for 16 x 16 32-bit words. */
static WG_INL void transpose16(const uint32_t *src, int64_t ls, uint32_t *dst, int64_t ld)
{
    __m512i r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_si512(src + i * ls);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* r[4 g + j], lane l: words 4 l + j of rows 4 g .. 4 g + 3 */
    for (int j = 0; j < 4; j++) {
        __m512i a0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);
        __m512i a1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd);
        __m512i a2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
        __m512i a3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
        _mm512_storeu_si512(dst + (0 + j) * ld, _mm512_shuffle_i32x4(a0, a2, 0x88));
        _mm512_storeu_si512(dst + (8 + j) * ld, _mm512_shuffle_i32x4(a0, a2, 0xdd));
        _mm512_storeu_si512(dst + (4 + j) * ld, _mm512_shuffle_i32x4(a1, a3, 0x88));
        _mm512_storeu_si512(dst + (12 + j) * ld, _mm512_shuffle_i32x4(a1, a3, 0xdd));
    }
}

/* dq[s][o] = word s of dt's row o (32 rows of `steps` words, steps % 16 == 0). */
static void transpose_block(const uint32_t *dt, int64_t steps, uint32_t *dq)
{
    for (int64_t s0 = 0; s0 < steps; s0 += 16)
        for (int o0 = 0; o0 < WG_NR; o0 += 16)
            transpose16(dt + o0 * steps + s0, steps, dq + s0 * WG_NR + o0, WG_NR);
}

/* Whether any of n float32 (bfloat16 when bf) values is an inf or NaN. */
static int any_nonfinite(const char *p, int64_t n, int bf)
{
    int64_t nb = n * (bf ? 2 : 4), i = 0;
    __m512i e = bf ? _mm512_set1_epi16(0x7f80) : _mm512_set1_epi32(0x7f800000);
    __mmask64 hit = 0;
    for (; i + 64 <= nb; i += 64) {
        __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + i), e);
        hit |= bf ? _mm512_cmpeq_epi16_mask(v, e) : (__mmask64)_mm512_cmpeq_epi32_mask(v, e);
    }
    if (hit)
        return 1;
    for (; i < nb; i += bf ? 2 : 4) {
        uint32_t w = bf ? *(const uint16_t *)(p + i) : *(const uint32_t *)(p + i);
        uint32_t m = bf ? 0x7f80u : 0x7f800000u;
        if ((w & m) == m)
            return 1;
    }
    return 0;
}

/* acc (an 8 x 32 tile) += the steps of the chunk's segments: in segment i,
 * x rows xr + xo[i] + r * xl bytes, one 32-bit word per step; dy 128 bytes
 * per step at dq, all segments in a row. */
static WG_INL void tile_kernel(int bf, int64_t ns, const int64_t *sst, const int64_t *xo,
                               const char *xr0, int64_t xl, const char *dq, float *acc)
{
    __m512 c0[WG_MR], c1[WG_MR];
    for (int r = 0; r < WG_MR; r++) {
        c0[r] = _mm512_loadu_ps(acc + r * WG_NR);
        c1[r] = _mm512_loadu_ps(acc + r * WG_NR + 16);
    }
    for (int64_t i = 0; i < ns; i++) {
    const char *xr = xr0 + xo[i] * (bf ? 2 : 4);
    int64_t steps = sst[i];
    if (bf) {
        for (int64_t s = 0; s < steps; s++, dq += 128, xr += 4) {
            _mm_prefetch(dq + WG_PF, _MM_HINT_T0);
            _mm_prefetch(dq + WG_PF + 64, _MM_HINT_T0);
            __m512bh b0 = (__m512bh)_mm512_load_si512(dq), b1 = (__m512bh)_mm512_load_si512(dq + 64);
            for (int r = 0; r < WG_MR; r++) {
                __m512bh a = (__m512bh)_mm512_set1_epi32(*(const int *)(xr + r * xl));
                c0[r] = _mm512_dpbf16_ps(c0[r], b0, a);
                c1[r] = _mm512_dpbf16_ps(c1[r], b1, a);
            }
        }
    } else {
        for (int64_t s = 0; s < steps; s++, dq += 128, xr += 4) {
            _mm_prefetch(dq + WG_PF, _MM_HINT_T0);
            _mm_prefetch(dq + WG_PF + 64, _MM_HINT_T0);
            __m512 b0 = _mm512_load_ps((const float *)dq), b1 = _mm512_load_ps((const float *)dq + 16);
            for (int r = 0; r < WG_MR; r++) {
                __m512 a = _mm512_set1_ps(*(const float *)(xr + r * xl));
                c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
                c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
            }
        }
    }
    }
    for (int r = 0; r < WG_MR; r++) {
        _mm512_storeu_ps(acc + r * WG_NR, c0[r]);
        _mm512_storeu_ps(acc + r * WG_NR + 16, c1[r]);
    }
}

static void tile_bf16(int64_t ns, const int64_t *sst, const int64_t *xo, const char *xr,
                      int64_t xl, const char *dq, float *acc)
{
    tile_kernel(1, ns, sst, xo, xr, xl, dq, acc);
}

static void tile_f32(int64_t ns, const int64_t *sst, const int64_t *xo, const char *xr,
                     int64_t xl, const char *dq, float *acc)
{
    tile_kernel(0, ns, sst, xo, xr, xl, dq, acc);
}
#pragma GCC pop_options

/* Chunk positions [q0, q0 + kc) in images' runs of seg positions (the last
 * chunk ends at the last image's): the segments, their flat starts fs[i] and compact offsets qa[i]. */
static void chunk_segments(const wg_plan *p, int64_t q0, wg_work *w, int64_t *fs, int64_t *qa)
{
    int64_t ns = 0, q1 = q0 + p->kc < p->g->N * p->seg ? q0 + p->kc : p->g->N * p->seg;
    for (int64_t q = q0; q < q1; ns++) {
        int64_t n = q / p->seg, r = q % p->seg;
        int64_t len = p->seg - r < q1 - q ? p->seg - r : q1 - q;
        fs[ns] = n * p->Hs * p->Wr + r;
        qa[ns] = q - q0;
        w->sst[ns] = p->bf ? len / 2 : len;
        w->xo[ns] = fs[ns];
        q += len;
    }
    w->ns = ns;
}

/* Packs chunk q0's dy into w's buffers. */
static void pack_chunk(const wg_plan *p, int64_t q0, wg_work *w)
{
    const ampy_conv2d_geom *g = p->g;
    size_t es = p->es;
    int64_t steps = p->bf ? p->kc / 2 : p->kc, *fs = w->sst + p->nsmax, *qa = w->xo + p->nsmax;
    chunk_segments(p, q0, w, fs, qa);
    for (int64_t ob = 0; ob < p->nob; ob++) {
        for (int64_t r = 0; r < WG_NR; r++) {
            char *row = w->dt + (size_t)(r * p->kc) * es;
            if (ob * WG_NR + r >= g->O) {
                memset(row, 0, (size_t)p->kc * es);
                continue;
            }
            for (int64_t i = 0; i < w->ns; i++)
                fill_dy_plane(p, ob * WG_NR + r, fs[i], (p->bf ? 2 : 1) * w->sst[i],
                              row + (size_t)qa[i] * es);
        }
        transpose_block((const uint32_t *)w->dt, steps,
                        (uint32_t *)(w->dq + (size_t)(ob * steps) * 128));
    }
}

static void run_chunk(const wg_plan *p, wg_work *w)
{
    int64_t steps = p->bf ? p->kc / 2 : p->kc, xl = p->xl * (int64_t)p->es;
    (void)steps;
    for (int64_t cb = 0; cb < p->Cp / WG_MR; cb++) {
        const char *xc = p->xf + cb * WG_MR * xl;
        for (int64_t ob = 0; ob < p->nob; ob++) {
            const char *dq = w->dq + (size_t)(ob * steps) * 128;
            float *acc = w->acc + ((cb * p->nob + ob) * p->taps) * WG_TILE;
            for (int64_t t = 0; t < p->taps; t++, acc += WG_TILE) {
                const char *xr = xc + p->off[t] * (int64_t)p->es;
                if (p->bf)
                    tile_bf16(w->ns, w->sst, w->xo, xr, xl, dq, acc);
                else
                    tile_f32(w->ns, w->sst, w->xo, xr, xl, dq, acc);
            }
        }
    }
}

typedef struct {
    const wg_plan *p;
    char *bad;
} wgx_ctx;

/* Items are (channel, phase) planes of xf; bad[item] = whether the plane
 * holds an inf or NaN. */
static void pack_x_range(int64_t begin, int64_t end, void *vctx)
{
    const wgx_ctx *c = vctx;
    const wg_plan *p = c->p;
    for (int64_t it = begin; it < end; it++) {
        int64_t ch = it / p->nph, k = it % p->nph;
        char *row = p->xf + (size_t)(ch * p->xl + k * p->xlp) * p->es;
        if (ch >= p->g->C) {
            memset(row, 0, (size_t)p->xlp * p->es);
            c->bad[it] = 0;
            continue;
        }
        fill_x_plane(p, ch, k, 0, p->xlp, row);
        c->bad[it] = (char)any_nonfinite(row, p->xlp, p->bf);
    }
}

/* Fills xf; 1 when x held an inf or NaN. */
static int pack_x(const wg_plan *p, char *bad)
{
    wgx_ctx c = {p, bad};
    int64_t n = p->Cp * p->nph;
    ampy_parallel_for(n, p->xlp >= 16384 ? 1 : 16384 / p->xlp, pack_x_range, &c);
    for (int64_t i = 0; i < n; i++)
        if (bad[i])
            return 1;
    return 0;
}

typedef struct {
    const wg_plan *p;
    wg_work *work;
    int64_t nw;
    size_t accbytes;
} wg_ctx;

/* Items are the workers: each zeroes its own float32 tile buffer (on its
 * thread, in parallel, not serially on the caller) and sums its run of
 * chunks into it. */
static void worker_range(int64_t begin, int64_t end, void *vctx)
{
    const wg_ctx *c = vctx;
    const wg_plan *p = c->p;
    for (int64_t wi = begin; wi < end; wi++) {
        wg_work *w = &c->work[wi];
        memset(w->acc, 0, c->accbytes);
        int64_t a = wi * p->nch / c->nw, b = (wi + 1) * p->nch / c->nw;
        for (int64_t ch = a; ch < b; ch++) {
            pack_chunk(p, ch * p->kc, w);
            run_chunk(p, w);
        }
    }
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The phases of x that the taps read (tap t: residues (kh*dh mod sh,
 * kw*dw mod sw), phase tph[t]; phase k's residues phs[k]), each tap's shift
 * within its phase into off, and the flat space's row and image sizes. */
static void plan_phases(const ampy_conv2d_geom *g, int64_t *off, int64_t *tph, int64_t *phs,
                        wg_plan *p)
{
    int64_t wr = g->OW, hs = g->OH;
    p->nph = 0;
    for (int64_t t = 0; t < p->taps; t++) {
        int64_t kh = t / g->KW * g->dh, kw = t % g->KW * g->dw, fh = kh % g->sh, fw = kw % g->sw;
        int64_t k = 0, a0, a1, b0, b1;
        while (k < p->nph && phs[k] != fh * g->sw + fw)
            k++;
        if (k == p->nph)
            phs[p->nph++] = fh * g->sw + fw;
        tph[t] = k;
        /* a row (image) holds the phase's data, and a read of the last
         * output position past it lands in the next one's zero padding */
        data_cols(fw, g->sw, g->pl, g->W, &b0, &b1);
        data_cols(fh, g->sh, g->pt, g->H, &a0, &a1);
        wr = wr > b1 ? wr : b1;
        wr = wr > g->OW + kw / g->sw - b0 ? wr : g->OW + kw / g->sw - b0;
        hs = hs > a1 ? hs : a1;
        hs = hs > g->OH + kh / g->sh - a0 ? hs : g->OH + kh / g->sh - a0;
    }
    p->Wr = wr, p->Hs = hs;
    /* an image's segment is OH * Wr rounded up to even (below); its extra
     * position must be a junk row of the same image, not the next image's
     * first position */
    if (p->Hs == g->OH && (g->OH * p->Wr) % 2)
        p->Hs++;
    for (int64_t t = 0; t < p->taps; t++)
        off[t] = t / g->KW * g->dh / g->sh * p->Wr + t % g->KW * g->dw / g->sw;
}

/* The flat space, the phases, the shifts and the chunk size of g. off holds
 * 3 * taps elements: the shifts, then the scratch of plan_phases. */
static void make_plan(const ampy_conv2d_geom *g, int bf, int64_t *off, wg_plan *p)
{
    p->taps = g->KH * g->KW;
    int64_t *tph = off + p->taps, *phs = off + 2 * p->taps, offmax = 0;
    plan_phases(g, off, tph, phs, p);
    for (int64_t t = 0; t < p->taps; t++)
        offmax = off[t] > offmax ? off[t] : offmax;
    p->Cp = round_up(g->C, WG_MR);
    p->nob = (g->O + WG_NR - 1) / WG_NR;
    p->bf = bf;
    p->es = bf ? 2 : 4;
    /* an image's positions: its first OH rows (the rows below hold only
     * junk), an even count so that bfloat16 pairs never straddle images */
    p->seg = round_up(g->OH * p->Wr, 2);
    p->ext = offmax + 2;
    int64_t L = g->N * p->seg, budget = WG_CHUNK_BYTES / (int64_t)p->es;
    /* the chunk's dy (all panels, re-read per channel block) and one channel
     * block's x runs stay in L2; x streams through once per chunk */
    int64_t xc = p->nph * WG_MR;
    int64_t kc = (budget - 2 * xc * p->ext) / (xc + xc * p->ext / p->seg + (p->nob + 1) * WG_NR);
    int64_t nt = ampy_get_num_threads(), per = round_up((L + 4 * nt - 1) / (4 * nt), 32);
    kc = kc / 32 * 32;
    kc = kc < per ? kc : per;
    kc = kc > WG_KC_MIN ? kc : WG_KC_MIN;
    p->kc = kc < round_up(L, 32) ? kc : round_up(L, 32);
    p->nch = (L + p->kc - 1) / p->kc;
    p->nsmax = p->kc / p->seg + 2;
    p->xlp = round_up(g->N * p->Hs * p->Wr + p->ext + 2, 32);
    p->xl = p->nph * p->xlp;
    /* tap t reads its phase's plane */
    for (int64_t t = 0; t < p->taps; t++)
        off[t] += tph[t] * p->xlp;
    p->off = off, p->phs = phs;
}

typedef struct {
    const wg_plan *p;
    const wg_work *work;
    int64_t nw;
    void *dw;
} store_ctx;

/* Items are o blocks: dw[o][c][tap] = the threads' sums, rounded once; per
 * (o block, c block) the taps' tiles (in L1) are written as 32 runs of
 * 8 * taps contiguous elements. */
static void store_range(int64_t begin, int64_t end, void *vctx)
{
    const store_ctx *s = vctx;
    const wg_plan *p = s->p;
    const ampy_conv2d_geom *g = p->g;
    int64_t taps = p->taps;
    for (int64_t ob = begin; ob < end; ob++)
        for (int64_t cb = 0; cb < p->Cp / WG_MR; cb++) {
            int64_t base = (cb * p->nob + ob) * taps * WG_TILE;
            int64_t rn = g->C - cb * WG_MR < WG_MR ? g->C - cb * WG_MR : WG_MR;
            for (int64_t j = 0; j < WG_NR && ob * WG_NR + j < g->O; j++) {
                int64_t i = ((ob * WG_NR + j) * g->C + cb * WG_MR) * taps;
                for (int64_t r = 0; r < rn; r++)
                    for (int64_t t = 0; t < taps; t++, i++) {
                        int64_t a = base + t * WG_TILE + r * WG_NR + j;
                        float v = s->work[0].acc[a];
                        for (int64_t w = 1; w < s->nw; w++)
                            v += s->work[w].acc[a];
                        if (p->bf)
                            ((uint16_t *)s->dw)[i] = ampy_f32_to_bf16(v);
                        else
                            ((float *)s->dw)[i] = v;
                    }
            }
        }
}

int ampy_conv_wgrad_shifted_ok(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    if (g->groups != 1 || g->N <= 0 || g->C <= 0 || g->O <= 0 || g->OH <= 0 || g->OW <= 0)
        return 0;
    ampy_cpu_level lv = ampy_cpu_level_get();
    if (dtype == AMPY_FLOAT32)
        return lv >= AMPY_CPU_AVX512;
    return dtype == AMPY_BFLOAT16 && lv == AMPY_CPU_AVX512_BF16 &&
           (ampy_cpu_features() & AMPY_CPU_HAS_AVX512BF16);
}

static void free_work(wg_work *w, int64_t nw, const size_t *sz)
{
    for (int64_t i = 0; i < nw; i++) {
        ampy_free(w[i].dt, sz[1]);
        ampy_free(w[i].dq, sz[2]);
        ampy_free(w[i].acc, sz[3]);
        ampy_free(w[i].sst, sz[4]);
        ampy_free(w[i].xo, sz[4]);
    }
}

#define WG_MAX_WORKERS 256

ampy_status ampy_conv_wgrad_shifted(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                    const int64_t *xs, const void *dy, void *dw, int *fallback)
{
    int64_t taps = g->KH * g->KW;
    int64_t *off = ampy_alloc((size_t)(3 * taps) * sizeof(int64_t));
    if (!off)
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate the tap shifts");
    wg_plan p = {0};
    p.g = g, p.x = x, p.dy = dy;
    memcpy(p.xs, xs, sizeof(p.xs));
    make_plan(g, dtype == AMPY_BFLOAT16, off, &p);
    int64_t nw = ampy_get_num_threads();
    nw = nw < p.nch ? nw : p.nch;
    nw = nw < WG_MAX_WORKERS ? nw : WG_MAX_WORKERS;
    size_t sz[5] = {(size_t)(p.Cp * p.xl) * p.es, (size_t)(WG_NR * p.kc) * p.es,
                    (size_t)(p.nob * WG_NR * p.kc) * p.es,
                    (size_t)(p.Cp * p.nob * WG_NR * taps) * sizeof(float),
                    (size_t)(2 * p.nsmax) * sizeof(int64_t)};
    wg_work work[WG_MAX_WORKERS];
    memset(work, 0, sizeof(wg_work) * (size_t)nw);
    ampy_status s = AMPY_OK;
    char *flags = ampy_alloc((size_t)(p.Cp * p.nph));
    p.xf = ampy_alloc(sz[0]);
    if (!flags || !p.xf) {
        s = ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate the weight-gradient buffers");
        goto done;
    }
    for (int64_t i = 0; i < nw; i++) {
        work[i].dt = ampy_alloc(sz[1]);
        work[i].dq = ampy_alloc(sz[2]);
        work[i].acc = ampy_alloc(sz[3]);
        work[i].sst = ampy_alloc(sz[4]);
        work[i].xo = ampy_alloc(sz[4]);
        if (!work[i].dt || !work[i].dq || !work[i].acc || !work[i].sst ||
            !work[i].xo) {
            s = ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate the weight-gradient buffers");
            goto done;
        }
    }
    if ((*fallback = pack_x(&p, flags)) == 0) {
        wg_ctx c = {&p, work, nw, sz[3]};
        ampy_parallel_for(nw, 1, worker_range, &c);
        store_ctx sc = {&p, work, nw, dw};
        int64_t per = p.Cp * WG_NR * taps;
        ampy_parallel_for(p.nob, per >= 16384 ? 1 : 16384 / per, store_range, &sc);
    }
done:
    free_work(work, nw, sz);
    ampy_free(p.xf, sz[0]);
    ampy_free(flags, (size_t)(p.Cp * p.nph));
    ampy_free(off, (size_t)(3 * taps) * sizeof(int64_t));
    return s;
}

#else

int ampy_conv_wgrad_shifted_ok(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    (void)g, (void)dtype;
    return 0;
}

ampy_status ampy_conv_wgrad_shifted(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                    const int64_t *xs, const void *dy, void *dw, int *fallback)
{
    (void)g, (void)dtype, (void)x, (void)xs, (void)dy, (void)dw;
    *fallback = 1;
    return AMPY_OK;
}

#endif
