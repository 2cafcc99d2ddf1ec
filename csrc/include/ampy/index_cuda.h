/* index_cuda.h — the entry points of cuda/index.cu (advanced indexing on the
 * device), called by ampy._C's binding csrc/py/index_py.c through the
 * ampy_cuda_api table (cuda.h). Plain C: no CUDA types. */
#ifndef AMPY_INDEX_CUDA_H
#define AMPY_INDEX_CUDA_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* index.h's ampy_index_spec with ELEMENT strides and an int itemsize. */
typedef struct ampy_index_cuda_spec {
    int k;                     /* indexed dims (1..AMPY_MAX_DIMS)               */
    const int64_t *sizes;      /* [k]                                           */
    const int64_t *strides;    /* [k] element strides of the indexed dims       */
    const int64_t *const *idx; /* [k] device pointers to P contiguous int64     */
    int64_t P;
    int rest_ndim;
    const int64_t *rest_shape;   /* [rest_ndim]                                 */
    const int64_t *rest_strides; /* [rest_ndim] element strides                 */
    int itemsize;
} ampy_index_cuda_spec;

/* out (contiguous [P, rest...]) = src[tuples]. */
ampy_status ampy_index_gather_cuda(int device, const ampy_index_cuda_spec *s, const void *src,
                                   void *out);
/* dst[tuples] = values (accumulate 0: the last repeat wins) or += (accumulate
 * 1; order +1 adds repeats in increasing position, -1 in decreasing).
 * vstrides: [1 + rest_ndim] element strides of the [P, rest...] values. */
ampy_status ampy_index_scatter_cuda(int device, const ampy_index_cuda_spec *s, void *dst,
                                    const void *values, const int64_t *vstrides, int dtype,
                                    int accumulate, int order);
/* Count the non-zero bytes of a strided mask (element strides) into *count
 * (host; this synchronises). scratch: 2 * numel + 1 device int64s, kept for
 * ampy_nonzero_fill_cuda, which writes out[count][ndim]. */
ampy_status ampy_nonzero_cuda(int device, int ndim, const int64_t *shape, const int64_t *strides,
                              const uint8_t *mask, int64_t *scratch, int64_t *count);
ampy_status ampy_nonzero_fill_cuda(int device, int ndim, const int64_t *shape,
                                   const int64_t *strides, const uint8_t *mask,
                                   const int64_t *scratch, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_INDEX_CUDA_H */
