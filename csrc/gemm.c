/* gemm.c — the public GEMM entry points (see ampy/gemm.h): argument
 * validation, implementation selection by CPUID, the beta-only path for
 * K == 0, and the triple-loop reference kept as the test oracle.
 *
 * The blocked driver is in gemm_driver.c, the portable packing / micro-kernel
 * / epilogue in gemm_portable.c, the SIMD kernels in gemm_x86.c and
 * gemm_amx.c.
 */
#include <string.h>

#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/gemm.h"
#include "gemm_impl.h"

ampy_status ampy_gemm_run(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                          const gemm_operand *a, int64_t a_bs, const gemm_operand *b,
                          int64_t b_bs, float beta, char *c, ampy_dtype cdt, int64_t c_bs,
                          int64_t crs, int64_t ccs, const gemm_impl *impl);

/* ---- implementation selection ------------------------------------------ */

/* "auto" follows the shared CPU level (cpu.h: CPUID, lowered to portable by
 * AMPY_FORCE_PORTABLE=1 or ampy_cpu_level_set); a name set through
 * ampy_gemm_set_impl pins that implementation, so tests reach each one. */
enum { IMPL_AUTO = 0, IMPL_PORTABLE, IMPL_AVX2, IMPL_AVX512, IMPL_AMX };
static const char *const impl_names[] = {"auto", "portable", "avx2", "avx512", "amx"};
static int impl_choice = IMPL_AUTO;

static int impl_usable(int which)
{
    switch (which) {
    case IMPL_AUTO:
    case IMPL_PORTABLE: return 1;
    case IMPL_AVX2: return ampy_gemm_avx2_usable();
    case IMPL_AVX512: return ampy_gemm_avx512_usable();
    case IMPL_AMX: return ampy_gemm_amx_usable();
    default: return 0;
    }
}

static int current_choice(void)
{
    if (impl_choice != IMPL_AUTO)
        return impl_choice;
    switch (ampy_cpu_level_get()) {
    case AMPY_CPU_AVX512: return IMPL_AMX; /* AMX for bf16 when usable, else AVX-512 */
    case AMPY_CPU_AVX2: return IMPL_AVX2;
    default: return IMPL_PORTABLE;
    }
}

/* The implementation for dtype dt under the current choice: the chosen one
 * if it handles dt (AMX handles bfloat16, and float16 split into bfloat16
 * pairs; not float32), else the next best. */
static const gemm_impl *select_impl(ampy_dtype dt)
{
    int c = current_choice();
    const gemm_impl *p = NULL;
    if (c == IMPL_AMX && ampy_gemm_amx_usable())
        p = dt == AMPY_FLOAT16 ? ampy_gemm_impl_amx_f16() : ampy_gemm_impl_amx(dt);
    if (!p && (c == IMPL_AMX || c == IMPL_AVX512) && ampy_gemm_avx512_usable())
        p = ampy_gemm_impl_avx512(dt);
    if (!p && c != IMPL_PORTABLE && ampy_gemm_avx2_usable())
        p = ampy_gemm_impl_avx2(dt);
    return p ? p : &ampy_gemm_impl_portable;
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
                      "avx512, avx2 or portable)", name ? name : "(null)");
}

int ampy_gemm_impl_available(const char *name)
{
    for (int i = 0; name && i < (int)(sizeof impl_names / sizeof *impl_names); i++)
        if (strcmp(name, impl_names[i]) == 0)
            return impl_usable(i);
    return 0;
}

const char *ampy_gemm_impl_name(ampy_dtype dtype) { return select_impl(dtype)->name; }

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
    if (!gemm_input_dtype(adt))
        return ampy_error(AMPY_ERR_DTYPE,
                          "%s: A must be float32, float16 or bfloat16, got %s", fn,
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

/* out = alpha * acc + beta * c, with c not read when beta == 0. */
static void finish(char *c, ampy_dtype cdt, int64_t idx, float acc, float alpha, float beta)
{
    float r = alpha * acc;
    if (beta != 0.0f)
        r += beta * load_f32(c, cdt, idx);
    store_f32(c, cdt, idx, r);
}

ampy_status ampy_gemm_reference(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                                const void *A, ampy_dtype adt, int64_t a_bs, int64_t a_rs,
                                int64_t a_cs, const void *B, ampy_dtype bdt, int64_t b_bs,
                                int64_t b_rs, int64_t b_cs, float beta, void *C,
                                ampy_dtype cdt, int64_t c_bs, int64_t c_rs, int64_t c_cs)
{
    ampy_status s = validate("ampy_gemm_reference", batch, M, N, K, A, adt, B, bdt, C, cdt);
    if (s != AMPY_OK || batch == 0 || M == 0 || N == 0)
        return s;
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += load_f32(A, adt, bi * a_bs + i * a_rs + k * a_cs) *
                           load_f32(B, bdt, bi * b_bs + k * b_rs + j * b_cs);
                finish(C, cdt, bi * c_bs + i * c_rs + j * c_cs, acc, alpha, beta);
            }
    return AMPY_OK;
}

ampy_status ampy_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                      const void *A, ampy_dtype adt, int64_t a_bs, int64_t a_rs, int64_t a_cs,
                      const void *B, ampy_dtype bdt, int64_t b_bs, int64_t b_rs, int64_t b_cs,
                      float beta, void *C, ampy_dtype cdt, int64_t c_bs, int64_t c_rs,
                      int64_t c_cs)
{
    ampy_status s = validate("ampy_gemm", batch, M, N, K, A, adt, B, bdt, C, cdt);
    if (s != AMPY_OK || batch == 0 || M == 0 || N == 0)
        return s;
    if (K == 0) { /* C = beta * C (alpha * empty sum = 0) */
        for (int64_t bi = 0; bi < batch; bi++)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++)
                    finish(C, cdt, bi * c_bs + i * c_rs + j * c_cs, 0.0f, alpha, beta);
        return AMPY_OK;
    }
    gemm_operand a = {(const char *)A, adt, a_rs, a_cs};
    gemm_operand b = {(const char *)B, bdt, b_rs, b_cs};
    return ampy_gemm_run(batch, M, N, K, alpha, &a, a_bs, &b, b_bs, beta, (char *)C, cdt,
                         c_bs, c_rs, c_cs, select_impl(adt));
}
