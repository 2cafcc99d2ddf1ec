/* gemm.c — the public GEMM entry points (see ampy/gemm.h): argument
 * validation, implementation selection by CPUID, the beta-only path for
 * K == 0, and the triple-loop reference kept as the test oracle.
 *
 * The blocked driver is in gemm_driver.c, the portable packing / micro-kernel
 * / epilogue in gemm_portable.c, the SIMD kernels in gemm_x86.c,
 * gemm_amx.c and gemm_avx512bf16.c; float64 has its own loop in gemm_f64.c.
 */
#include <stdlib.h>
#include <string.h>

#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/gemm.h"
#include "gemm_impl.h"

ampy_status ampy_gemm_run(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                          const gemm_operand *a, int64_t a_bs, const gemm_operand *b,
                          int64_t b_bs, float beta, const float *bias, char *c, ampy_dtype cdt,
                          int64_t c_bs, int64_t crs, int64_t ccs, const gemm_impl *impl);
ampy_status ampy_gemm_run_nd(int nd, const int64_t *shape, int64_t M, int64_t N, int64_t K,
                             float alpha, const gemm_operand *a, const int64_t *a_bs,
                             const gemm_operand *b, const int64_t *b_bs, float beta,
                             const float *bias, char *c, ampy_dtype cdt, const int64_t *c_bs,
                             int64_t crs, int64_t ccs, const gemm_impl *impl);

/* ---- implementation selection ------------------------------------------ */

/* "auto" follows the shared CPU level (cpu.h: CPUID, lowered to portable by
 * AMPY_FORCE_PORTABLE=1 or ampy_cpu_level_set); a name set through
 * ampy_gemm_set_impl pins that implementation, so tests reach each one. */
enum { IMPL_AUTO = 0, IMPL_PORTABLE, IMPL_AVX2, IMPL_AVX512, IMPL_AMX, IMPL_AVX512BF16 };
static const char *const impl_names[] = {"auto", "portable", "avx2", "avx512", "amx",
                                         "avx512bf16"};
static int impl_choice = IMPL_AUTO;

static int impl_usable(int which)
{
    switch (which) {
    case IMPL_AUTO:
    case IMPL_PORTABLE: return 1;
    case IMPL_AVX2: return ampy_gemm_avx2_usable();
    case IMPL_AVX512: return ampy_gemm_avx512_usable();
    case IMPL_AMX: return ampy_gemm_amx_usable();
    case IMPL_AVX512BF16: return ampy_gemm_avx512bf16_usable();
    default: return 0;
    }
}

static int current_choice(void)
{
    if (impl_choice != IMPL_AUTO)
        return impl_choice;
    switch (ampy_cpu_level_get()) {
    case AMPY_CPU_AMX: return IMPL_AMX; /* AMX for bf16 when usable, else below */
    case AMPY_CPU_AVX512_BF16: return IMPL_AVX512BF16;
    case AMPY_CPU_AVX512: return IMPL_AVX512;
    case AMPY_CPU_AVX2: return IMPL_AVX2;
    default: return IMPL_PORTABLE;
    }
}

/* The implementation for dtype dt under the current choice: the chosen one
 * if it handles dt (AMX handles bfloat16, and float16 split into bfloat16
 * pairs; vdpbf16ps (avx512bf16) bfloat16 only; neither float32), else the
 * next best: AMX -> avx512bf16 -> avx512 -> avx2 -> portable. */
static const gemm_impl *select_impl(ampy_dtype dt)
{
    int c = current_choice();
    const gemm_impl *p = NULL;
    if (c == IMPL_AMX && ampy_gemm_amx_usable())
        p = dt == AMPY_FLOAT16 ? ampy_gemm_impl_amx_f16() : ampy_gemm_impl_amx(dt);
    if (!p && (c == IMPL_AMX || c == IMPL_AVX512BF16) && ampy_gemm_avx512bf16_usable())
        p = ampy_gemm_impl_avx512bf16(dt);
    if (!p && (c == IMPL_AMX || c == IMPL_AVX512BF16 || c == IMPL_AVX512) &&
        ampy_gemm_avx512_usable())
        p = ampy_gemm_impl_avx512(dt);
    if (!p && c != IMPL_PORTABLE && ampy_gemm_avx2_usable())
        p = ampy_gemm_impl_avx2(dt);
    return p ? p : &ampy_gemm_impl_portable;
}

