/* ampy/elem.h — per-element math shared by the CPU kernels (csrc/) and the
 * CUDA kernels (cuda/).
 *
 * Everything here is a small inline function of a few scalars, compiled as
 * `static inline` by a C compiler and `__host__ __device__` by nvcc, so the
 * CPU test suite checks the very code the GPU runs.
 *
 * Half formats (bit layouts, most significant bit first):
 *
 *   float32  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm   bias 127
 *   float16  s eeeee mmmmmmmmmm                   bias 15, max 65504
 *   bfloat16 s eeeeeeee mmmmmmm                   bias 127 (top half of f32)
 *
 * All conversions to a half format round once, to nearest with ties to even,
 * overflow to +-inf, keep subnormals (no flush to zero) and keep NaN a NaN.
 * They use integer operations only, so they give the same bits on every
 * machine whatever its floating-point mode. References: NumPy's
 * npymath/halffloat (float16 semantics, including NaN payload handling) and
 * c10::BFloat16 round_to_nearest_even (bfloat16: every NaN becomes 0x7FC0).
 */
#ifndef AMPY_ELEM_H
#define AMPY_ELEM_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define AMPY_ELEM static __host__ __device__ __forceinline__
#else
#define AMPY_ELEM static inline
#endif

/* ---- bit reinterpretation (memcpy is the portable, UB-free way; compilers
 * turn it into a register move) ---------------------------------------- */

AMPY_ELEM uint32_t ampy_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AMPY_ELEM float ampy_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
AMPY_ELEM uint64_t ampy_f64_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
AMPY_ELEM double ampy_bits_f64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* Round the integer q (the kept bits) by the dropped bits `rem`, of which
 * `half` is the weight of the first dropped bit: round to nearest, ties to
 * the even q. Shared by every narrowing conversion below. */
AMPY_ELEM uint64_t ampy_round_rne(uint64_t q, uint64_t rem, uint64_t half)
{
    return q + (rem > half || (rem == half && (q & 1u)));
}

/* ---- float32 -> float16 --------------------------------------------------
 * |x| >= 65520 (halfway between 65504 and 2^16) rounds to inf.
 * |x| < 2^-14 becomes a half subnormal: the 24-bit significand (with the
 * implicit bit) is shifted right into units of 2^-24; |x| <= 2^-25 (half of
 * the smallest subnormal, a tie with zero) rounds to a signed zero.
 * NaN keeps its sign and the top 10 payload bits (forced non-zero so it stays
 * a NaN), as NumPy does. */
AMPY_ELEM uint16_t ampy_f32_to_f16_bits(uint32_t f)
{
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t a = f & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) {
        if (a == 0x7F800000u)
            return (uint16_t)(sign | 0x7C00u);
        uint32_t r = 0x7C00u | ((a & 0x007FFFFFu) >> 13);
        return (uint16_t)(sign | (r == 0x7C00u ? 0x7C01u : r));
    }
    if (a >= 0x477FF000u) /* 65520.0f */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x38800000u) { /* 2^-14: half subnormal range */
        if (a <= 0x33000000u) /* 2^-25 */
            return (uint16_t)sign;
        uint32_t e = a >> 23;                          /* 102 .. 112 */
        uint32_t m = (a & 0x007FFFFFu) | 0x00800000u;  /* 24 bits    */
        uint32_t shift = 126u - e;                     /* 14 .. 24   */
        uint64_t q = ampy_round_rne(m >> shift, m & ((1u << shift) - 1u), 1u << (shift - 1u));
        return (uint16_t)(sign | (uint32_t)q); /* q == 0x400 is the smallest normal */
    }
    /* normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits; a
     * carry out of the mantissa correctly bumps the exponent. */
    uint32_t r = a - 0x38000000u;
    return (uint16_t)(sign | (uint32_t)ampy_round_rne(r >> 13, r & 0x1FFFu, 0x1000u));
}

/* ---- float64 -> float16, rounded once (not through float32) ------------ */
AMPY_ELEM uint16_t ampy_f64_to_f16_bits(uint64_t d)
{
    uint32_t sign = (uint32_t)(d >> 48) & 0x8000u;
    uint64_t a = d & 0x7FFFFFFFFFFFFFFFull;
    if (a >= 0x7FF0000000000000ull) {
        if (a == 0x7FF0000000000000ull)
            return (uint16_t)(sign | 0x7C00u);
        uint32_t r = 0x7C00u | (uint32_t)((a & 0x000FFFFFFFFFFFFFull) >> 42);
        return (uint16_t)(sign | (r == 0x7C00u ? 0x7C01u : r));
    }
    if (a >= 0x40EFFE0000000000ull) /* 65520.0 */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x3F10000000000000ull) { /* 2^-14 */
        if (a <= 0x3E60000000000000ull) /* 2^-25 */
            return (uint16_t)sign;
        uint32_t e = (uint32_t)(a >> 52);                                 /* 998 .. 1008 */
        uint64_t m = (a & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull; /* 53 bits     */
        uint32_t shift = 1051u - e;                                       /* 43 .. 53    */
        uint64_t q = ampy_round_rne(m >> shift, m & ((1ull << shift) - 1u), 1ull << (shift - 1u));
        return (uint16_t)(sign | (uint32_t)q);
    }
    uint64_t r = a - (1008ull << 52); /* rebias 1023 -> 15 */
    return (uint16_t)(sign | (uint32_t)ampy_round_rne(r >> 42, r & ((1ull << 42) - 1u), 1ull << 41));
}

