/* gemm_amx.c — bfloat16 GEMM on Intel AMX tiles (TDPBF16PS), fp32 accumulate.
 *
 * Eight tile registers: C0..C3 hold a 32 x 32 float32 block (2 x 2 tiles of
 * 16 x 16), A0/A1 two 16-row x 32-k bf16 tiles, B0/B1 two 16-k-pair x 16-col
 * tiles in the "VNNI" layout TDPBF16PS expects (each 32-bit word holds the
 * bf16 pair B[2p][c], B[2p+1][c]). One k step of 32 issues 4 TDPBF16PS (each
 * 16 x 16 x 32 multiply-adds) for 4 tile loads. Intel SDM vol. 1 ch. 3 (AMX)
 * and the Intel Optimization Manual "Intel AMX" chapter describe the layout.
 *
 * Packed A micro-panel (32 rows, kcp a multiple of 32): for each k block of
 * 32, two 16 x 32 bf16 tiles (rows 0-15, 16-31), 64-byte rows.
 * Packed B micro-panel (32 cols): for each k block of 32, two tiles (cols
 * 0-15, 16-31) of 16 rows (k pairs) x 16 words.
 *
 * Linux hands out AMX state only on request: arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) once per process. Tile configuration is per thread, so
 * every task range loads it (thread_begin) and releases the tiles after
 * (thread_end): another library's AMX code on the same thread cannot leave us
 * a stale configuration. TDPBF16PS flushes bf16 subnormal inputs and subnormal
 * results to zero (documented in gemm.h). Only bfloat16 inputs come here.
 * The single-K-block macro-kernel (the common case, K <= T_KC) is in
 * gemm_amx_macro.c.
 */
#define _GNU_SOURCE
#include "ampy/cpu.h"
#include "gemm_amx.h"

#ifdef AMPY_GEMM_AMX
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#ifndef T_MC
#define T_MC 128 /* measured: 128 beat 256 by 5-10 % with K = 1024, even with K = 256 */
#endif
#ifndef AMX_KBLOCK
#define AMX_KBLOCK 1
#endif
#ifndef T_KC
#define T_KC 1024
#endif

static int amx_state = -1;

int ampy_gemm_amx_usable(void)
{
    if (amx_state < 0) {
        unsigned f = ampy_cpu_features();
        int ok = (f & AMPY_CPU_HAS_AMX_BF16) && (f & AMPY_CPU_HAS_AVX512) &&
                 (f & AMPY_CPU_HAS_AVX512BF16);
        if (ok)
            ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
        amx_state = ok;
    }
    return amx_state;
}

#pragma GCC push_options
AMPY_GEMM_AMX_TARGET

static inline uint16_t ld16b(const char *p, int64_t idx)
{
    uint16_t h;
    memcpy(&h, p + idx * 2, 2);
    return h;
}

static inline __mmask32 lanes32(int64_t n)
{
    return n >= 32 ? 0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1u);
}

#include "simd_transpose.h"

