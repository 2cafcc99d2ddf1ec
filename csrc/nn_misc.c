/* nn_misc.c — the light nn kernels: nll_loss, embedding (gather and its
 * scatter-add backward), dropout's mask-and-scale, mse_loss. Contracts in
 * nn.h; formulas as ATen's CPU kernels (LossNLL.cpp, Embedding.cpp,
 * Dropout.cpp, the mse_loss element kernel).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/mse_sum.h"
#include "ampy/nn.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"

/* ---- nll_loss ---------------------------------------------------------------- */
ampy_status ampy_nn_nll_loss_fwd(int64_t M, int64_t C, const void *x, int x_dtype,
                                 const int64_t *target, const void *w, int64_t ignore_index,
                                 int reduction, void *out)
{
    ampy_status s = nn_check_targets(M, C, x_dtype, target, ignore_index, reduction, "nll_loss");
    if (s != AMPY_OK)
        return s;
    double sum = 0.0;
    for (int64_t i = 0; i < M; i++) {
        int64_t t = target[i];
        double l = t == ignore_index ? 0.0
                                     : -(w ? ampy_nn_load1(w, x_dtype, t) : 1.0) *
                                           ampy_nn_load1(x, x_dtype, i * C + t);
        if (reduction == AMPY_NN_REDUCTION_NONE)
            ampy_nn_store1(out, x_dtype, i, l);
        sum += l;
    }
    if (reduction == AMPY_NN_REDUCTION_MEAN)
        sum /= nn_total_weight(M, target, w, x_dtype, ignore_index);
    if (reduction != AMPY_NN_REDUCTION_NONE)
        ampy_nn_store1(out, x_dtype, 0, sum);
    return AMPY_OK;
}

ampy_status ampy_nn_nll_loss_bwd(int64_t M, int64_t C, int x_dtype, const int64_t *target,
                                 const void *w, int64_t ignore_index, int reduction,
                                 const void *dout, void *dx)
{
    ampy_status s = nn_check_targets(M, C, x_dtype, target, ignore_index, reduction,
                                     "nll_loss_backward");
    if (s != AMPY_OK)
        return s;
    memset(dx, 0, (size_t)(M * C) * ampy_dtype_size(x_dtype));
    double denom = reduction == AMPY_NN_REDUCTION_MEAN
                       ? nn_total_weight(M, target, w, x_dtype, ignore_index)
                       : 1.0;
    double g = reduction == AMPY_NN_REDUCTION_NONE || M == 0 ? 0.0 : ampy_nn_load1(dout, x_dtype, 0);
    for (int64_t i = 0; i < M; i++) {
        int64_t t = target[i];
        if (t == ignore_index)
            continue;
        double gi = reduction == AMPY_NN_REDUCTION_NONE ? ampy_nn_load1(dout, x_dtype, i) : g;
        ampy_nn_store1(dx, x_dtype, i * C + t, -(w ? ampy_nn_load1(w, x_dtype, t) : 1.0) * gi / denom);
    }
    return AMPY_OK;
}

/* ---- embedding ------------------------------------------------------------------ */
static ampy_status emb_check(int64_t P, const int64_t *idx, int64_t V, int64_t D, int dt,
                             const char *fn)
{
    ampy_status s = ampy_nn_embedding_check_args(P, V, D, dt, fn);
    if (s != AMPY_OK)
        return s;
    for (int64_t i = 0; i < P; i++)
        if (idx[i] < 0 || idx[i] >= V)
            return ampy_error(AMPY_ERR_INDEX, "index out of range in self");
    return AMPY_OK;
}

ampy_status ampy_nn_embedding_fwd(int64_t P, const int64_t *idx, int64_t V, int64_t D,
                                  const void *weight, int w_dtype, void *out)
{
    ampy_status s = emb_check(P, idx, V, D, w_dtype, "embedding");
    if (s != AMPY_OK)
        return s;
    const size_t row = (size_t)D * ampy_dtype_size(w_dtype);
    for (int64_t i = 0; i < P; i++)
        memcpy((char *)out + (size_t)i * row, (const char *)weight + (size_t)idx[i] * row, row);
    return AMPY_OK;
}

typedef struct {
    int64_t P, V, D, nchunks, pad;
    const int64_t *idx;
    const void *dy;
    int dt;
    void *acc; /* V*D float (double for float64) accumulators */
} emb_ctx;

/* Each chunk owns a slice of columns, so no two threads write one address. */
static void emb_bwd_chunks(int64_t cb, int64_t ce, void *vc)
{
    emb_ctx *c = (emb_ctx *)vc;
    const int64_t D = c->D;
    for (int64_t k = cb; k < ce; k++) {
        int64_t j0 = D * k / c->nchunks, j1 = D * (k + 1) / c->nchunks;
        for (int64_t i = 0; i < c->P; i++) {
            int64_t r = c->idx[i];
            if (r == c->pad)
                continue;
            if (c->dt == AMPY_FLOAT64) {
                double *a = (double *)c->acc + r * D;
                const double *g = (const double *)c->dy + i * D;
                for (int64_t j = j0; j < j1; j++)
                    a[j] += g[j];
            } else if (c->dt == AMPY_FLOAT32) {
                float *a = (float *)c->acc + r * D;
                const float *g = (const float *)c->dy + i * D;
                for (int64_t j = j0; j < j1; j++)
                    a[j] += g[j];
            } else {
                float *a = (float *)c->acc + r * D;
                for (int64_t j = j0; j < j1; j++)
                    a[j] += (float)ampy_nn_load1(c->dy, c->dt, i * D + j);
            }
        }
    }
}

