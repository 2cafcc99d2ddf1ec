/* rnn_kernel_x86.c — the packed-weight products of rnn_kernel.h on AVX-512
 * (float32 FMAs; vdpbf16ps for bfloat16).
 *
 * The recurrent layer multiplies the same weight by a new B-row left operand
 * every step; packing the weight once per call (instead of once per step
 * inside the GEMM) removes a full pass over it per step. A step's product
 * has few rows (the batch), so the loop runs over pairs of panels (32
 * columns, one 64-byte line per k each) and, inside, over tiles of up to 12
 * rows: 24 zmm accumulators, 2 panel loads and 12 broadcasts per k (per k
 * pair for bfloat16). A panel pair is read from memory once per step; the
 * float32 loop takes it one K block (32 KB) at a time across the row tiles,
 * so the other row tiles read it from L1. (Measured on a loaded 2-core
 * Sapphire Rapids, LSTM H=512 B=32 layer forward, 1 thread: 8-row tiles
 * over the whole K 18.4 ms, block-major 17.8, 12-row tiles 16.3; 14-row
 * tiles, even or balanced heights, no better.)
 *
 * Only called when ampy_rnn_pack_kind said the GEMM itself would use that
 * ISA; the instructions are enabled per function with `#pragma GCC target`.
 */
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/gemm.h"
#include "rnn_kernel.h"

int ampy_rnn_pack_kind(int dt, int64_t K)
{
#if defined(__x86_64__) || defined(_M_X64)
    /* The GEMM's own choice for this product, so the bits stay the GEMM's:
     * its AVX-512 FMA kernel (float32; float16 widened) or vdpbf16ps
     * (bfloat16). AMX (bfloat16, float16 on an AMX level) sums otherwise:
     * those layers keep the per-step GEMM. */
    const char *impl = ampy_gemm_impl_name_k((ampy_dtype)dt, K);
    if ((dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16) && strcmp(impl, "avx512") == 0)
        return RNN_PK_F32;
    if (dt == AMPY_BFLOAT16 && strcmp(impl, "avx512bf16") == 0)
        return RNN_PK_BF16;
#else
    (void)dt, (void)K;
#endif
    return -1;
}

static int64_t k_padded(int kind, int64_t K) { return kind == RNN_PK_BF16 ? (K + 1) / 2 * 2 : K; }

int64_t ampy_rnn_pack_bytes(int kind, int64_t K, int64_t panels)
{
    return k_padded(kind, K) * 16 * panels * (kind == RNN_PK_BF16 ? 2 : 4);
}

/* Column c of a float32-kind panel: d[k * 16] for every k, zero when dead. */
static void pack_col_f32(float *d, int dt, const void *src, int64_t base, int64_t ks, int64_t K,
                         int live)
{
    if (!live) {
        for (int64_t k = 0; k < K; k++)
            d[k * 16] = 0.0f;
    } else if (dt == AMPY_FLOAT32) {
        const float *s = (const float *)src + base;
        for (int64_t k = 0; k < K; k++)
            d[k * 16] = s[k * ks];
    } else {
        const uint16_t *s = (const uint16_t *)src + base;
        for (int64_t k = 0; k < K; k++)
            d[k * 16] = ampy_f16_to_f32(s[k * ks]);
    }
}

/* Column c of a bfloat16-kind panel: pair row k / 2, lane k & 1. */
static void pack_col_bf16(uint16_t *d, const void *src, int64_t base, int64_t ks, int64_t K,
                          int64_t kp, int live)
{
    const uint16_t *s = (const uint16_t *)src + base;
    for (int64_t k = 0; k < kp; k++)
        d[k / 2 * 32 + (k & 1)] = live && k < K ? s[k * ks] : 0;
}

