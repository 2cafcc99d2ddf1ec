/* ampy/multinomial_math.h — what the CPU (csrc/multinomial.c) and CUDA
 * (cuda/multinomial.cu) samplers compute alike: the inverse-CDF search of a
 * draw with replacement and the exponential key of a category without
 * replacement (multinomial.h has the law). AMPY_ELEM: host and device.
 * Unit tests: tests/c/test_cuda_twin_math.c.
 */
#ifndef AMPY_MULTINOMIAL_MATH_H
#define AMPY_MULTINOMIAL_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/elem.h"

/* The sample of uniform u from the running sums cdf[0..ncat) of a row
 * (total cdf[ncat - 1]): the first category whose running sum exceeds
 * u * total, never past `last`, the last category of positive weight (u *
 * total rounded up to the total). */
AMPY_ELEM int64_t ampy_mn_search(const double *cdf, int64_t ncat, int64_t last, double u)
{
    const double t = u * cdf[ncat - 1];
    int64_t lo = 0, hi = ncat - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo > last ? last : lo;
}

/* The key of a category of weight p and uniform u (without replacement the
 * largest keys are the sample): p / E with E = -log(1 - u) exponential(1);
 * infinity for E == 0; a category of weight zero gets -1 / (1 + E), below
 * every positive weight's key and in a random order among themselves. */
AMPY_ELEM double ampy_mn_key(double p, double u)
{
    const double e = -log1p(-u);
    return p > 0.0 ? (e > 0.0 ? p / e : INFINITY) : -1.0 / (1.0 + e);
}

#endif /* AMPY_MULTINOMIAL_MATH_H */