/* select_impl for a product with K terms: under "auto", a bfloat16 product
 * with K < BF16DP_MIN_K takes the AVX-512 FMA path instead of vdpbf16ps,
 * whose K is padded to 32 (measured on Zen 4: K = 8 ran at 0.7x the FMA
 * path, K = 16 at 1.2x, K >= 64 at ~2x). */
#define BF16DP_MIN_K 16
static const gemm_impl *select_impl_k(ampy_dtype dt, int64_t K)
{
    const gemm_impl *p = select_impl(dt);
    if (impl_choice == IMPL_AUTO && K < BF16DP_MIN_K && p == ampy_gemm_impl_avx512bf16(dt) &&
        ampy_gemm_avx512_usable())
        p = ampy_gemm_impl_avx512(dt);
    return p;
}

/* float64 runs gemm_f64.c's loop: its AVX-512 FMA micro-kernel under any
 * choice from "avx512" up when the CPU has AVX-512, else portable C. */
static int f64_simd(void)
{
    int c = current_choice();
    return (c == IMPL_AVX512 || c == IMPL_AVX512BF16 || c == IMPL_AMX) &&
           ampy_gemm_avx512_usable();
}

ampy_status ampy_gemm_set_impl(const char *name)
{
    for (int i = 0; name && i < (int)(sizeof impl_names / sizeof *impl_names); i++) {
        if (strcmp(name, impl_names[i]) != 0)
            continue;
        if (!impl_usable(i))
            return ampy_error(AMPY_ERR_VALUE,
                              "ampy_gemm_set_impl: '%s' is not supported by this CPU/OS", name);
        impl_choice = i;
        return AMPY_OK;
    }
    return ampy_error(AMPY_ERR_VALUE,
                      "ampy_gemm_set_impl: unknown implementation '%s' (expected auto, amx, "
                      "avx512bf16, avx512, avx2 or portable)", name ? name : "(null)");
}

int ampy_gemm_impl_available(const char *name)
{
    for (int i = 0; name && i < (int)(sizeof impl_names / sizeof *impl_names); i++)
        if (strcmp(name, impl_names[i]) == 0)
            return impl_usable(i);
    return 0;
}

const char *ampy_gemm_impl_name(ampy_dtype dtype)
{
    if (dtype == AMPY_FLOAT64)
        return f64_simd() ? "avx512" : "portable";
    return select_impl(dtype)->name;
}

const char *ampy_gemm_impl_name_k(ampy_dtype dtype, int64_t K)
{
    if (dtype == AMPY_FLOAT64)
        return ampy_gemm_impl_name(dtype);
    return select_impl_k(dtype, K)->name;
}

/* ---- validation ---------------------------------------------------------- */

static int gemm_input_dtype(ampy_dtype dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16;
}

static ampy_status validate(const char *fn, int64_t batch, int64_t M, int64_t N, int64_t K,
                            const void *A, ampy_dtype adt, const void *B, ampy_dtype bdt,
                            const void *C, ampy_dtype cdt)
{
    if (batch < 0 || M < 0 || N < 0 || K < 0)
        return ampy_error(AMPY_ERR_SHAPE,
                          "%s: sizes must be >= 0, got batch=%lld M=%lld N=%lld K=%lld", fn,
                          (long long)batch, (long long)M, (long long)N, (long long)K);
    if (!gemm_input_dtype(adt) && adt != AMPY_FLOAT64)
        return ampy_error(AMPY_ERR_DTYPE,
                          "%s: A must be float32, float16, bfloat16 or float64, got %s", fn,
                          ampy_dtype_name(adt));
    if (bdt != adt)
        return ampy_error(AMPY_ERR_DTYPE,
                          "%s: A and B must have the same dtype, got %s and %s", fn,
                          ampy_dtype_name(adt), ampy_dtype_name(bdt));
    if (cdt != adt && cdt != AMPY_FLOAT32)
        return ampy_error(AMPY_ERR_DTYPE,
                          "%s: C's dtype must be %s (the inputs' dtype) or float32, got %s",
                          fn, ampy_dtype_name(adt), ampy_dtype_name(cdt));
    if (batch == 0 || M == 0 || N == 0)
        return AMPY_OK;
    if (!C || (K > 0 && (!A || !B)))
        return ampy_error(AMPY_ERR_SHAPE, "%s: NULL %s for a non-empty problem", fn,
                          !C ? "C" : !A ? "A" : "B");
    return AMPY_OK;
}

