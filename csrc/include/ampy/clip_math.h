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
#include "ampy/nn_math.h"

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

/* v rounded once to float dtype dt, back as a double (nn_math.h's store
 * and load of one element): torch rounds each per-tensor norm to its
 * tensor's dtype and the total to the promoted dtype of those norms. */
AMPY_ELEM double ampy_norm_round(double v, int dt)
{
    double cell = 0.0; /* room for one element of any float dtype */
    ampy_nn_store1(&cell, dt, 0, v);
    return ampy_nn_load1(&cell, dt, 0);
}

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CLIP_MATH_H */
