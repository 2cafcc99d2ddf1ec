/* ampy/clip_math.h — the per-element step of a vector p-norm, shared by the
 * CPU (csrc/clip.c) and the CUDA (cuda/clip.cu) multi-tensor norm kernels.
 *
 * A norm is accumulated in double over |x| (x converted from its dtype):
 *   p = +inf:  max |x|        p = -inf: min |x|        p = 0: count of x != 0
 *   else:      sum |x|^p      (p = 1 and p = 2 without pow())
 * then finished as acc^(1/p) for a finite non-zero p. A NaN element makes the
 * max / min / sum NaN, as torch.linalg.vector_norm does.
 */
#ifndef AMPY_CLIP_MATH_H
#define AMPY_CLIP_MATH_H

#include <math.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The identity of the accumulation for order p. */
AMPY_ELEM double ampy_norm_init(double p)
{
    return p == -INFINITY ? INFINITY : 0.0;
}

/* acc combined with one element a = |x| (or with another partial, for
 * p = +-inf and p = 0 and sums: the combination rule is the same). */
AMPY_ELEM double ampy_norm_step(double acc, double a, double p)
{
    if (p == INFINITY)
        return (a > acc || a != a) ? a : acc;
    if (p == -INFINITY)
        return (a < acc || a != a) ? a : acc;
    if (p == 0.0)
        return acc + (a != 0.0);
    if (p == 1.0)
        return acc + a;
    if (p == 2.0)
        return acc + a * a;
    return acc + pow(a, p);
}

/* Merge two partial accumulations (the partial of a later range second). */
AMPY_ELEM double ampy_norm_merge(double acc, double part, double p)
{
    if (p == INFINITY || p == -INFINITY)
        return ampy_norm_step(acc, part, p);
    return acc + part;
}

/* The norm from its accumulation. */
AMPY_ELEM double ampy_norm_finish(double acc, double p)
{
    if (p == INFINITY || p == -INFINITY || p == 0.0 || p == 1.0)
        return acc;
    if (p == 2.0)
        return sqrt(acc);
    return pow(acc, 1.0 / p);
}

/* v rounded once to dtype dt (a float dtype), back as a double: torch
 * rounds each per-tensor norm to its tensor's dtype and the total to the
 * promoted dtype of those norms. */
AMPY_ELEM double ampy_norm_round(double v, int dt)
{
    switch (dt) {
    case AMPY_FLOAT16: return (double)ampy_f16_to_f32(ampy_f64_to_f16(v));
    case AMPY_BFLOAT16: return (double)ampy_bf16_to_f32(ampy_f64_to_bf16(v));
    case AMPY_FLOAT32: return (double)(float)v;
    default: return v;
    }
}

/* torch.result_type of two float dtypes (a < 0: none yet). */
AMPY_ELEM int ampy_norm_promote(int a, int b)
{
    if (a < 0 || a == b)
        return b;
    if (a == AMPY_FLOAT64 || b == AMPY_FLOAT64)
        return AMPY_FLOAT64;
    return AMPY_FLOAT32; /* float32 with a half, or float16 with bfloat16 */
}

/* Store v (already rounded to dt) as one element of float dtype dt. */
AMPY_ELEM void ampy_norm_store(void *out, int dt, double v)
{
    switch (dt) {
    case AMPY_FLOAT16: *(uint16_t *)out = ampy_f64_to_f16(v); break;
    case AMPY_BFLOAT16: *(uint16_t *)out = ampy_f64_to_bf16(v); break;
    case AMPY_FLOAT32: *(float *)out = (float)v; break;
    default: *(double *)out = v;
    }
}

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CLIP_MATH_H */
