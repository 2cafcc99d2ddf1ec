/* gemm_amx_f16.c — float16 GEMM on AMX-BF16 tiles (TDPBF16PS), exact
 * products and float32 accumulation: the same contract as the AVX-512 FMA
 * path, on CPUs that have AMX-BF16 but not AMX-FP16 (Sapphire Rapids).
 *
 * The split. A float16 value x has an 11-bit significand; bfloat16 has 8 and
 * float32's exponent range. So x = hi + lo exactly, with hi = x truncated
 * to bfloat16 (toward zero) and lo = x - hi (at most 3 significant bits,
 * same sign as x, |lo| < 2^-7 |x|, a multiple of x's float16 ulp), both
 * bfloat16. Then
 *     a * b = ah*bh + (ah*bl + al*bh + al*bl)
 * where every product of two bfloat16 is exact in float32 (and as all parts
 * are multiples of the float16 ulps, sums that an fp32 GEMM forms exactly,
 * e.g. of small integers, are exact here too). Two passes of TDPBF16PS per
 * K block: first the "correction" sum of the three small products, from
 * zero; then the "main" sum of ah*bh over k, which in the first K block
 * simply continues in the same tiles, and in later blocks accumulates onto
 * W, the block's correction sum being added to W after with one AVX-512 add
 * (not summed at W's magnitude term by term). Keeping the small terms
 * in their own sum matters for accuracy: the main sum is rounded once per k
 * as in an fp32 GEMM (|ah*bh| <= |a*b|: error <= K * 2^-24 * sum|a*b|),
 * the correction terms add up to < 2^-6 * sum|a*b| (|al| < 2^-7 |a|), so
 * their 3K roundings cost < 0.05 K * 2^-24 * sum|a*b|, and a merge one
 * more rounding: about (1.05 K + 1) * 2^-24 * sum|a*b| per K block, against
 * K * 2^-24 * sum|a*b| for an fp32-accumulated GEMM (and not the
 * 4K * 2^-24 of one long sum of all 4K partial products). (Three passes, dropping al*bl, would leave an error of
 * up to 2^-14 |a*b| per product: far above fp32 accumulation, so all four.)
 *
 * TDPBF16PS semantics (Intel SDM vol. 2, "TDPBF16PS"): for each pair it
 * performs tmp += a0*b0 then tmp += a1*b1 as float32 FMAs, round to nearest
 * even on each accumulation; bfloat16 input denormals are treated as zero and
 * float32 output denormals are flushed to zero; MXCSR is neither read nor
 * written. None of that changes a result here: a nonzero float16 value x
 * is a multiple of its ulp (>= 2^-24), and so are hi and lo (nonzero ones are
 * >= 2^-24: normal bfloat16), so every product is zero or a multiple of
 * 2^-48, and so is every partial sum (rounding a multiple of 2^-48 that is
 * >= 2^-48 cannot go below 2^-48): no denormal is ever read or produced.
 * (The widening VCVTPH2PS ignores MXCSR.DAZ, so float16 subnormals convert
 * exactly in any floating-point mode.)
 *
 * Special values. inf and NaN do not split (inf - inf is NaN), and a finite
 * x exact in bfloat16 has lo = 0, so inf * y must not meet inf * 0 in a
 * correction product. Hence a third part: hc, "hi for the correction", equal
 * to hi for finite x and 0 for inf/NaN, whose lo is 0 too; inf/NaN keep hi =
 * x (a NaN with its quiet bit set, so no payload is truncated into inf). The
 * main sum then meets exactly the IEEE products of the fp32 path (hi of a
 * finite nonzero x is nonzero with x's sign: inf * y = inf * yh has the right
 * sign, inf * 0 = NaN, NaN propagates, +inf + -inf = NaN), and the
 * correction sum ah_c*bl + al*bl + al*bh_c only ever sees finite values.
 * Products are at most 2^32, so no finite sum overflows for K below 2^90.
 *
 * Packed layout (per 32 k of a K block, 6 KiB per 32 x 32 panel):
 *   A panel (32 rows): hi tiles (rows 0-15, 16-31; 32 bfloat16 of k per
 *     64-byte row), then lo tiles, then hc tiles: gemm_amx.c's A panel
 *     three times.
 *   B panel (32 cols): hi tiles (cols 0-15, 16-31; 16 k-pair rows of 16
 *     words, each word = bf16 pair (B[2p][c], B[2p+1][c]), the layout
 *     TDPBF16PS expects), then lo tiles, then hc tiles.
 * pelem is 6 bytes (hi, lo, hc bfloat16 per float16 element).
 *
 * Selection: gemm.c picks this kernel for float16 whenever "amx" is chosen
 * (the default on AMX CPUs); ampy_gemm_set_impl("avx512") pins the AVX-512
 * FMA kernel instead (tests and benchmarks compare the two).
 *
 * The tile configuration (8 tiles of 16 rows x 64 bytes) is set per thread
 * range (thread_begin) and released after (thread_end), like gemm_amx.c; it
 * is kept here rather than shared so the two kernels can change
 * independently.
 */
