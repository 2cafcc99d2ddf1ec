/* test_gemm.c — every GEMM implementation this machine can run, checked
 * against ampy_gemm_reference (the triple loop): odd shapes, strided and
 * transposed operands, batches, alpha/beta, K up to 8192, NaN/inf, K == 0,
 * beta == 0 over a NaN-filled C, and argument errors.
 *
 * Tolerance per output: the two results are float32 sums of the same
 * products in different orders, so they differ by at most about
 * 2 * K * 2^-24 * sum_k |a_ik b_kj| (times |alpha|), plus one unit in the last
 * place of the output dtype when rounded to half.
 *
 * Build (from the repository root):
 *   gcc -O2 -std=c11 -Icsrc/include csrc/gemm*.c csrc/status.c csrc/parallel.c \
 *       tests/c/test_gemm.c -lpthread -lm -o test_gemm && ./test_gemm
 * Exit status 0 when every check passes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/elem.h"
#include "ampy/gemm.h"
#include "ampy/parallel.h"

static int failures = 0;
static void expect(int cond, const char *what);
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float urand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static size_t esz(ampy_dtype dt) { return ampy_dtype_size(dt); }

static float get(const void *p, ampy_dtype dt, int64_t i)
{
    if (dt == AMPY_FLOAT32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
}

static void set(void *p, ampy_dtype dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
}

static void *fill(ampy_dtype dt, int64_t n)
{
    void *p = malloc(esz(dt) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        set(p, dt, i, urand());
    return p;
}

/* One matrix view: element (b, i, j) at b*bs + i*rs + j*cs. */
typedef struct { int64_t bs, rs, cs, n; } view;

/* Row-major (trans = 0), column-major (1) or row-major with column step 2 (2). */
static view make_view(int64_t batch, int64_t rows, int64_t cols, int layout)
{
    view v;
    int64_t step = layout == 2 ? 2 : 1;
    v.rs = layout == 1 ? 1 : cols * step;
    v.cs = layout == 1 ? rows : step;
    v.bs = rows * cols * step;
    v.n = batch * v.bs;
    return v;
}

typedef struct {
    int64_t batch, M, N, K;
    ampy_dtype dt, cdt;
    int la, lb, lc;
    float alpha, beta;
    const char *what;
} gcase;

static double out_ulp(ampy_dtype cdt)
{
    return cdt == AMPY_FLOAT16 ? ldexp(1, -10) : cdt == AMPY_BFLOAT16 ? ldexp(1, -7) : 0;
}

/* Compare C against the reference R. The bound uses sum_k |a_ik| * max|B|
 * (an upper bound of sum_k |a_ik b_kj|), which keeps the check O(M K). */
static int compare(const gcase *t, const void *C, const void *R, const view *vc,
                   const void *A, const view *va, const void *B, const view *vb)
{
    double bmax = 0;
    for (int64_t i = 0; i < vb->n; i++)
        if (fabs(get(B, t->dt, i)) > bmax && isfinite(get(B, t->dt, i)))
            bmax = fabs(get(B, t->dt, i));
    for (int64_t b = 0; b < t->batch; b++)
        for (int64_t i = 0; i < t->M; i++) {
            double s = 0;
            for (int64_t k = 0; k < t->K; k++)
                s += fabs((double)get(A, t->dt, b * va->bs + i * va->rs + k * va->cs)) * bmax;
            for (int64_t j = 0; j < t->N; j++) {
                int64_t ic = b * vc->bs + i * vc->rs + j * vc->cs;
                float x = get(C, t->cdt, ic), r = get(R, t->cdt, ic);
                if (isnan(r) || isnan(x) || isinf(r) || isinf(x)) {
                    if (isnan(r) != isnan(x) || (isinf(r) && x != r)) {
                        printf("FAIL %s [%lld,%lld,%lld]: got %g want %g\n", t->what,
                               (long long)b, (long long)i, (long long)j, x, r);
                        return 1;
                    }
                    continue;
                }
                double tol = 2.0 * (double)t->K * ldexp(1, -24) * s * fabs(t->alpha) +
                             ldexp(1, -22) * fabs(r) +
                             out_ulp(t->cdt) * fmax(fabs(r), fabs(x)) +
                             (t->cdt == AMPY_FLOAT16 ? ldexp(1, -24) : 0);
                if (fabs((double)x - r) > tol) {
                    printf("FAIL %s [%lld,%lld,%lld]: got %.9g want %.9g (tol %.3g)\n", t->what,
                           (long long)b, (long long)i, (long long)j, x, r, tol);
                    return 1;
                }
            }
        }
    return 0;
}

