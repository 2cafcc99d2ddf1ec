/* cast_x86.c — SIMD kernels for the four AMP conversions (x86-64).
 *
 * Compiled without -march flags: each function carries its target through
 * a GCC target attribute, and cast.c calls it only when ampy_cpu_level_get()
 * says the CPU has that level. Each kernel gives the same bits as elem.h:
 *  - f32 -> f16: vcvtps2ph with round-to-nearest-even equals elem.h for every
 *    non-NaN input; NaN lanes differ (hardware quiets signalling NaNs), so a
 *    vector containing a NaN is redone with the scalar elem.h code.
 *  - f16 -> f32: vcvtph2ps is exact; a vector holding a half NaN is redone in
 *    scalar code for the same reason.
 *  - f32 -> bf16: the integer round-to-nearest-even trick of elem.h, 16 lanes
 *    at a time, NaN lanes blended to 0x7FC0.
 *  - bf16 -> f32: zero-extend and shift left by 16 (exact, NaNs kept).
 * Tails shorter than a vector use the scalar code.
 */
#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2_T __attribute__((target("avx2,fma,f16c")))
#define AVX512_T __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))

static void f32_to_f16_scalar(const float *s, uint16_t *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = ampy_f32_to_f16(s[i]);
}
static void f16_to_f32_scalar(const uint16_t *s, float *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = ampy_f16_to_f32(s[i]);
}

/* ---------------------------------------------------------------- AVX2 -- */
AVX2_T static void f32_to_f16_avx2(const void *src, void *dst, int64_t n)
{
    const float *s = (const float *)src;
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(s + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            f32_to_f16_scalar(s + i, d + i, 8);
            continue;
        }
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    f32_to_f16_scalar(s + i, d + i, n - i);
}

AVX2_T static void f16_to_f32_avx2(const void *src, void *dst, int64_t n)
{
    const uint16_t *s = (const uint16_t *)src;
    float *d = (float *)dst;
    const __m128i expmask = _mm_set1_epi16(0x7C00);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(s + i));
        /* any lane with an all-ones exponent (inf or NaN)? redo in scalar:
         * infs convert fine either way, NaNs must keep their payload. */
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, expmask), expmask))) {
            f16_to_f32_scalar(s + i, d + i, 8);
            continue;
        }
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
    }
    f16_to_f32_scalar(s + i, d + i, n - i);
}

/* -------------------------------------------------------------- AVX-512 -- */
AVX512_T static void f32_to_f16_avx512(const void *src, void *dst, int64_t n)
{
    const float *s = (const float *)src;
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(s + i), b = _mm512_loadu_ps(s + i + 16);
        if (_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q)) {
            f32_to_f16_scalar(s + i, d + i, 32);
            continue;
        }
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
        _mm256_storeu_si256((__m256i *)(d + i + 16), _mm512_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT));
    }
    f32_to_f16_scalar(s + i, d + i, n - i);
}

AVX512_T static void f16_to_f32_avx512(const void *src, void *dst, int64_t n)
{
    const uint16_t *s = (const uint16_t *)src;
    float *d = (float *)dst;
    const __m512i expmask = _mm512_set1_epi16(0x7C00);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i h = _mm512_loadu_si512((const void *)(s + i));
        if (_mm512_cmpeq_epi16_mask(_mm512_and_si512(h, expmask), expmask)) {
            f16_to_f32_scalar(s + i, d + i, 32);
            continue;
        }
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm512_castsi512_si256(h)));
        _mm512_storeu_ps(d + i + 16, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)));
    }
    f16_to_f32_scalar(s + i, d + i, n - i);
}

AVX512_T static void f32_to_bf16_avx512(const void *src, void *dst, int64_t n)
{
    const uint32_t *s = (const uint32_t *)src;
    uint16_t *d = (uint16_t *)dst;
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    const __m512i nan = _mm512_set1_epi32(0x7FC0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_loadu_si512((const void *)(s + i));
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(bias, lsb)), 16);
        __mmask16 isnan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(x), _mm512_castsi512_ps(x),
                                             _CMP_UNORD_Q);
        r = _mm512_mask_blend_epi32(isnan, r, nan);
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++)
        d[i] = ampy_f32_to_bf16_bits(s[i]);
}

AVX512_T static void bf16_to_f32_avx512(const void *src, void *dst, int64_t n)
{
    const uint16_t *s = (const uint16_t *)src;
    uint32_t *d = (uint32_t *)dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(s + i));
        _mm512_storeu_si512((void *)(d + i), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    for (; i < n; i++)
        d[i] = ampy_bf16_to_f32_bits(s[i]);
}

ampy_cast_kernel ampy_cast_simd_kernel(int level, ampy_dtype src, ampy_dtype dst)
{
    if (level >= AMPY_CPU_AVX512) {
        if (src == AMPY_FLOAT32 && dst == AMPY_FLOAT16) return f32_to_f16_avx512;
        if (src == AMPY_FLOAT16 && dst == AMPY_FLOAT32) return f16_to_f32_avx512;
        if (src == AMPY_FLOAT32 && dst == AMPY_BFLOAT16) return f32_to_bf16_avx512;
        if (src == AMPY_BFLOAT16 && dst == AMPY_FLOAT32) return bf16_to_f32_avx512;
    }
    if (level >= AMPY_CPU_AVX2) {
        if (src == AMPY_FLOAT32 && dst == AMPY_FLOAT16) return f32_to_f16_avx2;
        if (src == AMPY_FLOAT16 && dst == AMPY_FLOAT32) return f16_to_f32_avx2;
    }
    return NULL;
}

#else /* not x86-64 with GCC/Clang: portable loops only */
ampy_cast_kernel ampy_cast_simd_kernel(int level, ampy_dtype src, ampy_dtype dst)
{
    (void)level, (void)src, (void)dst;
    return NULL;
}
#endif
