/* ampy/nn.h — fused kernels of ampy.nn.functional: layer_norm, cross_entropy
 * (log_softmax + nll_loss in one pass), nll_loss, embedding, dropout's
 * mask-and-scale, mse_loss. Forward and backward of each.
 *
 * Precision (torch semantics): float16/bfloat16 data are read into
 * float32, computed in float32 and rounded once on store; float32 computes in
 * float32; float64 in float64. Sums over a row (means, variances, logsumexp,
 * loss reductions) accumulate in double, so results agree with torch's fp32
 * cascade sums to within fp32 rounding.
 *
 * Memory: every tensor argument is contiguous, row-major, on the CPU; sizes
 * are in elements; nothing is allocated for the caller (scratch is internal
 * and freed before return). `out` buffers never alias inputs. Arguments are
 * checked before anything is written, so a call that fails changes nothing.
 *
 * Threads: rows (or, for the embedding backward, columns) are split across
 * ampy_parallel_for(); results do not depend on the thread count except the
 * layer-norm weight/bias gradients, whose per-thread partial sums are added in
 * a fixed chunk order (deterministic for a given thread count).
 *
 * SIMD: the float32 row math is compiled twice, portable and with an AVX-512
 * target attribute, chosen by ampy_cpu_level_get() (AMPY_FORCE_PORTABLE=1
 * forces the portable path). Both give results within a few fp32 ulps.
 */
#ifndef AMPY_NN_H
#define AMPY_NN_H

#include <stdint.h>

#include "ampy/elem.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* exp(x) for float32 in the form a vectorizing compiler accepts (no calls,
 * no branches): x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2),
 * e^r by Cephes' expf polynomial (relative error < 2e-7 on that range), and
 * 2^(n-1) built in the exponent bits (times 2, so n = 128 still works).
 * x > 88.7228 gives +inf, x < -86 gives 0 (results below 4.4e-38 are
 * flushed: they never matter in a softmax), NaN gives NaN. Error about
 * 2 ulp versus a correctly rounded exp. */
AMPY_ELEM float ampy_nn_expf(float x)
{
    const float hi = 88.7228393554688f, lo = -86.0f;
    float xc = x > hi ? hi : (x < lo ? lo : x);
    /* n = round(xc / ln2): adding and subtracting 1.5 * 2^23 rounds to the
     * nearest integer with no call (floorf is a libm call without SSE4.1,
     * which stops vectorization); exact since |xc / ln2| < 2^22. */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f; /* ln2 high part: n * it is exact */
    r = r - n * -2.12194440e-4f;     /* ln2 low part                    */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t e = (int32_t)n + 126; /* in [1, 254] after the clamp */
    float y = p * ampy_bits_f32((uint32_t)e << 23) * 2.0f;
    y = x > hi ? __builtin_inff() : (x < lo ? 0.0f : y);
    return x != x ? x : y;
}

/* Reductions of the losses (torch's enum values). */
typedef enum ampy_nn_reduction {
    AMPY_NN_REDUCTION_NONE = 0,
    AMPY_NN_REDUCTION_MEAN = 1,
    AMPY_NN_REDUCTION_SUM = 2,
} ampy_nn_reduction;

/* ---- layer_norm ------------------------------------------------------------
 * Normalises each of M rows of N elements: y = (x - mean) * rstd * w + b,
 * rstd = 1 / sqrt(var + eps), var the biased variance (two-pass).
 *   M, N      in   rows and row length, >= 0
 *   x         in   M*N elements of x_dtype (float32, float16, bfloat16, float64)
 *   w, b      in   N elements of w_dtype each, or NULL (= ones / zeros)
 *   w_dtype   in   float32/float16/bfloat16 (any, for a half x), or float64
 *                  when x is float64; ignored when w and b are NULL
 *   eps       in   >= 0
 *   y         out  M*N elements of x_dtype
 *   mean,rstd out  M doubles each (saved for the backward), or NULL
 * Returns AMPY_OK, AMPY_ERR_DTYPE, AMPY_ERR_VALUE (negative size or eps,
 * NULL y), AMPY_ERR_NOMEM. */
ampy_status ampy_nn_layer_norm_fwd(int64_t M, int64_t N, const void *x, int x_dtype,
                                   const void *w, const void *b, int w_dtype, double eps,
                                   void *y, double *mean, double *rstd);

/* Backward of ampy_nn_layer_norm_fwd.
 *   dy        in   M*N elements of x_dtype
 *   mean,rstd in   the forward's statistics, or both NULL (recomputed from x, eps)
 *   dx        out  M*N elements of x_dtype, or NULL (not wanted)
 *   dw, db    out  N elements of w_dtype each, or NULL (not wanted); fully
 *                  written (not accumulated)
 * Other arguments as for the forward. Returns as the forward. */
ampy_status ampy_nn_layer_norm_bwd(int64_t M, int64_t N, const void *x, int x_dtype,
                                   const void *w, int w_dtype, const void *dy,
                                   const double *mean, const double *rstd, double eps,
                                   void *dx, void *dw, void *db);

/* ---- cross_entropy (class-index targets) ----------------------------------
 * For each of M rows of C logits x and target t (ignore_index rows count 0):
 *   lse = log(sum_c exp(x_c))
 *   loss = (1 - ls) * w_t * (lse - x_t) + (ls / C) * sum_c w_c * (lse - x_c)
 * (torch.nn.functional.cross_entropy with label_smoothing ls; w = ones when
 * NULL). Reduction MEAN divides by the sum of w_t over rows not ignored
 * (NaN when that is 0, as torch), SUM adds, NONE writes M losses.
 *   M, C          in   rows, classes (C >= 1 when M > 0)
 *   x             in   M*C elements of x_dtype (float32/float16/bfloat16/float64)
 *   target        in   M int64 class indices in [0, C) or == ignore_index
 *   w             in   C elements of x_dtype, or NULL
 *   ls            in   label smoothing, in [0, 1]
 *   out           out  1 element (MEAN/SUM) or M elements (NONE) of x_dtype
 *   lse           out  M doubles saved for the backward, or NULL
 * Returns AMPY_OK, AMPY_ERR_INDEX ("Target 7 is out of bounds."),
 * AMPY_ERR_DTYPE, AMPY_ERR_VALUE, AMPY_ERR_NOMEM. */
