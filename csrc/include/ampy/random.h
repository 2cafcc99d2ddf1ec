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

typedef enum ampy_random_kind {
    AMPY_RANDOM_UNIFORM = 0,   /* U[a, b)                     */
    AMPY_RANDOM_NORMAL = 1,    /* N(a, b^2) (Box-Muller)      */
    AMPY_RANDOM_INTEGER = 2,   /* integers in [a, b)          */
    AMPY_RANDOM_BERNOULLI = 3, /* 1 with probability a, else 0 */
} ampy_random_kind;

/* Fill n contiguous elements of dst (any dtype; values rounded once to it).
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
