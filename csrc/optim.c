/* optim.c — fused multi-tensor SGD / Adam / AdamW with fp32 master weights
 * (see optim.h). Validation, per-tensor step constants (in double, as
 * torch.optim computes them in Python) and the portable per-element loops;
 * the AVX-512 loops live in optim_x86.c. The per-element math is elem.h's.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/finite.h"
#include "ampy/optim.h"

/* Elements per thread before a step is split across threads. */
#define OPTIM_GRAIN ((int64_t)1 << 16)

/* Python's repr() of a float (shortest round-trip, ".0" for integers), so
 * messages read like torch's: "Invalid learning rate: -1.0". */
static const char *pyrepr(char *buf, size_t size, double x)
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

static int ok_nonneg(double x) { return x >= 0.0 && ampy_f64_isfinite(x); }

static int float_dtype(int dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16;
}

/* Shared per-tensor checks; `what` names the optimizer in messages. */
static ampy_status check_tensor(const char *what, int64_t i, void *param, const float *master,
                                const void *grad, int64_t numel, int pdt, int gdt)
{
    if (!float_dtype(pdt) || !float_dtype(gdt))
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

/* Prefix sums of numels (n + 1 entries), or NULL with an error set. */
static int64_t *make_offsets(const char *what, int64_t n, const void *t, size_t stride,
                             size_t numel_off)
{
    int64_t *off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!off) {
        ampy_error(AMPY_ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    off[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t ne;
        memcpy(&ne, (const char *)t + (size_t)i * stride + numel_off, sizeof ne);
        if (ne > INT64_MAX - off[i]) {
            free(off);
            ampy_error(AMPY_ERR_NOMEM, "%s: total numel overflows int64", what);
            return NULL;
        }
        off[i + 1] = off[i] + ne;
    }
    return off;
}

static float load_grad(const void *g, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_FLOAT16: return ampy_f16_to_f32(((const uint16_t *)g)[i]);
    case AMPY_BFLOAT16: return ampy_bf16_to_f32(((const uint16_t *)g)[i]);
    default: return ((const float *)g)[i];
    }
}

static void store_half(void *p, int dt, int64_t i, float w)
{
    if (dt == AMPY_FLOAT16)
        ((uint16_t *)p)[i] = ampy_f32_to_f16(w);
    else if (dt == AMPY_BFLOAT16)
        ((uint16_t *)p)[i] = ampy_f32_to_bf16(w);
}

static void store_grad(void *g, int dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)g)[i] = v;
    else
        store_half(g, dt, i, v);
}

/* Write-back wanted: options ask for it and the multiplier is not 1. */
static int wants_write(int write_grads, const float *inv_scale)
{
    return write_grads && inv_scale && *inv_scale != 1.0f;
}

/* ---- a skipped step: only the gradients are unscaled ---------------------- */

typedef struct {
    void *const *grad;
    const int *dtype;
    float inv;
    int simd;
} unscale_ctx;

static void unscale_chunk(int64_t i, int64_t b, int64_t e, void *arg)
{
    const unscale_ctx *c = (const unscale_ctx *)arg;
    char *p = (char *)c->grad[i] + (size_t)b * ampy_dtype_size(c->dtype[i]);
    if (c->simd)
        (void)ampy_finite_run_avx512(p, e - b, c->dtype[i], c->inv);
    else
        (void)ampy_finite_run_portable(p, e - b, c->dtype[i], c->inv);
}

/* grad[i] *= inv for n entries laid out with `stride` bytes apart in `t`
 * (grad pointer at grad_off, numel at numel_off, grad dtype at dt_off):
 * the same bits as ampy_finite_check_unscale() and the fused write-back. */
