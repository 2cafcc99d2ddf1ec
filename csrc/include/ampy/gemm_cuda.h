/* ampy/gemm_cuda.h — half-precision GEMM with fp32 accumulation on CUDA
 * devices, through cuBLAS (cublasGemmStridedBatchedEx_64).
 *
 *   C[b] = alpha * A[b] @ B[b] + beta * C[b]      for b in [0, batch)
 *
 * Row-major semantics on strided operands (ELEMENT strides), read in place:
 *   A  m x k  strides (sa_m, sa_k), one of them 1 (row- or column-major: a
 *             transposed view such as weight.T is read without a copy)
 *   B  k x n  strides (sb_k, sb_n), one of them 1
 *   C  m x n  strides (ldc, 1), written (beta == 0: not read, may be garbage)
 *   batch strides sa_b, sb_b, sc_b (0 broadcasts an operand across the batch)
 * Types: A and B share in_dtype (float16, bfloat16, float32 or float64); C is
 * out_dtype = in_dtype, or float32 for half inputs (out_dtype=float32).
 * Precision, chosen explicitly (ampy_cuda's torch.backends settings):
 *   half inputs   CUBLAS_COMPUTE_32F: tensor cores, fp32 accumulation, and
 *                 CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, so no
 *                 split-K partial sums are rounded to half;
 *   float32       CUBLAS_COMPUTE_32F in pedantic-free default math (no TF32);
 *   float64       CUBLAS_COMPUTE_64F.
 * cuBLAS is loaded with dlopen at the first call (libcublas.so.13/.12 by
 * soname, then the directories given to ampy_cuda_blas_add_path); without it
 * the call returns AMPY_ERR_RUNTIME naming what was tried.
 * Returns AMPY_OK; AMPY_ERR_DTYPE (type combination), AMPY_ERR_VALUE (sizes
 * < 0, an operand with neither stride 1: the caller must copy it), or
 * AMPY_ERR_RUNTIME (cuBLAS status, with cublasGetStatusString's text).
 */
#ifndef AMPY_GEMM_CUDA_H
#define AMPY_GEMM_CUDA_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ampy_gemm_cuda_args {
    int64_t batch, m, n, k;
    const void *a;
    int64_t sa_b, sa_m, sa_k;
    const void *b;
    int64_t sb_b, sb_k, sb_n;
    void *c;
    int64_t sc_b, ldc;
    ampy_dtype in_dtype, out_dtype;
    double alpha, beta;
} ampy_gemm_cuda_args;

ampy_status ampy_gemm_cuda(int device, const ampy_gemm_cuda_args *g);

/* Add a directory searched for libcublas.so.* (e.g. the nvidia-cublas wheel's
 * lib folder); call before the first GEMM. Returns AMPY_ERR_VALUE when the
 * list (8 entries) is full. */
ampy_status ampy_cuda_blas_add_path(const char *dir);

/* The float32 GEMM math mode (ampy.backends.cuda.matmul.allow_tf32): with
 * allow != 0, float32 x float32 GEMMs use cuBLAS's TF32 compute type
 * (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to 10-bit mantissas on the
 * tensor cores, float32 accumulation); with 0 (the default, as torch) they
 * use CUBLAS_COMPUTE_32F. Half and float64 GEMMs are not affected. Read at
 * each GEMM call; safe from any thread. */
void ampy_cuda_set_matmul_tf32(int allow);
int ampy_cuda_get_matmul_tf32(void);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_GEMM_CUDA_H */
