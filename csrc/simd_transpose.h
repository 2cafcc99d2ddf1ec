/* simd_transpose.h — the in-register 16 x 16 transpose of 32-bit lanes
 * shared by the AVX-512 and AMX GEMM packers (gemm_x86.c, gemm_amx.c).
 * Include it after a `#pragma GCC target` that enables AVX-512F, so the
 * function gets that ISA. */
#ifndef AMPY_SIMD_TRANSPOSE_H
#define AMPY_SIMD_TRANSPOSE_H

#include <immintrin.h>

/* r[i] lane j -> r[j] lane i (unpack 32/64-bit pairs, then 128-bit blocks) */
static inline void ampy_x86_transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        for (int h = 0; h < 2; h++) {
            __m512d x = _mm512_castps_pd(t[4 * i + h]), y = _mm512_castps_pd(t[4 * i + 2 + h]);
            r[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
            r[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
        }
    }
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < 4; h++) {
            t[8 * i + h] = _mm512_shuffle_f32x4(r[8 * i + h], r[8 * i + 4 + h], 0x88);
            t[8 * i + 4 + h] = _mm512_shuffle_f32x4(r[8 * i + h], r[8 * i + 4 + h], 0xDD);
        }
    for (int h = 0; h < 8; h++) {
        r[h] = _mm512_shuffle_f32x4(t[h], t[8 + h], 0x88);
        r[8 + h] = _mm512_shuffle_f32x4(t[h], t[8 + h], 0xDD);
    }
}

#endif
