/* conv_direct_x86.c — the register-tile micro-kernels of the direct
 * convolution (conv_direct.c): one tile of CONV_DIRECT_MR consecutive flat
 * positions x 32 output channels, accumulated in zmm registers over every
 * tap and channel, then parked as float32 in a 14 x 32 buffer for the
 * epilogue.
 *
 * Operands (see conv_direct.c): a points at the tile's first position in the
 * zero-padded channels-last input, rows rs elements apart (the padded
 * channel count); tap t of the tile starts offs[t] elements further. The B
 * panel holds, per tap and channel (bfloat16: per channel PAIR), the 32
 * output channels' weights as 2 vectors, in the order the loops below read
 * them, so B is one sequential stream.
 *
 * float32: per channel, 2 B vectors and per row one broadcast feeding 2
 * FMAs: 28 independent accumulator chains, 28 FMAs per 16 loads, the
 * 1-FMA-per-cycle zmm rate of Zen 4 and the latency of 4 covered.
 * bfloat16: the same with vdpbf16ps, each row's broadcast the 32-bit word of
 * two adjacent channels (c even, the padded channel zero): one channel pair
 * per instruction, odd element first, fused, DAZ/FTZ as the hardware
 * defines it (gemm_avx512bf16.c has the exact model).
 *
 * The rows are addressed from three bases (rows 0-4, 5-9, 10-13) plus
 * multiples of rs that the x86 addressing modes reach, so the 28
 * accumulators, 2 B vectors and a broadcast fit the 32 zmm registers and
 * the loop keeps its pointers in general registers without spills.
 */
#include <stdint.h>

#include "conv_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "simd_half.h"

/* The B panel is read once per tile from L2: prefetched 4 KiB (float32) /
 * 2 KiB (bfloat16) ahead, the distance that measured fastest on Zen 5 with
 * the panel past L1 (~5 %; a prefetch past the panel's end is harmless). */
#define DIRECT_PF_F32 1024
#define DIRECT_PF_BF16 1024

/* Four butterfly stages: at stage b, rows i and i + b (bit b of i clear)
 * swap the elements (i, j + b) and (i + b, j) of every column j with bit b
 * clear, so after b = 8, 4, 2, 1 element (i, j) sits at (j, i). The index
 * vectors: lo[j] = j & b ? 16 + j - b : j, hi[j] = j & b ? 16 + j : j + b. */
#define T16_PAIR(i, b)                                                                            \
    {                                                                                             \
        __m512i x_ = r[i], y_ = r[(i) + (b)];                                                     \
        r[i] = _mm512_permutex2var_epi32(x_, il, y_);                                             \
        r[(i) + (b)] = _mm512_permutex2var_epi32(x_, ih, y_);                                     \
    }
#define T16_STAGE(b, L, H)                                                                        \
    {                                                                                             \
        __m512i il = _mm512_setr_epi32 L, ih = _mm512_setr_epi32 H;                               \
        for (int i = 0; i < 16; i++)                                                              \
            if (!(i & (b)))                                                                       \
                T16_PAIR(i, b)                                                                    \
    }

