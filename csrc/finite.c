/* finite.c — multi-tensor non-finite check + unscale (see finite.h).
 *
 * The portable loops below are the oracle for the AVX-512 ones in
 * finite_x86.c. With inv == 1 they only test exponent bits (no conversion);
 * otherwise load -> to_f32 -> * inv -> from_f32 -> store, and the stored
 * bits are tested (exponent all ones = inf or NaN).
 */
#include <stdlib.h>

#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/finite.h"
#include "ampy/parallel.h"

/* Elements per thread before a pass is split: below this, waking a worker
 * costs more than it saves. */
#define FINITE_GRAIN ((int64_t)1 << 17)

static int run_f32(float *x, int64_t n, float inv)
{
    uint32_t bad = 0;
    if (inv == 1.0f) {
        for (int64_t i = 0; i < n; i++)
            bad |= (ampy_f32_bits(x[i]) & 0x7F800000u) == 0x7F800000u;
        return bad != 0;
    }
    for (int64_t i = 0; i < n; i++) {
        float y = x[i] * inv;
        bad |= (ampy_f32_bits(y) & 0x7F800000u) == 0x7F800000u;
        x[i] = y;
    }
    return bad != 0;
}

static int run_f16(uint16_t *x, int64_t n, float inv)
{
    unsigned bad = 0;
    if (inv == 1.0f) {
        for (int64_t i = 0; i < n; i++)
            bad |= (x[i] & 0x7C00u) == 0x7C00u;
        return bad != 0;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = ampy_f32_to_f16(ampy_f16_to_f32(x[i]) * inv);
        bad |= (h & 0x7C00u) == 0x7C00u;
        x[i] = h;
    }
    return bad != 0;
}

static int run_bf16(uint16_t *x, int64_t n, float inv)
{
    unsigned bad = 0;
    if (inv == 1.0f) {
        for (int64_t i = 0; i < n; i++)
            bad |= (x[i] & 0x7F80u) == 0x7F80u;
        return bad != 0;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = ampy_f32_to_bf16(ampy_bf16_to_f32(x[i]) * inv);
        bad |= (h & 0x7F80u) == 0x7F80u;
        x[i] = h;
    }
    return bad != 0;
}

/* float64 (torch accepts it): x * (double)inv, one rounding in double. */
static int run_f64(double *x, int64_t n, float inv)
{
    const uint64_t exp = 0x7FF0000000000000ull;
    uint64_t bad = 0;
    if (inv == 1.0f) {
        for (int64_t i = 0; i < n; i++)
            bad |= (ampy_f64_bits(x[i]) & exp) == exp;
        return bad != 0;
    }
    const double d = (double)inv;
    for (int64_t i = 0; i < n; i++) {
        double y = x[i] * d;
        bad |= (ampy_f64_bits(y) & exp) == exp;
        x[i] = y;
    }
    return bad != 0;
}

/* x * inv for a NaN inv, with the payload fixed (a C multiply of two NaNs
 * may return either one, depending on the operand order the compiler picks):
 * a NaN x keeps its own payload, any other x takes inv's; both quieted. */
static float mul_nan_inv(float x, float inv)
{
    uint32_t b = x != x ? ampy_f32_bits(x) : ampy_f32_bits(inv);
    return ampy_bits_f32(b | 0x00400000u);
}

static int run_nan_inv(void *data, int64_t n, int dtype, float inv)
{
    for (int64_t i = 0; i < n; i++) {
        if (dtype == AMPY_FLOAT32) {
            float *x = (float *)data;
            x[i] = mul_nan_inv(x[i], inv);
        } else if (dtype == AMPY_FLOAT16) {
            uint16_t *x = (uint16_t *)data;
            x[i] = ampy_f32_to_f16(mul_nan_inv(ampy_f16_to_f32(x[i]), inv));
        } else if (dtype == AMPY_BFLOAT16) {
            uint16_t *x = (uint16_t *)data;
            x[i] = ampy_f32_to_bf16(mul_nan_inv(ampy_bf16_to_f32(x[i]), inv));
        } else if (dtype == AMPY_FLOAT64) {
            double *x = (double *)data;
            uint64_t b = x[i] != x[i] ? ampy_f64_bits(x[i]) : ampy_f64_bits((double)inv);
            x[i] = ampy_bits_f64(b | 0x0008000000000000ull);
        }
    }
    return n > 0 && dtype >= AMPY_FLOAT32 && dtype <= AMPY_FLOAT64; /* every value is NaN */
}

int ampy_finite_run_portable(void *data, int64_t n, int dtype, float inv)
{
    if (inv != inv)
        return run_nan_inv(data, n, dtype, inv);
    switch (dtype) {
    case AMPY_FLOAT32: return run_f32((float *)data, n, inv);
    case AMPY_FLOAT16: return run_f16((uint16_t *)data, n, inv);
    case AMPY_BFLOAT16: return run_bf16((uint16_t *)data, n, inv);
    case AMPY_FLOAT64: return run_f64((double *)data, n, inv);
    default: return 0;
    }
}

