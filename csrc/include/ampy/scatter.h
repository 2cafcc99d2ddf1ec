/* ampy/scatter.h — gather / scatter / scatter_add along one dim (torch's
 * Tensor.gather, scatter_, scatter_add_).
 *
 * For every position c of the index tensor, the element of `self` at c with
 * c[dim] replaced by index[c] is read (gather: out[c] = self[...]) or written
 * (scatter: self[...] = src[c]; scatter_add: self[...] += src[c]). The
 * positions of one line along `dim` run in order, one line per task, so each
 * element of self sees its additions in index order: torch's serial CPU loop,
 * bit for bit (float16/bfloat16: self's value and the additions summed in
 * float, rounded once at the end, as torch accumulates reduced floats).
 * All strides are in bytes; shapes of self/src only need to cover the index
 * shape (the caller checks torch's size rules). Every index is checked before
 * anything is written.
 */
#ifndef AMPY_SCATTER_H
#define AMPY_SCATTER_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampy_scatter_spec {
    int ndim;                      /* >= 1 (a 0-d call is given as 1-d of size 1) */
    int dim;                       /* 0 <= dim < ndim                              */
    const int64_t *shape;          /* [ndim] the index shape                       */
    const int64_t *index_strides;  /* [ndim] byte strides of the int64 index       */
    int64_t self_size;             /* self's size along dim (the index bound)      */
    const int64_t *self_strides;   /* [ndim] byte strides of self                  */
    const int64_t *other_strides;  /* [ndim] byte strides of out (gather) / src    */
    ampy_dtype dtype;              /* of self, src and out                         */
} ampy_scatter_spec;

ampy_status ampy_gather(const ampy_scatter_spec *s, const char *self, const char *index,
                        char *out);
ampy_status ampy_scatter(const ampy_scatter_spec *s, char *self, const char *index,
                         const char *src);
/* bool: logical or; integers wrap as two's complement. */
ampy_status ampy_scatter_add(const ampy_scatter_spec *s, char *self, const char *index,
                             const char *src);

/* scatter_reduce_ with "prod", "amax" or "amin" (the sum is scatter_add;
 * "mean" and include_self=False are compositions over these): each element
 * of self combined with its src values in index order (prod: products;
 * amax/amin: a NaN wins, as torch's). float16/bfloat16 combine in float and
 * round once per element, as torch's CPU kernel does; integers multiply
 * wrapping; bool: and / or / and. */
typedef enum { AMPY_SCATTER_PROD = 1, AMPY_SCATTER_AMAX = 2, AMPY_SCATTER_AMIN = 3 }
    ampy_scatter_reduce_op;
ampy_status ampy_scatter_reduce(const ampy_scatter_spec *s, ampy_scatter_reduce_op op,
                                char *self, const char *index, const char *src);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_SCATTER_H */
