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

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")

#define ROWS_F32(X)                                                                               \
    X(0, p0, 0) X(1, p0, 1) X(2, p0, 2) X(3, p0, 3) X(4, p0, 4) X(5, p5, 0) X(6, p5, 1)          \
    X(7, p5, 2) X(8, p5, 3) X(9, p5, 4) X(10, p10, 0) X(11, p10, 1) X(12, p10, 2) X(13, p10, 3)

void ampy_conv_direct_tile_f32(const float *a, int64_t rs, const int64_t *offs, int64_t taps,
                               int64_t C, const float *b, float *out)
{
#define DECL(r, base, k) __m512 l##r = _mm512_setzero_ps(), h##r = _mm512_setzero_ps();
    ROWS_F32(DECL)
#undef DECL
    for (int64_t t = 0; t < taps; t++) {
        const float *p0 = a + offs[t], *p5 = p0 + 5 * rs, *p10 = p0 + 10 * rs;
        for (int64_t c = 0; c < C; c++, p0++, p5++, p10++, b += 32) {
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#define FMA(r, base, k)                                                                           \
    {                                                                                             \
        __m512 v = _mm512_set1_ps(base[(k) * rs]);                                                \
        l##r = _mm512_fmadd_ps(v, b0, l##r);                                                      \
        h##r = _mm512_fmadd_ps(v, b1, h##r);                                                      \
    }
            ROWS_F32(FMA)
#undef FMA
        }
    }
#define STORE(r, base, k)                                                                         \
    _mm512_storeu_ps(out + (r) * 32, l##r);                                                       \
    _mm512_storeu_ps(out + (r) * 32 + 16, h##r);
    ROWS_F32(STORE)
#undef STORE
}

#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512bf16")

void ampy_conv_direct_tile_bf16(const uint16_t *a, int64_t rs, const int64_t *offs,
                                int64_t taps, int64_t pairs, const uint16_t *b, float *out)
{
    int64_t rw = rs / 2; /* row stride in 32-bit words */
#define DECL(r, base, k) __m512 l##r = _mm512_setzero_ps(), h##r = _mm512_setzero_ps();
    ROWS_F32(DECL)
#undef DECL
    for (int64_t t = 0; t < taps; t++) {
        const int32_t *p0 = (const int32_t *)(a + offs[t]), *p5 = p0 + 5 * rw,
                      *p10 = p0 + 10 * rw;
        for (int64_t c = 0; c < pairs; c++, p0++, p5++, p10++, b += 64) {
            __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
            __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#define DOT(r, base, k)                                                                           \
    {                                                                                             \
        __m512bh v = (__m512bh)_mm512_set1_epi32(base[(k) * rw]);                                 \
        l##r = _mm512_dpbf16_ps(l##r, b0, v);                                                     \
        h##r = _mm512_dpbf16_ps(h##r, b1, v);                                                     \
    }
            ROWS_F32(DOT)
#undef DOT
        }
    }
#define STORE(r, base, k)                                                                         \
    _mm512_storeu_ps(out + (r) * 32, l##r);                                                       \
    _mm512_storeu_ps(out + (r) * 32 + 16, h##r);
    ROWS_F32(STORE)
#undef STORE
}

#pragma GCC pop_options
#endif
