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

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "simd.h"


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
AMPY_TARGET_AVX2 static void f32_to_f16_avx2(const void *src, void *dst, int64_t n)
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

AMPY_TARGET_AVX2 static void f16_to_f32_avx2(const void *src, void *dst, int64_t n)
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

/* -------------------------------------------------------------- AVX-512 --
 * Each loop step writes 64 (or 128) bytes. When a call writes at least
 * NT_MIN_BYTES, the output is first brought to a 64-byte boundary with scalar
 * code and then written with non-temporal stores: the output will not fit in
 * this core's L2 anyway, and streaming it skips the read-for-ownership of
 * every destination line (a third less memory traffic for a cast that reads
 * 4 and writes 2 bytes per element). Smaller outputs use ordinary stores so
 * that they stay in cache for the next op. */
#define NT_MIN_BYTES ((int64_t)1 << 20)

/* Elements to write with scalar code before dst is 64-byte aligned, or -1
 * when streaming does not apply (small output, or dst not element-aligned). */
static int64_t nt_head(const void *dst, int64_t n, int64_t elsize)
{
    uintptr_t a = (uintptr_t)dst;
    if (n * elsize < NT_MIN_BYTES || a % (uintptr_t)elsize)
        return -1;
    int64_t head = (int64_t)((64 - (a & 63)) & 63) / elsize;
    return head < n ? head : n;
}

AMPY_TARGET_AVX512 static inline void store64(void *p, __m512i v, int nt)
{
    if (nt)
        _mm512_stream_si512((__m512i *)p, v);
    else
        _mm512_storeu_si512(p, v);
}

AMPY_TARGET_AVX512 static void f32_to_f16_avx512(const void *src, void *dst, int64_t n)
{
    const float *s = (const float *)src;
    uint16_t *d = (uint16_t *)dst;
    int64_t i = nt_head(dst, n, 2);
    const int nt = i >= 0;
    if (nt)
        f32_to_f16_scalar(s, d, i);
    else
        i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(s + i), b = _mm512_loadu_ps(s + i + 16);
        __m512i r;
        if (_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q)) {
            uint16_t tmp[32];
            f32_to_f16_scalar(s + i, tmp, 32);
            r = _mm512_loadu_si512((const void *)tmp);
        } else {
            r = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT)),
                _mm512_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT), 1);
        }
        store64(d + i, r, nt);
    }
    if (nt)
        _mm_sfence();
    f32_to_f16_scalar(s + i, d + i, n - i);
}

AMPY_TARGET_AVX512 static void f16_to_f32_avx512(const void *src, void *dst, int64_t n)
{
    const uint16_t *s = (const uint16_t *)src;
    float *d = (float *)dst;
    const __m512i expmask = _mm512_set1_epi16(0x7C00);
    int64_t i = nt_head(dst, n, 4);
    const int nt = i >= 0;
    if (nt)
        f16_to_f32_scalar(s, d, i);
    else
        i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i h = _mm512_loadu_si512((const void *)(s + i));
        __m512i lo, hi;
        if (_mm512_cmpeq_epi16_mask(_mm512_and_si512(h, expmask), expmask)) {
            float tmp[32]; /* inf or NaN in the block: NaN payloads need elem.h */
            f16_to_f32_scalar(s + i, tmp, 32);
            lo = _mm512_castps_si512(_mm512_loadu_ps(tmp));
            hi = _mm512_castps_si512(_mm512_loadu_ps(tmp + 16));
        } else {
            lo = _mm512_castps_si512(_mm512_cvtph_ps(_mm512_castsi512_si256(h)));
            hi = _mm512_castps_si512(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)));
        }
        store64(d + i, lo, nt);
        store64(d + i + 16, hi, nt);
    }
    if (nt)
        _mm_sfence();
    _mm256_zeroupper(); /* GCC 12 emits none here: dirty uppers slow later SSE libm 50x */
    f16_to_f32_scalar(s + i, d + i, n - i);
}

static void f32_to_bf16_scalar(const uint32_t *s, uint16_t *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = ampy_f32_to_bf16_bits(s[i]);
}

/* elem.h's integer rounding, 16 lanes: add 0x7FFF + the lowest kept bit, drop
 * the low half; NaN lanes become 0x7FC0. */
AMPY_TARGET_AVX512 static inline __m256i bf16_round_int(__m512i x)
{
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(bias, lsb)), 16);
    __mmask16 isnan = _mm512_cmp_ps_mask(_mm512_castsi512_ps(x), _mm512_castsi512_ps(x),
                                         _CMP_UNORD_Q);
    r = _mm512_mask_blend_epi32(isnan, r, _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(r);
}

