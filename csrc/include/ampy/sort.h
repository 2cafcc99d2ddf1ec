/* ampy/sort.h — sorting and top-k selection along the rows of a contiguous
 * [rows, n] array.
 *
 * Keys are compared exactly: float16/bfloat16/float32/float64 as doubles,
 * integers and bool as int64. NaN is larger than every number (torch's
 * order: last when ascending, first when descending). Ties keep their input
 * order (a stable sort), so the indices are torch's with stable=True. The
 * values written are the input elements themselves (their bits), the
 * indices are int64 positions within the row. Both entry points check every
 * argument and write nothing on failure.
 */
#ifndef AMPY_SORT_H
#define AMPY_SORT_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* values/indices: [rows, n] each. */
ampy_status ampy_sort(ampy_dtype dtype, int64_t rows, int64_t n, const void *in, int descending,
                      void *values, int64_t *indices);

/* The k largest (largest != 0) or smallest elements of each row, in sorted
 * order, equal elements in input order. values/indices: [rows, k], 0 <= k <= n. */
ampy_status ampy_topk(ampy_dtype dtype, int64_t rows, int64_t n, int64_t k, int largest,
                      const void *in, void *values, int64_t *indices);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_SORT_H */
