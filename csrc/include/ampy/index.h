/* ampy/index.h — advanced (integer-array) indexing: gather, scatter, nonzero.
 *
 * The Python layer reduces every advanced index to this form: the indexed
 * dims are the first k dims of the source view, the k index arrays are int64,
 * contiguous and of one common length P (already broadcast), and the rest of
 * the view (rest_ndim dims) is copied whole for each index tuple. Negative
 * indices count from the end. Every index is checked before anything is
 * written, so a failing call changes nothing.
 */
#ifndef AMPY_INDEX_H
#define AMPY_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampy_index_spec {
    int k;                          /* number of indexed dims (1..AMPY_MAX_DIMS)      */
    const int64_t *sizes;           /* [k] sizes of the indexed dims                  */
    const int64_t *strides;         /* [k] byte strides of the indexed dims           */
    const int64_t *const *idx;      /* [k] pointers to P int64 indices each           */
    int64_t P;                      /* number of index tuples                         */
    int rest_ndim;                  /* dims copied whole                              */
    const int64_t *rest_shape;      /* [rest_ndim]                                    */
    const int64_t *rest_strides;    /* [rest_ndim] byte strides in the indexed tensor */
    size_t itemsize;                /* bytes per element                              */
} ampy_index_spec;

/* out: contiguous [P, rest...] buffer. src: the indexed tensor's element 0.
 * Returns AMPY_OK or AMPY_ERR_INDEX naming the bad index and the dim size. */
ampy_status ampy_index_gather(const ampy_index_spec *spec, const char *src, char *out);

/* dst[idx...] = values. values: element 0 of a [P, rest...] view with byte
 * strides vstrides[1 + rest_ndim] (0 broadcasts). Same statuses as gather.
 * Repeated index tuples: the last write wins (serial order). */
ampy_status ampy_index_scatter(const ampy_index_spec *spec, char *dst, const char *values,
                               const int64_t *vstrides);

/* dst[idx...] += values (torch's index_put_ with accumulate=True), arguments
 * as ampy_index_scatter. Every repeat of an index tuple is added, one
 * addition at a time rounded to `dtype` (float16/bfloat16: added in float),
 * in increasing position p: torch's serial CPU loop, bit for bit. dtype must
 * be a float dtype of spec->itemsize bytes (else AMPY_ERR_DTYPE); a bad
 * index is AMPY_ERR_INDEX with nothing written. */
ampy_status ampy_index_put_accumulate(const ampy_index_spec *spec, char *dst, ampy_dtype dtype,
                                      const char *values, const int64_t *vstrides);

/* Count the non-zero bytes (bool elements) of a strided view. */
int64_t ampy_nonzero_count(int ndim, const int64_t *shape, const int64_t *strides,
                           const uint8_t *mask);
/* Write the indices of non-zero elements, row-major, into out[count][ndim]. */
void ampy_nonzero_fill(int ndim, const int64_t *shape, const int64_t *strides,
                       const uint8_t *mask, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_INDEX_H */