/* ---- element access shared by the reference and the K == 0 path --------- */

static float load_f32(const char *p, ampy_dtype dt, int64_t idx)
{
    if (dt == AMPY_FLOAT32) {
        float f;
        memcpy(&f, p + idx * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + idx * 2, 2);
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
}

static void store_f32(char *p, ampy_dtype dt, int64_t idx, float v)
{
    if (dt == AMPY_FLOAT32) {
        memcpy(p + idx * 4, &v, 4);
        return;
    }
    uint16_t h = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
    memcpy(p + idx * 2, &h, 2);
}

/* out = alpha * acc + beta * c (+ bias), with c not read when beta == 0. */
static void finish(char *c, ampy_dtype cdt, int64_t idx, float acc, float alpha, float beta,
                   const float *bias)
{
    float r = alpha * acc;
    if (beta != 0.0f)
        r += beta * load_f32(c, cdt, idx);
    if (bias)
        r += *bias;
    store_f32(c, cdt, idx, r);
}

ampy_status ampy_gemm_reference(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                                const void *A, ampy_dtype adt, int64_t a_bs, int64_t a_rs,
                                int64_t a_cs, const void *B, ampy_dtype bdt, int64_t b_bs,
                                int64_t b_rs, int64_t b_cs, float beta, void *C,
                                ampy_dtype cdt, int64_t c_bs, int64_t c_rs, int64_t c_cs)
{
    ampy_status s = validate("ampy_gemm_reference", batch, M, N, K, A, adt, B, bdt, C, cdt);
    if (s == AMPY_OK && adt == AMPY_FLOAT64)
        s = ampy_error(AMPY_ERR_DTYPE, "ampy_gemm_reference: A must be float32, float16 or "
                       "bfloat16 (the oracle sums in float32), got float64");
    if (s != AMPY_OK || batch == 0 || M == 0 || N == 0)
        return s;
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += load_f32(A, adt, bi * a_bs + i * a_rs + k * a_cs) *
                           load_f32(B, bdt, bi * b_bs + k * b_rs + j * b_cs);
                finish(C, cdt, bi * c_bs + i * c_rs + j * c_cs, acc, alpha, beta, NULL);
            }
    return AMPY_OK;
}

/* ---- float64 ---------------------------------------------------------------- */

static double load_f64(const char *p, ampy_dtype dt, int64_t idx)
{
    if (dt != AMPY_FLOAT64)
        return load_f32(p, dt, idx);
    double v;
    memcpy(&v, p + idx * 8, 8);
    return v;
}

/* ampy_gemm_bias / ampy_gemm_batched for float64 A and B (validated):
 * the bias widened to a contiguous double row, then gemm_f64.c's loop. */
static ampy_status gemm_f64(int nd, const int64_t *shape, int64_t M, int64_t N, int64_t K,
                            double alpha, const void *A, const int64_t *a_bs, int64_t a_rs,
                            int64_t a_cs, const void *B, const int64_t *b_bs, int64_t b_rs,
                            int64_t b_cs, double beta, void *C, ampy_dtype cdt,
                            const int64_t *c_bs, int64_t c_rs, int64_t c_cs,
                            const void *bias, ampy_dtype bias_dt, int64_t bias_stride)
{
    double *bd = NULL;
    if (bias) {
        if (N > ((int64_t)1 << 40) || !(bd = malloc((size_t)N * sizeof(double))))
            return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: cannot allocate the bias row");
        for (int64_t j = 0; j < N; j++)
            bd[j] = load_f64(bias, bias_dt, j * bias_stride);
    }
    gemm_operand a = {(const char *)A, AMPY_FLOAT64, a_rs, a_cs};
    gemm_operand b = {(const char *)B, AMPY_FLOAT64, b_rs, b_cs};
    ampy_status s = ampy_gemm_f64_run(nd, shape, M, N, K, alpha, &a, a_bs, &b, b_bs, beta, bd,
                                      (char *)C, cdt, c_bs, c_rs, c_cs, f64_simd());
    free(bd);
    return s;
}

