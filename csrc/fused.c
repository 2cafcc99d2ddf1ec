/* fused.c — specialised hot-path kernels (see fused.h for the contract). */
#include <math.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/fused.h"
#include "ampy/parallel.h"
#include "vmath.h"

/* ---- zero fill --------------------------------------------------------------- */
typedef struct {
    char *p;
} zero_ctx;

static void zero_range(int64_t b, int64_t e, void *ctx)
{
    memset(((zero_ctx *)ctx)->p + b, 0, (size_t)(e - b));
}

ampy_status ampy_fused_zero(void *p, int64_t nbytes)
{
    if (nbytes < 0)
        return ampy_error(AMPY_ERR_VALUE, "fused_zero: negative size");
    if (nbytes == 0)
        return AMPY_OK;
    zero_ctx c = {(char *)p};
    ampy_parallel_for(nbytes, (int64_t)1 << 20, zero_range, &c);
    return AMPY_OK;
}

/* ---- mse_loss, float32 ------------------------------------------------------- *
 * The element loss is the float product f * f of f = x - y (float), widened
 * exactly to double; mean/sum add those doubles left to right as
 * ampy_nn_mse_fwd does, so the result has the same bits. */
ampy_status ampy_fused_mse_fwd_f32(int64_t n, const float *x, const float *y, int reduction,
                                   float *out)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss: negative size");
    if (reduction < 0 || reduction > 2)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss: %d is not a valid value for reduction",
                          reduction);
    if (reduction == 0) {
        for (int64_t i = 0; i < n; i++) {
            float f = x[i] - y[i];
            out[i] = f * f;
        }
        return AMPY_OK;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float f = x[i] - y[i];
        sum += (double)(f * f);
    }
    if (reduction == 1)
        sum /= (double)n;
    out[0] = (float)sum;
    return AMPY_OK;
}

typedef struct {
    const float *x, *y, *dout;
    float *dx, *dy;
    float norm, g0;
    int per_elem;
} mse_bwd_ctx;

static void mse_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const mse_bwd_ctx *c = (const mse_bwd_ctx *)ctx;
    const float *x = c->x, *y = c->y, *d = c->dout;
    float *dx = c->dx, *dy = c->dy;
    const float norm = c->norm, g0 = c->g0;
    if (c->per_elem) {
        for (int64_t i = b; i < e; i++) {
            float v = (norm * (x[i] - y[i])) * d[i];
            if (dx)
                dx[i] = v;
            if (dy)
                dy[i] = -v;
        }
    } else if (dx && dy) {
        for (int64_t i = b; i < e; i++) {
            float v = (norm * (x[i] - y[i])) * g0;
            dx[i] = v;
            dy[i] = -v;
        }
    } else if (dx) {
        for (int64_t i = b; i < e; i++)
            dx[i] = (norm * (x[i] - y[i])) * g0;
    } else {
        for (int64_t i = b; i < e; i++)
            dy[i] = -((norm * (x[i] - y[i])) * g0);
    }
}

/* v = (float)((float)norm * (x - y)) * (float)g, norm = 2/n (mean) or 2 — the
 * float operations of ampy_nn_mse_bwd, element by element. */
ampy_status ampy_fused_mse_bwd_f32(int64_t n, const float *x, const float *y, int reduction,
                                   const float *dout, float *dx, float *dy)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss_backward: negative size");
    if (reduction < 0 || reduction > 2)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss_backward: bad reduction %d", reduction);
    if (n == 0 || (!dx && !dy))
        return AMPY_OK;
    double norm = reduction == 1 ? 2.0 / (double)n : 2.0;
    mse_bwd_ctx c = {x, y, dout, dx, dy, (float)norm, reduction == 0 ? 0.0f : dout[0],
                     reduction == 0};
    ampy_parallel_for(n, (int64_t)1 << 16, mse_bwd_range, &c);
    return AMPY_OK;
}

