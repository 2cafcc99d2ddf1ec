/* gemm_f64.c — the float64 GEMM: double inputs, double products and sums,
 * alpha and beta in double, one rounding to C's dtype (float64, or float32
 * for an out_dtype=float32 result).
 *
 * float64 is not an AMP dtype, so it has its own small blocked loop instead
 * of a table in the float32 driver (whose accumulator block W is float32):
 * the problem is cut into tasks of F_MC rows x F_NC columns of one batch
 * item; a task walks K in blocks of F_KC, packs the A block into F_MR-row
 * micro-panels and the B block into F_NR-column micro-panels ([k][mr] and
 * [k][nr], zero padded), and an F_MR x F_NR micro-kernel adds each panel
 * pair into a double block W, which the epilogue writes out as
 * alpha * W + beta * C + bias (C not read when beta == 0). The sum over k
 * runs left to right inside a K block, one block after the other.
 * Workspace: one A panel, one B panel and one W block per thread (~1.4 MiB),
 * allocated before any output is written, so on error C is unchanged.
 * Two micro-kernels: portable C (always compiled) and AVX-512 FMA.
 */
#include <stdlib.h>
#include <string.h>

#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "gemm_impl.h"
#include "simd.h"

#define F_MR 8
#define F_NR 16
#define F_KC 256
#define F_MC 64
#define F_NC 512
#define SERIAL_FLOPS ((int64_t)1 << 21) /* below: one thread */
#define MAX_DIM ((int64_t)1 << 40)

typedef void (*f64_kernel_fn)(int64_t kc, const double *a, const double *b, double *w,
                              int64_t ldw, int accumulate);

typedef struct f64_ctx {
    int nd;
    const int64_t *shape, *a_bs, *b_bs, *c_bs;
    int64_t M, N, K, n_rb, n_cb, ntasks, nchunks;
    gemm_operand a, b;
    double alpha, beta;
    const double *bias;
    char *c;
    ampy_dtype cdt;
    int64_t crs, ccs;
    f64_kernel_fn kernel;
    double *ws; /* nchunks workspaces of WS_DOUBLES */
} f64_ctx;

#define WS_DOUBLES ((int64_t)F_MC * F_KC + (int64_t)F_KC * F_NC + (int64_t)F_MC * F_NC)

static inline double ld(const gemm_operand *x, int64_t idx)
{
    double v;
    memcpy(&v, x->p + idx * 8, 8);
    return v;
}

/* rows [i0, i0+rows) x k in [k0, k0+kc) of A into F_MR-row panels [k][F_MR]. */
static void pack_a(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                   double *dst)
{
    for (int64_t p0 = 0; p0 < rows; p0 += F_MR, dst += F_MR * kc) {
        int64_t h = rows - p0 < F_MR ? rows - p0 : F_MR;
        if (h < F_MR)
            memset(dst, 0, sizeof(double) * (size_t)(F_MR * kc));
        for (int64_t i = 0; i < h; i++) {
            int64_t base = (i0 + p0 + i) * a->rs + k0 * a->cs;
            for (int64_t k = 0; k < kc; k++)
                dst[k * F_MR + i] = ld(a, base + k * a->cs);
        }
    }
}

/* k in [k0, k0+kc) x columns [j0, j0+cols) of B into F_NR-column panels [k][F_NR]. */
static void pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t j0, int64_t cols,
                   double *dst)
{
    for (int64_t q0 = 0; q0 < cols; q0 += F_NR, dst += F_NR * kc) {
        int64_t w = cols - q0 < F_NR ? cols - q0 : F_NR;
        if (w < F_NR)
            memset(dst, 0, sizeof(double) * (size_t)(F_NR * kc));
        for (int64_t k = 0; k < kc; k++) {
            int64_t base = (k0 + k) * b->rs + (j0 + q0) * b->cs;
            for (int64_t j = 0; j < w; j++)
                dst[k * F_NR + j] = ld(b, base + j * b->cs);
        }
    }
}

