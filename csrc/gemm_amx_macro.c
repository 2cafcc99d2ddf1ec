/* gemm_amx_macro.c — the AMX bfloat16 macro-kernel: one task of a problem
 * whose K fits in one K block, from packed B to rounded C (gemm_amx.c packs
 * and holds the implementation table; gemm_amx.h the tile shape).
 */
#include <string.h>

#include "gemm_amx.h"

#ifdef AMPY_GEMM_AMX
#include <immintrin.h>

#pragma GCC push_options
AMPY_GEMM_AMX_TARGET

/* ---- the single-K-block macro-kernel ------------------------------------
 * For K <= T_KC the driver hands each task (rows x cols of C, B packed) to
 * ampy_gemm_amx_macro() below instead of "pack A, kernel into a float tile, epilogue":
 *  - with a short K (32-row A panel <= 24 KiB) tiles go row panel by row
 *    panel, and A is read by tileloadd straight from its rows when they are
 *    contiguous in k (a->cs == 1) and K is a multiple of 32 (a 16 x 32 A
 *    tile is just 16 rows of 64 bytes at A's row stride); with a longer K,
 *    and for other layouts or a ragged last row panel, A panels are packed,
 *    each just before its first use;
 *  - the C rows of the next tile are prefetched for writing (prefetchw)
 *    while the current one computes (a store to a line not in cache waited
 *    for its read-for-ownership);
 *  - each finished 32 x 32 float32 tile is stored to one of two L1 scratch
 *    tiles and rounded into C a few rows per k step DURING the next tile's
 *    TDPBF16PS chain (the tile unit and the vector units overlap, where
 *    "kernel, then epilogue" left the tile unit idle for the epilogue);
 *  - the rounding is vcvtne2ps2bf16 (RNE, 32 lanes per instruction) with a
 *    fall back to elem.h's integer rounding for a vector that holds a NaN or
 *    a float32 subnormal (the instruction flushes those and keeps NaN
 *    payloads), so the bits equal ampy_f32_to_bf16 of the float32 result.
 * Order of the float32 operations per output: alpha * acc, + beta * C,
 * + bias[j]; then one rounding (as ampy_gemm_epilogue_avx512). */

/* elem.h's float32 -> bfloat16 for 2 x 16 lanes (NaN -> 0x7FC0). */
static inline __m512i bf16_exact_32(__m512 v0, __m512 v1)
{
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    __m512i u[2] = {_mm512_castps_si512(v0), _mm512_castps_si512(v1)}, r[2];
    for (int h = 0; h < 2; h++) {
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u[h], absm), inf);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u[h], 16), one);
        __m512i x = _mm512_srli_epi32(_mm512_add_epi32(u[h], _mm512_add_epi32(lsb, bias)), 16);
        r[h] = _mm512_mask_blend_epi32(nan, x, _mm512_set1_epi32(0x7FC0));
    }
    __m512i p = _mm512_packus_epi32(r[0], r[1]);
    return _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), p);
}

/* 32 floats (v0 = columns 0-15, v1 = 16-31) -> 32 bfloat16, elem.h bits. */
static inline __m512i bf16_round_32(__m512 v0, __m512 v1)
{
    /* fpclass 0xA1: QNaN | SNaN | denormal */
    if (__builtin_expect(!_kortestz_mask16_u8(_mm512_fpclass_ps_mask(v0, 0xA1),
                                              _mm512_fpclass_ps_mask(v1, 0xA1)), 0))
        return bf16_exact_32(v0, v1);
    return (__m512i)_mm512_cvtne2ps_pbh(v1, v0);
}

/* inlined into tile_chain's k loop (a call per k step cost ~4 %) */
#define AMX_INL inline __attribute__((always_inline))

typedef struct amx_epi {
    __m512 alpha, beta, b0, b1; /* b0, b1: the tile's 32 bias values */
    int scale, accum, bias, f32; /* alpha != 1, beta != 0, bias, C float32 */
} amx_epi;

/* Rows [r0, r1) of a full 32 x 32 float tile t (row stride 32) into C at c
 * (row stride crs elements, column stride 1). */
static AMX_INL void epi_rows(const amx_epi *e, const float *t, char *c, int64_t crs, int r0,
                            int r1)
{
    for (int r = r0; r < r1; r++) {
        __m512 v0 = _mm512_load_ps(t + r * T_NR), v1 = _mm512_load_ps(t + r * T_NR + 16);
        if (e->scale) {
            v0 = _mm512_mul_ps(v0, e->alpha);
            v1 = _mm512_mul_ps(v1, e->alpha);
        }
        if (e->f32) {
            float *cr = (float *)c + r * crs;
            if (e->accum) {
                v0 = _mm512_add_ps(v0, _mm512_mul_ps(e->beta, _mm512_loadu_ps(cr)));
                v1 = _mm512_add_ps(v1, _mm512_mul_ps(e->beta, _mm512_loadu_ps(cr + 16)));
            }
            if (e->bias) {
                v0 = _mm512_add_ps(v0, e->b0);
                v1 = _mm512_add_ps(v1, e->b1);
            }
            _mm512_storeu_ps(cr, v0);
            _mm512_storeu_ps(cr + 16, v1);
        } else {
            uint16_t *cr = (uint16_t *)c + r * crs;
            if (e->accum) {
                __m512i h = _mm512_loadu_si512(cr);
                __m512 c0 = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
                __m512 c1 = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
                v0 = _mm512_add_ps(v0, _mm512_mul_ps(e->beta, c0));
                v1 = _mm512_add_ps(v1, _mm512_mul_ps(e->beta, c1));
            }
            if (e->bias) {
                v0 = _mm512_add_ps(v0, e->b0);
                v1 = _mm512_add_ps(v1, e->b1);
            }
            _mm512_storeu_si512(cr, bf16_round_32(v0, v1));
        }
    }
}

