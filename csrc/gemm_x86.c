/* gemm_x86.c — AVX-512 and AVX2 FMA GEMM: packing with fused half -> float32
 * conversion, register-blocked micro-kernels, vectorised epilogue.
 *
 * The extension is built without -march flags, so every function here carries
 * its ISA through `#pragma GCC target` and is only called after CPUID says the
 * CPU (and the OS, via XCR0) supports it (__builtin_cpu_supports).
 *
 * Micro-kernels follow the BLIS Skylake-X / Haswell sgemm shapes (vectors
 * along N, A broadcast): AVX-512 14 x 32 (28 zmm accumulators), AVX2 6 x 16
 * (12 ymm). Conversions: vcvtph2ps is exact for every float16 (including
 * subnormals), bfloat16 -> float32 is a 16-bit shift, so packed values equal
 * elem.h's ampy_f16_to_f32 / ampy_bf16_to_f32 bit for bit. Stores round with
 * vcvtps2ph (RNE, MXCSR-independent immediate) for float16 and with elem.h's
 * integer rounding, vectorised, for bfloat16 (vcvtneps2bf16 flushes
 * subnormals, so it would not match).
 */
#include "ampy/cpu.h"
#include "gemm_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int ampy_gemm_avx512_usable(void) { return (ampy_cpu_features() & AMPY_CPU_HAS_AVX512) != 0; }
int ampy_gemm_avx2_usable(void) { return (ampy_cpu_features() & AMPY_CPU_HAS_AVX2) != 0; }

/* =========================== AVX-512 ===================================== */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

#define X_MR 14
#define X_NR 32
#ifndef X_MC
#define X_MC 252
#endif
#ifndef X_KPF
#define X_KPF 8 /* k rows ahead prefetched when packing a k-major A */
#endif
#ifndef X_KC
#define X_KC 256
#endif