ampy_status ampy_gemm_bias(int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                           const void *A, ampy_dtype adt, int64_t a_bs, int64_t a_rs,
                           int64_t a_cs, const void *B, ampy_dtype bdt, int64_t b_bs,
                           int64_t b_rs, int64_t b_cs, double beta, void *C, ampy_dtype cdt,
                           int64_t c_bs, int64_t c_rs, int64_t c_cs, const void *bias,
                           ampy_dtype bias_dt, int64_t bias_stride)
{
    ampy_status s = validate("ampy_gemm", batch, M, N, K, A, adt, B, bdt, C, cdt);
    if (s == AMPY_OK && bias && !gemm_input_dtype(bias_dt) &&
        !(adt == AMPY_FLOAT64 && bias_dt == AMPY_FLOAT64))
        s = ampy_error(AMPY_ERR_DTYPE, "ampy_gemm: bias must be float32, float16 or bfloat16 "
                       "(or float64 with float64 inputs), got %s", ampy_dtype_name(bias_dt));
    if (s != AMPY_OK || batch == 0 || M == 0 || N == 0)
        return s;
    if (adt == AMPY_FLOAT64)
        return gemm_f64(1, &batch, M, N, K, alpha, A, &a_bs, a_rs, a_cs, B, &b_bs, b_rs, b_cs,
                        beta, C, cdt, &c_bs, c_rs, c_cs, bias, bias_dt, bias_stride);
    float alpha32 = (float)alpha, beta32 = (float)beta;
    /* The bias, widened once to a contiguous float32 row (exact). */
    float *bf = NULL;
    if (bias) {
        if (N > ((int64_t)1 << 40) || !(bf = malloc((size_t)N * sizeof(float))))
            return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: cannot allocate the bias row");
        for (int64_t j = 0; j < N; j++)
            bf[j] = load_f32(bias, bias_dt, j * bias_stride);
    }
    if (K == 0) { /* C = beta * C (+ bias) (alpha * empty sum = 0) */
        for (int64_t bi = 0; bi < batch; bi++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    finish(C, cdt, bi * c_bs + i * c_rs + j * c_cs, 0.0f, alpha32, beta32,
                           bf ? bf + j : NULL);
        free(bf);
        return AMPY_OK;
    }
    gemm_operand a = {(const char *)A, adt, a_rs, a_cs};
    gemm_operand b = {(const char *)B, bdt, b_rs, b_cs};
    s = ampy_gemm_run(batch, M, N, K, alpha32, &a, a_bs, &b, b_bs, beta32, bf, (char *)C, cdt,
                      c_bs, c_rs, c_cs, select_impl_k(adt, K));
    free(bf);
    return s;
}

ampy_status ampy_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, double alpha,
                      const void *A, ampy_dtype adt, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                      const void *B, ampy_dtype bdt, int64_t b_bs, int64_t b_rs, int64_t b_cs,
                      double beta, void *C, ampy_dtype cdt, int64_t c_bs, int64_t c_rs,
                      int64_t c_cs)
{
    return ampy_gemm_bias(batch, M, N, K, alpha, A, adt, a_bs, a_rs, a_cs, B, bdt, b_bs, b_rs,
                          b_cs, beta, C, cdt, c_bs, c_rs, c_cs, NULL, AMPY_FLOAT32, 0);
}

/* ---- multi-dimensional batch ---------------------------------------------- */

