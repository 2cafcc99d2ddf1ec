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

/* Bias and rounding a row (32 channels) at a time; the transpose into the
 * planes is scalar moves (a tile's store is ~3 % of its FMAs). */
AMPY_TARGET_AVX512 void ampy_conv_direct_store(const float *tile, const float *bias, int bf,
                                               int64_t len, int64_t on, char *y, int64_t P)
{
    __mmask16 m0 = on >= 16 ? 0xFFFF : (__mmask16)((1u << on) - 1);
    __mmask16 m1 = on >= 32 ? 0xFFFF : on <= 16 ? 0 : (__mmask16)((1u << (on - 16)) - 1);
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    if (bf) {
        uint16_t t16[CONV_DIRECT_MR * 32], *d = (uint16_t *)y;
        int bf16ok = 1;
        for (int64_t r = 0; r < len; r++) {
            __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(tile + r * 32), b0);
            __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(tile + r * 32 + 16), b1);
            _mm256_storeu_si256((__m256i *)(t16 + r * 32), ampy_x86_f32_to_half16(v0, 1, bf16ok));
            _mm256_storeu_si256((__m256i *)(t16 + r * 32 + 16),
                                ampy_x86_f32_to_half16(v1, 1, bf16ok));
        }
        for (int64_t o = 0; o < on; o++)
            for (int64_t r = 0; r < len; r++)
                d[o * P + r] = t16[r * 32 + o];
        return;
    }
    float t32[CONV_DIRECT_MR * 32], *d = (float *)y;
    for (int64_t r = 0; r < len; r++) {
        _mm512_storeu_ps(t32 + r * 32, _mm512_add_ps(_mm512_loadu_ps(tile + r * 32), b0));
        _mm512_storeu_ps(t32 + r * 32 + 16, _mm512_add_ps(_mm512_loadu_ps(tile + r * 32 + 16), b1));
    }
    for (int64_t o = 0; o < on; o++)
        for (int64_t r = 0; r < len; r++)
            d[o * P + r] = t32[r * 32 + o];
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