#define _GNU_SOURCE
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "gemm_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#include <string.h>

#define F_MR 32
#define F_NR 32
#define F_KB 32     /* k per tile row */
#define F_PART 1024 /* uint16 per part (hi, lo, hc) of a 32-k panel block: 2 tiles */
#define F_BLK (3 * F_PART)
#ifndef F_MC
#define F_MC 256
#endif
#ifndef F_KC
#define F_KC 512
#endif

/* ---- the split, one element (generic layouts) --------------------------- */

static void split1(uint16_t h, uint16_t *hi, uint16_t *lo, uint16_t *hc)
{
    uint32_t u = ampy_f16_to_f32_bits(h), hb = u & 0xFFFF0000u;
    if ((u & 0x7F800000u) == 0x7F800000u) { /* inf, NaN (made quiet) */
        *hi = (uint16_t)((hb >> 16) | ((u & 0x7FFFFFu) ? 0x40u : 0u));
        *lo = *hc = 0;
        return;
    }
    *hi = *hc = (uint16_t)(hb >> 16);
    *lo = (uint16_t)(ampy_f32_bits(ampy_bits_f32(u) - ampy_bits_f32(hb)) >> 16);
}

static inline uint16_t ld16(const char *p, int64_t idx)
{
    uint16_t h;
    memcpy(&h, p + idx * 2, 2);
    return h;
}

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq")

static inline __mmask32 lanes32(int64_t n)
{
    return n >= 32 ? 0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1u);
}

/* ---- the split, 16 lanes: dwords whose top 16 bits are the bfloat16 ----- */

static inline void split16(__m256i h, __m512i *hi, __m512i *lo)
{
    __m512 f = _mm512_cvtph_ps(h); /* exact */
    __m512i hb = _mm512_andnot_si512(_mm512_set1_epi32(0xFFFF), _mm512_castps_si512(f));
    *lo = _mm512_castps_si512(_mm512_sub_ps(f, _mm512_castsi512_ps(hb))); /* inf/NaN: NaN */
    *hi = hb;
}

/* hi, lo (bfloat16 in any lane order) -> lo and hc with inf/NaN lanes zeroed. */
static inline void fix_nonfinite(__m512i hi, __m512i *lo, __m512i *hc)
{
    const __m512i e = _mm512_set1_epi16(0x7F80);
    __mmask32 fin = _mm512_cmpneq_epi16_mask(_mm512_and_si512(hi, e), e);
    *lo = _mm512_maskz_mov_epi16(fin, *lo);
    *hc = _mm512_maskz_mov_epi16(fin, hi);
}

/* 32 float16 at p (lanes past the mask read as 0) -> 32 bfloat16 hi, lo (lo
 * not yet fixed for inf/NaN: fix_nonfinite after any reordering). */