/* ---- element-wise backward kernels: load a block to float, compute, store --- */
#define BLK 512

/* Block conversions between a half dtype and float, through the SIMD cast
 * kernels of cast_x86.c looked up once per range (ampy_cast_f16_to_f32 and
 * friends re-dispatch on every call, which cost more than the work for
 * 128-element softmax rows); plain C from elem.h when there is none. Same
 * bits either way. */
typedef struct {
    int dt;
    ampy_cast_kernel to_f32, from_f32;
} conv;

static void conv_init(conv *c, int dt)
{
    int level = ampy_cpu_level_get();
    c->dt = dt;
    c->to_f32 = dt == AMPY_FLOAT32 ? NULL : ampy_cast_simd_kernel(level, dt, AMPY_FLOAT32);
    c->from_f32 = dt == AMPY_FLOAT32 ? NULL : ampy_cast_simd_kernel(level, AMPY_FLOAT32, dt);
}

/* n elements at p (+ offset i) as floats: p itself for float32, else buf. */
static const float *ld_block(const conv *c, const void *p, int64_t i, int64_t n, float *buf)
{
    if (c->dt == AMPY_FLOAT32)
        return (const float *)p + i;
    const uint16_t *s = (const uint16_t *)p + i;
    if (c->to_f32)
        c->to_f32(s, buf, n);
    else if (c->dt == AMPY_BFLOAT16)
        for (int64_t k = 0; k < n; k++)
            buf[k] = ampy_bf16_to_f32(s[k]);
    else
        for (int64_t k = 0; k < n; k++)
            buf[k] = ampy_f16_to_f32(s[k]);
    return buf;
}

static void st_block(const conv *c, void *p, int64_t i, int64_t n, const float *buf)
{
    if (c->dt == AMPY_FLOAT32) {
        if ((const float *)p + i != buf)
            memcpy((float *)p + i, buf, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = (uint16_t *)p + i;
    if (c->from_f32)
        c->from_f32(buf, d, n);
    else if (c->dt == AMPY_BFLOAT16)
        for (int64_t k = 0; k < n; k++)
            d[k] = ampy_f32_to_bf16(buf[k]);
    else
        for (int64_t k = 0; k < n; k++)
            d[k] = ampy_f32_to_f16(buf[k]);
}

static int half_or_f32(int dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16;
}

typedef struct {
    const void *a, *g;
    void *out;
    int dt;
} ew_ctx;

/* gelu (exact) backward: dx = g * (Phi(x) + x * phi(x)) (ampy's composite
 * rule), by the vectorized vmath kernel (AVX-512 or portable by CPU level) on
 * float32 blocks. */
static void gelu_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const ew_ctx *c = (const ew_ctx *)ctx;
    const ampy_vm_table *vm = ampy_vm();
    float bx[BLK], bg[BLK], bo[BLK];
    conv cv;
    conv_init(&cv, c->dt);
    if (c->dt == AMPY_FLOAT32) {
        vm->gelu_bwd((const float *)c->a + b, (const float *)c->g + b, (float *)c->out + b, e - b);
        return;
    }
    if (vm->gelu_bwd_half) { /* converts in registers */
        vm->gelu_bwd_half((const uint16_t *)c->a + b, (const uint16_t *)c->g + b,
                          (uint16_t *)c->out + b, e - b, c->dt == AMPY_BFLOAT16);
        return;
    }
    for (int64_t i = b; i < e; i += BLK) {
        int64_t n = e - i < BLK ? e - i : BLK;
        const float *x = ld_block(&cv, c->a, i, n, bx);
        const float *g = ld_block(&cv, c->g, i, n, bg);
        vm->gelu_bwd(x, g, bo, n);
        st_block(&cv, c->out, i, n, bo);
    }
}

ampy_status ampy_fused_gelu_bwd(int64_t n, const void *x, const void *g, int dtype, void *dx)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "gelu_backward: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "gelu_backward: float32, float16 or bfloat16 only");
    ew_ctx c = {x, g, dx, dtype};
    ampy_parallel_for(n, 4096, gelu_bwd_range, &c);
    return AMPY_OK;
}

