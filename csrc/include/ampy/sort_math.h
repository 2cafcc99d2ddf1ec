/* ampy/sort_math.h — the order every row sort of ampy uses (csrc/sort.c and
 * its CUDA twin cuda/sort.cu): (key, position) pairs in one total order, the
 * key first (NaN above every number; reversed when descending) and then the
 * position, which makes a sort stable and top-k the first k of that sort.
 * AMPY_ELEM: host and device. Unit tests: tests/c/test_cuda_twin_math.c.
 */
#ifndef AMPY_SORT_MATH_H
#define AMPY_SORT_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/elem.h"

/* "(ak, ai) comes before (bk, bi)" for floating keys. */
AMPY_ELEM int ampy_sort_before_f(double ak, int64_t ai, double bk, int64_t bi, int desc)
{
    const int an = isnan(ak) != 0, bn = isnan(bk) != 0;
    if (an || bn) {
        if (an && bn)
            return ai < bi;
        return desc ? an : bn;
    }
    if (ak != bk)
        return desc ? ak > bk : ak < bk;
    return ai < bi;
}

/* The same for integer (and bool) keys. */
AMPY_ELEM int ampy_sort_before_i(int64_t ak, int64_t ai, int64_t bk, int64_t bi, int desc)
{
    if (ak != bk)
        return desc ? ak > bk : ak < bk;
    return ai < bi;
}

#endif /* AMPY_SORT_MATH_H */