static inline void split32(const char *p, __mmask32 m, __m512i *hi, __m512i *lo)
{
    static const uint16_t odd[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                     23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                     45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    const __m512i idx = _mm512_loadu_si512(odd);
    __m512i v = _mm512_maskz_loadu_epi16(m, p), h0, l0, h1, l1;
    split16(_mm512_castsi512_si256(v), &h0, &l0);
    split16(_mm512_extracti64x4_epi64(v, 1), &h1, &l1);
    /* back in v's lane order: a NaN (|v| > 0x7C00) gets the quiet bit, so a
     * payload only in the truncated bits cannot read as inf */
    __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)),
                                            _mm512_set1_epi16(0x7C00));
    __m512i hp = _mm512_permutex2var_epi16(h0, idx, h1);
    *hi = _mm512_mask_mov_epi16(hp, nan, _mm512_or_si512(hp, _mm512_set1_epi16(0x0040)));
    *lo = _mm512_permutex2var_epi16(l0, idx, l1);
}

/* Stores the three parts of one packed row at d (parts F_PART apart). */
static inline void store3(uint16_t *d, __m512i hi, __m512i lo)
{
    __m512i hc;
    fix_nonfinite(hi, &lo, &hc);
    _mm512_storeu_si512(d, hi);
    _mm512_storeu_si512(d + F_PART, lo);
    _mm512_storeu_si512(d + 2 * F_PART, hc);
}