/* A pending full tile: its float32 values in scratch, rounded into C a few
 * rows at a time while the next tile computes. */
typedef struct amx_pend {
    const float *t;
    char *c;
    int next; /* next row to round; 32 = done */
    amx_epi e;
} amx_pend;

static AMX_INL void pend_rows(amx_pend *p, int64_t crs, int n)
{
    if (p->next >= T_MR)
        return;
    int r1 = p->next + n < T_MR ? p->next + n : T_MR;
    epi_rows(&p->e, p->t, p->c, crs, p->next, r1);
    p->next = r1;
}

/* One 32 x 32 tile over nsteps k steps of 32; A tiles at a0/a1 + s * astep
 * (row stride lda bytes), B at b + s * 2048 (packed). While the tile unit
 * works, `rps` rows of the pending tile per step are rounded into C, and
 * `pf_n` lines (row stride pf_ld bytes) from pf on are prefetched for writing
 * (the next tile's C rows: a first store to an uncached output line costs a
 * read-for-ownership miss, which stalled the epilogue). The result is left
 * in tiles 0-3. */
/* tile_chain that, when sa != NULL, also stores each A tile pair it loads
 * to sa in the packed micro-panel layout (A read in place and packed in the
 * same pass). */
static inline void tile_chain_sa(int64_t nsteps, const char *a0, const char *a1,
                                 int64_t astep, int64_t lda, const char *b, amx_pend *pend,
                                 int64_t crs, int rps, const char *pf, int64_t pf_ld, int pf_n,
                                 char *sa)
{
    int pf_per = (int)((pf_n + nsteps - 1) / nsteps), pf_i = 0;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t s = 0; s < nsteps; s++, a0 += astep, a1 += astep, b += 2048) {
        _tile_loadd(4, a0, lda);
        _tile_loadd(6, b, 64);
        _tile_loadd(5, a1, lda);
        _tile_loadd(7, b + 1024, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        if (sa) {
            _tile_stored(4, sa + s * 2048, 64);
            _tile_stored(5, sa + s * 2048 + 1024, 64);
        }
        for (int i = 0; i < pf_per && pf_i < pf_n; i++, pf_i++)
            _mm_prefetch(pf + pf_i * pf_ld, _MM_HINT_ET0);
        pend_rows(pend, crs, rps);
    }
    pend_rows(pend, crs, T_MR);
}

static inline void tile_chain(int64_t nsteps, const char *a0, const char *a1, int64_t astep,
                              int64_t lda, const char *b, amx_pend *pend, int64_t crs, int rps,
                              const char *pf, int64_t pf_ld, int pf_n)
{
    tile_chain_sa(nsteps, a0, a1, astep, lda, b, pend, crs, rps, pf, pf_ld, pf_n, NULL);
}

#define AMX_L1_PANEL (24 << 10) /* bytes of a 32-row A panel kept in L1 */
#ifndef AMX_FUSE
#define AMX_FUSE 1
#endif

/* The epilogue constants of task t (a tile's bias values are loaded per tile). */
static AMX_INL amx_epi epi_init(const gemm_task *t)
{
    amx_epi e;
    memset(&e, 0, sizeof e);
    e.alpha = _mm512_set1_ps(t->alpha);
    e.beta = _mm512_set1_ps(t->beta);
    e.scale = t->alpha != 1.0f;
    e.accum = t->beta != 0.0f;
    e.bias = t->bias != NULL;
    e.f32 = t->cdt == AMPY_FLOAT32;
    return e;
}

/* The first C element of tile n (in the macro-kernel's tile order) when it
 * is a full T_MR x T_NR tile, else NULL. */
static AMX_INL const char *next_full_tile(const gemm_task *t, int64_t n, int64_t np,
                                          int64_t nq, int qouter, int64_t csz)
{
    int64_t pn = qouter ? n % np : n / nq;
    int64_t qn = qouter ? n / np : n % nq;
    if ((pn + 1) * T_MR <= t->rows && (qn + 1) * T_NR <= t->cols)
        return t->c + (pn * T_MR * t->crs + qn * T_NR) * csz;
    return NULL;
}

/* Tiles 0-3 (an h x w block of C at cq, columns from q0) stored to the
 * scratch tile sc; a full tile with a fast C layout (pending) becomes the
 * pending tile, rounded into C during the next tile's chain (returns 1: the
 * next tile takes the other scratch), any other is finished now (returns 0). */