/* ---- float16 -> float32 (exact) -----------------------------------------
 * A subnormal half m * 2^-24 (m != 0) is normalised by shifting m left until
 * its bit 10 is set; the loop runs at most 10 times and never sees m == 0
 * (no __builtin_clz(0)). NaN payloads are kept, as NumPy does. */
AMPY_ELEM uint32_t ampy_f16_to_f32_bits(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1Fu;
    uint32_t m = (uint32_t)h & 0x3FFu;
    if (e == 0x1Fu)
        return sign | 0x7F800000u | (m << 13);
    if (e == 0) {
        if (m == 0)
            return sign;
        uint32_t shift = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            shift++;
        }
        return sign | ((113u - shift) << 23) | ((m & 0x3FFu) << 13);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}

/* ---- float32 -> bfloat16: add 0x7FFF plus the lowest kept bit, then drop
 * the low 16 bits (ties go to the even result); every NaN becomes 0x7FC0 as
 * in c10::BFloat16. */
AMPY_ELEM uint16_t ampy_f32_to_bf16_bits(uint32_t f)
{
    if ((f & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0u;
    return (uint16_t)((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

/* ---- float64 -> bfloat16, rounded once ---------------------------------
 * Largest finite bf16 is (2 - 2^-7) * 2^127; from (2 - 2^-8) * 2^127 up the
 * value rounds to inf. Below 2^-126 bf16 is subnormal in units of 2^-133;
 * |x| <= 2^-134 rounds to a signed zero. */
AMPY_ELEM uint16_t ampy_f64_to_bf16_bits(uint64_t d)
{
    uint32_t sign = (uint32_t)(d >> 48) & 0x8000u;
    uint64_t a = d & 0x7FFFFFFFFFFFFFFFull;
    if (a > 0x7FF0000000000000ull)
        return 0x7FC0u;
    if (a >= 0x47EFF00000000000ull)
        return (uint16_t)(sign | 0x7F80u);
    if (a < 0x3810000000000000ull) { /* 2^-126 */
        if (a <= 0x3790000000000000ull) /* 2^-134 */
            return (uint16_t)sign;
        uint32_t e = (uint32_t)(a >> 52);                                 /* 889 .. 896 */
        uint64_t m = (a & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull;
        uint32_t shift = 942u - e;                                        /* 46 .. 53   */
        uint64_t q = ampy_round_rne(m >> shift, m & ((1ull << shift) - 1u), 1ull << (shift - 1u));
        return (uint16_t)(sign | (uint32_t)q);
    }
    uint64_t r = a - (896ull << 52); /* rebias 1023 -> 127 */
    return (uint16_t)(sign | (uint32_t)ampy_round_rne(r >> 45, r & ((1ull << 45) - 1u), 1ull << 44));
}

AMPY_ELEM uint32_t ampy_bf16_to_f32_bits(uint16_t h) { return (uint32_t)h << 16; }

/* ---- value-level wrappers ------------------------------------------------ */
AMPY_ELEM float ampy_f16_to_f32(uint16_t h) { return ampy_bits_f32(ampy_f16_to_f32_bits(h)); }
AMPY_ELEM float ampy_bf16_to_f32(uint16_t h) { return ampy_bits_f32(ampy_bf16_to_f32_bits(h)); }
AMPY_ELEM uint16_t ampy_f32_to_f16(float f) { return ampy_f32_to_f16_bits(ampy_f32_bits(f)); }
AMPY_ELEM uint16_t ampy_f32_to_bf16(float f) { return ampy_f32_to_bf16_bits(ampy_f32_bits(f)); }
AMPY_ELEM uint16_t ampy_f64_to_f16(double d) { return ampy_f64_to_f16_bits(ampy_f64_bits(d)); }
AMPY_ELEM uint16_t ampy_f64_to_bf16(double d) { return ampy_f64_to_bf16_bits(ampy_f64_bits(d)); }

/* ---- finiteness on bits (independent of -ffast-math and FP modes) ------ */
AMPY_ELEM int ampy_f32_isfinite(float f) { return (ampy_f32_bits(f) & 0x7F800000u) != 0x7F800000u; }
AMPY_ELEM int ampy_f64_isfinite(double d)
{
    return (ampy_f64_bits(d) & 0x7FF0000000000000ull) != 0x7FF0000000000000ull;
}
AMPY_ELEM int ampy_f16_isfinite_bits(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }
AMPY_ELEM int ampy_bf16_isfinite_bits(uint16_t h) { return (h & 0x7F80u) != 0x7F80u; }

/* ---- float -> integer without undefined behaviour ------------------------
 * C leaves out-of-range and NaN conversions undefined; these give the x86
 * "integer indefinite" value (INT64_MIN) for them, which is what torch's CPU
 * build produces on this architecture. Finite in-range values truncate. */
AMPY_ELEM int64_t ampy_f64_to_i64(double v)
{
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)v;
}

/* ==== optimizer and loss-scale math (see optim.h / scaler.h) ==============
 * Appended by the AMP-kernel work: the per-element SGD/Adam update and the
 * loss-scale update rule live below this line. */

#endif /* AMPY_ELEM_H */