/* 16 x 16 transpose of 32-bit words: v[i] lane j -> v[j] lane i. */
static inline void transpose16w(__m512i v[16])
{
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_castsi512_ps(v[i]);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
        for (int h = 0; h < 2; h++) {
            __m512d x = _mm512_castps_pd(t[i + h]), y = _mm512_castps_pd(t[i + 2 + h]);
            r[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
            r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
        }
    for (int i = 0; i < 16; i += 8)
        for (int h = 0; h < 4; h++) {
            t[i + h] = _mm512_shuffle_f32x4(r[i + h], r[i + 4 + h], 0x88);
            t[i + 4 + h] = _mm512_shuffle_f32x4(r[i + h], r[i + 4 + h], 0xDD);
        }
    for (int h = 0; h < 8; h++) {
        v[h] = _mm512_castps_si512(_mm512_shuffle_f32x4(t[h], t[8 + h], 0x88));
        v[8 + h] = _mm512_castps_si512(_mm512_shuffle_f32x4(t[h], t[8 + h], 0xDD));
    }
}

/* Word interleave of two 32 x bfloat16 rows: lanes 2c, 2c+1 = r0[c], r1[c]
 * for c < 16 (ilo) or c + 16 (ihi). */
static const uint16_t ilo_idx[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                     37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                     11, 43, 12, 44, 13, 45, 14, 46, 15, 47};

/* ---- packing A ---------------------------------------------------------- */

/* Row-major rows (cs == 1): each row's 32 k of a block is one tile row. */
static void pack_a_rows(const gemm_operand *a, int64_t i0, int64_t h, int64_t k0, int64_t kc,
                        int64_t kcp, uint16_t *dst)
{
    for (int64_t kb = 0; kb < kcp; kb += F_KB, dst += F_BLK) {
        __mmask32 m = lanes32(kc - kb);
        for (int r = 0; r < F_MR; r++) {
            __m512i hi = _mm512_setzero_si512(), lo = hi;
            if (r < h)
                split32(a->p + ((i0 + r) * a->rs + k0 + kb) * 2, m, &hi, &lo);
            store3(dst + r * F_KB, hi, lo);
        }
    }
}

/* k-major (rs == 1, e.g. dY.T), one block of 32 k: rows k, k+1 (32
 * consecutive i) interleave into words; two 16 x 16 word transposes per part
 * give the tile rows. */
static void pack_a_kmajor(const gemm_operand *a, int64_t i0, int64_t h, int64_t k0,
                          int64_t kc, int64_t kb, uint16_t *dst)
{
    const __m512i ilo = _mm512_loadu_si512(ilo_idx);
    const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
    __mmask32 m = lanes32(h);
    __m512i L[2][16], H[2][16];
    for (int p = 0; p < 16; p++) {
        int64_t k = kb + 2 * p;
        __m512i h0, l0, h1, l1;
        split32(a->p + ((k0 + k) * a->cs + i0) * 2, k < kc ? m : 0, &h0, &l0);
        split32(a->p + ((k0 + k + 1) * a->cs + i0) * 2, k + 1 < kc ? m : 0, &h1, &l1);
        L[0][p] = _mm512_permutex2var_epi16(h0, ilo, h1);
        H[0][p] = _mm512_permutex2var_epi16(h0, ihi, h1);
        L[1][p] = _mm512_permutex2var_epi16(l0, ilo, l1);
        H[1][p] = _mm512_permutex2var_epi16(l0, ihi, l1);
    }
    for (int part = 0; part < 2; part++) {
        transpose16w(L[part]);
        transpose16w(H[part]);
    }
    for (int r = 0; r < 16; r++) {
        store3(dst + r * F_KB, L[0][r], L[1][r]);
        store3(dst + (16 + r) * F_KB, H[0][r], H[1][r]);
    }
}

static void pack_a_generic(const gemm_operand *a, int64_t i0, int64_t h, int64_t k0,
                           int64_t kc, int64_t kcp, uint16_t *dst)
{
    for (int64_t k = 0; k < kcp; k++)
        for (int r = 0; r < F_MR; r++) {
            uint16_t hi = 0, lo = 0, hc = 0;
            if (r < h && k < kc)
                split1(ld16(a->p, (i0 + r) * a->rs + (k0 + k) * a->cs), &hi, &lo, &hc);
            uint16_t *d = dst + (k / F_KB) * F_BLK + r * F_KB + k % F_KB;
            d[0] = hi;
            d[F_PART] = lo;
            d[2 * F_PART] = hc;
        }
}

static void pack_a(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                   int64_t kcp, void *vdst)
{
    uint16_t *dst = vdst;
    if (a->rs == 1 && a->cs != 1) {
        /* k-major: block of k by block of k across all panels, so each k row
         * is read as one run of `rows` elements (panel by panel would read
         * 64 bytes per row, rows a whole stride apart). */
        for (int64_t kb = 0; kb < kcp; kb += F_KB)
            for (int64_t p0 = 0; p0 < rows; p0 += F_MR) {
                int64_t h = rows - p0 < F_MR ? rows - p0 : F_MR;
                pack_a_kmajor(a, i0 + p0, h, k0, kc, kb,
                              dst + p0 / F_MR * 3 * F_MR * kcp + kb / F_KB * F_BLK);
            }
        return;
    }
    for (int64_t p0 = 0; p0 < rows; p0 += F_MR, dst += 3 * F_MR * kcp) {
        int64_t h = rows - p0 < F_MR ? rows - p0 : F_MR;
        if (a->cs == 1)
            pack_a_rows(a, i0 + p0, h, k0, kc, kcp, dst);
        else
            pack_a_generic(a, i0 + p0, h, k0, kc, kcp, dst);
    }
}

/* ---- packing B ---------------------------------------------------------- */

/* Row-major B: rows k and k+1 (w <= 32 columns from src) become word row
 * (k % 32) / 2 of the hi, lo and hc tiles at dst (the panel's block of k). */
static inline void pack_b_pair(const char *src, int64_t rs, __mmask32 m, int two,
                               uint16_t *dst, __m512i ilo, __m512i ihi)
{
    __m512i h0, l0, h1 = _mm512_setzero_si512(), l1 = h1;
    split32(src, m, &h0, &l0);
    if (two)
        split32(src + rs * 2, m, &h1, &l1);
    store3(dst, _mm512_permutex2var_epi16(h0, ilo, h1), _mm512_permutex2var_epi16(l0, ilo, l1));
    store3(dst + 16 * F_KB, _mm512_permutex2var_epi16(h0, ihi, h1),
           _mm512_permutex2var_epi16(l0, ihi, l1));
}

/* Column-major B (rs == 1, e.g. W.T): a column's 32 k of a block are 16
 * words of bf16 pairs, one row of the tile's transpose. */
static void pack_b_cols(const char *src, int64_t cs, int64_t w, int64_t kc, int64_t kcp,
                        uint16_t *dst)
{
    for (int64_t kb = 0; kb < kcp; kb += F_KB, dst += F_BLK) {
        __mmask32 km = lanes32(kc - kb);
        for (int g = 0; g < F_NR / 16; g++) {
            __m512i vh[16], vl[16];
            for (int c = 0; c < 16; c++)
                split32(src + ((16 * g + c) * cs + kb) * 2, 16 * g + c < w ? km : 0, &vh[c],
                        &vl[c]);
            transpose16w(vh);
            transpose16w(vl);
            for (int p = 0; p < 16; p++)
                store3(dst + g * 16 * F_KB + p * F_KB, vh[p], vl[p]);
        }
    }
}

static void pack_b_generic(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                           int64_t j0, int64_t w, uint16_t *dst)
{
    for (int64_t k = 0; k < kcp; k++)
        for (int c = 0; c < F_NR; c++) {
            uint16_t hi = 0, lo = 0, hc = 0;
            if (k < kc && c < w)
                split1(ld16(b->p, (k0 + k) * b->rs + (j0 + c) * b->cs), &hi, &lo, &hc);
            uint16_t *d = dst + (k / F_KB) * F_BLK + (c / 16) * 16 * F_KB +
                          (k % F_KB) / 2 * F_KB + (c % 16) * 2 + (k & 1);
            d[0] = hi;
            d[F_PART] = lo;
            d[2 * F_PART] = hc;
        }
}

static void pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp, int64_t j0,
                   int64_t cols, void *vdst)
{
    uint16_t *dst = vdst;
    if (b->cs == 1) {
        /* k pair by k pair across all panels, so each row is read as a run. */
        const __m512i ilo = _mm512_loadu_si512(ilo_idx);
        const __m512i ihi = _mm512_add_epi16(ilo, _mm512_set1_epi16(16));
        for (int64_t k = 0; k < kcp; k += 2) {
            const char *src = b->p + ((k0 + k) * b->rs + j0) * 2;
            int64_t off = (k / F_KB) * F_BLK + (k % F_KB) / 2 * F_KB;
            for (int64_t q0 = 0; q0 < cols; q0 += F_NR) {
                int64_t w = cols - q0 < F_NR ? cols - q0 : F_NR;
                pack_b_pair(src + q0 * 2, b->rs, k < kc ? lanes32(w) : 0, k + 1 < kc,
                            dst + (q0 / F_NR) * 3 * F_NR * kcp + off, ilo, ihi);
            }
        }
        return;
    }
    for (int64_t q0 = 0; q0 < cols; q0 += F_NR, dst += 3 * F_NR * kcp) {
        int64_t w = cols - q0 < F_NR ? cols - q0 : F_NR;
        if (b->rs == 1)
            pack_b_cols(b->p + (k0 + (j0 + q0) * b->cs) * 2, b->cs, w, kc, kcp, dst);
        else
            pack_b_generic(b, k0, kc, kcp, j0 + q0, w, dst);
    }
}

