/* ampy/reduce_math.h — what the CPU (csrc/reduce.c) and CUDA (cuda/reduce.cu)
 * reductions compute alike: the accumulator, the pass classes of each op, the
 * final value of an output from its passes (AMPY_ELEM: host and device), and
 * the argument checks of both entry points (host only).
 *
 * An op is one or two passes over the reduced elements, each a fold of one
 * class into an accumulator (floating inputs in double, integer and bool
 * inputs in wrapping int64):
 *   sum, mean        SUM                 mean = sum / R
 *   prod             PROD
 *   max/min, arg*    MAX / MIN           NaN propagates, ties keep the lowest index
 *   var, std         SUM, then DEV2      sum((x - mean)^2) / max(0, R - correction), std = sqrt
 *   norm             SUMSQ               sqrt
 *   logsumexp        MAX, then SUMEXP    m + log(sum(exp(x - m))), m = 0 for an infinite
 *                                        or absent maximum
 *   all, any         NZ                  count == R, count > 0
 * How a pass folds (order of the additions) is each side's own; the files
 * above document it. Unit tests: tests/c/test_shared_math.c.
 */
#ifndef AMPY_REDUCE_MATH_H
#define AMPY_REDUCE_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/iter.h"
#include "ampy/reduce.h"
#include "ampy/status.h"

/* Pass classes: what one pass folds. */
enum {
    AMPY_RC_SUM,    /* x                    */
    AMPY_RC_PROD,   /* product              */
    AMPY_RC_SUMSQ,  /* x * x                */
    AMPY_RC_DEV2,   /* (x - center)^2       */
    AMPY_RC_SUMEXP, /* exp(x - center)      */
    AMPY_RC_MAX,    /* best value and index */
    AMPY_RC_MIN,
    AMPY_RC_NZ      /* count of x != 0      */
};

typedef struct ampy_reduce_acc {
    double s;      /* sum / product (floating inputs)                   */
    int64_t is;    /* sum / product / nonzero count (integer inputs)    */
    double best;   /* max/min value (floating inputs)                   */
    int64_t ibest; /* max/min value (integer inputs)                    */
    int64_t bidx;  /* flat position of best                             */
    int has, nan;  /* a value was folded; best is a NaN                 */
} ampy_reduce_acc;

/* The empty accumulator of a class (1 for products, 0 otherwise). */
AMPY_ELEM ampy_reduce_acc ampy_reduce_acc_init(int cls)
{
    ampy_reduce_acc a;
    a.s = cls == AMPY_RC_PROD ? 1.0 : 0.0;
    a.is = cls == AMPY_RC_PROD ? 1 : 0;
    a.best = 0.0;
    a.ibest = 0;
    a.bidx = 0;
    a.has = a.nan = 0;
    return a;
}

/* The class of an op's first pass. */
AMPY_ELEM int ampy_reduce_first_cls(int op)
{
    switch (op) {
    case AMPY_RED_PROD: return AMPY_RC_PROD;
    case AMPY_RED_MAX:
    case AMPY_RED_ARGMAX:
    case AMPY_RED_LOGSUMEXP: return AMPY_RC_MAX;
    case AMPY_RED_MIN:
    case AMPY_RED_ARGMIN: return AMPY_RC_MIN;
    case AMPY_RED_NORM2: return AMPY_RC_SUMSQ;
    case AMPY_RED_ALL:
    case AMPY_RED_ANY: return AMPY_RC_NZ;
    default: return AMPY_RC_SUM; /* sum, mean, var, std */
    }
}

/* The class of an op's second pass, or -1 for single-pass ops. */
AMPY_ELEM int ampy_reduce_second_cls(int op)
{
    if (op == AMPY_RED_VAR || op == AMPY_RED_STD)
        return AMPY_RC_DEV2;
    return op == AMPY_RED_LOGSUMEXP ? AMPY_RC_SUMEXP : -1;
}

/* The center of the second pass from the first pass's accumulator: the mean
 * (var, std) or the finite maximum, else 0 (logsumexp). */
