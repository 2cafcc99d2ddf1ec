/* ampy/gemm.h — batched matrix multiply with fp32 (fp64 for float64) accumulation.
 *
 *   for every b < batch:   C[b] = alpha * (A[b] @ B[b]) + beta * C[b]
 *
 * A[b] is M x K, B[b] is K x N, C[b] is M x N. Inputs are float32, float16,
 * bfloat16 or float64 (A and B the same dtype, as torch requires). For the
 * first three every product is formed and summed in float32 (never in half
 * precision); alpha and beta are applied in float32 and the result is
 * rounded ONCE to C's dtype (the input dtype, or float32 for an
 * "out_dtype=float32" result), with elem.h's round-to-nearest-even
 * conversions. float64 inputs are multiplied, summed and scaled by alpha and
 * beta in double, then rounded once to C's dtype (float64, or float32).
 *
 * Layout: every operand is given by a base pointer and three strides in
 * ELEMENTS (not bytes): element (b, i, j) of X lives at
 *   X + b * x_batch_stride + i * x_row_stride + j * x_col_stride.
 * Strides may be any value, including 0 (broadcast) and negative, so views
 * such as weight.T (row stride 1) are read in place; the packing routine is
 * picked by which stride is 1. C must not overlap A or B, and two distinct
 * (b, i, j) of C must not address the same element (not checked: overlapping
 * output is undefined, as in BLAS).
 *
 * beta: when beta == 0, C is write-only — it is never read, so NaN or inf in
 * an uninitialised C does not propagate (torch's addmm/baddbmm semantics).
 * K == 0 gives C = beta * C (zeros when beta == 0).
 *
 * Accuracy: the sum order is blocked (not left to right), so results are not
 * bit-identical to a naive loop, but each output is an fp32-accumulated sum,
 * error <= ~K * 2^-24 * sum|a*b| before the final rounding (float64:
 * ~K * 2^-53 * sum|a*b|; its AVX-512 kernel fuses each multiply-add, the
 * portable one does not). NaN and inf
 * propagate as IEEE arithmetic says. The AMX bfloat16 path and the
 * AVX512-BF16 one (vdpbf16ps) treat bfloat16 inputs below 2^-126 (subnormals)
 * as zero and flush subnormal partial sums, as the hardware does
 * (torch/oneDNN behave the same); vdpbf16ps also fuses each multiply-add and
 * takes the two k of a pair odd first (its exact sequence, and how it differs
 * from ampy_gemm_reference, is in csrc/gemm_avx512bf16.c). float16 inputs on AMX are split exactly into two bfloat16 each
 * (x = hi + lo, four exact products per a*b, fp32 sums: gemm_amx_f16.c), so
 * they are never rounded, and no subnormal float16 is flushed.
 *
 * Implementations are chosen at run time from the CPU (CPUID, via cpu.h):
 * AMX-BF16 tiles (bfloat16 inputs, and float16 split into bfloat16 pairs),
 * AVX512-BF16 vdpbf16ps (bfloat16 inputs, on CPUs without AMX such as AMD
 * Zen 4, or below AMX by ampy_cpu_level_set(AMPY_CPU_AVX512_BF16); a product
 * with K < 16 takes the FMA path there), AVX-512 FMA, AVX2 FMA, and portable
 * C (always compiled); float64 runs gemm_f64.c's loop with an AVX-512 FMA or
 * a portable micro-kernel. On the FMA paths
 * float16/bfloat16 inputs are widened to float32 while the operands are
 * packed.
 * AMPY_FORCE_PORTABLE=1 (read by cpu.h) forces the portable kernels. Large
 * problems use ampy_parallel_for (all threads of ampy_get_num_threads()).
 * Workspace (packed panels, a float32 accumulator block) is allocated
 * internally and kept per thread between calls (at most ~20 MiB per thread,
 * freed when the thread exits), so repeated calls do not page-fault.
 */
#ifndef AMPY_GEMM_H
#define AMPY_GEMM_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GEMM above.
 *   batch, M, N, K   in: sizes, each >= 0 (0 is a valid empty problem).
 *   alpha, beta      in: scalars (applied in float32, in double for float64
 *                    inputs). beta == 0: C is not read.
 *   A, a_dtype, a_*_stride   in: M x K operand (per batch item), strides in
 *                    elements. May be NULL only when batch*M*K == 0.
 *   B, b_dtype, b_*_stride   in: K x N operand, same rules.
 *   C, c_dtype, c_*_stride   in,out: M x N result. c_dtype is a_dtype or
 *                    AMPY_FLOAT32. May be NULL only when batch*M*N == 0.
 * Returns
 *   AMPY_OK
 *   AMPY_ERR_DTYPE   a_dtype != b_dtype, a dtype that is not float32/float16/
 *                    bfloat16/float64, or a c_dtype other than a_dtype / float32.
 *   AMPY_ERR_SHAPE   a negative size, or a NULL pointer for a non-empty operand.
 *   AMPY_ERR_NOMEM   workspace allocation failed or sizes overflow.
 * On error C is unchanged and ampy_last_error() names the argument. */
ampy_status ampy_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                      const void *A, ampy_dtype a_dtype, int64_t a_batch_stride,
                      int64_t a_row_stride, int64_t a_col_stride,
                      const void *B, ampy_dtype b_dtype, int64_t b_batch_stride,
                      int64_t b_row_stride, int64_t b_col_stride, double beta,
                      void *C, ampy_dtype c_dtype, int64_t c_batch_stride,
                      int64_t c_row_stride, int64_t c_col_stride);