/* ---- the micro-kernel: W[32 x 32] (+)= A_panel @ B_panel ----------------- */

/* Tiles: 0-3 the 2 x 2 float32 output tiles, 4/5 A rows 0-15/16-31,
 * 6/7 B cols 0-15/16-31. Byte offsets inside a 6 KiB block of 32 k. */
#define T0 0
#define T1 1024
#define LO 2048
#define HC 4096
#define BLK_BYTES 6144

/* C tiles 0-3 += sum over the nkb blocks of ah*bh. */
static inline void main_pass(int64_t nkb, const char *a, const char *b)
{
    for (int64_t t = 0; t < nkb; t++, a += BLK_BYTES, b += BLK_BYTES) {
        _tile_loadd(4, a + T0, 64);
        _tile_loadd(6, b + T0, 64);
        _tile_loadd(5, a + T1, 64);
        _tile_loadd(7, b + T1, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
}

/* C tiles 0-3 = sum over the nkb blocks of ah_c*bl + al*bl + al*bh_c. */
static inline void corr_pass(int64_t nkb, const char *a, const char *b)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t t = 0; t < nkb; t++, a += BLK_BYTES, b += BLK_BYTES) {
        _tile_loadd(4, a + HC + T0, 64);
        _tile_loadd(6, b + LO + T0, 64);
        _tile_loadd(5, a + HC + T1, 64);
        _tile_loadd(7, b + LO + T1, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        _tile_loadd(4, a + LO + T0, 64);
        _tile_loadd(5, a + LO + T1, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        _tile_loadd(6, b + HC + T0, 64);
        _tile_loadd(7, b + HC + T1, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
}

static inline void tiles_load_c(const float *w, int64_t ldw)
{
    _tile_loadd(0, w, ldw * 4);
    _tile_loadd(1, w + 16, ldw * 4);
    _tile_loadd(2, w + 16 * ldw, ldw * 4);
    _tile_loadd(3, w + 16 * ldw + 16, ldw * 4);
}

static inline void tiles_store_c(float *w, int64_t ldw)
{
    _tile_stored(0, w, ldw * 4);
    _tile_stored(1, w + 16, ldw * 4);
    _tile_stored(2, w + 16 * ldw, ldw * 4);
    _tile_stored(3, w + 16 * ldw + 16, ldw * 4);
}

static void kernel(int64_t kcp, const void *va, const void *vb, float *w, int64_t ldw,
                   int accumulate)
{
    const char *a = va, *b = vb;
    int64_t nkb = kcp / F_KB;
    float s[F_MR * F_NR] __attribute__((aligned(64)));
    corr_pass(nkb, a, b);
    if (!accumulate) {
        /* first K block: the main sum continues from the correction sum
         * in the same tiles (no separate merge rounding) */
        main_pass(nkb, a, b);
        tiles_store_c(w, ldw);
        return;
    }
    /* later K blocks: main sum onto W in the tiles, the correction sum (kept
     * apart so its small terms are not rounded at W's magnitude) added after */
    tiles_store_c(s, F_NR);
    tiles_load_c(w, ldw);
    main_pass(nkb, a, b);
    tiles_store_c(w, ldw);
    for (int r = 0; r < F_MR; r++) {
        float *wr = w + r * ldw;
        const float *sr = s + r * F_NR;
        _mm512_storeu_ps(wr, _mm512_add_ps(_mm512_loadu_ps(wr), _mm512_load_ps(sr)));
        _mm512_storeu_ps(wr + 16,
                         _mm512_add_ps(_mm512_loadu_ps(wr + 16), _mm512_load_ps(sr + 16)));
    }
}


#pragma GCC pop_options

/* Designated: fields added to gemm_impl later (none needed here) stay 0. */
static const gemm_impl impl_amx_f16 = {
    .name = "amx-f16", .mr = F_MR, .nr = F_NR, .kunit = F_KB, .mc = F_MC, .kc = F_KC,
    .pelem = 6, .pack_a = pack_a, .pack_b = pack_b, .kernel = kernel,
    .epilogue = ampy_gemm_epilogue_avx512, .thread_begin = ampy_gemm_amx_tiles_begin,
    .thread_end = ampy_gemm_amx_tiles_end,
};

const gemm_impl *ampy_gemm_impl_amx_f16(void) { return &impl_amx_f16; }

#else

const gemm_impl *ampy_gemm_impl_amx_f16(void) { return 0; }

#endif
