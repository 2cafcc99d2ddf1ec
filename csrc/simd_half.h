/* simd_half.h — 16 floats to 16 float16/bfloat16 in an AVX-512 register,
 * with elem.h's rounding bits; shared by the one-pass element-wise path
 * (ewise.c), the fused softmax backward (fused.c) and softmax rows
 * (reduce_softmax.c). Include only from x86-64 GCC/Clang translation units
 * whose callers carry at least AMPY_TARGET_AVX512's target features. */
#ifndef AMPY_SIMD_HALF_H
#define AMPY_SIMD_HALF_H

#include <immintrin.h>
#include "simd.h"


/* bf != 0: bfloat16, round to nearest even; vcvtneps2bf16 (bf16ok: the CPU
 * has AVX512-BF16) rounds like elem.h except for NaN and denormal inputs
 * (fpclass 0x01 | 0x20 | 0x80), which take the integer path (NaN -> 0x7FC0).
 * bf == 0: float16 by vcvtps2ph, whose NaN equals elem.h's for the quiet
 * NaNs arithmetic produces. */
AMPY_TARGET_AVX512 static inline __m256i ampy_x86_f32_to_half16(__m512 v, int bf, int bf16ok)
{
    __m256i h;
    if (bf && bf16ok && !_mm512_fpclass_ps_mask(v, 0xA1)) {
        __asm__("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(v));
    } else if (bf) {
        const __m512i x = _mm512_castps_si512(v);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
        r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r,
                                    _mm512_set1_epi32(0x7FC0));
        h = _mm512_cvtepi32_epi16(r);
    } else {
        h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    }
    return h;
}

#endif