ampy_status ampy_nn_cross_entropy_fwd(int64_t M, int64_t C, const void *x, int x_dtype,
                                      const int64_t *target, const void *w, int64_t ignore_index,
                                      double ls, int reduction, void *out, double *lse);

/* Backward: dx = dL/dx for upstream gradient `dout` (1 element for MEAN/SUM,
 * M for NONE, of x_dtype). lse may be NULL (recomputed). dx: M*C of x_dtype. */
ampy_status ampy_nn_cross_entropy_bwd(int64_t M, int64_t C, const void *x, int x_dtype,
                                      const int64_t *target, const void *w, int64_t ignore_index,
                                      double ls, int reduction, const void *dout,
                                      const double *lse, void *dx);

/* ---- nll_loss ---------------------------------------------------------------
 * loss_i = -w_t * x[i, t] for log-probabilities x (M*C), reductions as for
 * cross_entropy (ls = 0). Arguments as ampy_nn_cross_entropy_fwd. */
ampy_status ampy_nn_nll_loss_fwd(int64_t M, int64_t C, const void *x, int x_dtype,
                                 const int64_t *target, const void *w, int64_t ignore_index,
                                 int reduction, void *out);
/* dx (M*C of x_dtype) is fully written: zeros except -w_t * scale at [i, t]. */
ampy_status ampy_nn_nll_loss_bwd(int64_t M, int64_t C, int x_dtype, const int64_t *target,
                                 const void *w, int64_t ignore_index, int reduction,
                                 const void *dout, void *dx);

/* ---- embedding ---------------------------------------------------------------
 * Forward: out[i, :] = weight[idx[i], :] for P indices, rows of D elements of
 * any dtype (a byte copy). Every index must lie in [0, V): AMPY_ERR_INDEX
 * ("index out of range in self") otherwise, checked before any write. */
ampy_status ampy_nn_embedding_fwd(int64_t P, const int64_t *idx, int64_t V, int64_t D,
                                  const void *weight, int w_dtype, void *out);
/* Backward: dweight (V*D of w_dtype, fully written) = sum over i of dy[i, :]
 * into row idx[i], skipping idx[i] == padding_idx (pass a negative value for
 * none). Accumulates in float32 (float64 for float64) and rounds once. */
ampy_status ampy_nn_embedding_bwd(int64_t P, const int64_t *idx, int64_t V, int64_t D,
                                  const void *dy, int w_dtype, int64_t padding_idx,
                                  void *dweight);

/* ---- dropout -----------------------------------------------------------------
 * out[i] = x[i] * (mask[i] ? s : 0) with s = 1/(1-p) rounded to dtype (torch
 * CPU's noise.div_(1 - p)), product computed in float32 (float64) and rounded
 * once. mask: n bytes (uint8/bool, non-zero keeps). Also the backward
 * (x = the upstream gradient). out may alias x. */
ampy_status ampy_nn_mask_scale(int64_t n, const void *x, int dtype, const uint8_t *mask,
                               double scale, void *out);

/* ---- mse_loss ----------------------------------------------------------------
 * d_i = (x_i - y_i)^2 rounded to dtype (as torch's element-wise loss), then
 * NONE: out = d (n elements); SUM/MEAN: one element, sum in double / n. */
ampy_status ampy_nn_mse_fwd(int64_t n, const void *x, const void *y, int dtype, int reduction,
                            void *out);
/* dx_i = norm * (x_i - y_i) * dout_i (dout one element unless NONE), norm =
 * 2/n for MEAN else 2; dy = -dx. dx, dy: n elements of dtype, or NULL. */
ampy_status ampy_nn_mse_bwd(int64_t n, const void *x, const void *y, int dtype, int reduction,
                            const void *dout, void *dx, void *dy);

/* ---- internal: helpers shared by csrc/nn.c and csrc/nn_misc.c ------------- */
/* Row [off, off+n) as float32: the array itself (float32) or converted into
 * scratch (float16/bfloat16). */
const float *nn_row_f32(const void *src, int dt, int64_t off, int64_t n, float *scratch);
/* Round a float32 row into dst[off..] (float16/bfloat16; no-op for float32). */
void nn_store_row_f32(const float *row, void *dst, int dt, int64_t off, int64_t n);
/* malloc'ed float32 (float64 when dt is float64) copy of p[0..n), or `fill`
 * when p is NULL; NULL when out of memory. */
void *nn_vec(const void *p, int dt, int64_t n, double fill);
/* Parallel chunks for M rows of row_elems work each (1..threads). */
int64_t nn_chunks(int64_t M, int64_t row_elems);
/* Checks sizes, dtype, reduction and every target (AMPY_ERR_INDEX). */
ampy_status nn_check_targets(int64_t M, int64_t C, int x_dtype, const int64_t *target,
                             int64_t ignore_index, int reduction, const char *fn);
/* Sum of w[target[i]] (1 without w) over i with target[i] != ignore_index. */
double nn_total_weight(int64_t M, const int64_t *target, const void *w, int dt,
                       int64_t ignore_index);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_NN_H */
