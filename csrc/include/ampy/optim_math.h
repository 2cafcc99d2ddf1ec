/* ampy/optim_math.h — what the CPU (csrc/optim.c) and CUDA (cuda/optim.cu)
 * fused optimizers compute alike: the per-step scalars of SGD and Adam/AdamW
 * (AMPY_ELEM: host and device) and the argument checks of both entry points
 * (host only). The per-element updates they feed are elem.h's; those of
 * RMSprop, Adagrad and Adadelta (optim_adaptive.h) are here.
 *
 * Adam's scalars are computed in double and rounded once to float32, as
 * torch.optim computes them in Python and ATen's Scalar.to<float>() rounds
 * them: bc1 = 1 - beta1^step, bc2 = 1 - beta2^step, step_size = lr / bc1 and
 * bc2_sqrt = bc2 ** 0.5. The last is pow(bc2, 0.5), not sqrt(bc2): torch's
 * single-tensor and foreach Adam write `bias_correction2 ** 0.5` (a Python
 * float power, C's pow); only the fused CUDA kernel calls sqrt.
 *
 * The checks report with torch's messages ("Invalid learning rate: -1.0");
 * unit tests: tests/c/test_shared_math.c.
 */
#ifndef AMPY_OPTIM_MATH_H
#define AMPY_OPTIM_MATH_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/optim.h"
#include "ampy/optim_adaptive.h"
#include "ampy/status.h"

/* ---- per-step scalars ------------------------------------------------------ */

/* Adam/AdamW constants of one tensor for the step about to be taken (`step`
 * = steps taken so far + 1); inv: the gradient multiplier; write: the loop
 * stores the unscaled gradient back. */
AMPY_ELEM void ampy_adam_scalars_init(const ampy_adam_options *o, float inv, int write, float step,
                                      ampy_adam_scalars *s)
{
    double bc1 = 1.0 - pow(o->beta1, (double)step);
    double bc2 = 1.0 - pow(o->beta2, (double)step);
    double step_size = o->lr / bc1;
    s->inv_scale = inv;
    s->neg = o->maximize ? -1.0f : 1.0f;
    s->decoupled = o->decoupled_weight_decay && o->weight_decay != 0.0;
    s->wd = (!o->decoupled_weight_decay && o->weight_decay != 0.0) ? (float)o->weight_decay : 0.0f;
    s->decay_mul = s->decoupled ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
    s->w1 = (float)(1.0 - o->beta1);
    s->w1m1 = s->w1 - 1.0f;
    s->w1_small = fabsf(s->w1) < 0.5f;
    s->beta2 = (float)o->beta2;
    s->w2 = (float)(1.0 - o->beta2);
    s->bc2_sqrt = (float)pow(bc2, 0.5);
    s->eps = (float)o->eps;
    s->neg_step_size = (float)(-step_size);
    s->amsgrad = o->amsgrad != 0;
    s->write_grad = write;
}

/* SGD constants (the same for every tensor and step). */
AMPY_ELEM void ampy_sgd_scalars_init(const ampy_sgd_options *o, float inv, int write,
                                     ampy_sgd_scalars *s)
{
    s->inv_scale = inv;
    s->neg = o->maximize ? -1.0f : 1.0f;
    s->wd = (float)o->weight_decay;
    s->has_momentum = o->momentum != 0.0;
    s->momentum = (float)o->momentum;
    s->one_m_damp = (float)(1.0 - o->dampening);
    s->nesterov = o->nesterov != 0;
    s->neg_lr = (float)(-o->lr);
    s->write_grad = write;
}

/* ---- RMSprop / Adagrad / Adadelta (optim_adaptive.h) ----------------------------
 * Each ATen op of torch's single-tensor loop is one float32 operation here,
 * in torch's order: x.add(y, alpha=a) and x.add_(y, alpha=a) are fma(y, a, x)
 * and x.addcmul_(y, z, value=c) is fma(c*y, z, x) (ATen's vectorised fmadd);
 * x.addcdiv_(y, z, value=c) is x + (c*y)/z; x.lerp_(y, wt) is ATen's two-branch
 * lerp (as in ampy_adam_elem). */

