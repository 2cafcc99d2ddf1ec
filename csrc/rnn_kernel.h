/* rnn_kernel.h — the per-step products of the recurrent layer (csrc/rnn_layer.c)
 * with the weight packed once per call (csrc/rnn_kernel_x86.c).
 *
 *     out (rows, 16 * (q1 - q0)) = A (rows, K) @ P[:, panels q0 .. q1)
 *
 * P is a K x N right-hand operand stored as panels of 16 columns: panel q
 * holds columns 16q .. 16q+15 for every k, zero-padded past the last
 * column. The f32 kind stores each k's 16 values as one 64-byte row (the
 * float32 and float16 layers; float16 is widened exactly while packing);
 * the bf16 kind stores each k PAIR as one 64-byte row of 16 (even, odd)
 * bfloat16 pairs, K padded to even with zeros (vdpbf16ps's operand).
 * Every output is a float32 sum in k order (bf16: pair order, the
 * hardware's fused, DAZ/FTZ multiply-adds) over K blocks of the GEMM's
 * sizes, each block's from +0 and added to the earlier ones: the sums of the
 * GEMM's AVX-512 FMA and AVX512-BF16 kernels bit for bit.
 */
#ifndef AMPY_RNN_KERNEL_H
#define AMPY_RNN_KERNEL_H

#include <stdint.h>

enum { RNN_PK_F32 = 0, RNN_PK_BF16 = 1 };

typedef struct rnn_pack {
    int kind;
    int64_t K, kp; /* kp: K rounded up to the kind's k unit (1 or 2)   */
    void *p;       /* panel q starts at element q * kp * 16            */
} rnn_pack;

/* The pack kind for a K-term product of dtype dt: the one whose sums are
 * those of the GEMM implementation that ampy_gemm would use for it now, or
 * -1 (then the layer keeps the per-step GEMM). */
int ampy_rnn_pack_kind(int dt, int64_t K);

/* Bytes of a pack of `panels` panels over K. */
int64_t ampy_rnn_pack_bytes(int kind, int64_t K, int64_t panels);

/* Packs panels [q0, q1) from src of dtype dt: column n (0 <= n < 16 * panels
 * of a group of `gcols` columns, groups side by side in panel order, each
 * group's width rounded up to 16) is element (k, c) of group g at
 *     src[g * goff + c * cs + k * ks]      (elements, c < gcols)
 * and zero for c >= gcols. panels_per_group = ceil(gcols / 16). */
void ampy_rnn_pack(const rnn_pack *P, int dt, const void *src, int64_t gcols, int64_t goff,
                   int64_t cs, int64_t ks, int64_t q0, int64_t q1);

/* out[r * ldo + 16 * (q - q0) + c] = sum_k A[r * lda + k] * P(k, 16q + c) for
 * r < rows, q0 <= q < q1. A is float32 for the f32 kind (rows of K), bfloat16
 * for the bf16 kind. */
void ampy_rnn_kernel(const rnn_pack *P, int64_t q0, int64_t q1, int64_t rows, const void *A,
                     int64_t lda, float *out, int64_t ldo);

#endif /* AMPY_RNN_KERNEL_H */