static ampy_status unscale_only(const char *what, int64_t n, const void *t, size_t stride,
                                size_t grad_off, size_t numel_off, size_t dt_off, float inv)
{
    int64_t *off = make_offsets(what, n, t, stride, numel_off);
    void **grad = (void **)malloc(sizeof(void *) * (size_t)(n + 1));
    int *dt = (int *)malloc(sizeof(int) * (size_t)(n + 1));
    if (!off || !grad || !dt) {
        free(grad);
        free(dt);
        if (!off)
            return AMPY_ERR_NOMEM;
        free(off);
        return ampy_error(AMPY_ERR_NOMEM, "%s: out of memory", what);
    }
    for (int64_t i = 0; i < n; i++) {
        const char *x = (const char *)t + (size_t)i * stride;
        memcpy(&grad[i], x + grad_off, sizeof grad[i]);
        memcpy(&dt[i], x + dt_off, sizeof dt[i]);
    }
    unscale_ctx c = {grad, dt, inv, ampy_cpu_level_get() >= AMPY_CPU_AVX512};
    ampy_mt_parallel(n, off, OPTIM_GRAIN, unscale_chunk, &c);
    free(off);
    free(grad);
    free(dt);
    return AMPY_OK;
}

/* ==== Adam ================================================================== */

void ampy_optim_adam_run_portable(const ampy_adam_tensor *t, int64_t b, int64_t e, const void *sv)
{
    const ampy_adam_scalars *s = (const ampy_adam_scalars *)sv;
    float *w = t->master ? t->master : (float *)t->param;
    float dummy = 0.0f;
    for (int64_t i = b; i < e; i++) {
        float *vmax = s->amsgrad ? &t->max_exp_avg_sq[i] : &dummy;
        float g = load_grad(t->grad, t->grad_dtype, i);
        if (s->write_grad)
            store_grad(t->grad, t->grad_dtype, i, g * s->inv_scale);
        ampy_adam_elem(g, &w[i], &t->exp_avg[i], &t->exp_avg_sq[i], vmax, s);
        if (t->master)
            store_half(t->param, t->param_dtype, i, w[i]);
    }
}

#if !(defined(__x86_64__) && defined(__GNUC__))
void ampy_optim_adam_run_avx512(const ampy_adam_tensor *t, int64_t b, int64_t e, const void *s)
{
    ampy_optim_adam_run_portable(t, b, e, s);
}
void ampy_optim_sgd_run_avx512(const ampy_sgd_tensor *t, int64_t b, int64_t e, const void *s)
{
    ampy_optim_sgd_run_portable(t, b, e, s);
}
#endif

typedef struct {
    const ampy_adam_tensor *t;
    const ampy_adam_scalars *s;
    int simd;
} adam_ctx;

static void adam_chunk(int64_t i, int64_t b, int64_t e, void *arg)
{
    const adam_ctx *c = (const adam_ctx *)arg;
    if (c->simd)
        ampy_optim_adam_run_avx512(&c->t[i], b, e, &c->s[i]);
    else
        ampy_optim_adam_run_portable(&c->t[i], b, e, &c->s[i]);
}