AMPY_ELEM double ampy_reduce_center(int op, const ampy_reduce_acc *a, int64_t R)
{
    if (op == AMPY_RED_LOGSUMEXP)
        return (!a->has || isinf(a->best)) ? 0.0 : a->best;
    return a->s / (double)R;
}

/* The value of one output: *v (floating result) or *iv (integer result;
 * the return value is then 1). a: the first pass; b, center: the second pass
 * and its center (ignored by single-pass ops); is_int: the input was
 * accumulated in int64. */
AMPY_ELEM int ampy_reduce_finish(int op, const ampy_reduce_acc *a, const ampy_reduce_acc *b,
                                 double center, int64_t R, double correction, int is_int,
                                 double *v, int64_t *iv)
{
    const double Rd = (double)R;
    *v = 0.0;
    *iv = 0;
    switch (op) {
    case AMPY_RED_SUM:
    case AMPY_RED_PROD: *v = a->s, *iv = a->is; break;
    case AMPY_RED_MEAN: *v = a->s / Rd; break;
    case AMPY_RED_MAX:
    case AMPY_RED_MIN: *v = a->best, *iv = a->ibest; break;
    case AMPY_RED_ARGMAX:
    case AMPY_RED_ARGMIN: *iv = a->bidx; return 1;
    case AMPY_RED_VAR:
    case AMPY_RED_STD: {
        double den = Rd - correction > 0.0 ? Rd - correction : 0.0;
        *v = b->s / den;
        if (op == AMPY_RED_STD)
            *v = sqrt(*v);
        break;
    }
    case AMPY_RED_NORM2: *v = sqrt(a->s); break;
    case AMPY_RED_LOGSUMEXP: *v = center + log(b->s); break;
    case AMPY_RED_ALL: *iv = a->is == R; return 1;
    case AMPY_RED_ANY: *iv = a->is > 0; return 1;
    default: break;
    }
    return is_int;
}

/* ---- argument checks (host) -------------------------------------------------- */

/* The op's name ("sum", ..., "any"), or NULL for a bad code. */
static inline const char *ampy_reduce_name(int op)
{
    static const char *const names[AMPY_RED_NUM_OPS] = {
        "sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "norm",
        "logsumexp", "all", "any"};
    return (op >= 0 && op < AMPY_RED_NUM_OPS) ? names[op] : NULL;
}

/* Ops that take floating inputs only. */
AMPY_ELEM int ampy_reduce_float_only(int op)
{
    return op == AMPY_RED_MEAN || op == AMPY_RED_VAR || op == AMPY_RED_STD ||
           op == AMPY_RED_NORM2 || op == AMPY_RED_LOGSUMEXP;
}

/* Op code, ndim, dtype codes, and a floating input where the op needs one. */
static inline ampy_status ampy_reduce_check_args(int op, int ndim, int in_dtype, int out_dtype)
{
    const char *name = ampy_reduce_name(op);
    if (!name)
        return ampy_error(AMPY_ERR_VALUE, "reduce: invalid op code %d", op);
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad ndim %d", name, ndim);
    if (!ampy_dtype_valid(in_dtype) || !ampy_dtype_valid(out_dtype))
        return ampy_error(AMPY_ERR_VALUE, "%s: invalid dtype code", name);
    if (!ampy_dtype_is_float(in_dtype) && ampy_reduce_float_only(op))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating point input, got %s", name,
                          ampy_dtype_name(in_dtype));
    return AMPY_OK;
}

/* max/min/argmax/argmin over zero elements have no identity (logsumexp,
 * whose first pass is also a max, gives -inf). */
static inline ampy_status ampy_reduce_check_nonempty(int op, int64_t R)
{
    int cls = ampy_reduce_first_cls(op);
    if (R == 0 && (cls == AMPY_RC_MAX || cls == AMPY_RC_MIN) && op != AMPY_RED_LOGSUMEXP)
        return ampy_error(AMPY_ERR_INDEX, "%s: expected a non-empty reduction (the reduced dims "
                          "have zero elements and %s has no identity)", ampy_reduce_name(op),
                          ampy_reduce_name(op));
    return AMPY_OK;
}

#endif /* AMPY_REDUCE_MATH_H */