/* 16 elements from p[idx..], lanes outside m read as 0, converted to f32. */
static inline __m512 ld16(const char *p, ampy_dtype dt, int64_t idx, __mmask16 m)
{
    if (dt == AMPY_FLOAT32)
        return _mm512_maskz_loadu_ps(m, p + idx * 4);
    __m256i h = _mm256_maskz_loadu_epi16(m, p + idx * 2);
    if (dt == AMPY_FLOAT16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __mmask16 lanes(int64_t n) { return n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1u); }

#include "simd_transpose.h"

/* dst[k*L + l] = src line l, element k, for l < nlines (0 for nlines <= l < L)
 * and k < kc (0 for kc <= k < kcp). Line l starts at element l*ls. */
static void pack_lines(const char *src, ampy_dtype dt, int64_t ls, int64_t nlines,
                       int64_t kc, int64_t kcp, int L, float *dst)
{
    for (int l0 = 0; l0 < L; l0 += 16) {
        __mmask16 sm = lanes(L - l0);
        for (int64_t k = 0; k < kcp; k += 16) {
            __m512 r[16];
            __mmask16 km = lanes(kc - k > 0 ? kc - k : 0);
            for (int l = 0; l < 16; l++)
                r[l] = l0 + l < nlines ? ld16(src, dt, (l0 + l) * ls + k, km)
                                       : _mm512_setzero_ps();
            ampy_x86_transpose16(r);
            int64_t kn = kcp - k < 16 ? kcp - k : 16;
            for (int64_t kk = 0; kk < kn; kk++)
                _mm512_mask_storeu_ps(dst + (k + kk) * L + l0, sm, r[kk]);
        }
    }
}

/* dst[k*L + l] = src[k*ks + l] for l < n (0 up to L), k < kc (0 up to kcp). */
static void pack_rows(const char *src, ampy_dtype dt, int64_t ks, int64_t n, int64_t kc,
                      int64_t kcp, int L, float *dst)
{
    for (int64_t k = 0; k < kcp; k++)
        for (int l0 = 0; l0 < L; l0 += 16) {
            __mmask16 m = lanes(k < kc && n > l0 ? n - l0 : 0);
            _mm512_mask_storeu_ps(dst + k * L + l0, lanes(L - l0),
                                  ld16(src, dt, k * ks + l0, m));
        }
}

/* A stored k-major (a->rs == 1, e.g. dY.T of a weight gradient): for each k
 * the block's rows are one contiguous run, so copy it k by k into every micro-
 * panel. Panel by panel would touch a new line (and a new page when the column
 * stride is a few KiB) per k for every panel, i.e. the whole K x rows source
 * rows/mr times. */
static void pack_a512_kmajor(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                             int64_t kc, int64_t kcp, float *dst)
{
    int64_t es = (int64_t)ampy_dtype_size(a->dt), rb = rows * es;
    for (int64_t k = 0; k < kcp; k++) {
        const char *src = a->p + ((k0 + k) * a->cs + i0) * es;
        float *d = dst + k * X_MR;
#if X_KPF
        /* the rows of A a few k ahead: each k is a new run, often a new page
         * (cs = M elements), where the hardware prefetchers stop */
        if (k + X_KPF < kc)
            for (int64_t o = 0; o < rb + 63; o += 64)
                _mm_prefetch(src + X_KPF * a->cs * es + (o < rb ? o : rb - 1), _MM_HINT_T0);
#endif
        for (int64_t p0 = 0; p0 < rows; p0 += X_MR, d += X_MR * kcp) {
            __mmask16 m = lanes(k < kc ? (rows - p0 < X_MR ? rows - p0 : X_MR) : 0);
            _mm512_mask_storeu_ps(d, lanes(X_MR), ld16(src, a->dt, p0, m));
        }
    }
}

static void pack_a512(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                      int64_t kc, int64_t kcp, void *vdst)
{
    float *dst = vdst;
    if (a->rs == 1 && a->cs != 1) {
        pack_a512_kmajor(a, i0, rows, k0, kc, kcp, dst);
        return;
    }
    for (int64_t p0 = 0; p0 < rows; p0 += X_MR, dst += X_MR * kcp) {
        int64_t h = rows - p0 < X_MR ? rows - p0 : X_MR;
        int64_t base = (i0 + p0) * a->rs + k0 * a->cs;
        int64_t es = (int64_t)ampy_dtype_size(a->dt);
        if (a->cs == 1)
            pack_lines(a->p + base * es, a->dt, a->rs, h, kc, kcp, X_MR, dst);
        else if (a->rs == 1)
            pack_rows(a->p + base * es, a->dt, a->cs, h, kc, kcp, X_MR, dst);
        else
            ampy_gemm_pack_a_f32(a, i0 + p0, h, k0, kc, kcp, X_MR, dst);
    }
}

static void pack_b512(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp, int64_t j0,
                      int64_t cols, void *vdst)
{
    float *dst = vdst;
    int64_t es = (int64_t)ampy_dtype_size(b->dt);
    if (b->cs == 1 && cols > X_NR) {
        /* Row-major B: each k row of the whole group once, split across the
         * panels (one panel at a time would stride down K per panel). */
        for (int64_t k = 0; k < kcp; k++) {
            const char *src = b->p + ((k0 + k) * b->rs + j0) * es;
            float *d = dst + k * X_NR;
            for (int64_t q0 = 0; q0 < cols; q0 += X_NR, d += X_NR * kcp) {
                int64_t w = k < kc ? cols - q0 : 0;
                _mm512_storeu_ps(d, ld16(src, b->dt, q0, lanes(w)));
                _mm512_storeu_ps(d + 16, ld16(src, b->dt, q0 + 16, lanes(w > 16 ? w - 16 : 0)));
            }
        }
        return;
    }
    for (int64_t q0 = 0; q0 < cols; q0 += X_NR, dst += X_NR * kcp) {
        int64_t w = cols - q0 < X_NR ? cols - q0 : X_NR;
        const char *src = b->p + (k0 * b->rs + (j0 + q0) * b->cs) * es;
        if (b->cs == 1)
            pack_rows(src, b->dt, b->rs, w, kc, kcp, X_NR, dst);
        else if (b->rs == 1)
            pack_lines(src, b->dt, b->cs, w, kc, kcp, X_NR, dst);
        else
            ampy_gemm_pack_b_f32(b, k0, kc, kcp, j0 + q0, w, X_NR, dst);
    }
}

#define ROWS14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

static void kernel512(int64_t kcp, const void *va, const void *vb, float *w, int64_t ldw,
                      int accumulate)
{
    const float *a = va, *b = vb;
#define DECL(i) __m512 c##i##0 = _mm512_setzero_ps(), c##i##1 = _mm512_setzero_ps();
    ROWS14(DECL)
#undef DECL
    for (int i = 0; i < X_MR; i++) { /* the W tile is read after the loop */
        _mm_prefetch((const char *)(w + i * ldw), _MM_HINT_T0);
        _mm_prefetch((const char *)(w + i * ldw + 16), _MM_HINT_T0);
    }
    for (int64_t k = 0; k < kcp; k++, a += X_MR, b += X_NR) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#define STEP(i)                                      \
        {                                            \
            __m512 ai = _mm512_set1_ps(a[i]);        \
            c##i##0 = _mm512_fmadd_ps(ai, b0, c##i##0); \
            c##i##1 = _mm512_fmadd_ps(ai, b1, c##i##1); \
        }
        ROWS14(STEP)
#undef STEP
    }
#define STORE(i)                                                                   \
    if (accumulate) {                                                              \
        c##i##0 = _mm512_add_ps(c##i##0, _mm512_loadu_ps(w + i * ldw));            \
        c##i##1 = _mm512_add_ps(c##i##1, _mm512_loadu_ps(w + i * ldw + 16));       \
    }                                                                              \
    _mm512_storeu_ps(w + i * ldw, c##i##0);                                        \
    _mm512_storeu_ps(w + i * ldw + 16, c##i##1);
    ROWS14(STORE)
#undef STORE
}

/* elem.h's float32 -> bfloat16 rounding on 16 lanes (NaN -> 0x7FC0), the
 * result in the low half of each 32-bit lane. */
static inline __m512i f32_to_bf16_lanes(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                            _mm512_set1_epi32(0x7F800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    return _mm512_mask_blend_epi32(nan, _mm512_srli_epi32(r, 16), _mm512_set1_epi32(0x7FC0));
}

/* 32 consecutive float32 -> 32 bfloat16 in one register: packus keeps the
 * (< 0x10000) lane values and interleaves the halves per 128-bit lane; the
 * qword permute restores the order. Stored with one plain 64-byte store (a
 * masked vpmovdw to memory per 16 was most of the bf16 epilogue's time). */
static inline __m512i f32_to_bf16_32(__m512 v0, __m512 v1)
{
    __m512i p = _mm512_packus_epi32(f32_to_bf16_lanes(v0), f32_to_bf16_lanes(v1));
    return _mm512_permutexvar_epi64(_mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0), p);
}

static inline __m256i f32_to_bf16_16(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                            _mm512_set1_epi32(0x7F800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    r = _mm512_mask_blend_epi32(nan, _mm512_srli_epi32(r, 16), _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(r);
}

void ampy_gemm_epilogue_avx512(const float *w, int64_t ldw, int64_t rows, int64_t cols,
                               float alpha, float beta, const float *bias, void *vc,
                               ampy_dtype cdt, int64_t crs, int64_t ccs)
{
    if (ccs != 1) {
        ampy_gemm_epilogue_portable(w, ldw, rows, cols, alpha, beta, bias, vc, cdt, crs, ccs);
        return;
    }
    char *c = vc;
    int64_t es = (int64_t)ampy_dtype_size(cdt);
    __m512 va = _mm512_set1_ps(alpha), vbeta = _mm512_set1_ps(beta);
    for (int64_t i = 0; i < rows; i++) {
        char *ci = c + i * crs * es;
        int64_t j = 0;
        if (cdt == AMPY_BFLOAT16)
            for (; j + 32 <= cols; j += 32) {
                __m512 r0 = _mm512_mul_ps(va, _mm512_loadu_ps(w + i * ldw + j));
                __m512 r1 = _mm512_mul_ps(va, _mm512_loadu_ps(w + i * ldw + j + 16));
                if (beta != 0.0f) {
                    r0 = _mm512_add_ps(r0, _mm512_mul_ps(vbeta, ld16(ci, cdt, j, 0xFFFF)));
                    r1 = _mm512_add_ps(r1, _mm512_mul_ps(vbeta, ld16(ci, cdt, j + 16, 0xFFFF)));
                }
                if (bias) {
                    r0 = _mm512_add_ps(r0, _mm512_loadu_ps(bias + j));
                    r1 = _mm512_add_ps(r1, _mm512_loadu_ps(bias + j + 16));
                }
                _mm512_storeu_si512(ci + j * 2, f32_to_bf16_32(r0, r1));
            }
        for (; j < cols; j += 16) {
            __mmask16 m = lanes(cols - j);
            __m512 r = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, w + i * ldw + j));
            if (beta != 0.0f)
                r = _mm512_add_ps(r, _mm512_mul_ps(vbeta, ld16(ci, cdt, j, m)));
            if (bias)
                r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, bias + j));
            if (cdt == AMPY_FLOAT32)
                _mm512_mask_storeu_ps(ci + j * 4, m, r);
            else if (cdt == AMPY_FLOAT16)
                _mm256_mask_storeu_epi16(ci + j * 2, m,
                    _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            else
                _mm256_mask_storeu_epi16(ci + j * 2, m, f32_to_bf16_16(r));
        }
    }
}

/* Single-K-block task (the driver's loop, gemm_impl.macro): a full micro-
 * tile of a float32 C with alpha 1, beta 0 and no bias is written by the
 * kernel straight into C (the epilogue would only copy it: x * 1.0f is x,
 * NaN payloads included), saving a store, a reload and a store per output
 * (~6 % of K = 256 GEMMs); every other tile goes through the scratch tile
 * and the epilogue as in the driver. */
static void macro512(const gemm_task *t)
{
    float tile[X_MR * X_NR] __attribute__((aligned(64)));
    int64_t csz = (int64_t)ampy_dtype_size(t->cdt), kcp = t->kcp;
    int direct = t->cdt == AMPY_FLOAT32 && t->ccs == 1 && t->alpha == 1.0f &&
                 t->beta == 0.0f && !t->bias;
    const float *ap = t->ap, *bp = (const float *)t->bp;
    pack_a512(t->a, t->i0, t->rows, 0, t->K, kcp, t->ap);
    for (int64_t jq = 0; jq < t->cols; jq += X_NR, bp += X_NR * kcp) {
        int64_t tc = t->cols - jq < X_NR ? t->cols - jq : X_NR;
        for (int64_t ip = 0; ip < t->rows; ip += X_MR) {
            int64_t tr = t->rows - ip < X_MR ? t->rows - ip : X_MR;
            char *c = t->c + (ip * t->crs + jq * t->ccs) * csz;
            if (direct && tr == X_MR && tc == X_NR) {
                kernel512(kcp, ap + ip * kcp, bp, (float *)c, t->crs, 0);
                continue;
            }
            kernel512(kcp, ap + ip * kcp, bp, tile, X_NR, 0);
            ampy_gemm_epilogue_avx512(tile, X_NR, tr, tc, t->alpha, t->beta,
                                      t->bias ? t->bias + jq : NULL, c, t->cdt, t->crs,
                                      t->ccs);
        }
    }
}

#pragma GCC pop_options

#ifndef X_MACRO
#define X_MACRO 1
#endif
static const gemm_impl impl512 = {
    "avx512", X_MR, X_NR, 1, X_MC, X_KC, sizeof(float),
    pack_a512, pack_b512, kernel512, ampy_gemm_epilogue_avx512, 0, 0,
    X_MACRO ? macro512 : 0,
};

const gemm_impl *ampy_gemm_impl_avx512(ampy_dtype dt) { (void)dt; return &impl512; }

/* ============================= AVX2 ====================================== */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#define Y_MR 6
#define Y_NR 16

static void pack_a256(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                      int64_t kc, int64_t kcp, void *dst)
{
    ampy_gemm_pack_a_f32(a, i0, rows, k0, kc, kcp, Y_MR, dst);
}

static void pack_b256(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp, int64_t j0,
                      int64_t cols, void *dst)
{
    ampy_gemm_pack_b_f32(b, k0, kc, kcp, j0, cols, Y_NR, dst);
}

#define ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)

static void kernel256(int64_t kcp, const void *va, const void *vb, float *w, int64_t ldw,
                      int accumulate)
{
    const float *a = va, *b = vb;
#define DECL(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = _mm256_setzero_ps();
    ROWS6(DECL)
#undef DECL
    for (int64_t k = 0; k < kcp; k++, a += Y_MR, b += Y_NR) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#define STEP(i)                                         \
        {                                               \
            __m256 ai = _mm256_broadcast_ss(a + i);     \
            c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0); \
            c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1); \
        }
        ROWS6(STEP)
