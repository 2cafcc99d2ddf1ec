/* ampy/attention.h — fused scaled dot-product attention (flash attention).
 *
 *   out = softmax(scale * Q K^T + mask) V        per batch item
 *
 * Q is Lq x E, K is Lk x E, V is Lk x Ev. The kernel never forms the Lq x Lk
 * score matrix: each task walks the keys in blocks of AMPY_ATTN_BLOCK_K and
 * keeps a running row maximum and row sum (the online softmax of Milakov and
 * Gimelshein, "Online normalizer calculation for softmax", 2018, as used by
 * Dao et al., "FlashAttention", 2022), so the working memory of one thread is
 * one AMPY_ATTN_BLOCK_Q x AMPY_ATTN_BLOCK_K score block plus a block of
 * output rows. The products Q K^T and P V run on ampy_gemm (gemm.h), so
 * float16/bfloat16 take the AVX512-BF16/AMX paths with float32 accumulation;
 * the probabilities P are rounded to the input dtype before P V, as torch's
 * CPU flash kernel does. float64 inputs accumulate in double.
 *
 * The backward recomputes each score block from Q, K and the saved row
 * log-sum-exp (the flash backward): dV = P^T dO, dP = dO V^T,
 * dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK = scale dS^T Q.
 *
 * Masking (torch's semantics): `causal` keeps key j for query i when j <= i
 * (top-left aligned, also when Lq != Lk); a bool mask keeps the True
 * entries; a float mask is added to the scores. A row with no key kept
 * gives an output row of zeros and zero gradients (torch on the CPU).
 * Dropout drops each probability with chance p and scales the kept ones by
 * 1/(1-p); the keep decision of element (b, i, j) is Philox (random.h) of
 * (seed, offset + (b*Lq + i)*Lk + j), so the backward redraws the same mask.
 */
#ifndef AMPY_ATTENTION_H
#define AMPY_ATTENTION_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPY_ATTN_MAX_BATCH 8
#define AMPY_ATTN_BLOCK_Q 64
#define AMPY_ATTN_BLOCK_K 128

/* A strided operand: element (b_0..b_{nd-1}, r, c) lives at
 * data + (sum_d b_d * bs[d] + r * rs + c * cs) elements. */
typedef struct ampy_attn_operand {
    const void *data;
    int64_t bs[AMPY_ATTN_MAX_BATCH];
    int64_t rs, cs;
} ampy_attn_operand;

typedef struct ampy_attn_problem {
    int nd;                              /* batch dims, 0..AMPY_ATTN_MAX_BATCH    */
    int64_t batch[AMPY_ATTN_MAX_BATCH];  /* batch shape (>= 0 each)                */
    int64_t Lq, Lk, E, Ev;               /* sizes (>= 0)                           */
    ampy_dtype dtype;                    /* q, k, v: float32/float16/bfloat16/float64 */
    ampy_attn_operand q, k, v;           /* Lq x E, Lk x E, Lk x Ev per item       */
    ampy_attn_operand mask;              /* Lq x Lk per item; data NULL: no mask   */
    ampy_dtype mask_dtype;               /* AMPY_BOOL, float32, or dtype           */
    int causal;                          /* 1: key j kept for query i iff j <= i   */
    double scale;                        /* multiplies Q K^T                       */
    double dropout_p;                    /* 0 <= p <= 1                            */
    uint64_t seed, offset;               /* dropout's Philox stream                */
} ampy_attn_problem;

/* Forward.
 *   p     in: the problem (checked: sizes, dtypes, nd, dropout_p).
 *   out   out: (batch..., Lq, Ev) contiguous, p->dtype.
 *   lse   out: (batch..., Lq) contiguous row log-sum-exp of the masked,
 *         scaled scores (+inf for a row with no key kept), float32 (float64
 *         for float64 inputs); NULL when no backward follows.
 * Returns AMPY_OK, AMPY_ERR_DTYPE, AMPY_ERR_SHAPE, AMPY_ERR_VALUE or
 * AMPY_ERR_NOMEM (workspace); the message names the argument. */
ampy_status ampy_attention_fwd(const ampy_attn_problem *p, void *out, void *lse);

/* Backward of the same problem (same seed and offset).
 *   out, dout  in: (batch..., Lq, Ev) contiguous, p->dtype (the forward's
 *              output and its gradient).
 *   lse        in: the forward's lse.
 *   dq         out: (batch..., Lq, E) contiguous, p->dtype.
 *   dk, dv     out: (batch..., Lk, E) / (batch..., Lk, Ev) contiguous, per
 *              batch item of the problem (a caller that broadcast K or V over
 *              a batch dim sums over it).
 * Returns as ampy_attention_fwd. */
ampy_status ampy_attention_bwd(const ampy_attn_problem *p, const void *out, const void *dout,
                               const void *lse, void *dq, void *dk, void *dv);

/* The backward with the attention mask's gradient as well (a float mask
 * that requires grad): the same outputs as ampy_attention_bwd, plus
 *   dmask      out: (batch..., Lq, Lk) contiguous, float32 (float64 for
 *              float64 inputs): the gradient of the masked scores,
 *              P (dP - rowsum(dO O)) before the scale (zero where a key is
 *              not kept). Per batch item of the problem; a caller that
 *              broadcast the mask sums over those dims. NULL: as
 *              ampy_attention_bwd (nothing beyond its workspace is used).
 * Returns as ampy_attention_fwd. */
ampy_status ampy_attention_bwd_mask(const ampy_attn_problem *p, const void *out,
                                    const void *dout, const void *lse, void *dq, void *dk,
                                    void *dv, void *dmask);

/* The checks both entry points (and the CUDA twin) run. */
ampy_status ampy_attention_check(const ampy_attn_problem *p);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_ATTENTION_H */
