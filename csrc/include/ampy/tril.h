/* ampy/tril.h — the lower / upper triangle of the last two dims (torch.tril,
 * torch.triu), out of place or in place.
 *
 * Element (i, j) of every matrix is kept when j - i <= diagonal (lower) or
 * j - i >= diagonal (upper), and set to zero bits otherwise (+0.0, 0, False
 * in every dtype). in == out with equal strides is the in-place form. Strides
 * are in bytes; ndim >= 2.
 */
#ifndef AMPY_TRIL_H
#define AMPY_TRIL_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

ampy_status ampy_tril(int ndim, const int64_t *shape, const char *in, const int64_t *in_strides,
                      char *out, const int64_t *out_strides, size_t itemsize, int64_t diagonal,
                      int upper);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_TRIL_H */