/* the 16 x 16 transpose on 32-bit words: here a word is a pair of bf16 */
static inline void transpose16w(__m512i v[16])
{
    __m512 r[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_castsi512_ps(v[i]);
    ampy_x86_transpose16(r);
    for (int i = 0; i < 16; i++)
        v[i] = _mm512_castps_si512(r[i]);
}

/* Word-interleave index: lanes 2c, 2c+1 of the result = r0[c], r1[c] for
 * c < 16 (lo) or c + 16 (lo + 16). */
static inline __m512i interleave_lo(void)
{
    return _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39,
                            7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
}

/* A stored k-major (a->rs == 1, e.g. dY.T): per 32-k block, interleave rows
 * k, k+1 (32 consecutive i each) into bf16 pairs, giving a 16 (pair) x 32 (i)
 * word matrix; two 16 x 16 word transposes turn it into the 32 tile rows.
 * One 32-k block kb of one panel (rows i0.., h of them) to dst. */
static inline void pack_a_kmajor_kb(const gemm_operand *a, int64_t i0, int64_t h, int64_t k0,
                                    int64_t kc, int64_t kb, uint16_t *dst)
{
    const __m512i lo = interleave_lo(), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    __mmask32 m = lanes32(h);
    __m512i L[16], H[16];
    for (int p = 0; p < 16; p++) {
        int64_t k = kb + 2 * p;
        __m512i r0 = _mm512_maskz_loadu_epi16(k < kc ? m : 0, a->p + ((k0 + k) * a->cs + i0) * 2);
        __m512i r1 = _mm512_maskz_loadu_epi16(k + 1 < kc ? m : 0,
                                              a->p + ((k0 + k + 1) * a->cs + i0) * 2);
        L[p] = _mm512_permutex2var_epi16(r0, lo, r1);
        H[p] = _mm512_permutex2var_epi16(r0, hi, r1);
    }
    transpose16w(L);
    transpose16w(H);
    for (int r = 0; r < 16; r++) {
        _mm512_storeu_si512(dst + r * T_KB, L[r]);
        _mm512_storeu_si512(dst + (16 + r) * T_KB, H[r]);
    }
}

static void pack_a_panel_kmajor(const gemm_operand *a, int64_t i0, int64_t h, int64_t k0,
                                int64_t kc, int64_t kcp, uint16_t *dst)
{
    for (int64_t kb = 0; kb < kcp; kb += T_KB, dst += T_MR * T_KB)
        pack_a_kmajor_kb(a, i0, h, k0, kc, kb, dst);
}

/* The whole block k-major: 32-k block by 32-k block across every panel, so
 * each source row's run over the block's rows (rows * 2 bytes; the rows lie
 * M elements apart, a new page every few) is read at once (panel by panel
 * it was read 64 bytes at a time, four passes over 1024 rows; measured ~5 %
 * of a dW GEMM; prefetching the next block's rows as well was slower). */
static void pack_a_kmajor(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                          int64_t kc, int64_t kcp, uint16_t *dst)
{
    for (int64_t kb = 0; kb < kcp; kb += T_KB) {
        for (int64_t p0 = 0; p0 < rows; p0 += T_MR) {
            int64_t h = rows - p0 < T_MR ? rows - p0 : T_MR;
            pack_a_kmajor_kb(a, i0 + p0, h, k0, kc, kb, dst + p0 * kcp + kb * T_MR);
        }
    }
}

/* A micro-panel: dst[kb][g][r][kk] = A[i0+16g+r][k0 + 32kb + kk]. Row by
 * row when A's rows are contiguous in k: each source row is then read as
 * one sequential run (k block by k block it would be 32 interleaved
 * streams, which the prefetchers follow worse). */
static void pack_a_panel(const gemm_operand *a, int64_t i0, int64_t h, int64_t k0, int64_t kc,
                         int64_t kcp, uint16_t *dst)
{
    if (a->cs == 1) {
        for (int r = 0; r < T_MR; r++) {
            const char *src = a->p + ((i0 + r) * a->rs + k0) * 2;
            uint16_t *d = dst + r * T_KB;
            for (int64_t kb = 0; kb < kcp; kb += T_KB, d += T_MR * T_KB)
                _mm512_storeu_si512(d, r < h ? _mm512_maskz_loadu_epi16(lanes32(kc - kb),
                                                                         src + kb * 2)
                                             : _mm512_setzero_si512());
        }
        return;
    }
    for (int64_t kb = 0; kb < kcp; kb += T_KB)
        for (int r = 0; r < T_MR; r++, dst += T_KB) {
            if (r >= h) {
                _mm512_storeu_si512(dst, _mm512_setzero_si512());
                continue;
            }
            int64_t base = (i0 + r) * a->rs + (k0 + kb) * a->cs;
            for (int kk = 0; kk < T_KB; kk++)
                dst[kk] = kb + kk < kc ? ld16b(a->p, base + kk * a->cs) : 0;
        }
}

static void pack_a(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                   int64_t kcp, void *vdst)
{
    uint16_t *dst = vdst;
    if (a->rs == 1 && a->cs != 1 && AMX_KBLOCK) {
        pack_a_kmajor(a, i0, rows, k0, kc, kcp, dst);
        return;
    }
    for (int64_t p0 = 0; p0 < rows; p0 += T_MR, dst += T_MR * kcp) {
        int64_t h = rows - p0 < T_MR ? rows - p0 : T_MR;
        if (a->rs == 1 && a->cs != 1)
            pack_a_panel_kmajor(a, i0 + p0, h, k0, kc, kcp, dst);
        else
            pack_a_panel(a, i0 + p0, h, k0, kc, kcp, dst);
    }
}

/* B row-major: interleave rows k, k+1 (32 columns each) into word pairs. */
static void pack_b_rows(const char *src, int64_t rs, int64_t w, int64_t kc, int64_t kcp,
                        uint16_t *dst)
{
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9,
                                        40, 8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1,
                                        32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    __mmask32 m = lanes32(w);
    for (int64_t k = 0; k < kcp; k += 2) {
        __m512i r0 = k < kc ? _mm512_maskz_loadu_epi16(m, src + k * rs * 2)
                            : _mm512_setzero_si512();
        __m512i r1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(m, src + (k + 1) * rs * 2)
                                : _mm512_setzero_si512();
        uint16_t *d = dst + (k / T_KB) * (T_KB * T_NR) + (k % T_KB) / 2 * T_KB;
        _mm512_storeu_si512(d, _mm512_permutex2var_epi16(r0, lo, r1));
        _mm512_storeu_si512(d + 16 * T_KB, _mm512_permutex2var_epi16(r0, hi, r1));
    }
}

/* B stored column-major (b->rs == 1, e.g. W.T of a linear): each column's
 * 32 k of a block are 16 consecutive bf16 pairs, i.e. one row of the VNNI
 * tile's transpose; a 16 x 16 word transpose per 16 columns gives the tile. */
static void pack_b_lines(const char *src, int64_t cs, int64_t w, int64_t kc, int64_t kcp,
                         uint16_t *dst)
{
    for (int64_t kb = 0; kb < kcp; kb += T_KB, dst += T_KB * T_NR) {
        __mmask32 km = lanes32(kc - kb);
        for (int g = 0; g < T_NR / 16; g++) {
            __m512i v[16];
            for (int c = 0; c < 16; c++)
                v[c] = _mm512_maskz_loadu_epi16(16 * g + c < w ? km : 0,
                                                src + ((16 * g + c) * cs + kb) * 2);
            transpose16w(v);
            for (int p = 0; p < 16; p++)
                _mm512_storeu_si512(dst + g * 16 * T_KB + p * T_KB, v[p]);
        }
    }
}

/* Any other layout: element by element. */
static void pack_b_generic(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                           int64_t j0, int64_t w, uint16_t *dst)
{
    for (int64_t k = 0; k < kcp; k++)
        for (int c = 0; c < T_NR; c++) {
            uint16_t v = (k < kc && c < w) ? ld16b(b->p, (k0 + k) * b->rs + (j0 + c) * b->cs) : 0;
            dst[(k / T_KB) * (T_KB * T_NR) + (c / 16) * 16 * T_KB + (k % T_KB) / 2 * T_KB +
                (c % 16) * 2 + (k & 1)] = v;
        }
}

static void pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp, int64_t j0,
                   int64_t cols, void *vdst)
{
    uint16_t *dst = vdst;
    if (b->cs == 1 && cols > T_NR) {
        /* Row-major B: k pair by k pair across the whole group, so each row
         * is read once as a run (panel by panel would stride down K). */
        for (int64_t k = 0; k < kcp; k += 2) {
            const char *src = b->p + ((k0 + k) * b->rs + j0) * 2;
            for (int64_t q0 = 0; q0 < cols; q0 += T_NR) {
                int64_t w = cols - q0 < T_NR ? cols - q0 : T_NR;
                pack_b_rows(src + q0 * 2, b->rs, w, kc - k, 2,
                            dst + (q0 / T_NR) * T_NR * kcp + (k / T_KB) * (T_KB * T_NR) +
                                (k % T_KB) / 2 * T_KB);
            }
        }
        return;
    }
    for (int64_t q0 = 0; q0 < cols; q0 += T_NR, dst += T_NR * kcp) {
        int64_t w = cols - q0 < T_NR ? cols - q0 : T_NR;
        if (b->cs == 1)
            pack_b_rows(b->p + (k0 * b->rs + j0 + q0) * 2, b->rs, w, kc, kcp, dst);
        else if (b->rs == 1)
            pack_b_lines(b->p + (k0 + (j0 + q0) * b->cs) * 2, b->cs, w, kc, kcp, dst);
        else
            pack_b_generic(b, k0, kc, kcp, j0 + q0, w, dst);
    }
}

