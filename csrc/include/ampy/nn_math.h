/* ampy/nn_math.h — what the CPU (csrc/nn.c, csrc/nn_misc.c) and CUDA
 * (cuda/nn.cu, cuda/nn_embed.cu) nn kernels compute alike: the per-row and
 * per-element formulas of the losses and dropout (AMPY_ELEM: host and
 * device) and the argument checks of both entry points (host only). Row
 * sums (log-sum-exp, the weighted row sum) and reductions are each side's
 * own; these functions take them as arguments. Unit tests:
 * tests/c/test_shared_math.c.
 */
#ifndef AMPY_NN_MATH_H
#define AMPY_NN_MATH_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/nn.h"
#include "ampy/status.h"

/* float32, float16, bfloat16 or float64. */
AMPY_ELEM int ampy_nn_is_float(int dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16 || dt == AMPY_FLOAT64;
}

/* Element i of a float32/float16/bfloat16 array as float (widened to
 * double), of a float64 array as double. */
AMPY_ELEM double ampy_nn_load1(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_FLOAT32: return ((const float *)p)[i];
    case AMPY_FLOAT16: return ampy_f16_to_f32(((const uint16_t *)p)[i]);
    case AMPY_BFLOAT16: return ampy_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const double *)p)[i];
    }
}

/* Store v into element i, rounded once to dt. */
AMPY_ELEM void ampy_nn_store1(void *p, int dt, int64_t i, double v)
{
    switch (dt) {
    case AMPY_FLOAT32: ((float *)p)[i] = (float)v; break;
    case AMPY_FLOAT16: ((uint16_t *)p)[i] = ampy_f64_to_f16(v); break;
    case AMPY_BFLOAT16: ((uint16_t *)p)[i] = ampy_f64_to_bf16(v); break;
    default: ((double *)p)[i] = v; break;
    }
}

/* ---- cross_entropy --------------------------------------------------------------
 * Row loss with class weights w and label smoothing ls (torch's formula):
 *   l = w_t (lse - x_t)                                   (ls == 0)
 *   l = (1 - ls) w_t (lse - x_t) + ls/C (W lse - sum_j w_j x_j)   (ls > 0)
 * wt = w_t (1 without weights), W = sum_j w_j (C without weights),
 * wx = sum_j w_j x_j (ignored when ls == 0). */
AMPY_ELEM double ampy_ce_row_loss(double wt, double lse, double xt, double ls, int64_t C, double W,
                                  double wx)
{
    double l = wt * (lse - xt);
    if (ls > 0.0)
        l = (1.0 - ls) * l + (ls / (double)C) * (W * lse - wx);
    return l;
}

/* Gradient coefficients of one row for an upstream gradient g and the
 * reduction's denominator (the total weight for MEAN, else 1):
 *   dx_j = a softmax_j - cs w_j,  then dx_t -= cn,
 * with cn = g (1 - ls) w_t / denom, cs = g ls / C / denom and a = cn + cs W.
 * Returns a; stores cn and cs. */
AMPY_ELEM double ampy_ce_row_grad_coef(double g, double wt, double ls, int64_t C, double W,
                                       double denom, double *cn, double *cs)
{
    *cn = g * (1.0 - ls) * wt / denom;
    *cs = g * ls / (double)C / denom;
    return *cn + *cs * W;
}

/* ---- dropout --------------------------------------------------------------------
 * The kept elements' multiplier 1/(1-p) (given as `scale`) rounded to the
 * input's dtype, as ATen's noise tensor of that dtype holds it; returned as
 * a double (exact for every dtype). */
AMPY_ELEM double ampy_dropout_scale(int dtype, double scale)
{
    if (dtype == AMPY_FLOAT16)
        return ampy_f16_to_f32(ampy_f64_to_f16(scale));
    if (dtype == AMPY_BFLOAT16)
        return ampy_bf16_to_f32(ampy_f64_to_bf16(scale));
    return dtype == AMPY_FLOAT64 ? scale : (double)(float)scale;
}