void ampy_rnn_pack(const rnn_pack *P, int dt, const void *src, int64_t gcols, int64_t goff,
                   int64_t cs, int64_t ks, int64_t q0, int64_t q1)
{
    const int64_t ppg = (gcols + 15) / 16, K = P->K, kp = P->kp;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t g = q / ppg, c0 = q % ppg * 16;
        for (int64_t c = 0; c < 16; c++) {
            const int64_t base = g * goff + (c0 + c) * cs;
            const int live = c0 + c < gcols;
            if (P->kind == RNN_PK_F32)
                pack_col_f32((float *)P->p + q * kp * 16 + c, dt, src, base, ks, K, live);
            else
                pack_col_bf16((uint16_t *)P->p + q * kp * 16 + 2 * c, src, base, ks, K, kp,
                              live);
        }
    }
}

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

/* K blocks: the GEMM's (gemm_x86.c's X_KC, gemm_avx512bf16.c's B_KC), so a
 * product's sums are the GEMM's bit for bit. */
#define F32_KC 256
#define BF16_KC 2048

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")

/* Stores the accumulators of one K block: the first block's sums, later
 * blocks' added to them (acc + stored, the GEMM's accumulate order). */
#define STORE_BLOCK(first)                                                                   \
    for (int r = 0; r < R; r++)                                                              \
        for (int j = 0; j < NP; j++) {                                                       \
            float *o = out + r * ldo + 16 * j;                                               \
            _mm512_storeu_ps(o, first ? acc[r][j] : _mm512_add_ps(acc[r][j], _mm512_loadu_ps(o))); \
        }

/* R rows (<= 12) x NP panels (1 or 2), float32, terms [k0, k1) of one K
 * block: stored when the block is the first, else added to what is stored. */