ampy_status ampy_nn_embedding_bwd(int64_t P, const int64_t *idx, int64_t V, int64_t D,
                                  const void *dy, int w_dtype, int64_t padding_idx,
                                  void *dweight)
{
    ampy_status s = emb_check(P, idx, V, D, w_dtype, "embedding_backward");
    if (s != AMPY_OK)
        return s;
    if (!ampy_nn_is_float(w_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "embedding_backward: weight must be floating point");
    const size_t vd = (size_t)(V * D);
    int direct = w_dtype == AMPY_FLOAT32 || w_dtype == AMPY_FLOAT64;
    size_t asz = w_dtype == AMPY_FLOAT64 ? 8 : 4;
    void *acc = direct ? dweight : calloc(vd ? vd : 1, asz);
    if (!acc)
        return ampy_error(AMPY_ERR_NOMEM, "embedding_backward: out of memory");
    if (direct)
        memset(dweight, 0, vd * asz);
    emb_ctx c = {.P = P, .V = V, .D = D, .pad = padding_idx, .idx = idx, .dy = dy,
                 .dt = w_dtype, .acc = acc};
    int64_t t = ampy_get_num_threads();
    c.nchunks = (P * D >= 65536 && D >= 2 * t) ? t : 1;
    if (P > 0 && D > 0)
        ampy_parallel_for(c.nchunks, 1, emb_bwd_chunks, &c);
    if (!direct) {
        for (size_t i = 0; i < vd; i++)
            ampy_nn_store1(dweight, w_dtype, (int64_t)i, ((float *)acc)[i]);
        free(acc);
    }
    return AMPY_OK;
}

/* ---- dropout ------------------------------------------------------------------ */
typedef struct {
    const void *x;
    void *out;
    const uint8_t *mask;
    int dt;
    double s;
} ms_ctx;

static void ms_range(int64_t b, int64_t e, void *vc)
{
    ms_ctx *c = (ms_ctx *)vc;
    switch (c->dt) {
    case AMPY_FLOAT32: {
        const float *x = (const float *)c->x;
        float *o = (float *)c->out, s = (float)c->s;
        for (int64_t i = b; i < e; i++)
            o[i] = x[i] * (c->mask[i] ? s : 0.0f);
        break;
    }
    case AMPY_FLOAT64: {
        const double *x = (const double *)c->x;
        double *o = (double *)c->out;
        for (int64_t i = b; i < e; i++)
            o[i] = x[i] * (c->mask[i] ? c->s : 0.0);
        break;
    }
    default: {
        float s = (float)c->s;
        for (int64_t i = b; i < e; i++)
            ampy_nn_store1(c->out, c->dt, i, (float)ampy_nn_load1(c->x, c->dt, i) * (c->mask[i] ? s : 0.0f));
    }
    }
}

ampy_status ampy_nn_mask_scale(int64_t n, const void *x, int dtype, const uint8_t *mask,
                               double scale, void *out)
{
    ampy_status st = ampy_nn_mask_scale_check_args(n, dtype);
    if (st != AMPY_OK)
        return st;
    ms_ctx c = {.x = x, .out = out, .mask = mask, .dt = dtype, .s = ampy_dropout_scale(dtype, scale)};
    ampy_parallel_for(n, 1 << 16, ms_range, &c);
    return AMPY_OK;
}

/* ---- mse_loss ------------------------------------------------------------------ */
ampy_status ampy_nn_mse_fwd(int64_t n, const void *x, const void *y, int dtype, int reduction,
                            void *out)
{
    ampy_status st = ampy_nn_mse_check_args(n, dtype, reduction, 0);
    if (st != AMPY_OK)
        return st;
    double acc[AMPY_MSE_LANES] = {0.0}; /* the lane order of mse_sum.h */
    for (int64_t i = 0; i < n; i++) {
        double d = ampy_mse_elem(ampy_nn_load1(x, dtype, i), ampy_nn_load1(y, dtype, i), dtype);
        if (reduction == AMPY_NN_REDUCTION_NONE)
            ampy_nn_store1(out, dtype, i, d);
        else
            acc[i % AMPY_MSE_LANES] += d;
    }
    double sum = ampy_mse_lanes_total(acc);
    if (reduction == AMPY_NN_REDUCTION_MEAN)
        sum /= (double)n;
    if (reduction != AMPY_NN_REDUCTION_NONE)
        ampy_nn_store1(out, dtype, 0, sum);
    return AMPY_OK;
}

ampy_status ampy_nn_mse_bwd(int64_t n, const void *x, const void *y, int dtype, int reduction,
                            const void *dout, void *dx, void *dy)
{
    ampy_status st = ampy_nn_mse_check_args(n, dtype, reduction, 1);
    if (st != AMPY_OK)
        return st;
    double norm = reduction == AMPY_NN_REDUCTION_MEAN ? 2.0 / (double)n : 2.0;
    double g0 = reduction == AMPY_NN_REDUCTION_NONE || n == 0 ? 0.0 : ampy_nn_load1(dout, dtype, 0);
    for (int64_t i = 0; i < n; i++) {
        double g = reduction == AMPY_NN_REDUCTION_NONE ? ampy_nn_load1(dout, dtype, i) : g0;
        double v = ampy_mse_grad(ampy_nn_load1(x, dtype, i), ampy_nn_load1(y, dtype, i), norm, g, dtype);
        if (dx)
            ampy_nn_store1(dx, dtype, i, v);
        if (dy)
            ampy_nn_store1(dy, dtype, i, -v);
    }
    return AMPY_OK;
}