AMPY_TARGET_AVX512 static inline __attribute__((always_inline)) void t16_regs(__m512i *r)
{
    T16_STAGE(8, (0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
              (8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31))
    T16_STAGE(4, (0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
              (4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31))
    T16_STAGE(2, (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
              (2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31))
    T16_STAGE(1, (0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
              (1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31))
}

/* Row i of a t16 source, nj elements cs (1 or 2) apart, zero-extended to
 * 32-bit lanes; lanes past nj zero. */
AMPY_TARGET_AVX512 static inline __attribute__((always_inline)) __m512i
t16_row(const char *src, size_t es, int64_t cs, int64_t nj)
{
    __mmask16 mj = (__mmask16)((1u << nj) - 1);
    if (cs == 1 && es == 4)
        return nj == 16 ? _mm512_loadu_si512(src) : _mm512_maskz_loadu_epi32(mj, src);
    if (cs == 1)
        return _mm512_cvtepu16_epi32(nj == 16 ? _mm256_loadu_si256((const __m256i *)src)
                                              : _mm256_maskz_loadu_epi16(mj, src));
    if (es == 2) { /* the even 16-bit words of 2 * nj - 1: the low halves of nj words */
        __mmask32 m = (__mmask32)((1ull << (2 * nj - 1)) - 1);
        return _mm512_and_si512(_mm512_maskz_loadu_epi16(m, src), _mm512_set1_epi32(0xFFFF));
    }
    /* the even elements of two vectors (element 2 * nj - 2 the last one read) */
    __mmask16 ml = nj >= 9 ? 0xFFFF : (__mmask16)((1u << (2 * nj - 1)) - 1);
    __mmask16 mh = nj <= 8 ? 0 : (__mmask16)((1u << (2 * nj - 17)) - 1);
    __m512i lo = _mm512_maskz_loadu_epi32(ml, src), hi = _mm512_maskz_loadu_epi32(mh, src + 64);
    __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_epi32(lo, ev, hi);
}

AMPY_TARGET_AVX512 void ampy_conv_direct_t16(const void *src, int64_t ss, int64_t cs, size_t es,
                                             int64_t ni, int64_t nj, void *dst, int64_t ds)
{
    __m512i r[16];
    for (int64_t i = 0; i < 16; i++)
        r[i] = i < ni ? t16_row((const char *)src + (size_t)(i * ss) * es, es, cs, nj)
                      : _mm512_setzero_si512();
    t16_regs(r);
    __mmask16 mi = (__mmask16)((1u << ni) - 1);
    for (int64_t j = 0; j < nj; j++) {
        char *d = (char *)dst + (size_t)(j * ds) * es;
        if (es == 4 && ni == 16)
            _mm512_storeu_si512(d, r[j]);
        else if (es == 4)
            _mm512_mask_storeu_epi32(d, mi, r[j]);
        else if (ni == 16)
            _mm256_storeu_si256((__m256i *)d, _mm512_cvtepi32_epi16(r[j]));
        else
            _mm256_mask_storeu_epi16(d, mi, _mm512_cvtepi32_epi16(r[j]));
    }
}

/* Bias and rounding a row (32 channels) at a time, then the tile's rows x
 * channels transposed into the planes 16 x 16 at a time (ampy_conv_direct_t16). */
AMPY_TARGET_AVX512 void ampy_conv_direct_store(const float *tile, const float *bias, int bf,
                                               int64_t len, int64_t on, char *y, int64_t P)
{
    __mmask16 m0 = on >= 16 ? 0xFFFF : (__mmask16)((1u << on) - 1);
    __mmask16 m1 = on >= 32 ? 0xFFFF : on <= 16 ? 0 : (__mmask16)((1u << (on - 16)) - 1);
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    uint32_t buf[CONV_DIRECT_MR * 32];
    if (bf) {
        uint16_t *t16 = (uint16_t *)buf;
        int bf16ok = 1;
        for (int64_t r = 0; r < len; r++) {
            __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(tile + r * 32), b0);
            __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(tile + r * 32 + 16), b1);
            _mm256_storeu_si256((__m256i *)(t16 + r * 32), ampy_x86_f32_to_half16(v0, 1, bf16ok));
            _mm256_storeu_si256((__m256i *)(t16 + r * 32 + 16),
                                ampy_x86_f32_to_half16(v1, 1, bf16ok));
        }
    } else {
        float *t32 = (float *)buf;
        for (int64_t r = 0; r < len; r++) {
            _mm512_storeu_ps(t32 + r * 32, _mm512_add_ps(_mm512_loadu_ps(tile + r * 32), b0));
            _mm512_storeu_ps(t32 + r * 32 + 16,
                             _mm512_add_ps(_mm512_loadu_ps(tile + r * 32 + 16), b1));
        }
    }
    size_t es = bf ? 2 : 4;
    for (int64_t o0 = 0; o0 < on; o0 += 16)
        ampy_conv_direct_t16((char *)buf + (size_t)o0 * es, 32, 1, es, len,
                             on - o0 < 16 ? on - o0 : 16, y + (size_t)(o0 * P) * es, P);
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define DECL(r) __m512 l##r = _mm512_setzero_ps(), h##r = _mm512_setzero_ps();
#define STORE(r)                                                                                  \
    _mm512_storeu_ps(out + (r) * 32, l##r);                                                       \
    _mm512_storeu_ps(out + (r) * 32 + 16, h##r);

void ampy_conv_direct_tile_f32(const float *a, const int64_t *roff, const int64_t *offs,
                               int64_t taps, int64_t C, const float *b, float *out)
{
    ROWS(DECL)
    for (int64_t t = 0; t < taps; t++) {
        const float *p = a + offs[t];
#define PTR(r) const float *q##r = p + roff[r];
        ROWS(PTR)
#undef PTR
        for (int64_t c = 0; c < C; c++, b += 32) {
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
            _mm_prefetch((const char *)(b + DIRECT_PF_F32), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + DIRECT_PF_F32 + 16), _MM_HINT_T0);
#define FMA(r)                                                                                    \
    {                                                                                             \
        __m512 v = _mm512_set1_ps(q##r[c]);                                                       \
        l##r = _mm512_fmadd_ps(v, b0, l##r);                                                      \
        h##r = _mm512_fmadd_ps(v, b1, h##r);                                                      \
    }
            ROWS(FMA)
#undef FMA
        }
    }
    ROWS(STORE)
}

#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512bf16")

void ampy_conv_direct_tile_bf16(const uint16_t *a, const int64_t *roff, const int64_t *offs,
                                int64_t taps, int64_t pairs, const uint16_t *b, float *out)
{
    ROWS(DECL)
    for (int64_t t = 0; t < taps; t++) {
        const uint16_t *p = a + offs[t];
#define PTR(r) const int32_t *q##r = (const int32_t *)(p + roff[r]);
        ROWS(PTR)
#undef PTR
        for (int64_t c = 0; c < pairs; c++, b += 64) {
            __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
            __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
            _mm_prefetch((const char *)(b + DIRECT_PF_BF16), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + DIRECT_PF_BF16 + 32), _MM_HINT_T0);
#define DOT(r)                                                                                    \
    {                                                                                             \
        __m512bh v = (__m512bh)_mm512_set1_epi32(q##r[c]);                                        \
        l##r = _mm512_dpbf16_ps(l##r, b0, v);                                                     \
        h##r = _mm512_dpbf16_ps(h##r, b1, v);                                                     \
    }
            ROWS(DOT)
#undef DOT
        }
    }
    ROWS(STORE)
}

#pragma GCC pop_options
#endif
