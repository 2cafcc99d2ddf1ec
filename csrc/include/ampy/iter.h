/* ampy/iter.h — strided N-d iteration over up to AMPY_ITER_MAX_OPS operands.
 *
 * The numeric kernels of libampy are written as 1-d "inner loops" over
 * `n` elements with one byte stride per operand (NumPy's ufunc loop shape).
 * ampy_iter_run() walks an N-d, broadcast, arbitrarily strided space and calls
 * the inner loop once per run of the innermost (coalesced) dimension, split
 * across threads when the work is large enough (see parallel.h).
 *
 * Strides here are in BYTES and may be 0 (broadcast) or negative.
 */
#ifndef AMPY_ITER_H
#define AMPY_ITER_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPY_MAX_DIMS 16
#define AMPY_ITER_MAX_OPS 6

/* in,out: ptrs[op] points at element 0 of the run for operand op;
 * strides[op] is that operand's byte stride along the run; n >= 1. */
typedef void (*ampy_inner_fn)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

/* Runs `fn` over the whole space.
 *   ndim, shape  : the iteration space (0 <= ndim <= AMPY_MAX_DIMS; shape[d] >= 0)
 *   nops         : number of operands, 1..AMPY_ITER_MAX_OPS
 *   ptrs[op]     : base pointer of operand op (element at index 0,...,0)
 *   strides[op]  : byte strides of operand op, ndim entries each (row-major
 *                  [op * ndim + d])
 *   grain        : minimum elements per thread before splitting (0 = never split)
 *   ctx          : passed through to fn
 * Empty spaces (some shape[d] == 0) call nothing. `fn` must be safe to call
 * concurrently on disjoint runs. Returns AMPY_OK or AMPY_ERR_VALUE (bad ndim/nops). */
ampy_status ampy_iter_run(int ndim, const int64_t *shape, int nops, char *const *ptrs,
                          const int64_t *strides, ampy_inner_fn fn, void *ctx, int64_t grain);

/* ampy_iter_run for element-wise work whose LAST operand is written once per
 * element and every other is only read: the order of the runs is then free
 * (unless an input overlaps the output other than element for element), and
 * it follows the memory (dims reordered by stride, 2-d tiles for transposes).
 * elsize[op]: bytes per element of operand op (1, 2, 4 or 8): an operand
 * walked across lines is copied through a small tile buffer so that fn sees it
 * with stride elsize[op]. */
ampy_status ampy_iter_run_ew(int ndim, const int64_t *shape, int nops, char *const *ptrs,
                             const int64_t *strides, ampy_inner_fn fn, void *ctx, int64_t grain,
                             const int *elsize);

/* Broadcast two shapes the NumPy/torch way. out_shape gets max(na, nb) dims.
 * Returns AMPY_ERR_SHAPE (with a message naming `what`) when they do not fit. */
ampy_status ampy_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                                  int *nout, int64_t *out_shape, const char *what);

/* The one checked shape product of ampy (the binding and, through
 * _C.shape_numel, the Python layer use it; torch's c10 rules):
 * ampy_shape_numel: *numel = prod(shape), taken in uint64 with a sticky
 *   overflow flag (as c10::safe_multiplies_u64), so [2**62, 4, 0] overflows
 *   although its product is 0; the result must fit int64. AMPY_ERR_VALUE for a
 *   negative dim, AMPY_ERR_RUNTIME "numel: integer multiplication overflow".
 * ampy_shape_nbytes: *nbytes = numel * itemsize for a contiguous allocation;
 *   AMPY_ERR_RUNTIME "Storage size calculation overflowed with sizes=[...]"
 *   when the product or the byte count passes INT64_MAX.
 * ndim in 0..AMPY_MAX_DIMS; nothing is written on failure. */
ampy_status ampy_shape_numel(int ndim, const int64_t *shape, int64_t *numel);
ampy_status ampy_shape_nbytes(int ndim, const int64_t *shape, int64_t itemsize, int64_t *nbytes);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_ITER_H */