/* column sums of a contiguous (M, N) matrix: out[j] = sum_i x[i, j], added
 * row by row in double and rounded once to the dtype -- the order and the
 * rounding of ampy_reduce's sum over dim 0 (its row-streaming path), so the
 * results are the same bits; this one converts halves with the SIMD casts. */
typedef struct {
    int64_t M, N;
    const void *x;
    void *out;
    int dt;
} colsum_ctx;

static void colsum_range(int64_t b, int64_t e, void *ctx)
{
    const colsum_ctx *c = (const colsum_ctx *)ctx;
    const ampy_vm_table *vm = ampy_vm();
    double acc[BLK];
    float buf[BLK];
    conv cv;
    conv_init(&cv, c->dt);
    for (int64_t j0 = b; j0 < e; j0 += BLK) {
        const int64_t m = e - j0 < BLK ? e - j0 : BLK;
        for (int64_t k = 0; k < m; k++)
            acc[k] = 0.0;
        for (int64_t i = 0; i < c->M; i++) {
            vm->addf64(acc, ld_block(&cv, c->x, i * c->N + j0, m, buf), m);
        }
        if (c->dt == AMPY_FLOAT32) {
            float *o = (float *)c->out + j0;
            for (int64_t k = 0; k < m; k++)
                o[k] = (float)acc[k];
        } else if (c->dt == AMPY_FLOAT16) {
            uint16_t *o = (uint16_t *)c->out + j0;
            for (int64_t k = 0; k < m; k++)
                o[k] = ampy_f64_to_f16(acc[k]);
        } else {
            uint16_t *o = (uint16_t *)c->out + j0;
            for (int64_t k = 0; k < m; k++)
                o[k] = ampy_f64_to_bf16(acc[k]);
        }
    }
}

ampy_status ampy_fused_colsum(int64_t M, int64_t N, const void *x, int dtype, void *out)
{
    if (M < 0 || N < 0)
        return ampy_error(AMPY_ERR_VALUE, "colsum: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "colsum: float32, float16 or bfloat16 only");
    colsum_ctx c = {M, N, x, out, dtype};
    /* about 64 Ki elements of work per task */
    int64_t grain = M > 0 ? ((int64_t)1 << 16) / M : N;
    ampy_parallel_for(N, grain < 16 ? 16 : grain, colsum_range, &c);
    return AMPY_OK;
}

/* relu backward from the output y: dx = y > 0 ? g : +0 (ampy's rule
 * where(y > 0, g, 0)); operates on the bits, so it is exact for every dtype. */
static void relu_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const ew_ctx *c = (const ew_ctx *)ctx;
    /* a float value is > 0 when its bits are in [1, +inf]: sign clear, not
     * +0, not NaN; (v - 1) mod 2^bits < inf tests that without branches */
    if (c->dt == AMPY_FLOAT32) {
        const uint32_t *y = (const uint32_t *)c->a, *g = (const uint32_t *)c->g;
        uint32_t *o = (uint32_t *)c->out;
        for (int64_t i = b; i < e; i++) {
            uint32_t keep = (uint32_t)(y[i] - 1u) < 0x7F800000u;
            o[i] = g[i] & (uint32_t)-keep;
        }
        return;
    }
    const uint16_t *y = (const uint16_t *)c->a, *g = (const uint16_t *)c->g;
    uint16_t *o = (uint16_t *)c->out;
    const uint16_t inf = c->dt == AMPY_FLOAT16 ? 0x7C00u : 0x7F80u;
    for (int64_t i = b; i < e; i++) {
        uint16_t keep = (uint16_t)(y[i] - 1u) < inf;
        o[i] = g[i] & (uint16_t)-keep;
    }
}