/* Per-step constants of one tensor, float32. */
typedef struct ampy_adaptive_scalars {
    int kind;             /* AMPY_ADAPTIVE_*                                   */
    float inv_scale;      /* gradient multiplier (1 = none)                    */
    float neg;            /* -1 when maximize, else +1                         */
    float wd;             /* L2 weight decay (0: none)                         */
    float decay;          /* RMSprop alpha / Adadelta rho                      */
    float w;              /* 1 - decay, rounded once from double               */
    float wm1;            /* w - 1 in float (the lerp's second branch)         */
    int w_small;          /* |w| < 0.5: which lerp formula                     */
    float eps;
    float momentum;       /* RMSprop                                           */
    int has_momentum;     /* momentum > 0                                      */
    int centered;
    float neg_lr;         /* -lr; Adagrad: -lr / (1 + (step-1)*lr_decay)       */
    int write_grad;       /* the loop stores g * inv_scale back into grad      */
} ampy_adaptive_scalars;

/* Constants for the step about to be taken (`step` = steps taken so far + 1,
 * read by Adagrad's learning-rate decay). */
AMPY_ELEM void ampy_adaptive_scalars_init(const ampy_adaptive_options *o, float inv, int write,
                                          float step, ampy_adaptive_scalars *s)
{
    double decay = o->kind == AMPY_ADAPTIVE_ADADELTA ? o->rho : o->alpha;
    s->kind = o->kind;
    s->inv_scale = inv;
    s->neg = o->maximize ? -1.0f : 1.0f;
    s->wd = (float)o->weight_decay;
    s->decay = (float)decay;
    s->w = (float)(1.0 - decay);
    s->wm1 = s->w - 1.0f;
    s->w_small = fabsf(s->w) < 0.5f;
    s->eps = (float)o->eps;
    s->momentum = (float)o->momentum;
    s->has_momentum = o->kind == AMPY_ADAPTIVE_RMSPROP && o->momentum > 0.0;
    s->centered = o->kind == AMPY_ADAPTIVE_RMSPROP && o->centered != 0;
    if (o->kind == AMPY_ADAPTIVE_ADAGRAD)
        s->neg_lr = (float)(-(o->lr / (1.0 + ((double)step - 1.0) * o->lr_decay)));
    else
        s->neg_lr = (float)(-o->lr);
    s->write_grad = write;
}

/* The gradient as the update sees it: unscaled, negated for maximize, with
 * L2 weight decay. */
AMPY_ELEM float ampy_adaptive_grad(float g, float w, const ampy_adaptive_scalars *s)
{
    g = g * s->inv_scale;
    g = g * s->neg;
    if (s->wd != 0.0f)
        g = AMPY_FMAF(w, s->wd, g);
    return g;
}

/* One RMSprop element: *p fp32 weight, *v square_avg, *buf momentum_buffer
 * (has_momentum), *ga grad_avg (centered). */
AMPY_ELEM void ampy_rmsprop_elem(float g, float *p, float *v, float *buf, float *ga,
                                 const ampy_adaptive_scalars *s)
{
    float w = *p;
    g = ampy_adaptive_grad(g, w, s);
    float vv = AMPY_FMAF(s->w * g, g, *v * s->decay);
    float avg;
    if (s->centered) {
        float d = g - *ga;
        float a = s->w_small ? AMPY_FMAF(s->w, d, *ga) : AMPY_FMAF(s->wm1, d, g);
        *ga = a;
        avg = AMPY_SQRTF(AMPY_FMAF(-a, a, vv));
    } else {
        avg = AMPY_SQRTF(vv);
    }
    avg = avg + s->eps;
    if (s->has_momentum) {
        float b = *buf * s->momentum;
        b = b + g / avg;
        *buf = b;
        w = AMPY_FMAF(b, s->neg_lr, w);
    } else {
        w = w + (s->neg_lr * g) / avg;
    }
    *p = w;
    *v = vv;
}