/* One 4 x 8 quarter of the portable micro-tile (a few SSE2 registers' worth
 * of accumulators); rows r0.., columns q0.. of the F_MR x F_NR tile. */
static void quarter_portable(int64_t kc, const double *a, const double *b, int r0, int q0,
                             double *w, int64_t ldw, int accumulate)
{
    double t[4][8] = {{0}};
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < 4; i++) {
            double ai = a[k * F_MR + r0 + i];
            for (int j = 0; j < 8; j++)
                t[i][j] += ai * b[k * F_NR + q0 + j];
        }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) {
            double *o = w + (r0 + i) * ldw + q0 + j;
            *o = accumulate ? *o + t[i][j] : t[i][j];
        }
}

static void kernel_portable(int64_t kc, const double *a, const double *b, double *w,
                            int64_t ldw, int accumulate)
{
    for (int r0 = 0; r0 < F_MR; r0 += 4)
        for (int q0 = 0; q0 < F_NR; q0 += 8)
            quarter_portable(kc, a, b, r0, q0, w, ldw, accumulate);
}

#ifdef AMPY_X86_SIMD
#include <immintrin.h>

/* F_MR x F_NR = 8 rows x two 8-double vectors: 16 accumulators, fused
 * multiply-adds (one rounding per product-sum, unlike the portable kernel). */
AMPY_TARGET_AVX512 static void kernel_avx512(int64_t kc, const double *a, const double *b,
                                             double *w, int64_t ldw, int accumulate)
{
    __m512d c0[F_MR], c1[F_MR];
    for (int i = 0; i < F_MR; i++)
        c0[i] = c1[i] = _mm512_setzero_pd();
    for (int64_t k = 0; k < kc; k++) {
        __m512d b0 = _mm512_loadu_pd(b + k * F_NR), b1 = _mm512_loadu_pd(b + k * F_NR + 8);
        for (int i = 0; i < F_MR; i++) {
            __m512d ai = _mm512_set1_pd(a[k * F_MR + i]);
            c0[i] = _mm512_fmadd_pd(ai, b0, c0[i]);
            c1[i] = _mm512_fmadd_pd(ai, b1, c1[i]);
        }
    }
    for (int i = 0; i < F_MR; i++) {
        double *o = w + i * ldw;
        if (accumulate) {
            c0[i] = _mm512_add_pd(_mm512_loadu_pd(o), c0[i]);
            c1[i] = _mm512_add_pd(_mm512_loadu_pd(o + 8), c1[i]);
        }
        _mm512_storeu_pd(o, c0[i]);
        _mm512_storeu_pd(o + 8, c1[i]);
    }
}
#endif

/* C block (rows x cols, c at its first element) = alpha * W + beta * C + bias. */
static void epilogue(const f64_ctx *x, const double *w, int64_t rows, int64_t cols, char *c,
                     const double *bias)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t idx = i * x->crs + j * x->ccs;
            double r = x->alpha * w[i * F_NC + j];
            if (x->cdt == AMPY_FLOAT64) {
                double *o = (double *)(void *)c + idx, prev;
                if (x->beta != 0.0) {
                    memcpy(&prev, o, 8);
                    r += x->beta * prev;
                }
                if (bias)
                    r += bias[j];
                memcpy(o, &r, 8);
            } else {
                float *o = (float *)(void *)c + idx, prev;
                if (x->beta != 0.0) {
                    memcpy(&prev, o, 4);
                    r += x->beta * (double)prev;
                }
                if (bias)
                    r += bias[j];
                float f = (float)r;
                memcpy(o, &f, 4);
            }
        }
}

/* Element offsets of batch item `item` in A, B and C. */
static void item_offsets(const f64_ctx *x, int64_t item, int64_t off[3])
{
    off[0] = off[1] = off[2] = 0;
    for (int d = x->nd - 1; d >= 0; d--) {
        int64_t i = item % x->shape[d];
        item /= x->shape[d];
        off[0] += i * x->a_bs[d], off[1] += i * x->b_bs[d], off[2] += i * x->c_bs[d];
    }
}

