/* fused_colsum.c — column sums of a contiguous (M, N) matrix (bias gradients).
 *
 * out[j] = sum_i x[i, j], added row by row in double and rounded once to the
 * dtype: the order and the rounding of ampy_reduce's sum over dim 0 (its
 * row-streaming path), so the results are the same bits. The AVX-512 path
 * widens each element in registers (bfloat16 by a shift, float16 by
 * vcvtph2ps, then vcvtps2pd, all exact) and adds blocks of rows into sums
 * kept in registers: one pass over x, no buffers. */
#include <stdint.h>

#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/fused.h"
#include "ampy/parallel.h"
#include "simd.h"

typedef struct {
    int64_t M, N;
    const void *x;
    void *out;
    int dt;
    int simd;
} colsum_ctx;

static double colsum_ld(const void *x, int dt, int64_t i)
{
    if (dt == AMPY_FLOAT32)
        return (double)((const float *)x)[i];
    const uint16_t h = ((const uint16_t *)x)[i];
    return (double)(dt == AMPY_BFLOAT16 ? ampy_bf16_to_f32(h) : ampy_f16_to_f32(h));
}

static void colsum_store(const colsum_ctx *c, int64_t j, const double *acc, int64_t m)
{
    if (c->dt == AMPY_FLOAT32) {
        float *o = (float *)c->out + j;
        for (int64_t k = 0; k < m; k++)
            o[k] = (float)acc[k];
        return;
    }
    uint16_t *o = (uint16_t *)c->out + j;
    for (int64_t k = 0; k < m; k++)
        o[k] = c->dt == AMPY_FLOAT16 ? ampy_f64_to_f16(acc[k]) : ampy_f64_to_bf16(acc[k]);
}

#define CS_CHUNK 1024 /* columns per chunk (its sums stay in L1) */
#define CS_RB 8       /* rows per block */

static void colsum_chunk_c(const colsum_ctx *c, int64_t j0, int64_t m, double *acc)
{
    for (int64_t k = 0; k < m; k++)
        acc[k] = 0.0;
    for (int64_t i = 0; i < c->M; i++)
        for (int64_t k = 0; k < m; k++)
            acc[k] += colsum_ld(c->x, c->dt, i * c->N + j0 + k);
}

#ifdef AMPY_X86_SIMD
#include <immintrin.h>

/* 16 elements from p (masked by k) widened to float */
AMPY_TARGET_AVX512 static inline __m512 cs_ld16(const void *p, int dt, __mmask16 k)
{
    if (dt == AMPY_FLOAT32)
        return _mm512_maskz_loadu_ps(k, p);
    const __m256i h = _mm256_maskz_loadu_epi16(k, p);
    if (dt == AMPY_BFLOAT16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

/* v's 16 floats widened exactly and added to s[0] (low 8) and s[1] (high 8) */
AMPY_TARGET_AVX512 static inline void cs_add(__m512d *s, __m512 v)
{
    s[0] = _mm512_add_pd(s[0], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s[1] = _mm512_add_pd(
        s[1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

/* the sums of 16 nc columns from j0 (nc = 1 or 2, the last 16 masked by k)
 * over rows [i0, i1) added to acc[0 .. 16 nc): the sums stay in registers
 * down the rows, 2 nc independent chains of additions */
AMPY_TARGET_AVX512 static inline __attribute__((always_inline)) void
cs_cols(const colsum_ctx *c, int64_t i0, int64_t i1, int64_t j0, int nc, __mmask16 k,
        double *acc)
{
    const int64_t es = c->dt == AMPY_FLOAT32 ? 4 : 2;
    const int64_t rs = c->N * es;
    const char *p = (const char *)c->x + i0 * rs + j0 * es;
    __m512d s[4];
    for (int q = 0; q < 2 * nc; q++)
        s[q] = _mm512_loadu_pd(acc + 8 * q);
    for (int64_t i = i0; i < i1; i++, p += rs) {
        if (nc == 2) {
            cs_add(s, cs_ld16(p, c->dt, 0xFFFF));
            cs_add(s + 2, cs_ld16(p + 16 * es, c->dt, k));
        } else {
            cs_add(s, cs_ld16(p, c->dt, k));
        }
    }
    for (int q = 0; q < 2 * nc; q++)
        _mm512_storeu_pd(acc + 8 * q, s[q]);
}

/* the column sums of columns [j0, j0 + m), m <= CS_CHUNK, into acc, by
 * blocks of CS_RB rows walked 16 columns at a time: memory is read as CS_RB
 * sequential streams, which the prefetchers follow (a strip of columns
 * down the whole matrix reads a few lines per row at the row's stride: a
 * third of the speed at 1024 bfloat16 columns) */
AMPY_TARGET_AVX512 static void colsum_chunk_avx512(const colsum_ctx *c, int64_t j0, int64_t m,
                                                   double *acc)
{
    for (int64_t k = 0; k < m; k++)
        acc[k] = 0.0;
    for (int64_t i0 = 0; i0 < c->M; i0 += CS_RB) {
        const int64_t i1 = c->M - i0 < CS_RB ? c->M : i0 + CS_RB;
        int64_t k = 0;
        for (; k + 32 <= m; k += 32)
            cs_cols(c, i0, i1, j0 + k, 2, 0xFFFF, acc + k);
        for (; k + 16 <= m; k += 16)
            cs_cols(c, i0, i1, j0 + k, 1, 0xFFFF, acc + k);
        if (k < m)
            cs_cols(c, i0, i1, j0 + k, 1, (__mmask16)((1u << (m - k)) - 1u), acc + k);
    }
}
#endif

static void colsum_range(int64_t b, int64_t e, void *ctx)
{
    const colsum_ctx *c = (const colsum_ctx *)ctx;
    double acc[CS_CHUNK];
    for (int64_t j0 = b; j0 < e; j0 += CS_CHUNK) {
        const int64_t m = e - j0 < CS_CHUNK ? e - j0 : CS_CHUNK;
#ifdef AMPY_X86_SIMD
        if (c->simd)
            colsum_chunk_avx512(c, j0, m, acc);
        else
#endif
            colsum_chunk_c(c, j0, m, acc);
        colsum_store(c, j0, acc, m);
    }
}

ampy_status ampy_fused_colsum(int64_t M, int64_t N, const void *x, int dtype, void *out)
{
    if (M < 0 || N < 0)
        return ampy_error(AMPY_ERR_VALUE, "colsum: negative size");
    if (dtype != AMPY_FLOAT32 && dtype != AMPY_FLOAT16 && dtype != AMPY_BFLOAT16)
        return ampy_error(AMPY_ERR_DTYPE, "colsum: float32, float16 or bfloat16 only");
    colsum_ctx c = {M, N, x, out, dtype, ampy_cpu_level_get() >= AMPY_CPU_AVX512};
    /* about 64 Ki elements of work or more per task */
    int64_t grain = M > 0 ? ((int64_t)1 << 16) / M : N;
    grain = grain < 64 ? 64 : (grain + 15) / 16 * 16;
    ampy_parallel_for(N, grain, colsum_range, &c);
    return AMPY_OK;
}