static inline __attribute__((always_inline)) void tile_f32(const int R, const int NP,
                                                         const float *A, int64_t lda,
                                                         const float *p, int64_t K,
                                                         int64_t k0, int64_t k1, float *out,
                                                         int64_t ldo)
{
    const float *p1 = p + K * 16;
    __m512 acc[12][2];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NP; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (int64_t k = k0; k < k1; k++) {
        const __m512 b0 = _mm512_loadu_ps(p + k * 16);
        const __m512 b1 = NP == 2 ? _mm512_loadu_ps(p1 + k * 16) : b0;
        for (int r = 0; r < R; r++) {
            const __m512 a = _mm512_set1_ps(A[r * lda + k]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            if (NP == 2)
                acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    STORE_BLOCK(k0 == 0)
}

/* R rows (<= 12) x NP panels (1 or 2), bfloat16 pairs; the odd tail k of
 * an odd K is a pair with a zero partner. */
static inline __attribute__((always_inline)) void tile_bf16(const int R, const int NP,
                                                          const uint16_t *A, int64_t lda,
                                                          const uint16_t *p, int64_t K,
                                                          int64_t kp, float *out, int64_t ldo)
{
    const uint16_t *p1 = p + kp * 16;
    for (int64_t k0 = 0; k0 < kp; k0 += BF16_KC) {
        const int64_t k1 = kp - k0 < BF16_KC ? kp : k0 + BF16_KC;
        __m512 acc[12][2];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NP; j++)
                acc[r][j] = _mm512_setzero_ps();
        for (int64_t k = k0; k < k1; k += 2) {
            const __m512bh b0 = (__m512bh)_mm512_loadu_si512(p + k * 16);
            const __m512bh b1 = NP == 2 ? (__m512bh)_mm512_loadu_si512(p1 + k * 16) : b0;
            for (int r = 0; r < R; r++) {
                uint32_t w;
                if (k + 1 < K)
                    memcpy(&w, A + r * lda + k, 4);
                else
                    w = A[r * lda + k];
                const __m512bh a = (__m512bh)_mm512_set1_epi32((int)w);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
                if (NP == 2)
                    acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
            }
        }
        STORE_BLOCK(k0 == 0)
    }
}
#undef STORE_BLOCK

#define ROW_CASES12(CALL)                                                                    \
    switch (R) {                                                                             \
    case 12: CALL(12); break;                                                                \
    case 11: CALL(11); break;                                                                \
    case 10: CALL(10); break;                                                                \
    case 9: CALL(9); break;                                                                  \
    default: ROW_CASES(CALL)                                                                 \
    }

#define ROW_CASES(CALL)                                                                      \
    switch (R) {                                                                             \
    case 8: CALL(8); break;                                                                  \
    case 7: CALL(7); break;                                                                  \
    case 6: CALL(6); break;                                                                  \
    case 5: CALL(5); break;                                                                  \
    case 4: CALL(4); break;                                                                  \
    case 3: CALL(3); break;                                                                  \
    case 2: CALL(2); break;                                                                  \
    default: CALL(1); break;                                                                 \
    }

/* Per panel pair, per K block, every row tile: the pair's block (32 KB)
 * stays in L1 while the row tiles read it. Each output's sums are still
 * the K blocks' in order. */
static void run_f32(const rnn_pack *P, int64_t q0, int64_t q1, int64_t rows, const float *A,
                    int64_t lda, float *out, int64_t ldo)
{
    const int64_t K = P->K;
    for (int64_t q = q0; q < q1; q += 2) {
        const int np = q + 1 < q1 ? 2 : 1;
        const float *p = (const float *)P->p + q * K * 16;
        float *o = out + 16 * (q - q0);
        for (int64_t k0 = 0; k0 < K; k0 += F32_KC) {
            const int64_t k1 = K - k0 < F32_KC ? K : k0 + F32_KC;
            for (int64_t r0 = 0; r0 < rows; r0 += 12) {
                const int R = rows - r0 < 12 ? (int)(rows - r0) : 12;
                const float *a = A + r0 * lda;
                float *orow = o + r0 * ldo;
#define F32_CALL(n)                                                                          \
    (np == 2 ? tile_f32(n, 2, a, lda, p, K, k0, k1, orow, ldo)                               \
             : tile_f32(n, 1, a, lda, p, K, k0, k1, orow, ldo))
                ROW_CASES12(F32_CALL)
#undef F32_CALL
            }
        }
    }
}

static void run_bf16(const rnn_pack *P, int64_t q0, int64_t q1, int64_t rows,
                     const uint16_t *A, int64_t lda, float *out, int64_t ldo)
{
    const int64_t K = P->K, kp = P->kp;
    for (int64_t q = q0; q < q1; q += 2) {
        const int np = q + 1 < q1 ? 2 : 1;
        const uint16_t *p = (const uint16_t *)P->p + q * kp * 16;
        float *o = out + 16 * (q - q0);
        for (int64_t r0 = 0; r0 < rows; r0 += 12) {
            const int R = rows - r0 < 12 ? (int)(rows - r0) : 12;
            const uint16_t *a = A + r0 * lda;
            float *orow = o + r0 * ldo;
#define BF16_CALL(n)                                                                         \
    (np == 2 ? tile_bf16(n, 2, a, lda, p, K, kp, orow, ldo)                                  \
             : tile_bf16(n, 1, a, lda, p, K, kp, orow, ldo))
            ROW_CASES12(BF16_CALL)
#undef BF16_CALL
        }
    }
}
#pragma GCC pop_options

void ampy_rnn_kernel(const rnn_pack *P, int64_t q0, int64_t q1, int64_t rows, const void *A,
                     int64_t lda, float *out, int64_t ldo)
{
    if (P->kind == RNN_PK_F32)
        run_f32(P, q0, q1, rows, (const float *)A, lda, out, ldo);
    else
        run_bf16(P, q0, q1, rows, (const uint16_t *)A, lda, out, ldo);
}
#else
void ampy_rnn_kernel(const rnn_pack *P, int64_t q0, int64_t q1, int64_t rows, const void *A,
                     int64_t lda, float *out, int64_t ldo)
{
    (void)P, (void)q0, (void)q1, (void)rows, (void)A, (void)lda, (void)out, (void)ldo;
}
#endif