/* ---- mse_loss ---------------------------------------------------------------------
 * x, y: one element each, loaded exactly as double. The element loss
 * (x - y)^2 in the dtype's compute precision (float64, else float32),
 * rounded to the dtype (it is a tensor of that dtype in torch). */
AMPY_ELEM double ampy_mse_elem(double x, double y, int dtype)
{
    if (dtype == AMPY_FLOAT64) {
        double d = x - y;
        return d * d;
    }
    float f = (float)x - (float)y;
    double d = f * f;
    if (dtype == AMPY_FLOAT16)
        d = ampy_f16_to_f32(ampy_f64_to_f16(d));
    else if (dtype == AMPY_BFLOAT16)
        d = ampy_bf16_to_f32(ampy_f64_to_bf16(d));
    return d;
}

/* The gradient norm * (x - y) * g (norm = 2/n for MEAN, else 2), in the
 * dtype's compute precision, before rounding to the dtype. */
AMPY_ELEM double ampy_mse_grad(double x, double y, double norm, double g, int dtype)
{
    if (dtype == AMPY_FLOAT64)
        return norm * (x - y) * g;
    return (float)((float)norm * ((float)x - (float)y)) * (float)g;
}

/* ---- argument checks (host) --------------------------------------------------------- */

/* Class-index losses (cross_entropy, nll_loss): sizes, dtype, reduction
 * (the targets are checked by each side: on the device, deferred). */
static inline ampy_status ampy_nn_loss_check_args(int64_t M, int64_t C, int x_dtype,
                                                  int reduction, const char *fn)
{
    if (M < 0 || C < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    if (!ampy_nn_is_float(x_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "%s: input must be a floating-point tensor", fn);
    if (reduction < 0 || reduction > 2)
        return ampy_error(AMPY_ERR_VALUE, "%s: %d is not a valid value for reduction", fn,
                          reduction);
    return AMPY_OK;
}

static inline ampy_status ampy_ce_check_smoothing(double ls)
{
    if (!(ls >= 0.0 && ls <= 1.0))
        return ampy_error(AMPY_ERR_VALUE, "label_smoothing must be between 0.0 and 1.0. Got: %g",
                          ls);
    return AMPY_OK;
}

static inline ampy_status ampy_nn_mse_check_args(int64_t n, int dtype, int reduction,
                                                 int backward)
{
    if (backward) {
        if (n < 0)
            return ampy_error(AMPY_ERR_VALUE, "mse_loss_backward: negative size");
        if (!ampy_nn_is_float(dtype))
            return ampy_error(AMPY_ERR_DTYPE, "mse_loss_backward: bad dtype");
        if (reduction < 0 || reduction > 2)
            return ampy_error(AMPY_ERR_VALUE, "mse_loss_backward: bad reduction %d", reduction);
        return AMPY_OK;
    }
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss: negative size");
    if (!ampy_nn_is_float(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "mse_loss: input must be a floating-point tensor");
    if (reduction < 0 || reduction > 2)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss: %d is not a valid value for reduction",
                          reduction);
    return AMPY_OK;
}

static inline ampy_status ampy_nn_mask_scale_check_args(int64_t n, int dtype)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "dropout: negative size");
    if (!ampy_nn_is_float(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "dropout: input must be a floating-point tensor");
    return AMPY_OK;
}

/* Embedding: sizes and dtype (the indices are checked by each side); the
 * backward also needs a floating weight. */
static inline ampy_status ampy_nn_embedding_check_args(int64_t P, int64_t V, int64_t D, int dt,
                                                       const char *fn)
{
    if (P < 0 || V < 0 || D < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    if (!ampy_dtype_valid(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: invalid dtype", fn);
    return AMPY_OK;
}

#endif /* AMPY_NN_MATH_H */
