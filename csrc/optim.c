/* optim.c — fused multi-tensor SGD / Adam / AdamW with fp32 master weights
 * (see optim.h): the portable per-element loops, the threading and the
 * skipped-step path; the AVX-512 loops live in optim_x86.c. The argument
 * checks and per-step constants are optim_math.h's (shared with
 * cuda/optim.cu), the per-element math is elem.h's.
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
#include "ampy/optim_math.h"

/* Elements per thread before a step is split across threads. */
#define OPTIM_GRAIN ((int64_t)1 << 16)

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
        float g = ampy_optim_load_grad(t->grad, t->grad_dtype, i);
        if (s->write_grad)
            ampy_optim_store_grad(t->grad, t->grad_dtype, i, g * s->inv_scale);
        ampy_adam_elem(g, &w[i], &t->exp_avg[i], &t->exp_avg_sq[i], vmax, s);
        if (t->master)
            ampy_optim_store_half(t->param, t->param_dtype, i, w[i]);
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

ampy_status ampy_optim_adam_step(int64_t n, const ampy_adam_tensor *t, const ampy_adam_options *o,
                                 const float *inv_scale, const float *found_inf, int *stepped)
{
    ampy_status st = ampy_adam_check_args(n, t, o);
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
        ampy_adam_scalars_init(o, inv, write, *t[i].step + 1.0f, &s[i]);
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
        float g = ampy_optim_load_grad(t->grad, t->grad_dtype, i);
        if (s->write_grad)
            ampy_optim_store_grad(t->grad, t->grad_dtype, i, g * s->inv_scale);
        ampy_sgd_elem(g, &w[i], buf, t->momentum_first, s);
        if (t->master)
            ampy_optim_store_half(t->param, t->param_dtype, i, w[i]);
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

ampy_status ampy_optim_sgd_step(int64_t n, const ampy_sgd_tensor *t, const ampy_sgd_options *o,
                                const float *inv_scale, const float *found_inf, int *stepped)
{
    ampy_status st = ampy_sgd_check_args(n, t, o);
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
        ampy_sgd_scalars_init(o, inv_scale ? *inv_scale : 1.0f, write, &s);
        sgd_ctx c = {t, &s, ampy_cpu_level_get() >= AMPY_CPU_AVX512};
        ampy_mt_parallel(n, off, OPTIM_GRAIN, sgd_chunk, &c);
        free(off);
    }
    if (stepped)
        *stepped = 1;
    return AMPY_OK;
}
