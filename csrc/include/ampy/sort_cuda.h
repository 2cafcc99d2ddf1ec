/* ampy/sort_cuda.h — the CUDA twins of sort.h's row sorts (cuda/sort.cu),
 * filled into ampy_cuda_api (cuda.h) by cuda/module_py.c: the same
 * arguments with the device first, every pointer device memory. */
#ifndef AMPY_SORT_CUDA_H
#define AMPY_SORT_CUDA_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sort.h's row sorts: a bitonic network over each row padded to a power of
 * two, (key, position) compared as one total order, so the result is the
 * CPU's stable order bit for bit (NaN largest). Rows of up to
 * AMPY_SORT_CUDA_SHARED elements sort in one block's shared memory; longer
 * rows (up to AMPY_SORT_CUDA_MAX) in device scratch with one launch per
 * network stage; longer ones fail with AMPY_ERR_VALUE naming the limit. */
#define AMPY_SORT_CUDA_SHARED 1024
#define AMPY_SORT_CUDA_MAX (INT64_C(1) << 26)
ampy_status ampy_sort_cuda(int device, ampy_dtype dtype, int64_t rows, int64_t n, const void *in,
                           int descending, void *values, int64_t *indices);
ampy_status ampy_topk_cuda(int device, ampy_dtype dtype, int64_t rows, int64_t n, int64_t k,
                           int largest, const void *in, void *values, int64_t *indices);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_SORT_CUDA_H */