/* One Adagrad element: *sum the accumulated squares. */
AMPY_ELEM void ampy_adagrad_elem(float g, float *p, float *sum, const ampy_adaptive_scalars *s)
{
    float w = *p;
    g = ampy_adaptive_grad(g, w, s);
    float acc = AMPY_FMAF(g, g, *sum);
    float std = AMPY_SQRTF(acc) + s->eps;
    *sum = acc;
    *p = w + (s->neg_lr * g) / std;
}

/* One Adadelta element: *v square_avg, *acc acc_delta. */
AMPY_ELEM void ampy_adadelta_elem(float g, float *p, float *v, float *acc,
                                  const ampy_adaptive_scalars *s)
{
    float w = *p;
    g = ampy_adaptive_grad(g, w, s);
    float vv = AMPY_FMAF(s->w * g, g, *v * s->decay);
    float std = AMPY_SQRTF(vv + s->eps);
    float d = AMPY_SQRTF(*acc + s->eps);
    d = d / std;
    d = d * g;
    float a = AMPY_FMAF(s->w * d, d, *acc * s->decay);
    *v = vv;
    *acc = a;
    *p = AMPY_FMAF(d, s->neg_lr, w);
}

/* One element of any kind; state pointers as in ampy_adaptive_tensor. */
AMPY_ELEM void ampy_adaptive_elem(float g, float *p, float *s0, float *s1, float *s2,
                                  const ampy_adaptive_scalars *s)
{
    if (s->kind == AMPY_ADAPTIVE_RMSPROP)
        ampy_rmsprop_elem(g, p, s0, s1, s2, s);
    else if (s->kind == AMPY_ADAPTIVE_ADAGRAD)
        ampy_adagrad_elem(g, p, s0, s);
    else
        ampy_adadelta_elem(g, p, s0, s1, s);
}

/* ---- element access ---------------------------------------------------------- */

/* Gradient element i as float32 (float16/bfloat16 widened exactly). */
AMPY_ELEM float ampy_optim_load_grad(const void *g, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_FLOAT16: return ampy_f16_to_f32(((const uint16_t *)g)[i]);
    case AMPY_BFLOAT16: return ampy_bf16_to_f32(((const uint16_t *)g)[i]);
    default: return ((const float *)g)[i];
    }
}

/* Store w rounded once into a float16/bfloat16 array (nothing for other dtypes). */
AMPY_ELEM void ampy_optim_store_half(void *p, int dt, int64_t i, float w)
{
    if (dt == AMPY_FLOAT16)
        ((uint16_t *)p)[i] = ampy_f32_to_f16(w);
    else if (dt == AMPY_BFLOAT16)
        ((uint16_t *)p)[i] = ampy_f32_to_bf16(w);
}

/* Store v into a gradient array of dtype dt, rounded once. */
AMPY_ELEM void ampy_optim_store_grad(void *g, int dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)g)[i] = v;
    else
        ampy_optim_store_half(g, dt, i, v);
}

/* ---- argument checks (host) ---------------------------------------------------- */

/* Python's repr() of a float (shortest round trip, ".0" for integers), so
 * messages read like torch's: "Invalid learning rate: -1.0". */
static inline const char *ampy_optim_pyrepr(char *buf, size_t size, double x)
{
    if (x != x)
        return "nan";
    if (!ampy_f64_isfinite(x))
        return x > 0 ? "inf" : "-inf";
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".en"))
        strncat(buf, ".0", size - strlen(buf) - 1);
    return buf;
}

static inline int ampy_optim_nonneg(double x) { return x >= 0.0 && ampy_f64_isfinite(x); }

static inline int ampy_optim_float_dtype(int dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16;
}

/* One tensor entry: dtypes, numel, master copy given exactly for half
 * params, param and grad present; `what` names the optimizer. */