static ampy_status check_adam(int64_t n, const ampy_adam_tensor *t, const ampy_adam_options *o)
{
    char b[40];
    if (!ok_nonneg(o->lr))
        return ampy_error(AMPY_ERR_VALUE, "Invalid learning rate: %s", pyrepr(b, sizeof b, o->lr));
    if (!ok_nonneg(o->eps))
        return ampy_error(AMPY_ERR_VALUE, "Invalid epsilon value: %s", pyrepr(b, sizeof b, o->eps));
    if (!(o->beta1 >= 0.0 && o->beta1 < 1.0))
        return ampy_error(AMPY_ERR_VALUE, "Invalid beta parameter at index 0: %s",
                          pyrepr(b, sizeof b, o->beta1));
    if (!(o->beta2 >= 0.0 && o->beta2 < 1.0))
        return ampy_error(AMPY_ERR_VALUE, "Invalid beta parameter at index 1: %s",
                          pyrepr(b, sizeof b, o->beta2));
    if (!ok_nonneg(o->weight_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid weight_decay value: %s",
                          pyrepr(b, sizeof b, o->weight_decay));
    if (n > 0 && !t)
        return ampy_error(AMPY_ERR_VALUE, "adam_step: NULL tensor list");
    for (int64_t i = 0; i < n; i++) {
        const ampy_adam_tensor *x = &t[i];
        ampy_status st = check_tensor("adam_step", i, x->param, x->master, x->grad, x->numel,
                                      x->param_dtype, x->grad_dtype);
        if (st != AMPY_OK)
            return st;
        if (!x->step || (x->numel > 0 && (!x->exp_avg || !x->exp_avg_sq ||
                                          (o->amsgrad && !x->max_exp_avg_sq))))
            return ampy_error(AMPY_ERR_VALUE, "adam_step: tensor %lld: NULL step or moment buffer",
                              (long long)i);
    }
    return AMPY_OK;
}

/* Per-tensor constants for the step about to be taken (step = *step + 1). */
static void adam_scalars(const ampy_adam_options *o, float inv, int write, float step,
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

ampy_status ampy_optim_adam_step(int64_t n, const ampy_adam_tensor *t, const ampy_adam_options *o,
                                 const float *inv_scale, const float *found_inf, int *stepped)
{
    if (!o || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "adam_step: NULL options or n < 0");
    ampy_status st = check_adam(n, t, o);
    if (st != AMPY_OK)
        return st;
    if (stepped)
        *stepped = 0;
    int write = wants_write(o->write_grads, inv_scale);
    if (found_inf && *found_inf != 0.0f)
        return write ? unscale_only("adam_step", n, t, sizeof *t, offsetof(ampy_adam_tensor, grad),
                                    offsetof(ampy_adam_tensor, numel),
                                    offsetof(ampy_adam_tensor, grad_dtype), *inv_scale)
                     : AMPY_OK;
    if (n == 0) {
        if (stepped)
            *stepped = 1;
        return AMPY_OK;
    }
    int64_t *off = make_offsets("adam_step", n, t, sizeof *t, offsetof(ampy_adam_tensor, numel));
    ampy_adam_scalars *s = (ampy_adam_scalars *)malloc(sizeof *s * (size_t)n);
    if (!off || !s) {
        free(off);
        free(s);
        return off ? ampy_error(AMPY_ERR_NOMEM, "adam_step: out of memory") : AMPY_ERR_NOMEM;
    }
    float inv = inv_scale ? *inv_scale : 1.0f;
    for (int64_t i = 0; i < n; i++)
        adam_scalars(o, inv, write, *t[i].step + 1.0f, &s[i]);
    adam_ctx c = {t, s, ampy_cpu_level_get() >= AMPY_CPU_AVX512};
    ampy_mt_parallel(n, off, OPTIM_GRAIN, adam_chunk, &c);
    for (int64_t i = 0; i < n; i++)
        *t[i].step = *t[i].step + 1.0f;
    free(off);
    free(s);
    if (stepped)
        *stepped = 1;
    return AMPY_OK;
}

/* ==== SGD =================================================================== */

void ampy_optim_sgd_run_portable(const ampy_sgd_tensor *t, int64_t b, int64_t e, const void *sv)
{
    const ampy_sgd_scalars *s = (const ampy_sgd_scalars *)sv;
    float *w = t->master ? t->master : (float *)t->param;
    float dummy = 0.0f;
    for (int64_t i = b; i < e; i++) {
        float *buf = s->has_momentum ? &t->momentum_buffer[i] : &dummy;
        float g = load_grad(t->grad, t->grad_dtype, i);
        if (s->write_grad)
            store_grad(t->grad, t->grad_dtype, i, g * s->inv_scale);
        ampy_sgd_elem(g, &w[i], buf, t->momentum_first, s);
        if (t->master)
            store_half(t->param, t->param_dtype, i, w[i]);
    }
}

typedef struct {
    const ampy_sgd_tensor *t;
    const ampy_sgd_scalars *s;
    int simd;
} sgd_ctx;

static void sgd_chunk(int64_t i, int64_t b, int64_t e, void *arg)
{
    const sgd_ctx *c = (const sgd_ctx *)arg;
    if (c->simd)
        ampy_optim_sgd_run_avx512(&c->t[i], b, e, c->s);
    else
        ampy_optim_sgd_run_portable(&c->t[i], b, e, c->s);
}

static ampy_status check_sgd(int64_t n, const ampy_sgd_tensor *t, const ampy_sgd_options *o)
{
    char b[40];
    if (!ok_nonneg(o->lr))
        return ampy_error(AMPY_ERR_VALUE, "Invalid learning rate: %s", pyrepr(b, sizeof b, o->lr));
    if (!ok_nonneg(o->momentum))
        return ampy_error(AMPY_ERR_VALUE, "Invalid momentum value: %s",
                          pyrepr(b, sizeof b, o->momentum));
    if (!ok_nonneg(o->weight_decay))
        return ampy_error(AMPY_ERR_VALUE, "Invalid weight_decay value: %s",
                          pyrepr(b, sizeof b, o->weight_decay));
    if (!ampy_f64_isfinite(o->dampening))
        return ampy_error(AMPY_ERR_VALUE, "Invalid dampening value: %s",
                          pyrepr(b, sizeof b, o->dampening));
    if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
        return ampy_error(AMPY_ERR_VALUE, "Nesterov momentum requires a momentum and zero dampening");
    if (n > 0 && !t)
        return ampy_error(AMPY_ERR_VALUE, "sgd_step: NULL tensor list");
    for (int64_t i = 0; i < n; i++) {
        const ampy_sgd_tensor *x = &t[i];
        ampy_status st = check_tensor("sgd_step", i, x->param, x->master, x->grad, x->numel,
                                      x->param_dtype, x->grad_dtype);
        if (st != AMPY_OK)
            return st;
        if (o->momentum != 0.0 && x->numel > 0 && !x->momentum_buffer)
            return ampy_error(AMPY_ERR_VALUE, "sgd_step: tensor %lld: NULL momentum buffer",
                              (long long)i);
    }
    return AMPY_OK;
}

ampy_status ampy_optim_sgd_step(int64_t n, const ampy_sgd_tensor *t, const ampy_sgd_options *o,
                                const float *inv_scale, const float *found_inf, int *stepped)
{
    if (!o || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "sgd_step: NULL options or n < 0");
    ampy_status st = check_sgd(n, t, o);
    if (st != AMPY_OK)
        return st;
    if (stepped)
        *stepped = 0;
    int write = wants_write(o->write_grads, inv_scale);
    if (found_inf && *found_inf != 0.0f)
        return write ? unscale_only("sgd_step", n, t, sizeof *t, offsetof(ampy_sgd_tensor, grad),
                                    offsetof(ampy_sgd_tensor, numel),
                                    offsetof(ampy_sgd_tensor, grad_dtype), *inv_scale)
                     : AMPY_OK;
    if (n > 0) {
        int64_t *off = make_offsets("sgd_step", n, t, sizeof *t, offsetof(ampy_sgd_tensor, numel));
        if (!off)
            return AMPY_ERR_NOMEM;
        ampy_sgd_scalars s;
        s.inv_scale = inv_scale ? *inv_scale : 1.0f;
        s.neg = o->maximize ? -1.0f : 1.0f;
        s.wd = (float)o->weight_decay;
        s.has_momentum = o->momentum != 0.0;
        s.momentum = (float)o->momentum;
        s.one_m_damp = (float)(1.0 - o->dampening);
        s.nesterov = o->nesterov != 0;
        s.neg_lr = (float)(-o->lr);
        s.write_grad = write;
        sgd_ctx c = {t, &s, ampy_cpu_level_get() >= AMPY_CPU_AVX512};
        ampy_mt_parallel(n, off, OPTIM_GRAIN, sgd_chunk, &c);
        free(off);
    }
    if (stepped)
        *stepped = 1;
    return AMPY_OK;
}
