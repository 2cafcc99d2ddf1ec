/* fused.c — specialised hot-path kernels (see fused.h for the contract). */
#include <string.h>

#include "ampy/fused.h"
#include "ampy/parallel.h"

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