ampy_status ampy_fused_relu_bwd(int64_t n, const void *y, const void *g, int dtype, void *dx)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "relu_backward: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "relu_backward: float32, float16 or bfloat16 only");
    ew_ctx c = {y, g, dx, dtype};
    ampy_parallel_for(n, 32768, relu_bwd_range, &c);
    return AMPY_OK;
}

/* softmax backward over rows of N: s = sum_j float(g_j * y_j) accumulated in
 * double and rounded to float (ampy's sum), dx_j = y_j * (g_j - s) in float. */
typedef struct {
    const void *y, *g;
    void *out;
    int64_t N;
    int dt;
} sm_ctx;

#define SM_ROWS_N 256 /* rows up to this long go four at a time */
static void softmax_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const sm_ctx *c = (const sm_ctx *)ctx;
    const int64_t N = c->N;
    float by[BLK], bg[BLK], bo[BLK];
    conv cv;
    conv_init(&cv, c->dt);
    int64_t r = b;
    if (N <= SM_ROWS_N) {
        /* short rows, four at a time: four independent double sums (each row
         * still added in order, so the same bits) instead of one
         * latency-bound chain */
        float ry[4][SM_ROWS_N], rg[4][SM_ROWS_N], ro[SM_ROWS_N];
        for (; r + 4 <= e; r += 4) {
            const float *y[4], *g[4];
            for (int q = 0; q < 4; q++) {
                y[q] = ld_block(&cv, c->y, (r + q) * N, N, ry[q]);
                g[q] = ld_block(&cv, c->g, (r + q) * N, N, rg[q]);
            }
            double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
            for (int64_t k = 0; k < N; k++) {
                a0 += (double)(g[0][k] * y[0][k]);
                a1 += (double)(g[1][k] * y[1][k]);
                a2 += (double)(g[2][k] * y[2][k]);
                a3 += (double)(g[3][k] * y[3][k]);
            }
            const double acc[4] = {a0, a1, a2, a3};
            for (int q = 0; q < 4; q++) {
                const float s = (float)acc[q];
                float *o = c->dt == AMPY_FLOAT32 ? (float *)c->out + (r + q) * N : ro;
                for (int64_t k = 0; k < N; k++)
                    o[k] = y[q][k] * (g[q][k] - s);
                st_block(&cv, c->out, (r + q) * N, N, o);
            }
        }
    }
    for (; r < e; r++) {
        double acc = 0.0;
        for (int64_t j = 0; j < N; j += BLK) {
            int64_t n = N - j < BLK ? N - j : BLK;
            const float *y = ld_block(&cv, c->y, r * N + j, n, by);
            const float *g = ld_block(&cv, c->g, r * N + j, n, bg);
            for (int64_t k = 0; k < n; k++)
                acc += (double)(g[k] * y[k]);
        }
        const float s = (float)acc;
        for (int64_t j = 0; j < N; j += BLK) {
            int64_t n = N - j < BLK ? N - j : BLK;
            const float *y = ld_block(&cv, c->y, r * N + j, n, by);
            const float *g = ld_block(&cv, c->g, r * N + j, n, bg);
            float *o = c->dt == AMPY_FLOAT32 ? (float *)c->out + r * N + j : bo;
            for (int64_t k = 0; k < n; k++)
                o[k] = y[k] * (g[k] - s);
            st_block(&cv, c->out, r * N + j, n, o);
        }
    }
}

ampy_status ampy_fused_softmax_bwd(int64_t M, int64_t N, const void *y, const void *g,
                                   int dtype, void *dx)
{
    if (M < 0 || N < 0)
        return ampy_error(AMPY_ERR_VALUE, "softmax_backward: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "softmax_backward: float32, float16 or bfloat16 only");
    if (N == 0)
        return AMPY_OK;
    sm_ctx c = {y, g, dx, N, dtype};
    ampy_parallel_for(M, 32768 / N + 1, softmax_bwd_range, &c);
    return AMPY_OK;
}