AMPY_TARGET_AVX512 static void f32_to_bf16_avx512(const void *src, void *dst, int64_t n)
{
    const uint32_t *s = (const uint32_t *)src;
    uint16_t *d = (uint16_t *)dst;
    int64_t i = nt_head(dst, n, 2);
    const int nt = i >= 0;
    if (nt)
        f32_to_bf16_scalar(s, d, i);
    else
        i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i lo = bf16_round_int(_mm512_loadu_si512((const void *)(s + i)));
        __m256i hi = bf16_round_int(_mm512_loadu_si512((const void *)(s + i + 16)));
        store64(d + i, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), nt);
    }
    if (nt)
        _mm_sfence();
    f32_to_bf16_scalar(s + i, d + i, n - i);
}


/* AVX512-BF16: vcvtne2ps2bf16 rounds to nearest-even like elem.h for normal
 * inputs, but flushes denormal inputs to zero and quiets NaNs differently, so
 * a block holding a denormal or a NaN (fpclass 0x20 | 0x01 | 0x80) takes the
 * integer path. */
AMPY_TARGET_AVX512_BF16 static void f32_to_bf16_avx512bf16(const void *src, void *dst, int64_t n)
{
    const uint32_t *s = (const uint32_t *)src;
    uint16_t *d = (uint16_t *)dst;
    int64_t i = nt_head(dst, n, 2);
    const int nt = i >= 0;
    if (nt)
        f32_to_bf16_scalar(s, d, i);
    else
        i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps((const float *)(s + i));
        __m512 b = _mm512_loadu_ps((const float *)(s + i + 16));
        __m512i r;
        if (_mm512_fpclass_ps_mask(a, 0xA1) | _mm512_fpclass_ps_mask(b, 0xA1)) {
            __m256i lo = bf16_round_int(_mm512_castps_si512(a));
            __m256i hi = bf16_round_int(_mm512_castps_si512(b));
            r = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        } else {
            r = (__m512i)_mm512_cvtne2ps_pbh(b, a); /* a in the low half */
        }
        store64(d + i, r, nt);
    }
    if (nt)
        _mm_sfence();
    f32_to_bf16_scalar(s + i, d + i, n - i);
}

AMPY_TARGET_AVX512 static void bf16_to_f32_avx512(const void *src, void *dst, int64_t n)
{
    const uint16_t *s = (const uint16_t *)src;
    uint32_t *d = (uint32_t *)dst;
    int64_t i = nt_head(dst, n, 4);
    const int nt = i >= 0;
    if (nt)
        for (int64_t k = 0; k < i; k++)
            d[k] = ampy_bf16_to_f32_bits(s[k]);
    else
        i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i h = _mm512_loadu_si512((const void *)(s + i));
        store64(d + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16),
                nt);
        store64(d + i + 16,
                _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16), nt);
    }
    if (nt)
        _mm_sfence();
    for (; i < n; i++)
        d[i] = ampy_bf16_to_f32_bits(s[i]);
}

/* Same-dtype contiguous copies (clone, contiguous(), copy_ without a
 * conversion): memcpy for small runs, streaming stores for large ones. */
AMPY_TARGET_AVX512 static void copy_bytes_avx512(const char *s, char *d, int64_t nbytes)
{
    int64_t i = nt_head(d, nbytes, 1);
    if (i < 0) {
        memcpy(d, s, (size_t)nbytes);
        return;
    }
    memcpy(d, s, (size_t)i);
    for (; i + 128 <= nbytes; i += 128) {
        __m512i a = _mm512_loadu_si512((const void *)(s + i));
        __m512i b = _mm512_loadu_si512((const void *)(s + i + 64));
        _mm512_stream_si512((__m512i *)(d + i), a);
        _mm512_stream_si512((__m512i *)(d + i + 64), b);
    }
    _mm_sfence();
    memcpy(d + i, s + i, (size_t)(nbytes - i));
}

#define DEF_COPY(sz)                                                                    \
    static void copy##sz##_avx512(const void *src, void *dst, int64_t n)               \
    {                                                                                   \
        copy_bytes_avx512((const char *)src, (char *)dst, n * sz);                      \
    }
DEF_COPY(1)
DEF_COPY(2)
DEF_COPY(4)
DEF_COPY(8)

ampy_cast_kernel ampy_cast_simd_kernel(int level, ampy_dtype src, ampy_dtype dst)
{
    if (level >= AMPY_CPU_AVX512) {
        if (src == dst) {
            switch (ampy_dtype_size(src)) {
            case 1: return copy1_avx512;
            case 2: return copy2_avx512;
            case 4: return copy4_avx512;
            case 8: return copy8_avx512;
            default: return NULL;
            }
        }
        if (src == AMPY_FLOAT32 && dst == AMPY_BFLOAT16 &&
            level >= AMPY_CPU_AVX512_BF16)
            return f32_to_bf16_avx512bf16;
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
