/* ampy/gemm_matmul.h — torch.matmul's batch broadcasting over raw operands.
 *
 * An operand is given as it is stored: ndim >= 2 dims (batch..., rows, cols)
 * with ELEMENT strides (0 broadcasts; transposed and permuted views are read
 * in place). ampy_gemm_matmul_plan broadcasts the batch dims the torch way
 * (missing leading dims and size-1 dims) and gives the result's shape;
 * ampy_gemm_matmul_batch drops the size-1 batch dims and merges dims that
 * flatten for all three operands into the batch of ampy_gemm_batched (gemm.h);
 * ampy_gemm_matmul runs it. The CPU binding calls ampy_gemm_matmul; the CUDA
 * branch of the same binding walks the same ampy_gemm_matmul_batch with
 * cuBLAS (gemm_cuda.h), so both devices share one set of checks.
 */
#ifndef AMPY_GEMM_MATMUL_H
#define AMPY_GEMM_MATMUL_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/gemm.h"
#include "ampy/iter.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampy_gemm_operand {
    void *data;             /* element 0 (read-only for a and b)     */
    ampy_dtype dtype;
    int ndim;               /* 2..AMPY_MAX_DIMS                      */
    const int64_t *shape;   /* [ndim]                                */
    const int64_t *strides; /* [ndim] element strides                */
} ampy_gemm_operand;

/* a @ b's geometry: M, N, K; the broadcast batch (nd dims: shape and the
 * batch strides of a and b, 0 where broadcast); the result's shape. */
typedef struct ampy_gemm_plan {
    int64_t M, N, K;
    int nd;
    int64_t shape[AMPY_MAX_DIMS]; /* [nd + 2]: batch..., M, N (the result's shape) */
    int64_t a_bs[AMPY_MAX_DIMS], b_bs[AMPY_MAX_DIMS];
} ampy_gemm_plan;

/* Check a and b (each >= 2-d, one dtype, a's K == b's rows, batch dims that
 * broadcast) and fill *p. Returns AMPY_OK, AMPY_ERR_VALUE (ndim, sizes) or
 * AMPY_ERR_DTYPE, with messages that name the operands ("gemm_batched: ..."). */
ampy_status ampy_gemm_matmul_plan(const ampy_gemm_operand *a, const ampy_gemm_operand *b,
                                  ampy_gemm_plan *p);

/* The batch of *p for an output with element strides c_strides[nd + 2]:
 * size-1 dims dropped and dims that flatten for a, b and c merged, into
 * *n dims of shape[]/a_bs[]/b_bs[]/c_bs[] (arrays of AMPY_GEMM_MAX_BATCH_DIMS).
 * Returns AMPY_ERR_VALUE when more than AMPY_GEMM_MAX_BATCH_DIMS dims are
 * larger than 1. */
ampy_status ampy_gemm_matmul_batch(const ampy_gemm_plan *p, const int64_t *c_strides, int *n,
                                   int64_t *shape, int64_t *a_bs, int64_t *b_bs, int64_t *c_bs);

/* c = alpha * a @ b + beta * c (beta == 0: c is not read) with c of
 * p->shape (from ampy_gemm_matmul_plan(a, b, p)), float32 or a's dtype. One
 * ampy_gemm_batched call; statuses as ampy_gemm_batched's. */
ampy_status ampy_gemm_matmul(const ampy_gemm_plan *p, double alpha, const ampy_gemm_operand *a,
                             const ampy_gemm_operand *b, double beta, const ampy_gemm_operand *c);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_GEMM_MATMUL_H */