static AMX_INL int finish_tile(const gemm_task *t, float *sc, int pending, int64_t h,
                               int64_t w, int64_t q0, char *cq, amx_pend *pend)
{
    _tile_stored(0, sc, 128);
    _tile_stored(1, sc + 16, 128);
    _tile_stored(2, sc + 16 * T_NR, 128);
    _tile_stored(3, sc + 16 * T_NR + 16, 128);
    if (pending) {
        pend->t = sc;
        pend->c = cq;
        pend->next = 0;
        if (pend->e.bias) {
            pend->e.b0 = _mm512_loadu_ps(t->bias + q0);
            pend->e.b1 = _mm512_loadu_ps(t->bias + q0 + 16);
        }
        return 1;
    }
    ampy_gemm_epilogue_avx512(sc, T_NR, h, w, t->alpha, t->beta, t->bias ? t->bias + q0 : NULL,
                              cq, t->cdt, t->crs, t->ccs);
    return 0;
}

/* Tile order: with a short K the 32-row A panel (32 x K bf16) stays in L1
 * while the packed B panels stream past it (row panel outer); with a long K
 * it would not, so B's panel stays (as far as it can) and the packed A block
 * streams (column panel outer): the operand that streams is then contiguous,
 * which the L2 prefetcher follows. */
void ampy_gemm_amx_macro(const gemm_task *t)
{
    const gemm_operand *a = t->a;
    int64_t nsteps = t->kcp / T_KB, pbytes = (int64_t)T_MR * t->kcp * 2;
    int64_t csz = t->cdt == AMPY_FLOAT32 ? 4 : 2;
    int fast_c = t->ccs == 1 && (t->cdt == AMPY_FLOAT32 || t->cdt == AMPY_BFLOAT16);
    int qouter = pbytes > AMX_L1_PANEL;
    int direct = a->cs == 1 && a->rs > 0 && t->kcp == t->K;
    /* Long K: the first column panel reads A in place and stores the tiles
     * it loaded as the packed panel, which the other column panels read
     * (measured: re-reading A's rows for every column panel was slower, and
     * a separate packing pass, reading 8 MiB from L3 with K = 1024, was
     * ~15 % of the time, not overlapped with the tile unit). */
    int fuse = qouter && direct && AMX_FUSE;
    if (qouter)
        direct = 0;
    int rps = (int)((T_MR + nsteps - 1) / nsteps);
    int64_t np = (t->rows + T_MR - 1) / T_MR, nq = (t->cols + T_NR - 1) / T_NR;
    int64_t hlast = t->rows - (np - 1) * T_MR;
    /* packed A: every panel, each just before its first tile (below), or (A
     * read in place) only a ragged last one */
    if (direct && hlast < T_MR)
        ampy_gemm_amx_pack_a(a, t->i0 + (np - 1) * T_MR, hlast, 0, t->K, t->kcp, t->ap);
    float scratch[2][T_MR * T_NR] __attribute__((aligned(64)));
    amx_epi e0 = epi_init(t);
    amx_pend pend = {scratch[0], NULL, T_MR, e0};
    int cur = 0;
    for (int64_t n = 0, ntiles = np * nq; n < ntiles; n++) {
        int64_t p = qouter ? n % np : n / nq, q = qouter ? n / np : n % nq;
        int64_t p0 = p * T_MR, q0 = q * T_NR;
        int64_t h = t->rows - p0 < T_MR ? t->rows - p0 : T_MR;
        int64_t w = t->cols - q0 < T_NR ? t->cols - q0 : T_NR;
        const char *a0;
        int64_t astep = 2048, lda = 64, a1off = 1024;
        char *sa = NULL;
        if ((direct || (fuse && q == 0)) && h == T_MR) {
            lda = a->rs * 2;
            a0 = a->p + (t->i0 + p0) * lda;
            a1off = 16 * lda;
            astep = 64;
            if (fuse)
                sa = (char *)t->ap + p * pbytes;
        } else {
            a0 = (const char *)t->ap + (direct ? 0 : p * pbytes);
            if (!direct && q == 0)
                ampy_gemm_amx_pack_a(a, t->i0 + p0, h, 0, t->K, t->kcp,
                                     (char *)t->ap + p * pbytes);
        }
        const char *bq = t->bp + q * pbytes;
        char *cq = t->c + (p0 * t->crs + q0 * t->ccs) * csz;
        /* prefetch the C rows of the next tile when it is a full one */
        const char *pf = fast_c && n + 1 < ntiles ? next_full_tile(t, n + 1, np, nq, qouter, csz)
                                                 : NULL;
        int pf_n = pf ? T_MR : 0;
        tile_chain_sa(nsteps, a0, a0 + a1off, astep, lda, bq, &pend, t->crs, rps, pf,
                      t->crs * csz, pf_n, sa);
        cur ^= finish_tile(t, scratch[cur], fast_c && h == T_MR && w == T_NR, h, w, q0, cq,
                           &pend);
    }
    pend_rows(&pend, t->crs, T_MR);
}

#pragma GCC pop_options
#endif
