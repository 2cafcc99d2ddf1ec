/* ampy/random.h — counter-based random numbers and fill kernels.
 *
 * Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
 * SC'11): the value of element i depends only on (seed, offset, i), so results
 * are identical for any thread count and on the GPU (the round function is in
 * ampy_philox4x32, shared with cuda/). Element i of a fill uses counter block
 * `offset + i` (lanes 0..3 as needed); callers advance offset by n per fill.
 */
#ifndef AMPY_RANDOM_H
#define AMPY_RANDOM_H

#include <math.h>
#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

AMPY_ELEM void ampy_philox4x32(uint64_t counter, uint64_t seed, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* A float in [0, 1) from 24 random bits. */
AMPY_ELEM float ampy_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* The high 64 bits of x * y (portable: 32-bit halves, host and device). */
AMPY_ELEM uint64_t ampy_mulhi64(uint64_t x, uint64_t y, uint64_t *lo)
{
    uint64_t x0 = (uint32_t)x, x1 = x >> 32, y0 = (uint32_t)y, y1 = y >> 32;
    uint64_t p00 = x0 * y0, p01 = x0 * y1, p10 = x1 * y0, p11 = x1 * y1;
    uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
    *lo = (mid << 32) | (uint32_t)p00;
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* An integer uniform in [0, range) (range 0 means 2**64), unbiased: Lemire's
 * multiply-and-reject ("Fast Random Integer Generation in an Interval", 2019)
 * on 64-bit draws. Draw 0 and 1 are lanes 0-1 and 2-3 of counter `counter`;
 * a rare further retry k re-keys the same counter with seed + k * (golden
 * ratio), so the value still depends only on (seed, counter). */
AMPY_ELEM uint64_t ampy_random_below(uint64_t counter, uint64_t seed, uint64_t range)
{
    uint32_t r[4];
    ampy_philox4x32(counter, seed, r);
    if (range == 0)
        return ((uint64_t)r[0] << 32) | r[1];
    const uint64_t thresh = (0 - range) % range; /* 2**64 mod range */
    for (uint64_t k = 0;; k++) {
        if (k > 0 && (k & 1) == 0)
            ampy_philox4x32(counter, seed + (k >> 1) * 0x9E3779B97F4A7C15ull, r);
        uint64_t x = (k & 1) ? ((uint64_t)r[2] << 32) | r[3] : ((uint64_t)r[0] << 32) | r[1];
        uint64_t lo, hi = ampy_mulhi64(x, range, &lo);
        if (lo >= thresh)
            return hi;
    }
}

/* AMPY_RANDOM_INTEGER carries int64 `low` and uint64 `range` (high - low,
 * 0 for 2**64) bit for bit in the two double parameters of the fill
 * functions, so that no bound passes through a double's 53 bits. */
AMPY_ELEM void ampy_random_int_pack(int64_t low, uint64_t range, double *a, double *b)
{
    memcpy(a, &low, 8);
    memcpy(b, &range, 8);
}
AMPY_ELEM void ampy_random_int_unpack(double a, double b, int64_t *low, uint64_t *range)
{
    memcpy(low, &a, 8);
    memcpy(range, &b, 8);
}

typedef enum ampy_random_kind {
    AMPY_RANDOM_UNIFORM = 0,   /* U[a, b)                     */
    AMPY_RANDOM_NORMAL = 1,    /* N(a, b^2) (Box-Muller)      */
    AMPY_RANDOM_INTEGER = 2,   /* integers in [a, b)          */
    AMPY_RANDOM_BERNOULLI = 3, /* 1 with probability a, else 0 */
} ampy_random_kind;

/* The double value of element `counter` of a UNIFORM, NORMAL or BERNOULLI
 * fill (0 for INTEGER, whose values are ampy_random_below's), before
 * rounding to the dtype. */
AMPY_ELEM double ampy_random_value(int kind, uint64_t counter, uint64_t seed, double a, double b)
{
    uint32_t r[4];
    ampy_philox4x32(counter, seed, r);
    switch (kind) {
    case AMPY_RANDOM_UNIFORM: return a + (b - a) * ampy_u32_to_unit(r[0]);
    case AMPY_RANDOM_NORMAL: {
        double u1 = ((double)r[0] + 1.0) / 4294967296.0; /* (0, 1] */
        double u2 = (double)r[1] / 4294967296.0;
        return a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }
    case AMPY_RANDOM_INTEGER: return 0.0;
    default: return ampy_u32_to_unit(r[0]) < a ? 1.0 : 0.0;
    }
}

/* The checks of ampy_fill_random and its CUDA twin. */
static inline ampy_status ampy_fill_random_check_args(int dtype, int64_t n, int kind)
{
    if (!ampy_dtype_valid(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "fill_random: invalid dtype %d", dtype);
    if (n < 0 || kind < 0 || kind > AMPY_RANDOM_BERNOULLI)
        return ampy_error(AMPY_ERR_VALUE, "fill_random: bad kind %d or size %lld", kind,
                          (long long)n);
    return AMPY_OK;
}

/* Fill n contiguous elements of dst (any dtype; values rounded once to it).
 * For AMPY_RANDOM_INTEGER, a and b are ampy_random_int_pack(low, range): the
 * values are low + ampy_random_below(offset + i, seed, range), exact in int64
 * (the caller checks that [low, low + range) fits dtype, as torch).
 * Returns AMPY_ERR_VALUE for a bad kind or n < 0, AMPY_ERR_DTYPE for a bad dtype. */
ampy_status ampy_fill_random(void *dst, ampy_dtype dtype, int64_t n, int kind, uint64_t seed,
                             uint64_t offset, double a, double b);

/* dst[i] = start + i * step, computed in double and rounded once. */
ampy_status ampy_fill_arange(void *dst, ampy_dtype dtype, int64_t n, double start, double step);
/* torch.linspace: the first half counts up from start, the second half down
 * from end, so both endpoints are exact. */
ampy_status ampy_fill_linspace(void *dst, ampy_dtype dtype, int64_t n, double start, double end,
                               double step);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_RANDOM_H */
