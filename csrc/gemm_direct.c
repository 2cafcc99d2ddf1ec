/* gemm_direct.c — an AVX-512 float32 micro-kernel that reads A in place.
 *
 * For the small GEMMs of attention (128 x 64 x 128 per (batch, head) item,
 * each A used by only one or two B panels) packing a row-major A is a 16 x 16
 * transpose of every element, up to a fifth of the item's time, for data the
 * kernel could broadcast straight from memory. This kernel does that: the
 * same 14 x 32 register tile and k order as gemm_x86.c's kernel512 (so the
 * float32 sums, and the bits, are the same as through packed A), with A[i][k]
 * broadcast from a[i*rs + k] (row-major A) or a[k*cs + i] (a transposed view
 * such as att^T: the 14 values of one k are adjacent). B stays packed
 * (nr = 32 wide panels). Used by gemm_driver.c for float32 A when all of K is
 * one block; only called after the AVX-512 implementation was selected
 * (CPUID checked).
 */
#include <string.h>

#include "gemm_impl.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

#define D_NR 32

/* w[0:R, 0:32] = A[0:R, 0:K] @ Bpanel with A[i][k] at a[i*lda + k] (NAME r,
 * row-major) or at a[k*lda + i] (NAME k, k-major: a transposed view). */
#define DEFINE_KERNEL(NAME, R, IDX)                                                           \
    static void NAME##R(int64_t K, const float *a, int64_t lda, const float *b, float *w,    \
                        int64_t ldw)                                                          \
    {                                                                                         \
        __m512 c0[R], c1[R];                                                                  \
        _Pragma("GCC unroll 14") for (int i = 0; i < R; i++) c0[i] = c1[i] =                  \
            _mm512_setzero_ps();                                                              \
        for (int64_t k = 0; k < K; k++, b += D_NR) {                                          \
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);                     \
            _Pragma("GCC unroll 14") for (int i = 0; i < R; i++)                              \
            {                                                                                 \
                __m512 ai = _mm512_set1_ps(a[IDX]);                                           \
                c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);                                       \
                c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);                                       \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 14") for (int i = 0; i < R; i++)                                  \
        {                                                                                     \
            _mm512_storeu_ps(w + i * ldw, c0[i]);                                             \
            _mm512_storeu_ps(w + i * ldw + 16, c1[i]);                                        \
        }                                                                                     \
    }

#define ROWMAJ (i * lda + k)
#define KMAJ (k * lda + i)
DEFINE_KERNEL(kr, 14, ROWMAJ)
DEFINE_KERNEL(kr, 8, ROWMAJ)
DEFINE_KERNEL(kr, 4, ROWMAJ)
DEFINE_KERNEL(kr, 2, ROWMAJ)
DEFINE_KERNEL(kr, 1, ROWMAJ)
DEFINE_KERNEL(kk, 14, KMAJ)
DEFINE_KERNEL(kk, 8, KMAJ)
DEFINE_KERNEL(kk, 4, KMAJ)
DEFINE_KERNEL(kk, 2, KMAJ)
DEFINE_KERNEL(kk, 1, KMAJ)

void ampy_gemm_direct_a_f32(int64_t K, const float *a, int64_t rs, int64_t cs, int rows,
                            const float *b, float *w, int64_t ldw)
{
    int kmaj = cs != 1;
    int64_t lda = kmaj ? cs : rs;
    if (rows == 14) {
        (kmaj ? kk14 : kr14)(K, a, lda, b, w, ldw);
        return;
    }
    /* a partial panel: 8/4/2/1-row pieces (rows of the tile past `rows` are
     * not written; the epilogue reads only the first `rows`) */
    while (rows > 0) {
        int r = rows >= 8 ? 8 : rows >= 4 ? 4 : rows >= 2 ? 2 : 1;
        switch (r) {
        case 8: (kmaj ? kk8 : kr8)(K, a, lda, b, w, ldw); break;
        case 4: (kmaj ? kk4 : kr4)(K, a, lda, b, w, ldw); break;
        case 2: (kmaj ? kk2 : kr2)(K, a, lda, b, w, ldw); break;
        default: (kmaj ? kk1 : kr1)(K, a, lda, b, w, ldw); break;
        }
        a += r * rs;
        w += r * ldw;
        rows -= r;
    }
}

/* dst[i*K + k] = float32(A[i][k]) for a row-major float16/bfloat16 A (row
 * stride rs elements): the same exact widening as packing (vcvtph2ps / a
 * 16-bit shift), but a plain row copy instead of packing's 16 x 16
 * transposes; the rows are then read in place by the kernel above. */
void ampy_gemm_direct_widen_rows(const void *src, ampy_dtype dt, int64_t rs, int64_t rows,
                                 int64_t K, float *dst)
{
    const uint16_t *a = src;
    for (int64_t i = 0; i < rows; i++, a += rs, dst += K)
        for (int64_t k = 0; k < K; k += 16) {
            __mmask16 m = K - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (K - k)) - 1u);
            __m256i h = _mm256_maskz_loadu_epi16(m, a + k);
            __m512 f = dt == AMPY_FLOAT16
                           ? _mm512_cvtph_ps(h)
                           : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            _mm512_mask_storeu_ps(dst + k, m, f);
        }
}

#pragma GCC pop_options

/* 0: pack A as usual; 1: float32 A read in place; 2: float16/bfloat16
 * row-major A widened row by row (ampy_gemm_direct_widen_rows), then read
 * by the kernel. */
int ampy_gemm_direct_a_ok(const gemm_impl *im, const gemm_operand *a, int64_t K)
{
    /* the AVX-512 float32 table (14 x 32 tile, unpadded K), float32 A with
     * a unit row or column stride, all of K in one block; a line stride that
     * is a multiple of 4 KiB would put the 14 rows (row-major A) or the K
     * lines (k-major A) in one L1 set */
    if (strcmp(im->name, "avx512") != 0 || im->mr != 14 || im->nr != D_NR || im->kunit != 1 ||
        im->pelem != 4 || K > im->kc)
        return 0;
    if (a->dt != AMPY_FLOAT32) /* k-major half A packs cheaply already */
        return (a->dt == AMPY_FLOAT16 || a->dt == AMPY_BFLOAT16) && a->cs == 1 && a->rs != 0
                   ? 2 : 0;
    int64_t ls = a->cs == 1 ? a->rs : a->rs == 1 ? a->cs : 0;
    return ls > 0 && (ls * 4) % 4096 != 0;
}

#else

void ampy_gemm_direct_a_f32(int64_t K, const float *a, int64_t rs, int64_t cs, int rows,
                            const float *b, float *w, int64_t ldw)
{
    (void)K, (void)a, (void)rs, (void)cs, (void)rows, (void)b, (void)w, (void)ldw;
}

void ampy_gemm_direct_widen_rows(const void *src, ampy_dtype dt, int64_t rs, int64_t rows,
                                 int64_t K, float *dst)
{
    (void)src, (void)dt, (void)rs, (void)rows, (void)K, (void)dst;
}

int ampy_gemm_direct_a_ok(const gemm_impl *im, const gemm_operand *a, int64_t K)
{
    (void)im, (void)a, (void)K;
    return 0;
}

#endif
