/* optim_adaptive.c — fused multi-tensor RMSprop / Adagrad / Adadelta with
 * fp32 master weights (see optim_adaptive.h): the portable per-element loop,
 * the threading and the skipped-step path; the AVX-512 loop lives in
 * optim_x86.c. The argument checks, the per-step
 * constants and the per-element math are optim_math.h's (shared with
 * cuda/optim_adaptive.cu).
 */
#include <stddef.h>
#include <stdlib.h>

#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/finite.h"
#include "ampy/optim_adaptive.h"
#include "ampy/optim_math.h"

/* Elements per thread before a step is split across threads. */
#define ADAPTIVE_GRAIN ((int64_t)1 << 16)

void ampy_optim_adaptive_run_portable(const ampy_adaptive_tensor *t, int64_t b, int64_t e,
                                      const void *sv)
{
    const ampy_adaptive_scalars *s = (const ampy_adaptive_scalars *)sv;
    float *w = t->master ? t->master : (float *)t->param;
    float d1 = 0.0f, d2 = 0.0f;
    const int use1 = t->state1 != NULL, use2 = t->state2 != NULL;
    for (int64_t i = b; i < e; i++) {
        float g = ampy_optim_load_grad(t->grad, t->grad_dtype, i);
        if (s->write_grad)
            ampy_optim_store_grad(t->grad, t->grad_dtype, i, g * s->inv_scale);
        ampy_adaptive_elem(g, &w[i], &t->state0[i], use1 ? &t->state1[i] : &d1,
                           use2 ? &t->state2[i] : &d2, s);
        if (t->master)
            ampy_optim_store_half(t->param, t->param_dtype, i, w[i]);
    }
}

#if !(defined(__x86_64__) && defined(__GNUC__))
void ampy_optim_adaptive_run_avx512(const ampy_adaptive_tensor *t, int64_t b, int64_t e,
                                    const void *s)
{
    ampy_optim_adaptive_run_portable(t, b, e, s);
}
#endif

typedef struct {
    const ampy_adaptive_tensor *t;
    const ampy_adaptive_scalars *s;
    int simd;
} adaptive_ctx;

static void adaptive_chunk(int64_t i, int64_t b, int64_t e, void *arg)
{
    const adaptive_ctx *c = (const adaptive_ctx *)arg;
    if (c->simd)
        ampy_optim_adaptive_run_avx512(&c->t[i], b, e, &c->s[i]);
    else
        ampy_optim_adaptive_run_portable(&c->t[i], b, e, &c->s[i]);
}

/* The tensors' entries with the buffers this configuration does not use
 * cleared, so the loop never touches them; NULL with an error set. */
static ampy_adaptive_tensor *used_entries(int64_t n, const ampy_adaptive_tensor *t,
                                          const ampy_adaptive_options *o)
{
    ampy_adaptive_tensor *u = (ampy_adaptive_tensor *)malloc(sizeof *u * (size_t)n);
    if (!u) {
        ampy_error(AMPY_ERR_NOMEM, "adaptive_step: out of memory");
        return NULL;
    }
    const int use1 = (o->kind == AMPY_ADAPTIVE_RMSPROP && o->momentum > 0.0) ||
                     o->kind == AMPY_ADAPTIVE_ADADELTA;
    const int use2 = o->kind == AMPY_ADAPTIVE_RMSPROP && o->centered;
    for (int64_t i = 0; i < n; i++) {
        u[i] = t[i];
        if (!use1)
            u[i].state1 = NULL;
        if (!use2)
            u[i].state2 = NULL;
    }
    return u;
}

/* A skipped step with write-back: every gradient multiplied by inv in place,
 * the bits of ampy_finite_check_unscale() (which it is). */
static ampy_status unscale_only(int64_t n, const ampy_adaptive_tensor *t, const float *inv)
{
    void **data = (void **)malloc(sizeof(void *) * (size_t)(n + 1));
    int64_t *numel = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
    int *dtype = (int *)malloc(sizeof(int) * (size_t)(n + 1));
    ampy_status st = AMPY_OK;
    if (!data || !numel || !dtype) {
        st = ampy_error(AMPY_ERR_NOMEM, "adaptive_step: out of memory");
    } else {
        for (int64_t i = 0; i < n; i++) {
            data[i] = t[i].grad;
            numel[i] = t[i].numel;
            dtype[i] = t[i].grad_dtype;
        }
        float found = 0.0f;
        st = ampy_finite_check_unscale(n, data, numel, dtype, &found, inv);
    }
    free(data);
    free(numel);
    free(dtype);
    return st;
}

/* Prefix sums of the numels, or NULL with an error set. */
static int64_t *offsets_of(int64_t n, const ampy_adaptive_tensor *t)
{
    int64_t *off = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!off) {
        ampy_error(AMPY_ERR_NOMEM, "adaptive_step: out of memory");
        return NULL;
    }
    off[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (t[i].numel > INT64_MAX - off[i]) {
            free(off);
            ampy_error(AMPY_ERR_VALUE, "adaptive_step: total numel overflows int64");
            return NULL;
        }
        off[i + 1] = off[i] + t[i].numel;
    }
    return off;
}

ampy_status ampy_optim_adaptive_step(int64_t n, const ampy_adaptive_tensor *t,
                                     const ampy_adaptive_options *o, const float *inv_scale,
                                     const float *found_inf, int *stepped)
{
    ampy_status st = ampy_adaptive_check_args(n, t, o);
    if (st != AMPY_OK)
        return st;
    if (stepped)
        *stepped = 0;
    const int write = o->write_grads && inv_scale && *inv_scale != 1.0f;
    if (found_inf && *found_inf != 0.0f)
        return write && n > 0 ? unscale_only(n, t, inv_scale) : AMPY_OK;
    if (n > 0) {
        int64_t *off = offsets_of(n, t);
        ampy_adaptive_scalars *s = (ampy_adaptive_scalars *)malloc(sizeof *s * (size_t)n);
        ampy_adaptive_tensor *u = off && s ? used_entries(n, t, o) : NULL;
        if (!u) {
            free(off);
            free(s);
            return off && !s ? ampy_error(AMPY_ERR_NOMEM, "adaptive_step: out of memory")
                             : AMPY_ERR_NOMEM;
        }
        const float inv = inv_scale ? *inv_scale : 1.0f;
        for (int64_t i = 0; i < n; i++)
            ampy_adaptive_scalars_init(o, inv, write, *t[i].step + 1.0f, &s[i]);
        adaptive_ctx c = {u, s, ampy_cpu_level_get() >= AMPY_CPU_AVX512};
        ampy_mt_parallel(n, off, ADAPTIVE_GRAIN, adaptive_chunk, &c);
        for (int64_t i = 0; i < n; i++)
            *t[i].step = *t[i].step + 1.0f;
        free(off);
        free(s);
        free(u);
    }
    if (stepped)
        *stepped = 1;
    return AMPY_OK;
}
