/* ampy/reduce.h — reductions (sum, mean, max, var, ...), softmax and scans.
 *
 * Accumulation is in double for floating inputs (float16/bfloat16/float32
 * sums are therefore more accurate than torch's float accumulation, never
 * less) and in int64 for integer and bool inputs (exact, wrapping); the
 * result is rounded once into the output dtype. max/min/argmax/argmin
 * propagate NaN like torch (the first NaN wins and its index is returned);
 * ties return the first index. var/std use two passes (mean, then squared
 * deviations). logsumexp subtracts the maximum (an infinite maximum is
 * replaced by 0, as torch does). Softmax is computed along one dim with the
 * maximum subtracted, in float for float16/bfloat16/float32 (sums in double)
 * and in double for float64.
 *
 * Threads: many outputs are split across threads; a reduction to a single
 * output over many elements splits the reduced range instead and combines
 * the partial results in a fixed order (so results do not depend on timing).
 */
#ifndef AMPY_REDUCE_H
#define AMPY_REDUCE_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ampy_reduce_op {
    AMPY_RED_SUM = 0,
    AMPY_RED_MEAN = 1,      /* floating inputs only                            */
    AMPY_RED_PROD = 2,
    AMPY_RED_MAX = 3,       /* amax; with idx_out also the index (max(dim))    */
    AMPY_RED_MIN = 4,
    AMPY_RED_ARGMAX = 5,    /* writes the index to out (int64 out)             */
    AMPY_RED_ARGMIN = 6,
    AMPY_RED_VAR = 7,       /* sum((x - mean)^2) / max(0, N - correction)      */
    AMPY_RED_STD = 8,
    AMPY_RED_NORM2 = 9,     /* sqrt(sum x^2)                                   */
    AMPY_RED_LOGSUMEXP = 10,
    AMPY_RED_ALL = 11,      /* x != 0 for every element (1 for none)           */
    AMPY_RED_ANY = 12,
    AMPY_RED_NUM_OPS = 13
} ampy_reduce_op;

/* "sum", "mean", ... (torch's names); NULL for an invalid op. */
const char *ampy_reduce_op_name(int op);

/* Reduce `in` over the dims whose bit is set in reduce_mask.
 *   ndim, shape   the input's shape (0 <= ndim <= AMPY_MAX_DIMS)
 *   in            in: element (0,...,0); in_strides in BYTES (ndim entries)
 *   reduce_mask   bit d set: dim d is reduced (bits >= ndim are ignored)
 *   out           out: one element per kept index; out_strides in BYTES,
 *                 ndim entries, those of reduced dims ignored
 *   out_dtype     any dtype (the result is rounded once into it)
 *   idx_out       out, optional (NULL): int64 index of the max/min along the
 *                 reduced dims (flattened in row-major order), for MAX/MIN;
 *                 idx_strides like out_strides. ARGMAX/ARGMIN write the
 *                 index into out instead (out_dtype must be int64).
 *   correction    var/std only: the divisor is max(0, N - correction)
 * out and idx_out must not overlap in or each other.
 * Returns AMPY_OK; AMPY_ERR_VALUE (bad op/ndim/dtype); AMPY_ERR_DTYPE (mean,
 * var, std, norm, logsumexp of an integer input); AMPY_ERR_INDEX (max, min,
 * argmax or argmin over zero elements: they have no identity). */
ampy_status ampy_reduce(ampy_reduce_op op, int ndim, const int64_t *shape, const void *in,
                        const int64_t *in_strides, ampy_dtype in_dtype, uint32_t reduce_mask,
                        void *out, const int64_t *out_strides, ampy_dtype out_dtype,
                        int64_t *idx_out, const int64_t *idx_strides, double correction);

/* softmax (log = 0) or log_softmax (log = 1) of `in` along dim `dim`.
 *   in, out  same shape (ndim, shape); strides in BYTES; out may be
 *            identical to in (same data and strides) but not partially
 *            overlap it. in_dtype and out_dtype must be floating.
 * Returns AMPY_OK, AMPY_ERR_VALUE (bad ndim/dim), AMPY_ERR_DTYPE. */
ampy_status ampy_softmax(int ndim, const int64_t *shape, const void *in,
                         const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                         const int64_t *out_strides, ampy_dtype out_dtype, int log);

/* Inclusive scans along dim: cumsum (op 0) or cumprod (op 1), accumulated
 * in double (floating) or int64 (integer/bool inputs), each element rounded
 * once into out_dtype. Shapes/strides as in ampy_softmax.
 * Returns AMPY_OK, AMPY_ERR_VALUE. */
#define AMPY_SCAN_CUMSUM 0
#define AMPY_SCAN_CUMPROD 1
ampy_status ampy_scan(int op, int ndim, const int64_t *shape, const void *in,
                      const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                      const int64_t *out_strides, ampy_dtype out_dtype);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_REDUCE_H */