/* Task t: batch item, F_MC-row block and F_NC-column block of C. */
static void run_task(const f64_ctx *x, int64_t t, double *ws)
{
    double *ap = ws, *bp = ap + F_MC * F_KC, *w = bp + F_KC * F_NC;
    int64_t cb = t % x->n_cb, rb = t / x->n_cb % x->n_rb, item = t / x->n_cb / x->n_rb;
    int64_t off[3];
    item_offsets(x, item, off);
    gemm_operand a = x->a, b = x->b;
    a.p += off[0] * 8, b.p += off[1] * 8;
    int64_t i0 = rb * F_MC, j0 = cb * F_NC;
    int64_t rows = x->M - i0 < F_MC ? x->M - i0 : F_MC;
    int64_t cols = x->N - j0 < F_NC ? x->N - j0 : F_NC;
    if (x->K == 0)
        memset(w, 0, sizeof(double) * F_MC * F_NC);
    for (int64_t k0 = 0; k0 < x->K; k0 += F_KC) {
        int64_t kc = x->K - k0 < F_KC ? x->K - k0 : F_KC;
        pack_a(&a, i0, rows, k0, kc, ap);
        pack_b(&b, k0, kc, j0, cols, bp);
        for (int64_t q = 0; q < cols; q += F_NR)
            for (int64_t p = 0; p < rows; p += F_MR)
                x->kernel(kc, ap + p * kc, bp + q * kc, w + p * F_NC + q, F_NC, k0 > 0);
    }
    int64_t esize = x->cdt == AMPY_FLOAT64 ? 8 : 4;
    char *c = x->c + (off[2] + i0 * x->crs + j0 * x->ccs) * esize;
    epilogue(x, w, rows, cols, c, x->bias ? x->bias + j0 : NULL);
}

/* Chunk k runs tasks k, k + nchunks, ... on workspace k. */
static void chunk_range(int64_t begin, int64_t end, void *vx)
{
    const f64_ctx *x = vx;
    for (int64_t k = begin; k < end; k++)
        for (int64_t t = k; t < x->ntasks; t += x->nchunks)
            run_task(x, t, x->ws + k * WS_DOUBLES);
}

ampy_status ampy_gemm_f64_run(int nd, const int64_t *shape, int64_t M, int64_t N, int64_t K,
                              double alpha, const gemm_operand *a, const int64_t *a_bs,
                              const gemm_operand *b, const int64_t *b_bs, double beta,
                              const double *bias, char *c, ampy_dtype cdt, const int64_t *c_bs,
                              int64_t crs, int64_t ccs, int simd)
{
    int64_t items = 1;
    for (int d = 0; d < nd; d++)
        items *= shape[d];
    if (M > MAX_DIM || N > MAX_DIM || K > MAX_DIM || items > MAX_DIM)
        return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: float64 sizes overflow");
    f64_ctx x = {nd, shape, a_bs, b_bs, c_bs, M, N, K, (M + F_MC - 1) / F_MC,
                 (N + F_NC - 1) / F_NC, 0, 0, *a, *b, alpha, beta, bias, c, cdt, crs, ccs,
                 kernel_portable, NULL};
#ifdef AMPY_X86_SIMD
    if (simd)
        x.kernel = kernel_avx512;
#endif
    x.ntasks = items * x.n_rb * x.n_cb;
    double flops = 2.0 * (double)items * (double)M * (double)N * (double)K;
    int64_t threads = flops < (double)SERIAL_FLOPS ? 1 : ampy_get_num_threads();
    x.nchunks = x.ntasks < threads ? x.ntasks : threads;
    x.ws = malloc((size_t)(x.nchunks * WS_DOUBLES) * sizeof(double));
    if (!x.ws)
        return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: cannot allocate the float64 workspace");
    ampy_parallel_for(x.nchunks, 1, chunk_range, &x);
    free(x.ws);
    return AMPY_OK;
}
