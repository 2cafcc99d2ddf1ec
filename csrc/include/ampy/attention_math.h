/* ampy/attention_math.h — per-element rules of fused attention that the CPU
 * kernel (csrc/attention.c) and the CUDA one (cuda/attention.cu) share:
 * which scores a mask keeps, the dropout keep draw, and how a finished row
 * is normalised. AMPY_ELEM: host and device. Unit tests: tests/c/test_attention_math.c.
 */
#ifndef AMPY_ATTENTION_MATH_H
#define AMPY_ATTENTION_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/elem.h"
#include "ampy/random.h"

/* 1 when the causal rule keeps key `col` for query `row` (top-left aligned). */
AMPY_ELEM int ampy_attn_causal_keep(int causal, int64_t row, int64_t col)
{
    return !causal || col <= row;
}

/* Dropout's keep decision for score element `idx` (= (b*Lq + i)*Lk + j):
 * lane idx % 4 of Philox block offset + idx / 4, kept when its unit float
 * is below 1 - p. */
AMPY_ELEM int ampy_attn_keep(uint64_t seed, uint64_t offset, uint64_t idx, float keep_prob)
{
    uint32_t r[4];
    ampy_philox4x32(offset + (idx >> 2), seed, r);
    return ampy_u32_to_unit(r[idx & 3]) < keep_prob;
}

/* The factor on a probability after dropout: 1/(1-p) when kept, else 0
 * (everything 0 at p == 1). */
AMPY_ELEM double ampy_attn_drop_scale(double p)
{
    return p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
}

/* The saved log-sum-exp of a row with running max m and sum l; +inf for a
 * row with no key kept, so exp(s - lse) is 0 in the backward. */
AMPY_ELEM double ampy_attn_lse(double m, double l)
{
    return l > 0.0 ? m + log(l) : INFINITY;
}

/* 1/l for the output row, 0 for a row with no key kept (its output is 0). */
AMPY_ELEM double ampy_attn_row_inv(double l)
{
    return l > 0.0 ? 1.0 / l : 0.0;
}

#endif /* AMPY_ATTENTION_MATH_H */
