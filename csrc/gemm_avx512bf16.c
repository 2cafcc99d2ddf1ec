/* gemm_avx512bf16.c — bfloat16 GEMM on AVX512-BF16 (vdpbf16ps), fp32
 * accumulation: the bfloat16 path of CPUs with AVX512-BF16 but no AMX (AMD
 * Zen 4 / Zen 5, Intel Cooper Lake), and of AMX CPUs forced below AMX
 * (ampy_cpu_level_set(AMPY_CPU_AVX512_BF16)).
 *
 * vdpbf16ps zmm_acc, zmm_b, zmm_a: in each of the 16 float32 lanes,
 *     acc += b.bf16[2l+1] * a.bf16[2l+1];  acc += b.bf16[2l] * a.bf16[2l]
 * i.e. one k PAIR per instruction. Operands are packed by the AMX packers
 * (gemm_amx.c), whose layout is exactly the one needed here: in a 32-k block
 * of a 32-row A micro-panel, row r's 16 k pairs are 16 consecutive 32-bit
 * words (row stride 64 bytes); of a 32-column B micro-panel, pair p of
 * columns 0-15 is one 64-byte vector (16 words: (B[2p][c], B[2p+1][c])), of
 * columns 16-31 the vector 1024 bytes further. So a k pair is: 2 B vector
 * loads, and per A row one 32-bit broadcast (vdpbf16ps's {1to16} memory
 * operand), feeding 2 vdpbf16ps. An A stored k-major (a weight gradient's
 * dY.T) is packed here instead, into a layout of its own ("pairs", see
 * A_RSTEP): a second table (impl_bf16_km) with its own kernel instances.
 *
 * Register blocking: the 32 x 32 micro-tile is computed in 4 passes of 8
 * rows x 32 columns (16 zmm accumulators, 2 B vectors, 8 broadcasts per k
 * pair: 16 vdpbf16ps per 10 loads, and 16 independent chains cover the
 * instruction's latency at one issue per cycle). K runs in chunks of 256:
 * the chunk of the B panel (16 KiB) is re-read by each pass from L1, each A
 * element is read once per tile, and the accumulators are parked in the
 * tile between chunks. Measured on Zen 4, 1 thread: the kernel alone runs at
 * ~99 % of the vdpbf16ps peak from L1, a 2048^3 product at ~88-92 %
 * (packing and the epilogue take the rest). A K block of 2048 keeps W (and
 * the repacking of A per column block that its budget forces) out of every
 * product with K <= 2048.
 * For a single K block the macro-kernel runs only the passes that hold real
 * rows (a 1-row product pays for 8 rows, not 32).
 *
 * Numerics, as the hardware defines them (Intel SDM, VDPBF16PS; measured the
 * same on Zen 4): each multiply-add is FUSED (the exact product added to the
 * accumulator, one rounding, RNE, MXCSR ignored), the odd element of each
 * pair first; bfloat16 subnormal inputs are read as zero (DAZ) and every
 * subnormal result is flushed to a zero of its sign (FTZ). So output (i, j)
 * is, from acc = +0 over k pairs (0,1), (2,3), ... in order (K padded with
 * zero pairs to a multiple of 32 at the end of K; K blocks of B_KC are 32
 * multiples, so blocking does not change the sequence):
 *     acc = ftz(fma(a[i][2p+1], b[2p+1][j], acc));
 *     acc = ftz(fma(a[i][2p],   b[2p][j],   acc));
 * then the float32 epilogue alpha * acc (+ beta * C) (+ bias[j]) and one
 * rounding to C's dtype (ampy_gemm_epilogue_avx512). Against the portable
 * bf16 reference (ampy_gemm_reference: left to right, acc += a * b, no
 * flushing) the differences are: the swapped order within each pair, the
 * flushing of subnormal inputs / partial sums (torch/oneDNN on this
 * instruction do the same), and fma where the reference rounds the product
 * (a bf16 x bf16 product is exact in float32 unless it leaves float32's
 * normal range, so this matters only for products below 2^-126 or above
 * 2^128). NaN and inf propagate as IEEE arithmetic says (inf * 0 gives the
 * default NaN). tests/test_gemm_avx512bf16.py bit-compares with this model.
 */
#include "ampy/cpu.h"
#include "gemm_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>