#if !(defined(__x86_64__) && defined(__GNUC__))
int ampy_finite_run_avx512(void *data, int64_t n, int dtype, float inv)
{
    return ampy_finite_run_portable(data, n, dtype, inv);
}
#endif

/* ---- the multi-tensor walk ---------------------------------------------- */

typedef struct {
    int64_t ntensors;
    const int64_t *offsets;
    ampy_mt_fn fn;
    void *ctx;
} mt_job;

static void mt_range(int64_t begin, int64_t end, void *arg)
{
    const mt_job *j = (const mt_job *)arg;
    /* first tensor whose range contains `begin`: the last t with
     * offsets[t] <= begin (empty tensors share offsets and are skipped) */
    int64_t lo = 0, hi = j->ntensors - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (j->offsets[mid] <= begin)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int64_t t = lo; t < j->ntensors && begin < end; t++) {
        int64_t stop = j->offsets[t + 1] < end ? j->offsets[t + 1] : end;
        if (stop > begin)
            j->fn(t, begin - j->offsets[t], stop - j->offsets[t], j->ctx);
        begin = stop > begin ? stop : begin;
    }
}

void ampy_mt_parallel(int64_t ntensors, const int64_t *offsets, int64_t grain, ampy_mt_fn fn,
                      void *ctx)
{
    if (ntensors <= 0 || offsets[ntensors] <= 0)
        return;
    mt_job j = {ntensors, offsets, fn, ctx};
    ampy_parallel_for(offsets[ntensors], grain, mt_range, &j);
}

/* ---- entry point ----------------------------------------------------------- */

typedef struct {
    void *const *data;
    const int *dtype;
    float inv;
    int simd;
    int found; /* written with __atomic_store_n: set by any thread */
} finite_ctx;

static void finite_chunk(int64_t t, int64_t begin, int64_t end, void *arg)
{
    finite_ctx *c = (finite_ctx *)arg;
    size_t es = ampy_dtype_size(c->dtype[t]);
    char *p = (char *)c->data[t] + (size_t)begin * es;
    int simd = c->simd && c->dtype[t] != AMPY_FLOAT64; /* float64: portable loop only */
    int bad = simd ? ampy_finite_run_avx512(p, end - begin, c->dtype[t], c->inv)
                   : ampy_finite_run_portable(p, end - begin, c->dtype[t], c->inv);
    if (bad)
        __atomic_store_n(&c->found, 1, __ATOMIC_RELAXED);
}

ampy_status ampy_finite_check_unscale(int64_t ntensors, void *const *data, const int64_t *numel,
                                      const int *dtype, float *found_inf, const float *inv_scale)
{
    if (ntensors < 0)
        return ampy_error(AMPY_ERR_VALUE, "finite_check_unscale: ntensors must be >= 0, got %lld",
                          (long long)ntensors);
    if (!found_inf || !inv_scale)
        return ampy_error(AMPY_ERR_VALUE, "finite_check_unscale: found_inf and inv_scale must "
                                          "not be NULL");
    if (ntensors == 0)
        return AMPY_OK;
    if (!data || !numel || !dtype)
        return ampy_error(AMPY_ERR_VALUE, "finite_check_unscale: NULL tensor list");
    int64_t *offsets = (int64_t *)malloc(sizeof(int64_t) * (size_t)(ntensors + 1));
    if (!offsets)
        return ampy_error(AMPY_ERR_NOMEM, "finite_check_unscale: out of memory");
    offsets[0] = 0;
    for (int64_t i = 0; i < ntensors; i++) {
        int dt = dtype[i];
        if (dt != AMPY_FLOAT32 && dt != AMPY_FLOAT16 && dt != AMPY_BFLOAT16 &&
            dt != AMPY_FLOAT64) {
            free(offsets);
            return ampy_error(AMPY_ERR_DTYPE,
                              "finite_check_unscale: tensor %lld has dtype %s; expected "
                              "float32, float16, bfloat16 or float64",
                              (long long)i, ampy_dtype_name(dt));
        }
        if (numel[i] < 0 || (numel[i] > 0 && !data[i]) || numel[i] > INT64_MAX - offsets[i]) {
            free(offsets);
            return ampy_error(AMPY_ERR_VALUE, "finite_check_unscale: tensor %lld has numel %lld "
                                              "and data %p",
                              (long long)i, (long long)numel[i], data[i]);
        }
        offsets[i + 1] = offsets[i] + numel[i];
    }
    finite_ctx c = {data, dtype, *inv_scale, ampy_cpu_level_get() >= AMPY_CPU_AVX512, 0};
    ampy_mt_parallel(ntensors, offsets, FINITE_GRAIN, finite_chunk, &c);
    free(offsets);
    if (c.found)
        *found_inf = 1.0f;
    return AMPY_OK;
}