static void kernel(int64_t kcp, const void *va, const void *vb, float *w, int64_t ldw,
                   int accumulate)
{
    const char *a = va, *b = vb;
    int64_t ldb = ldw * 4;
    if (accumulate) {
        _tile_loadd(0, w, ldb);
        _tile_loadd(1, w + 16, ldb);
        _tile_loadd(2, w + 16 * ldw, ldb);
        _tile_loadd(3, w + 16 * ldw + 16, ldb);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t k = 0; k < kcp; k += T_KB, a += 2 * 1024, b += 2 * 1024) {
        _tile_loadd(4, a, 64);
        _tile_loadd(6, b, 64);
        _tile_loadd(5, a + 1024, 64);
        _tile_loadd(7, b + 1024, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, w, ldb);
    _tile_stored(1, w + 16, ldb);
    _tile_stored(2, w + 16 * ldw, ldb);
    _tile_stored(3, w + 16 * ldw + 16, ldb);
}

void ampy_gemm_amx_pack_a(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                          int64_t kc, int64_t kcp, void *dst)
{
    pack_a(a, i0, rows, k0, kc, kcp, dst);
}

void ampy_gemm_amx_pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                          int64_t j0, int64_t cols, void *dst)
{
    pack_b(b, k0, kc, kcp, j0, cols, dst);
}

/* Palette 1, every tile 16 rows x 64 bytes (also used by gemm_amx_f16.c). */
void ampy_gemm_amx_tiles_begin(void)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    /* inline asm, not _tile_loadconfig: GCC 12's builtin does not tell the
     * optimiser that it reads cfg, so the stores above can be dropped. */
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

void ampy_gemm_amx_tiles_end(void) { _tile_release(); }

#pragma GCC pop_options

static const gemm_impl impl_amx = {
    "amx", T_MR, T_NR, T_KB, T_MC, T_KC, 2,
    pack_a, pack_b, kernel, ampy_gemm_epilogue_avx512, ampy_gemm_amx_tiles_begin,
    ampy_gemm_amx_tiles_end, ampy_gemm_amx_macro,
};

const gemm_impl *ampy_gemm_impl_amx(ampy_dtype dt)
{
    return dt == AMPY_BFLOAT16 ? &impl_amx : 0;
}

#else

int ampy_gemm_amx_usable(void) { return 0; }
const gemm_impl *ampy_gemm_impl_amx(ampy_dtype dt) { (void)dt; return 0; }

#endif