/* special: 0 none, 1 plant inf/nan in A and B, 2 NaN-filled C with beta 0. */
static void run_case(const gcase *t, int special)
{
    view va = make_view(t->batch, t->M, t->K, t->la), vb = make_view(t->batch, t->K, t->N, t->lb);
    view vc = make_view(t->batch, t->M, t->N, t->lc);
    void *A = fill(t->dt, va.n), *B = fill(t->dt, vb.n), *C = fill(t->cdt, vc.n);
    if (special == 1 && va.n > 3 && vb.n > 3) {
        set(A, t->dt, va.n / 2, INFINITY);
        set(A, t->dt, va.n - 1, -INFINITY);
        set(B, t->dt, vb.n / 3, NAN);
    }
    if (special == 2)
        for (int64_t i = 0; i < vc.n; i++)
            set(C, t->cdt, i, NAN);
    void *R = malloc(esz(t->cdt) * (size_t)(vc.n > 0 ? vc.n : 1));
    memcpy(R, C, esz(t->cdt) * (size_t)vc.n);
    ampy_status s1 = ampy_gemm(t->batch, t->M, t->N, t->K, t->alpha, A, t->dt, va.bs, va.rs,
                               va.cs, B, t->dt, vb.bs, vb.rs, vb.cs, t->beta, C, t->cdt,
                               vc.bs, vc.rs, vc.cs);
    ampy_status s2 = ampy_gemm_reference(t->batch, t->M, t->N, t->K, t->alpha, A, t->dt, va.bs,
                                         va.rs, va.cs, B, t->dt, vb.bs, vb.rs, vb.cs, t->beta,
                                         R, t->cdt, vc.bs, vc.rs, vc.cs);
    if (s1 != AMPY_OK || s2 != AMPY_OK) {
        printf("FAIL %s: status %d/%d: %s\n", t->what, s1, s2, ampy_last_error());
        failures++;
    } else if (compare(t, C, R, &vc, A, &va, B, &vb)) {
        printf("  case: impl=%s dt=%s cdt=%s batch=%lld M=%lld N=%lld K=%lld la=%d lb=%d "
               "lc=%d alpha=%g beta=%g special=%d\n", ampy_gemm_impl_name(t->dt),
               ampy_dtype_name(t->dt), ampy_dtype_name(t->cdt), (long long)t->batch,
               (long long)t->M, (long long)t->N, (long long)t->K, t->la, t->lb, t->lc,
               t->alpha, t->beta, special);
        failures++;
    }
    free(A), free(B), free(C), free(R);
}

static void run_impl(const char *impl)
{
    static const int64_t sizes[] = {1, 7, 33, 255};
    static const ampy_dtype dts[] = {AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16};
    int before = failures;
    for (int d = 0; d < 3; d++) {
        gcase t = {1, 0, 0, 0, dts[d], dts[d], 0, 0, 0, 1.0f, 0.0f, impl};
        for (int mi = 0; mi < 4; mi++)
            for (int ni = 0; ni < 4; ni++)
                for (int ki = 0; ki < 4; ki++) {
                    if ((mi == 3) + (ni == 3) + (ki == 3) > 1)
                        continue; /* keep the suite fast: one 255 at a time */
                    t.M = sizes[mi], t.N = sizes[ni], t.K = sizes[ki];
                    int v = mi + ni + ki;
                    t.la = v % 3, t.lb = (v / 3) % 3, t.lc = (v % 2) * 2;
                    t.cdt = (v % 2) ? AMPY_FLOAT32 : dts[d];
                    t.alpha = (v % 3 == 0) ? 1.0f : 0.5f;
                    t.beta = (v % 4 == 0) ? 0.0f : (v % 4 == 1 ? 1.0f : -0.25f);
                    run_case(&t, 0);
                }
        gcase big[] = {
            {1, 300, 300, 520, dts[d], dts[d], 0, 0, 0, 1, 0, impl},   /* several blocks  */
            {1, 129, 97, 1031, dts[d], AMPY_FLOAT32, 1, 1, 0, 2, 1, impl},
            {1, 33, 65, 8192, dts[d], dts[d], 0, 1, 0, 1, 0, impl},    /* long K          */
            {1, 2, 1100, 8192, dts[d], dts[d], 0, 0, 0, 1, 0, impl},   /* several jc blocks */
            {3, 70, 45, 130, dts[d], dts[d], 0, 1, 0, 1, 0.5f, impl},  /* batch           */
            {1, 40, 50, 0, dts[d], dts[d], 0, 0, 0, 1, 0.5f, impl},    /* K == 0          */
            {1, 40, 50, 0, dts[d], dts[d], 0, 0, 0, 1, 0, impl},       /* K == 0, beta 0  */
        };
        for (size_t i = 0; i < sizeof big / sizeof *big; i++)
            run_case(&big[i], 0);
        gcase sp = {2, 37, 41, 53, dts[d], dts[d], 0, 0, 0, 1, 0, impl};
        run_case(&sp, 1);
        sp.cdt = AMPY_FLOAT32, sp.la = 1, sp.lb = 1;
        run_case(&sp, 1);
        run_case(&sp, 2);
        sp.cdt = dts[d], sp.K = 0;
        run_case(&sp, 2);
    }
    printf("%-9s %s (f32 -> %s, f16 -> %s, bf16 -> %s)\n", impl,
           failures == before ? "ok" : "FAILED", ampy_gemm_impl_name(AMPY_FLOAT32),
           ampy_gemm_impl_name(AMPY_FLOAT16), ampy_gemm_impl_name(AMPY_BFLOAT16));
}