static inline ampy_status ampy_optim_check_tensor(const char *what, int64_t i, const void *param,
                                                  const float *master, const void *grad,
                                                  int64_t numel, int pdt, int gdt)
{
    if (!ampy_optim_float_dtype(pdt) || !ampy_optim_float_dtype(gdt))
        return ampy_error(AMPY_ERR_DTYPE,
                          "%s: tensor %lld: param dtype %s / grad dtype %s; expected float32, "
                          "float16 or bfloat16",
                          what, (long long)i, ampy_dtype_name(pdt), ampy_dtype_name(gdt));
    if (numel < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: tensor %lld has numel %lld", what, (long long)i,
                          (long long)numel);
    if (pdt == AMPY_FLOAT32 && master)
        return ampy_error(AMPY_ERR_VALUE, "%s: tensor %lld: a float32 param takes no master copy",
                          what, (long long)i);
    if (numel > 0 && pdt != AMPY_FLOAT32 && !master)
        return ampy_error(AMPY_ERR_VALUE, "%s: tensor %lld: a %s param needs a float32 master copy",
                          what, (long long)i, ampy_dtype_name(pdt));
    if (numel > 0 && (!param || !grad))
        return ampy_error(AMPY_ERR_VALUE, "%s: tensor %lld: NULL param or grad", what, (long long)i);
    return AMPY_OK;
}