ampy_status ampy_gemm_batched(int nd, const int64_t *shape, int64_t M, int64_t N, int64_t K,
                              double alpha, const void *A, ampy_dtype adt, const int64_t *a_bs,
                              int64_t a_rs, int64_t a_cs, const void *B, ampy_dtype bdt,
                              const int64_t *b_bs, int64_t b_rs, int64_t b_cs, double beta,
                              void *C, ampy_dtype cdt, const int64_t *c_bs, int64_t c_rs,
                              int64_t c_cs)
{
    static const char fn[] = "ampy_gemm_batched";
    if (nd < 0 || nd > AMPY_GEMM_MAX_BATCH_DIMS)
        return ampy_error(AMPY_ERR_SHAPE, "%s: nd must be in [0, %d], got %d", fn,
                          AMPY_GEMM_MAX_BATCH_DIMS, nd);
    if (nd > 0 && (!shape || !a_bs || !b_bs || !c_bs))
        return ampy_error(AMPY_ERR_SHAPE, "%s: NULL %s with nd = %d", fn,
                          !shape ? "batch_shape" : !a_bs ? "a_batch_strides"
                          : !b_bs ? "b_batch_strides" : "c_batch_strides", nd);
    int64_t batch = 1;
    for (int d = 0; d < nd; d++) {
        if (shape[d] < 0)
            return ampy_error(AMPY_ERR_SHAPE, "%s: batch_shape[%d] must be >= 0, got %lld",
                              fn, d, (long long)shape[d]);
        batch = shape[d] == 0 ? 0 : batch;
    }
    ampy_status s = validate(fn, batch ? 1 : 0, M, N, K, A, adt, B, bdt, C, cdt);
    if (s != AMPY_OK || batch == 0 || M == 0 || N == 0)
        return s;
    /* Drop size-1 dims and merge dim d into d+1 when it is a plain outer
     * stride of it for all three operands (fewer index divisions per item). */
    int64_t sh[AMPY_GEMM_MAX_BATCH_DIMS], as[AMPY_GEMM_MAX_BATCH_DIMS],
        bs[AMPY_GEMM_MAX_BATCH_DIMS], cs[AMPY_GEMM_MAX_BATCH_DIMS];
    int n = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1)
            continue;
        if (n > 0 && as[n - 1] == a_bs[d] * shape[d] && bs[n - 1] == b_bs[d] * shape[d] &&
            cs[n - 1] == c_bs[d] * shape[d]) {
            sh[n - 1] *= shape[d];
            as[n - 1] = a_bs[d], bs[n - 1] = b_bs[d], cs[n - 1] = c_bs[d];
            continue;
        }
        sh[n] = shape[d], as[n] = a_bs[d], bs[n] = b_bs[d], cs[n] = c_bs[d];
        n++;
    }
    if (adt == AMPY_FLOAT64)
        return gemm_f64(n, sh, M, N, K, alpha, A, as, a_rs, a_cs, B, bs, b_rs, b_cs, beta, C,
                        cdt, cs, c_rs, c_cs, NULL, AMPY_FLOAT64, 0);
    float alpha32 = (float)alpha, beta32 = (float)beta;
    if (K == 0) { /* C = beta * C for every item */
        int64_t idx[AMPY_GEMM_MAX_BATCH_DIMS] = {0}, off = 0;
        for (;;) {
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    finish(C, cdt, off + i * c_rs + j * c_cs, 0.0f, alpha32, beta32, NULL);
            int d = n - 1;
            for (; d >= 0; d--) {
                off += cs[d];
                if (++idx[d] < sh[d])
                    break;
                off -= cs[d] * sh[d];
                idx[d] = 0;
            }
            if (d < 0)
                return AMPY_OK;
        }
    }
    gemm_operand a = {(const char *)A, adt, a_rs, a_cs};
    gemm_operand b = {(const char *)B, bdt, b_rs, b_cs};
    return ampy_gemm_run_nd(n, sh, M, N, K, alpha32, &a, as, &b, bs, beta32, NULL, (char *)C, cdt,
                            cs, c_rs, c_cs, select_impl_k(adt, K));
}