#define B_MR 32   /* micro-tile rows (the AMX A panel)      */
#define B_NR 32   /* micro-tile columns (the AMX B panel)   */
#define B_KB 32   /* k per packed block (kunit)             */
#define B_RP 8    /* rows per register pass                 */
#ifndef B_MC
#define B_MC 128
#endif
#ifndef B_KC
#define B_KC 2048
#endif
#ifndef B_KCH
#define B_KCH 256 /* k per L1 chunk inside the kernel */
#endif

int ampy_gemm_avx512bf16_usable(void)
{
    unsigned f = ampy_cpu_features();
    return (f & AMPY_CPU_HAS_AVX512) && (f & AMPY_CPU_HAS_AVX512BF16);
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

#define BF_INL inline __attribute__((always_inline))

/* The two layouts of a packed A micro-panel, as byte steps inside a 32-k
 * block: "rows" (the AMX packer's, row r's 16 k pairs at r * 64: A stored
 * row-major copies straight in) and "pairs" (pair p's 32 rows at p * 128: A
 * stored k-major, e.g. dY.T of a weight gradient, packs by interleaving two
 * k rows, without the word transposes the rows layout needs; see
 * pack_a_pairs). km selects "pairs". Only the addresses of the A broadcasts
 * differ: every output's sum runs over the same pairs in the same order. */
#define A_RSTEP(km) ((km) ? 4 : 64)
#define A_PSTEP(km) ((km) ? 4 * B_MR : 4)

/* One pass: rows [g*8, g*8+8) x 32 columns of the tile at w (row stride ldw)
 * over kcp packed k (a multiple of 32); per 32-k block, 8 lines from pf on
 * (512 bytes apart per block) are prefetched when pf != NULL. */
static BF_INL void pass8(int64_t kcp, const char *a, const char *b, float *w, int64_t ldw,
                         int accumulate, const char *pf, int km)
{
    __m512 c0[B_RP], c1[B_RP];
    for (int r = 0; r < B_RP; r++) {
        c0[r] = accumulate ? _mm512_loadu_ps(w + r * ldw) : _mm512_setzero_ps();
        c1[r] = accumulate ? _mm512_loadu_ps(w + r * ldw + 16) : _mm512_setzero_ps();
    }
    for (int64_t kb = 0; kb < kcp; kb += B_KB, a += B_MR * B_KB * 2, b += B_NR * B_KB * 2) {
        if (pf)
            for (int l = 0; l < 8; l++)
                _mm_prefetch(pf + kb / B_KB * 512 + l * 64, _MM_HINT_T0);
#pragma GCC unroll 16
        for (int p = 0; p < B_KB / 2; p++) {
            __m512bh b0 = (__m512bh)_mm512_load_si512(b + p * 64);
            __m512bh b1 = (__m512bh)_mm512_load_si512(b + 1024 + p * 64);
            for (int r = 0; r < B_RP; r++) {
                __m512bh av = (__m512bh)_mm512_set1_epi32(
                    *(const int *)(a + r * A_RSTEP(km) + p * A_PSTEP(km)));
                c0[r] = _mm512_dpbf16_ps(c0[r], b0, av);
                c1[r] = _mm512_dpbf16_ps(c1[r], b1, av);
            }
        }
    }
    for (int r = 0; r < B_RP; r++) {
        _mm512_storeu_ps(w + r * ldw, c0[r]);
        _mm512_storeu_ps(w + r * ldw + 16, c1[r]);
    }
}

/* The first npass passes (8 rows each) of the 32 x 32 tile, K chunk by K
 * chunk of B_KCH: the chunk of the B panel (32 x B_KCH bf16, 16 KiB) stays in
 * L1 while the passes re-read it, and each pass parks its accumulators in
 * the tile between chunks (the sum order per output does not change). While
 * a chunk computes, the passes prefetch the next chunk of B (a quarter
 * each), or after the last one the first chunk of next_b (the B panel of the
 * next call, or NULL): a B panel comes from L3 on its first use, and the
 * hardware prefetchers alone left ~10 % of the peak in stalls at K = 2048.
 * With ipf, a prefetch step for the next batch item runs before each pass of
 * the first chunk (B_MR / B_RP steps per tile: gemm_impl.pf_steps); with
 * bpf, a step for the next B packing item before every pass of every chunk. */
static BF_INL void kernel_n(int64_t kcp, const void *va, const void *vb, float *w,
                            int64_t ldw, int accumulate, int npass, const char *next_b,
                            struct gemm_prefetch *ipf, struct gemm_prefetch *bpf, int km)
{
    const char *a = va, *b = vb;
    const int64_t cb = B_KCH / B_KB * (B_NR * B_KB * 2); /* bytes of a B chunk */
    for (int64_t k0 = 0; k0 < kcp; k0 += B_KCH) {
        int64_t kn = kcp - k0 < B_KCH ? kcp - k0 : B_KCH, off = k0 / B_KB * (B_MR * B_KB * 2);
        const char *pf = k0 + B_KCH < kcp ? b + off + cb : next_b;
        for (int g = 0; g < npass; g++) {
            const char *pg = pf ? pf + g * (cb / 4) : NULL;
            if (ipf && k0 == 0)
                ampy_gemm_prefetch_step(ipf);
            if (bpf)
                ampy_gemm_prefetch_step(bpf);
            const char *ag = a + off + g * B_RP * A_RSTEP(km);
            if (accumulate || k0 > 0)
                pass8(kn, ag, b + off, w + g * B_RP * ldw, ldw, 1, pg, km);
            else
                pass8(kn, ag, b + off, w + g * B_RP * ldw, ldw, 0, pg, km);
        }
    }
}

/* kernel_n for each layout, out of line (as one function it was before the
 * layouts: inlined into the macro-kernel it ran the small items ~4 % slower) */
static __attribute__((noinline)) void kernel_rows(int64_t kcp, const void *a, const void *b,
                                                  float *w, int64_t ldw, int accumulate,
                                                  int npass, const char *next_b,
                                                  struct gemm_prefetch *ipf,
                                                  struct gemm_prefetch *bpf)
{
    kernel_n(kcp, a, b, w, ldw, accumulate, npass, next_b, ipf, bpf, 0);
}

static __attribute__((noinline)) void kernel_pairs(int64_t kcp, const void *a, const void *b,
                                                   float *w, int64_t ldw, int accumulate,
                                                   int npass, const char *next_b,
                                                   struct gemm_prefetch *ipf,
                                                   struct gemm_prefetch *bpf)
{
    kernel_n(kcp, a, b, w, ldw, accumulate, npass, next_b, ipf, bpf, 1);
}

static void kernel(int64_t kcp, const void *a, const void *b, float *w, int64_t ldw,
                   int accumulate)
{
    kernel_rows(kcp, a, b, w, ldw, accumulate, B_MR / B_RP, NULL, NULL, NULL);
}

static void kernel_pf(int64_t kcp, const void *a, const void *b, float *w, int64_t ldw,
                      int accumulate, struct gemm_prefetch *pf)
{
    kernel_rows(kcp, a, b, w, ldw, accumulate, B_MR / B_RP, NULL, NULL, pf);
}

static void kernel_km(int64_t kcp, const void *a, const void *b, float *w, int64_t ldw,
                      int accumulate)
{
    kernel_pairs(kcp, a, b, w, ldw, accumulate, B_MR / B_RP, NULL, NULL, NULL);
}

static void kernel_pf_km(int64_t kcp, const void *a, const void *b, float *w, int64_t ldw,
                         int accumulate, struct gemm_prefetch *pf)
{
    kernel_pairs(kcp, a, b, w, ldw, accumulate, B_MR / B_RP, NULL, NULL, pf);
}

/* A stored k-major (a->rs == 1: element (i, k) at (i + k * cs)), packed in
 * the "pairs" layout: k rows 2p, 2p+1 of a panel (32 consecutive i each) are
 * interleaved into the 32 words of pair p, one vpermt2w per 16 rows, the
 * rows A_PFD ahead prefetched (each is a run of rows * 2 bytes, cs elements
 * apart: a new page every row or two, which the hardware prefetchers hardly
 * follow; without them the copy waited on L3 for most of its time). Whole
 * block k pair by k pair across every panel, so each row run is read once. */
#ifndef A_PFD
#define A_PFD 16
#endif

static void pack_a_pairs(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                         int64_t kc, int64_t kcp, void *vdst)
{
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                        40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                        32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const char *row = a->p + (k0 * a->cs + i0) * 2;
    int64_t rb = a->cs * 2, run = rows * 2;
    uint16_t *dst = vdst;
    for (int64_t k = 0; k < kcp; k += 2, row += 2 * rb) {
        for (int64_t d = k + A_PFD; d < k + A_PFD + 2 && d < kc; d++) {
            const char *r = row + (d - k) * rb;
            for (int64_t o = 0; o < run + 63; o += 64)
                _mm_prefetch(r + (o < run ? o : run - 1), _MM_HINT_T0);
        }

        uint16_t *dk = dst + (k / B_KB) * (B_MR * B_KB) + (k % B_KB) / 2 * (2 * B_MR);
        for (int64_t p0 = 0; p0 < rows; p0 += B_MR, dk += B_MR * kcp) {
            __mmask32 m = rows - p0 >= B_MR ? 0xFFFFFFFFu : (__mmask32)((1u << (rows - p0)) - 1u);
            __m512i r0 = k < kc ? _mm512_maskz_loadu_epi16(m, row + p0 * 2)
                                : _mm512_setzero_si512();
            __m512i r1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(m, row + rb + p0 * 2)
                                    : _mm512_setzero_si512();
            _mm512_storeu_si512(dk, _mm512_permutex2var_epi16(r0, lo, r1));
            _mm512_storeu_si512(dk + B_MR, _mm512_permutex2var_epi16(r0, hi, r1));
        }
    }
}

/* A full 32 x 32 tile into a bfloat16 C (column stride 1): per row
 * alpha * acc (+ beta * C) (+ bias) in float32, as ampy_gemm_epilogue_avx512,
 * rounded by vcvtne2ps2bf16 (RNE, 32 lanes per instruction) instead of its
 * integer rounding. The instruction flushes float32 subnormals and keeps NaN
 * payloads, so a row holding either goes through ampy_gemm_epilogue_avx512,
 * which gives elem.h's bits; otherwise the two agree bit for bit. */
static void epilogue_tile_bf16(const float *t, float alpha, float beta, const float *bias,
                               uint16_t *c, int64_t crs)
{
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    for (int r = 0; r < B_MR; r++, t += B_NR, c += crs) {
        __m512 v0 = _mm512_mul_ps(va, _mm512_load_ps(t));
        __m512 v1 = _mm512_mul_ps(va, _mm512_load_ps(t + 16));
        if (beta != 0.0f) {
            __m512i h = _mm512_loadu_si512(c);
            __m512 c0 = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
            __m512 c1 = _mm512_castsi512_ps(
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
            v0 = _mm512_add_ps(v0, _mm512_mul_ps(vb, c0));
            v1 = _mm512_add_ps(v1, _mm512_mul_ps(vb, c1));
        }
        if (bias) {
            v0 = _mm512_add_ps(v0, b0);
            v1 = _mm512_add_ps(v1, b1);
        }
        /* fpclass 0xA1: QNaN | SNaN | denormal */
        if (!_kortestz_mask16_u8(_mm512_fpclass_ps_mask(v0, 0xA1),
                                 _mm512_fpclass_ps_mask(v1, 0xA1)))
            ampy_gemm_epilogue_avx512(t, B_NR, 1, B_NR, alpha, beta, bias, c, AMPY_BFLOAT16,
                                      crs, 1);
        else
            _mm512_storeu_si512(c, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
    }
}

/* B row-major (column stride 1), one packing item (a group of panels):
 * the AMX packers' layout (see the top), k pair by k pair across the whole
 * group, with the rows B_PFD ahead prefetched. Each k row of a group is a run
 * of at most 512 bytes, a row length apart: a new page every row or two,
 * which the hardware prefetchers hardly follow, so without the prefetches
 * the copy waited on memory for most of its time (a weight gradient, K =
 * 4096: the copy was a sixth of the product). Other layouts: the AMX packer. */
#ifndef B_PFD
#define B_PFD 16
#endif
static void pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp, int64_t j0,
                   int64_t cols, void *vdst)
{
    if (b->cs != 1) {
        ampy_gemm_amx_pack_b(b, k0, kc, kcp, j0, cols, vdst);
        return;
    }
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                        40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                        32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    const char *row = b->p + (k0 * b->rs + j0) * 2;
    int64_t rb = b->rs * 2, run = cols * 2;
    uint16_t *dst = vdst;
    for (int64_t k = 0; k < kcp; k += 2, row += 2 * rb) {
        for (int64_t d = k + B_PFD; d < k + B_PFD + 2 && d < kc; d++) {
            const char *r = row + (d - k) * rb;
            for (int64_t o = 0; o < run + 63; o += 64)
                _mm_prefetch(r + (o < run ? o : run - 1), _MM_HINT_T0);
        }
        uint16_t *dk = dst + (k / B_KB) * (B_KB * B_NR) + (k % B_KB) / 2 * B_KB;
        for (int64_t q0 = 0; q0 < cols; q0 += B_NR, dk += B_NR * kcp) {
            __mmask32 m = cols - q0 >= B_NR ? 0xFFFFFFFFu : (__mmask32)((1u << (cols - q0)) - 1u);
            __m512i r0 = k < kc ? _mm512_maskz_loadu_epi16(m, row + q0 * 2)
                                : _mm512_setzero_si512();
            __m512i r1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(m, row + rb + q0 * 2)
                                    : _mm512_setzero_si512();
            _mm512_storeu_si512(dk, _mm512_permutex2var_epi16(r0, lo, r1));
            _mm512_storeu_si512(dk + 16 * B_KB, _mm512_permutex2var_epi16(r0, hi, r1));
        }
    }
}

/* Single-K-block task (gemm_impl.macro): the driver's loop (pack the task's
 * A rows unless t->a_packed, then per B panel and A panel: kernel into an L1
 * tile, epilogue into C), with only the row passes that hold real rows.
 * Before each pass, a share of the next batch item's operands (t->pf) and
 * of the next B packing item's source (t->bpf) is prefetched (see
 * gemm_driver.c). */
static BF_INL void macro_n(const gemm_task *t, int km)
{
    float tile[B_MR * B_NR] __attribute__((aligned(64)));
    int64_t csz = (int64_t)ampy_dtype_size(t->cdt), kcp = t->kcp, pb = B_MR * kcp * 2;
    int fast = t->cdt == AMPY_BFLOAT16 && t->ccs == 1;
    if (!t->a_packed && km)
        pack_a_pairs(t->a, t->i0, t->rows, 0, t->K, kcp, t->ap);
    else if (!t->a_packed)
        ampy_gemm_amx_pack_a(t->a, t->i0, t->rows, 0, t->K, kcp, t->ap);
    const char *bp = t->bp;
    for (int64_t jq = 0; jq < t->cols; jq += B_NR, bp += pb) {
        int64_t tc = t->cols - jq < B_NR ? t->cols - jq : B_NR;
        const char *ap = t->ap;
        for (int64_t ip = 0; ip < t->rows; ip += B_MR, ap += pb) {
            int64_t tr = t->rows - ip < B_MR ? t->rows - ip : B_MR;
            char *c = t->c + (ip * t->crs + jq * t->ccs) * csz;
            const float *bias = t->bias ? t->bias + jq : NULL;
            const char *next_b = ip + B_MR < t->rows ? bp : jq + B_NR < t->cols ? bp + pb : NULL;
            (km ? kernel_pairs : kernel_rows)(kcp, ap, bp, tile, B_NR, 0,
                                              (int)((tr + B_RP - 1) / B_RP), next_b, t->pf,
                                              t->bpf);
            if (fast && tr == B_MR && tc == B_NR)
                epilogue_tile_bf16(tile, t->alpha, t->beta, bias, (uint16_t *)c, t->crs);
            else
                ampy_gemm_epilogue_avx512(tile, B_NR, tr, tc, t->alpha, t->beta, bias, c,
                                          t->cdt, t->crs, t->ccs);
        }
    }
}

static void macro(const gemm_task *t) { macro_n(t, 0); }
static void macro_km(const gemm_task *t) { macro_n(t, 1); }

#pragma GCC pop_options

static const gemm_impl *for_a(const gemm_operand *a);

/* Two tables, one per A layout (for_a picks one by A's strides); the
 * driver treats them as one implementation. */
static const gemm_impl impl_bf16 = {
    "avx512bf16", B_MR, B_NR, B_KB, B_MC, B_KC, 2,
    ampy_gemm_amx_pack_a, pack_b, kernel, ampy_gemm_epilogue_avx512, 0, 0,
    macro, B_MR / B_RP, 1, kernel_pf, B_KCH, for_a,
};
static const gemm_impl impl_bf16_km = {
    "avx512bf16", B_MR, B_NR, B_KB, B_MC, B_KC, 2,
    pack_a_pairs, pack_b, kernel_km, ampy_gemm_epilogue_avx512, 0, 0,
    macro_km, B_MR / B_RP, 1, kernel_pf_km, B_KCH, for_a,
};

static const gemm_impl *for_a(const gemm_operand *a)
{
    return a->rs == 1 && a->cs != 1 ? &impl_bf16_km : &impl_bf16;
}

const gemm_impl *ampy_gemm_impl_avx512bf16(ampy_dtype dt)
{
    return dt == AMPY_BFLOAT16 ? &impl_bf16 : 0;
}

#else

int ampy_gemm_avx512bf16_usable(void) { return 0; }
const gemm_impl *ampy_gemm_impl_avx512bf16(ampy_dtype dt) { (void)dt; return 0; }

#endif
