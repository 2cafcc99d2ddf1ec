/* test_gemm_f64.c — the float64 GEMM (gemm_f64.c) on each implementation
 * this CPU can run, against a long-double triple loop: odd shapes and shapes
 * that cross every block size, transposed and strided operands, batches
 * (flat and multi-dimensional, with a broadcast), alpha/beta, a bias row,
 * a float32 result, beta == 0 over a NaN-filled C, K == 0, one and two
 * threads. Under `make ctest` it runs with ASan + UBSan, which check every
 * packing and epilogue access.
 *
 * Tolerance per output (double sums in any order, then one rounding):
 *   2 * K * 2^-53 * |alpha| * sum_k |a_ik b_kj| + 2^-52 * |exact| (double C),
 *   plus 2^-24 * |exact| for a float32 C.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ampy/gemm.h"
#include "ampy/parallel.h"

static int failures = 0;
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static double urand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-52 - 1.0;
}

static double *fill(int64_t n)
{
    double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        p[i] = urand();
    return p;
}

typedef struct {
    int64_t batch, M, N, K;
    int ta, tb, c32, bias;
    double alpha, beta;
} f64_case;

/* One case: A (M x K, ta: stored transposed), B (K x N, tb), C row-major
 * (float64 or float32), batch items one after another. */
static void run_case(const f64_case *t)
{
    int64_t M = t->M, N = t->N, K = t->K, nb = t->batch;
    double *A = fill(nb * M * K), *B = fill(nb * K * N), *bias = fill(N);
    int64_t ars = t->ta ? 1 : K, acs = t->ta ? M : 1, brs = t->tb ? 1 : N, bcs = t->tb ? K : 1;
    size_t csz = t->c32 ? 4 : 8;
    char *C = malloc(csz * (size_t)(nb * M * N > 0 ? nb * M * N : 1));
    double *C0 = fill(nb * M * N);
    for (int64_t i = 0; i < nb * M * N; i++) {
        if (t->beta == 0.0)
            C0[i] = NAN;
        if (t->c32)
            ((float *)C)[i] = (float)C0[i], C0[i] = (float)C0[i];
        else
            ((double *)C)[i] = C0[i];
    }
    ampy_dtype cdt = t->c32 ? AMPY_FLOAT32 : AMPY_FLOAT64;
    ampy_status s = ampy_gemm_bias(nb, M, N, K, t->alpha, A, AMPY_FLOAT64, M * K, ars, acs, B,
                                   AMPY_FLOAT64, K * N, brs, bcs, t->beta, C, cdt, M * N, N, 1,
                                   t->bias ? bias : NULL, AMPY_FLOAT64, 1);
    if (s != AMPY_OK) {
        printf("FAIL: status %d for %lldx%lldx%lld\n", (int)s, (long long)M, (long long)N,
               (long long)K);
        failures++;
    }
    for (int64_t b = 0; s == AMPY_OK && b < nb; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                long double acc = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    long double p = (long double)A[b * M * K + i * ars + k * acs] *
                                    B[b * K * N + k * brs + j * bcs];
                    acc += p, mag += fabsl(p);
                }
                int64_t o = b * M * N + i * N + j;
                long double exact = t->alpha * acc + (t->bias ? bias[j] : 0.0) +
                                    (t->beta != 0.0 ? t->beta * (long double)C0[o] : 0.0L);
                long double got = t->c32 ? ((float *)C)[o] : ((double *)C)[o];
                long double tol = 2.0L * K * 0x1p-53L * fabsl(t->alpha) * mag +
                                  0x1p-52L * (fabsl(exact) +
                                              (t->beta != 0.0 ? fabsl(t->beta * C0[o]) : 0) +
                                              (t->bias ? fabsl(bias[j]) : 0.0L)) +
                                  (t->c32 ? 0x1p-24L * fabsl(exact) + 0x1p-149L : 0x1p-1074L);
                if (!(fabsl(got - exact) <= tol)) {
                    if (failures++ < 10)
                        printf("FAIL: %s %lldx%lldx%lld ta=%d tb=%d c32=%d (%lld,%lld): got "
                               "%.17Lg, want %.17Lg\n", ampy_gemm_impl_name(AMPY_FLOAT64),
                               (long long)M, (long long)N, (long long)K, t->ta, t->tb, t->c32,
                               (long long)i, (long long)j, got, exact);
                    break;
                }
            }
    free(A), free(B), free(bias), free(C), free(C0);
}

/* A (2 x M x K) broadcast against B (3 x K x N) over a 2-d batch (2, 3) by
 * ampy_gemm_batched, C (2, 3, M, N): item (p, q) is A[p] @ B[q]. */
static void run_batched(int64_t M, int64_t N, int64_t K)
{
    double *A = fill(2 * M * K), *B = fill(3 * K * N), *C = fill(6 * M * N);
    int64_t shape[2] = {2, 3}, as[2] = {M * K, 0}, bs[2] = {0, K * N}, cs[2] = {3 * M * N, M * N};
    ampy_status s = ampy_gemm_batched(2, shape, M, N, K, 1.0, A, AMPY_FLOAT64, as, K, 1, B,
                                      AMPY_FLOAT64, bs, N, 1, 0.0, C, AMPY_FLOAT64, cs, N, 1);
    int bad = s != AMPY_OK;
    for (int64_t p = 0; !bad && p < 2; p++)
        for (int64_t q = 0; q < 3; q++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    long double acc = 0, mag = 0;
                    for (int64_t k = 0; k < K; k++) {
                        long double x = (long double)A[p * M * K + i * K + k] *
                                        B[q * K * N + k * N + j];
                        acc += x, mag += fabsl(x);
                    }
                    long double got = C[(p * 3 + q) * M * N + i * N + j];
                    bad |= !(fabsl(got - acc) <= 2.0L * K * 0x1p-53L * mag + 0x1p-1074L);
                }
    if (bad) {
        printf("FAIL: batched %lldx%lldx%lld\n", (long long)M, (long long)N, (long long)K);
        failures++;
    }
    free(A), free(B), free(C);
}

int main(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {8, 16, 1}, {9, 17, 33},
                                        {65, 520, 257}, {130, 3, 600}, {2, 1030, 5},
                                        {4, 4, 0}};
    static const char *const impls[] = {"portable", "avx512"};
    for (int ii = 0; ii < 2; ii++) {
        if (!ampy_gemm_impl_available(impls[ii]) || ampy_gemm_set_impl(impls[ii]) != AMPY_OK)
            continue;
        int before = failures;
        for (int th = 1; th <= 2; th++) {
            ampy_set_num_threads(th);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int v = 0; v < 4; v++) {
                    f64_case t = {v == 3 ? 3 : 1, shapes[s][0], shapes[s][1], shapes[s][2],
                                  v & 1, v >> 1, v == 2, v == 1, v == 1 ? -0.75 : 1.0,
                                  v >= 2 ? 0.5 : 0.0};
                    run_case(&t);
                }
            run_batched(5, 7, 9);
            run_batched(33, 70, 300);
        }
        printf("%-9s %s (float64 -> %s)\n", impls[ii], failures == before ? "ok" : "FAILED",
               ampy_gemm_impl_name(AMPY_FLOAT64));
    }
    ampy_gemm_set_impl("auto");
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures != 0;
}