/* ampy_gemm plus a per-column bias, added in float32 before the single
 * rounding:   C[b][i][j] = alpha * (A[b] @ B[b])[i][j] + beta * C[b][i][j] + bias[j]
 * (torch's addmm / linear with a row-broadcast input, bfloat16 and float16
 * included: one rounding of the float32 sum).
 *   bias         in: N elements, element j at bias + j * bias_stride (0 is a
 *                scalar broadcast); NULL for none (then this is ampy_gemm).
 *   bias_dtype   in: float32, float16 or bfloat16 (any of them, whatever A's),
 *                or float64 when A is float64 (added in double then).
 * Returns as ampy_gemm, plus AMPY_ERR_DTYPE for a bias dtype that is not
 * one of those (the message names "bias"). */
ampy_status ampy_gemm_bias(int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                           const void *A, ampy_dtype a_dtype, int64_t a_batch_stride,
                           int64_t a_row_stride, int64_t a_col_stride,
                           const void *B, ampy_dtype b_dtype, int64_t b_batch_stride,
                           int64_t b_row_stride, int64_t b_col_stride, double beta,
                           void *C, ampy_dtype c_dtype, int64_t c_batch_stride,
                           int64_t c_row_stride, int64_t c_col_stride, const void *bias,
                           ampy_dtype bias_dtype, int64_t bias_stride);

/* The same GEMM over a multi-dimensional batch: for every batch index
 * (b_0, ..., b_{nd-1}) < batch_shape, the M x K item of A starts at
 *   A + sum_d b_d * a_batch_strides[d]     (elements; likewise B and C),
 * so operands whose batch dims do not flatten into one stride (the heads of
 * a permuted attention projection, broadcast dims with stride 0) are read in
 * place by ONE call: the loop over batch items, and the threads' split of
 * it, stay inside the driver. Dims that flatten for all three operands are
 * merged internally; nd == 0 is a single GEMM.
 *   nd               in: number of batch dims, 0 <= nd <= AMPY_GEMM_MAX_BATCH_DIMS.
 *   batch_shape      in: nd sizes, each >= 0 (may be NULL when nd == 0).
 *   a/b/c_batch_strides  in: nd strides each, in elements (any value; C's
 *                    must not make two items overlap; NULL when nd == 0).
 *   everything else  as for ampy_gemm.
 * Returns as ampy_gemm, plus AMPY_ERR_SHAPE for nd out of range, a negative
 * batch size or NULL shape/stride arrays with nd > 0. On error C is unchanged. */
#define AMPY_GEMM_MAX_BATCH_DIMS 8
ampy_status ampy_gemm_batched(int nd, const int64_t *batch_shape, int64_t M, int64_t N,
                              int64_t K, double alpha,
                              const void *A, ampy_dtype a_dtype, const int64_t *a_batch_strides,
                              int64_t a_row_stride, int64_t a_col_stride,
                              const void *B, ampy_dtype b_dtype, const int64_t *b_batch_strides,
                              int64_t b_row_stride, int64_t b_col_stride, double beta,
                              void *C, ampy_dtype c_dtype, const int64_t *c_batch_strides,
                              int64_t c_row_stride, int64_t c_col_stride);

/* The test oracle: the same contract and validation as ampy_gemm, computed by
 * a plain triple loop (k innermost, left to right, float32 sum; conversions
 * from elem.h). float32, float16 and bfloat16 only (AMPY_ERR_DTYPE for
 * float64). Slow; for tests only. */
ampy_status ampy_gemm_reference(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                                const void *A, ampy_dtype a_dtype, int64_t a_batch_stride,
                                int64_t a_row_stride, int64_t a_col_stride,
                                const void *B, ampy_dtype b_dtype, int64_t b_batch_stride,
                                int64_t b_row_stride, int64_t b_col_stride, float beta,
                                void *C, ampy_dtype c_dtype, int64_t c_batch_stride,
                                int64_t c_row_stride, int64_t c_col_stride);

/* Implementation selection (process-wide; for tests and benchmarks).
 * Names, best first: "amx" (bfloat16, and float16 — reported as "amx-f16"
 * by ampy_gemm_impl_name; float32 uses "avx512"), "avx512bf16" (bfloat16;
 * float16 and float32 use "avx512"), "avx512", "avx2", "portable", and
 * "auto" (the default: follows
 * ampy_cpu_level_get() of cpu.h, so AMPY_FORCE_PORTABLE=1 or
 * ampy_cpu_level_set(AMPY_CPU_PORTABLE) selects "portable"). A name other
 * than "auto" pins that implementation even under AMPY_FORCE_PORTABLE.
 *   name  in: one of the names above.
 * Returns AMPY_OK, or AMPY_ERR_VALUE for an unknown name or one this CPU
 * (or OS) cannot run; the selection is then unchanged. Not thread-safe with
 * a concurrent ampy_gemm call. */
ampy_status ampy_gemm_set_impl(const char *name);

/* Name of the implementation that ampy_gemm uses for `dtype` now (after
 * "auto" resolution), e.g. "amx" for bfloat16, "amx-f16" for float16 and
 * "avx512" for float32 on an AMX CPU. */
const char *ampy_gemm_impl_name(ampy_dtype dtype);

/* The same for a product with K terms: under "auto" a bfloat16 product with
 * small K takes "avx512" (FMAs) instead of "avx512bf16". Code that must give
 * the GEMM's bits with its own kernel (csrc/rnn_kernel_x86.c) asks this. */
const char *ampy_gemm_impl_name_k(ampy_dtype dtype, int64_t K);

/* Whether this CPU and OS can run implementation `name` (1) or not (0). */
int ampy_gemm_impl_available(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_GEMM_H */
