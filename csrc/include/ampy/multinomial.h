/* ampy/multinomial.h — sampling category indices from rows of weights
 * (torch.multinomial).
 *
 * p: [rows, ncat] non-negative finite weights, each row with a positive sum
 * (checked first: AMPY_ERR_RUNTIME with torch's message, nothing written).
 * With replacement, sample s of row r is the first category whose running
 * sum exceeds u[r, s] * total (u uniform in [0, 1), [rows, ns]); a category
 * of weight zero is never drawn. Without replacement (ns <= ncat) every
 * category gets the key p / E with E = -log(1 - u[r, c]) an exponential
 * draw (u: [rows, ncat]), and the ns largest keys are the sample, in
 * decreasing key order: the same law as drawing one by one and removing
 * each drawn category. out: [rows, ns] int64.
 */
#ifndef AMPY_MULTINOMIAL_H
#define AMPY_MULTINOMIAL_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

ampy_status ampy_multinomial(int64_t rows, int64_t ncat, const double *p, int64_t ns,
                             int replacement, const double *u, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_MULTINOMIAL_H */