/* The driver hands out B panels and row/column tasks dynamically, but each
 * output is one fp32 sum in a fixed order: 1, 2 and 3 threads give identical
 * bits (shapes with several row blocks, a column split, and N blocks). */
static void test_thread_counts(const char *impl)
{
    static const int64_t shapes[][3] = {{200, 300, 700}, {1000, 70, 64}, {8, 1100, 4100}};
    static const ampy_dtype dts[] = {AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16};
    int old = ampy_get_num_threads();
    for (int d = 0; d < 3; d++)
        for (int si = 0; si < 3; si++) {
            int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
            void *A = fill(dts[d], M * K), *B = fill(dts[d], K * N);
            float *C[3];
            for (int t = 0; t < 3; t++) {
                C[t] = malloc(sizeof(float) * (size_t)(M * N));
                ampy_set_num_threads(t + 1);
                expect(ampy_gemm(1, M, N, K, 1.0f, A, dts[d], 0, K, 1, B, dts[d], 0, 1, K, 0.0f,
                                 C[t], AMPY_FLOAT32, 0, N, 1) == AMPY_OK, "threaded gemm");
            }
            int same = memcmp(C[0], C[1], sizeof(float) * (size_t)(M * N)) == 0 &&
                       memcmp(C[0], C[2], sizeof(float) * (size_t)(M * N)) == 0;
            if (!same)
                printf("FAIL %s %s %lldx%lldx%lld: 1/2/3 threads differ\n", impl,
                       ampy_dtype_name(dts[d]), (long long)M, (long long)N, (long long)K);
            failures += !same;
            free(A), free(B), free(C[0]), free(C[1]), free(C[2]);
        }
    ampy_set_num_threads(old);
}

static void expect(int cond, const char *what)
{
    if (!cond) {
        printf("FAIL %s (last error: %s)\n", what, ampy_last_error());
        failures++;
    }
}

static void test_errors(void)
{
    float a[4] = {0}, b[4] = {0}, c[4] = {0};
    expect(ampy_gemm(1, 2, 2, 2, 1, a, AMPY_FLOAT32, 0, 2, 1, b, AMPY_FLOAT16, 0, 2, 1, 0, c,
                     AMPY_FLOAT32, 0, 2, 1) == AMPY_ERR_DTYPE, "mismatched dtypes");
    expect(ampy_gemm(1, 2, 2, 2, 1, a, AMPY_INT32, 0, 2, 1, b, AMPY_INT32, 0, 2, 1, 0, c,
                     AMPY_INT32, 0, 2, 1) == AMPY_ERR_DTYPE, "integer dtype");
    expect(ampy_gemm(1, 2, 2, 2, 1, a, AMPY_FLOAT32, 0, 2, 1, b, AMPY_FLOAT32, 0, 2, 1, 0, c,
                     AMPY_FLOAT16, 0, 2, 1) == AMPY_ERR_DTYPE, "f32 inputs into f16 C");
    expect(ampy_gemm(1, -1, 2, 2, 1, a, AMPY_FLOAT32, 0, 2, 1, b, AMPY_FLOAT32, 0, 2, 1, 0, c,
                     AMPY_FLOAT32, 0, 2, 1) == AMPY_ERR_SHAPE, "negative M");
    expect(ampy_gemm(1, 2, 2, 2, 1, NULL, AMPY_FLOAT32, 0, 2, 1, b, AMPY_FLOAT32, 0, 2, 1, 0, c,
                     AMPY_FLOAT32, 0, 2, 1) == AMPY_ERR_SHAPE, "NULL A");
    expect(ampy_gemm(0, 2, 2, 2, 1, NULL, AMPY_FLOAT32, 0, 2, 1, NULL, AMPY_FLOAT32, 0, 2, 1, 0,
                     NULL, AMPY_FLOAT32, 0, 2, 1) == AMPY_OK, "empty batch");
    expect(ampy_gemm_set_impl("nonsense") == AMPY_ERR_VALUE, "unknown impl name");
    expect(ampy_gemm_set_impl(NULL) == AMPY_ERR_VALUE, "NULL impl name");
}

int main(void)
{
    const char *force = getenv("AMPY_FORCE_PORTABLE");
    if (force && strcmp(force, "1") == 0)
        expect(strcmp(ampy_gemm_impl_name(AMPY_BFLOAT16), "portable") == 0,
               "AMPY_FORCE_PORTABLE=1 selects portable");
    test_errors();
    static const char *impls[] = {"portable", "avx2", "avx512", "avx512bf16", "amx"};
    for (int i = 0; i < (int)(sizeof impls / sizeof *impls); i++) {
        if (!ampy_gemm_impl_available(impls[i])) {
            printf("%-9s skipped (not supported here)\n", impls[i]);
            continue;
        }
        ampy_gemm_set_impl(impls[i]);
        run_impl(impls[i]);
        test_thread_counts(impls[i]);
    }
    ampy_gemm_set_impl("auto");
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