/* Adam/AdamW: options, then every tensor entry. */
static inline ampy_status ampy_adam_check_args(int64_t n, const ampy_adam_tensor *t,
                                               const ampy_adam_options *o)
{
    char b[40];
    if (!o || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "adam_step: NULL options or n < 0");
    if (!ampy_optim_nonneg(o->lr))
        return ampy_error(AMPY_ERR_VALUE, "Invalid learning rate: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->lr));
    if (!ampy_optim_nonneg(o->eps))
        return ampy_error(AMPY_ERR_VALUE, "Invalid epsilon value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->eps));
    if (!(o->beta1 >= 0.0 && o->beta1 < 1.0))
        return ampy_error(AMPY_ERR_VALUE, "Invalid beta parameter at index 0: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->beta1));
    if (!(o->beta2 >= 0.0 && o->beta2 < 1.0))
        return ampy_error(AMPY_ERR_VALUE, "Invalid beta parameter at index 1: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->beta2));
    if (!ampy_optim_nonneg(o->weight_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid weight_decay value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->weight_decay));
    if (n > 0 && !t)
        return ampy_error(AMPY_ERR_VALUE, "adam_step: NULL tensor list");
    for (int64_t i = 0; i < n; i++) {
        const ampy_adam_tensor *x = &t[i];
        ampy_status st = ampy_optim_check_tensor("adam_step", i, x->param, x->master, x->grad,
                                                 x->numel, x->param_dtype, x->grad_dtype);
        if (st != AMPY_OK)
            return st;
        if (!x->step || (x->numel > 0 && (!x->exp_avg || !x->exp_avg_sq ||
                                          (o->amsgrad && !x->max_exp_avg_sq))))
            return ampy_error(AMPY_ERR_VALUE, "adam_step: tensor %lld: NULL step or moment buffer",
                              (long long)i);
    }
    return AMPY_OK;
}

/* SGD: options, then every tensor entry. */
static inline ampy_status ampy_sgd_check_args(int64_t n, const ampy_sgd_tensor *t,
                                              const ampy_sgd_options *o)
{
    char b[40];
    if (!o || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "sgd_step: NULL options or n < 0");
    if (!ampy_optim_nonneg(o->lr))
        return ampy_error(AMPY_ERR_VALUE, "Invalid learning rate: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->lr));
    if (!ampy_optim_nonneg(o->momentum))
        return ampy_error(AMPY_ERR_VALUE, "Invalid momentum value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->momentum));
    if (!ampy_optim_nonneg(o->weight_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid weight_decay value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->weight_decay));
    if (!ampy_f64_isfinite(o->dampening))
        return ampy_error(AMPY_ERR_VALUE, "Invalid dampening value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->dampening));
    if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
        return ampy_error(AMPY_ERR_VALUE, "Nesterov momentum requires a momentum and zero dampening");
    if (n > 0 && !t)
        return ampy_error(AMPY_ERR_VALUE, "sgd_step: NULL tensor list");
    for (int64_t i = 0; i < n; i++) {
        const ampy_sgd_tensor *x = &t[i];
        ampy_status st = ampy_optim_check_tensor("sgd_step", i, x->param, x->master, x->grad,
                                                 x->numel, x->param_dtype, x->grad_dtype);
        if (st != AMPY_OK)
            return st;
        if (o->momentum != 0.0 && x->numel > 0 && !x->momentum_buffer)
            return ampy_error(AMPY_ERR_VALUE, "sgd_step: tensor %lld: NULL momentum buffer",
                              (long long)i);
    }
    return AMPY_OK;
}

/* RMSprop / Adagrad / Adadelta: options (in torch's order of checks), then
 * every tensor entry. */
static inline ampy_status ampy_adaptive_check_options(const ampy_adaptive_options *o)
{
    char b[40];
    if (!o || o->kind < AMPY_ADAPTIVE_RMSPROP || o->kind > AMPY_ADAPTIVE_ADADELTA)
        return ampy_error(AMPY_ERR_VALUE, "adaptive_step: NULL options or unknown kind");
    const int k = o->kind;
    if (!ampy_optim_nonneg(o->lr))
        return ampy_error(AMPY_ERR_VALUE, "Invalid learning rate: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->lr));
    if (k == AMPY_ADAPTIVE_ADAGRAD && !ampy_optim_nonneg(o->lr_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid lr_decay value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->lr_decay));
    if (k == AMPY_ADAPTIVE_ADAGRAD && !ampy_optim_nonneg(o->weight_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid weight_decay value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->weight_decay));
    if (k == AMPY_ADAPTIVE_ADADELTA && !(o->rho >= 0.0 && o->rho <= 1.0))
        return ampy_error(AMPY_ERR_VALUE, "Invalid rho value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->rho));
    if (!ampy_optim_nonneg(o->eps))
        return ampy_error(AMPY_ERR_VALUE, "Invalid epsilon value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->eps));
    if (k == AMPY_ADAPTIVE_RMSPROP && !ampy_optim_nonneg(o->momentum))
        return ampy_error(AMPY_ERR_VALUE, "Invalid momentum value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->momentum));
    if (k != AMPY_ADAPTIVE_ADAGRAD && !ampy_optim_nonneg(o->weight_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid weight_decay value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->weight_decay));
    if (k == AMPY_ADAPTIVE_RMSPROP && !ampy_optim_nonneg(o->alpha))
        return ampy_error(AMPY_ERR_VALUE, "Invalid alpha value: %s",
                          ampy_optim_pyrepr(b, sizeof b, o->alpha));
    return AMPY_OK;
}

static inline ampy_status ampy_adaptive_check_args(int64_t n, const ampy_adaptive_tensor *t,
                                                   const ampy_adaptive_options *o)
{
    ampy_status st = ampy_adaptive_check_options(o);
    if (st != AMPY_OK)
        return st;
    if (n < 0 || (n > 0 && !t))
        return ampy_error(AMPY_ERR_VALUE, "adaptive_step: n < 0 or NULL tensor list");
    const int need1 = (o->kind == AMPY_ADAPTIVE_RMSPROP && o->momentum > 0.0) ||
                      o->kind == AMPY_ADAPTIVE_ADADELTA;
    const int need2 = o->kind == AMPY_ADAPTIVE_RMSPROP && o->centered;
    for (int64_t i = 0; i < n; i++) {
        const ampy_adaptive_tensor *x = &t[i];
        st = ampy_optim_check_tensor("adaptive_step", i, x->param, x->master, x->grad, x->numel,
                                     x->param_dtype, x->grad_dtype);
        if (st != AMPY_OK)
            return st;
        if (!x->step || (x->numel > 0 && (!x->state0 || (need1 && !x->state1) ||
                                          (need2 && !x->state2))))
            return ampy_error(AMPY_ERR_VALUE, "adaptive_step: tensor %lld: NULL step or state "
                              "buffer", (long long)i);
    }
    return AMPY_OK;
}

#endif /* AMPY_OPTIM_MATH_H */
