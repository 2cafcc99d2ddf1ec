/* ampy/attention_math.h — per-element rules of fused attention that the CPU
 * kernel (csrc/attention.c) and the CUDA one (cuda/attention.cu) share:
 * which scores a mask keeps, the dropout keep draw, and how a finished row
 * is normalised (AMPY_ELEM: host and device), and the argument checks of both
 * entry points (host only). Unit tests: tests/c/test_attention.c.
 */
#ifndef AMPY_ATTENTION_MATH_H
#define AMPY_ATTENTION_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/attention.h"
#include "ampy/elem.h"
#include "ampy/random.h"
#include "ampy/status.h"

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

/* The checks of ampy_attention_fwd/bwd and their CUDA twins: dtypes, sizes,
 * batch dims and dropout_p, with a message naming the argument. */
static inline ampy_status ampy_attn_check(const ampy_attn_problem *p)
{
    const char *fn = "scaled_dot_product_attention";
    if (!p)
        return ampy_error(AMPY_ERR_VALUE, "%s: no problem given", fn);
    if (p->dtype != AMPY_FLOAT32 && p->dtype != AMPY_FLOAT16 && p->dtype != AMPY_BFLOAT16 &&
        p->dtype != AMPY_FLOAT64)
        return ampy_error(AMPY_ERR_DTYPE, "%s: query, key and value must be float32, float16, "
                                          "bfloat16 or float64", fn);
    if (p->nd < 0 || p->nd > AMPY_ATTN_MAX_BATCH)
        return ampy_error(AMPY_ERR_SHAPE, "%s: at most %d batch dims, got %d", fn,
                          AMPY_ATTN_MAX_BATCH, p->nd);
    for (int d = 0; d < p->nd; d++)
        if (p->batch[d] < 0)
            return ampy_error(AMPY_ERR_SHAPE, "%s: negative batch size", fn);
    if (p->Lq < 0 || p->Lk < 0 || p->E < 0 || p->Ev < 0)
        return ampy_error(AMPY_ERR_SHAPE, "%s: negative size", fn);
    if (p->mask.data && p->mask_dtype != AMPY_BOOL && p->mask_dtype != AMPY_FLOAT32 &&
        p->mask_dtype != p->dtype)
        return ampy_error(AMPY_ERR_DTYPE, "%s: attn_mask must be bool, float32 or the query's "
                                          "dtype", fn);
    if (!(p->dropout_p >= 0.0 && p->dropout_p <= 1.0))
        return ampy_error(AMPY_ERR_VALUE, "%s: dropout_p must be in [0, 1], got %g", fn,
                          p->dropout_p);
    return AMPY_OK;
}

#endif /* AMPY_ATTENTION_MATH_H */