#undef STEP
    }
#define STORE(i)                                                                   \
    if (accumulate) {                                                              \
        c##i##0 = _mm256_add_ps(c##i##0, _mm256_loadu_ps(w + i * ldw));            \
        c##i##1 = _mm256_add_ps(c##i##1, _mm256_loadu_ps(w + i * ldw + 8));        \
    }                                                                              \
    _mm256_storeu_ps(w + i * ldw, c##i##0);                                        \
    _mm256_storeu_ps(w + i * ldw + 8, c##i##1);
    ROWS6(STORE)
#undef STORE
}

#pragma GCC pop_options

static const gemm_impl impl256 = {
    "avx2", Y_MR, Y_NR, 1, 126, 256, sizeof(float),
    pack_a256, pack_b256, kernel256, ampy_gemm_epilogue_portable, 0, 0, 0,
};

const gemm_impl *ampy_gemm_impl_avx2(ampy_dtype dt) { (void)dt; return &impl256; }

#else /* not x86-64 GCC/Clang: portable only */

int ampy_gemm_avx512_usable(void) { return 0; }
int ampy_gemm_avx2_usable(void) { return 0; }
const gemm_impl *ampy_gemm_impl_avx512(ampy_dtype dt) { (void)dt; return 0; }
const gemm_impl *ampy_gemm_impl_avx2(ampy_dtype dt) { (void)dt; return 0; }

#endif
