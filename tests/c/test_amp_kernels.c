/* test_amp_kernels.c — C tests of the AMP kernels: the loss-scale rule and
 * the optimizer math of elem.h, and the portable vs AVX-512 paths of
 * finite.c / optim.c compared as bits.
 *
 * Build (from the repository root):
 *   gcc -O2 -std=c11 -fno-math-errno -Icsrc/include csrc/[a-z]*.c \
 *       tests/c/test_amp_kernels.c -lm -lpthread -o tests/c/bin/test_amp_kernels
 * Exit status 0 when every check passes; each failure prints one line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/finite.h"
#include "ampy/optim.h"
#include "ampy/parallel.h"
#include "ampy/scaler.h"
#include "ctest.h"

static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() >> 8) / 16777216.0f; }
static int have_avx512(void) { return (ampy_cpu_features() & AMPY_CPU_HAS_AVX512) != 0; }

/* ---- loss-scale rule ------------------------------------------------------ */

/* torch._amp_update_scale_ written out independently, in double. */
static void torch_update(float *scale, int32_t *tr, float found, double gf, double bf, int gi)
{
    if (found != 0.0f) {
        *scale = (float)((double)*scale * bf);
        *tr = 0;
    } else if (*tr + 1 == gi) {
        float ns = (float)((double)*scale * gf);
        if (isfinite(ns))
            *scale = ns;
        *tr = 0;
    } else {
        *tr += 1;
    }
}

static void test_scaler(void)
{
    ampy_scaler_options o;
    ampy_scaler_options_default(&o);
    o.growth_interval = 3;
    o.growth_factor = 2.5;
    o.backoff_factor = 0.3;
    float s = 65536.0f, rs = s;
    int32_t t = 0, rt = 0;
    for (int i = 0; i < 20000; i++) {
        float f = (rnd32() % 5 == 0) ? ((rnd32() & 1) ? 1.0f : NAN) : 0.0f;
        CHECK(ampy_scaler_update(&s, &t, NULL, &f, &o) == AMPY_OK, "update status");
        torch_update(&rs, &rt, f, 2.5, 0.3, 3);
        if (memcmp(&s, &rs, 4) || t != rt) {
            CHECK(0, "step %d: scale %a tracker %d, want %a %d", i, s, t, rs, rt);
            break;
        }
    }
    /* growth refused at inf, tracker still reset */
    s = 3e38f;
    t = 2;
    float zero = 0.0f, one = 1.0f;
    ampy_scaler_update(&s, &t, NULL, &zero, &o);
    CHECK(s == 3e38f && t == 0, "no growth to inf: %g %d", s, t);
    /* `==`: a tracker already past the interval never grows */
    s = 1.0f;
    t = 10;
    ampy_scaler_update(&s, &t, NULL, &zero, &o);
    CHECK(s == 1.0f && t == 11, "tracker past interval: %g %d", s, t);
    /* min / max */
    o.has_min_scale = 1;
    o.min_scale = 1.0;
    o.has_max_scale = 1;
    o.max_scale = 4.0;
    s = 1.2f;
    t = 0;
    ampy_scaler_update(&s, &t, NULL, &one, &o);
    CHECK(s == 1.0f, "min_scale clamp: %g", s);
    s = 3.0f;
    t = 2;
    ampy_scaler_update(&s, &t, NULL, &zero, &o);
    CHECK(s == 4.0f && t == 0, "max_scale clamp: %g %d", s, t);
    /* hysteresis 3: back off on the 3rd consecutive overflow only */
    ampy_scaler_options_default(&o);
    o.hysteresis = 3;
    int32_t h = 3;
    s = 1024.0f;
    t = 5;
    ampy_scaler_update(&s, &t, &h, &one, &o);
    CHECK(s == 1024.0f && t == 0 && h == 2, "hyst 1st: %g %d %d", s, t, h);
    ampy_scaler_update(&s, &t, &h, &one, &o);
    CHECK(s == 1024.0f && h == 1, "hyst 2nd: %g %d", s, h);
    ampy_scaler_update(&s, &t, &h, &one, &o);
    CHECK(s == 512.0f && h == 0, "hyst 3rd: %g %d", s, h);
    ampy_scaler_update(&s, &t, &h, &one, &o);
    CHECK(s == 256.0f && h == 0, "hyst 4th: %g %d", s, h);
    ampy_scaler_update(&s, &t, &h, &zero, &o);
    CHECK(s == 256.0f && h == 3 && t == 1, "hyst refill: %g %d %d", s, h, t);
    ampy_scaler_update(&s, &t, &h, &one, &o);
    CHECK(s == 256.0f && h == 2, "hyst after refill: %g %d", s, h);
    /* errors, nothing written */
    o.hysteresis = 0;
    s = 7.0f;
    CHECK(ampy_scaler_update(&s, &t, &h, &one, &o) == AMPY_ERR_VALUE && s == 7.0f, "hysteresis 0");
    o.hysteresis = 2;
    CHECK(ampy_scaler_update(&s, &t, NULL, &one, &o) == AMPY_ERR_VALUE, "hysteresis w/o tracker");
    ampy_scaler_options_default(&o);
    o.has_min_scale = o.has_max_scale = 1;
    o.min_scale = 8.0;
    o.max_scale = 2.0;
    CHECK(ampy_scaler_update(&s, &t, NULL, &one, &o) == AMPY_ERR_VALUE && s == 7.0f, "min > max");
}

/* ---- finite check + unscale ------------------------------------------------ */

static void fill_random(void *p, int dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = rndf(-4.0f, 4.0f) * ldexpf(1.0f, (int)(rnd32() % 40) - 20);
        if (dt == AMPY_FLOAT32)
            ((float *)p)[i] = v;
        else if (dt == AMPY_FLOAT16)
            ((uint16_t *)p)[i] = (rnd32() & 3) ? ampy_f32_to_f16(v) : (uint16_t)rnd32();
        else
            ((uint16_t *)p)[i] = (rnd32() & 3) ? ampy_f32_to_bf16(v) : (uint16_t)rnd32();
    }
}

static void plant(void *p, int dt, int64_t i, unsigned kind)
{
    static const float vals[3] = {INFINITY, -INFINITY, NAN};
    float v = vals[kind % 3];
    if (dt == AMPY_FLOAT32)
        ((float *)p)[i] = v;
    else if (dt == AMPY_FLOAT16)
        ((uint16_t *)p)[i] = ampy_f32_to_f16(v);
    else
        ((uint16_t *)p)[i] = ampy_f32_to_bf16(v);
}

/* is any value of a (dtype dt) non-finite, by the elem.h bit tests */
static int any_nonfinite(const void *p, int dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == AMPY_FLOAT32 && !ampy_f32_isfinite(((const float *)p)[i]))
            return 1;
        if (dt == AMPY_FLOAT16 && !ampy_f16_isfinite_bits(((const uint16_t *)p)[i]))
            return 1;
        if (dt == AMPY_BFLOAT16 && !ampy_bf16_isfinite_bits(((const uint16_t *)p)[i]))
            return 1;
    }
    return 0;
}

static void test_finite_paths(void)
{
    static const float invs[] = {1.0f, 0.5f, 3.0f, 1.0f / 3.0f, 65536.0f, 1.0f / 65536.0f, 0.0f};
    static const int64_t sizes[] = {0, 1, 7, 15, 16, 17, 31, 33, 255, 1000, 4099};
    int dts[3] = {AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16};
    for (int d = 0; d < 3; d++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
            for (size_t ii = 0; ii < sizeof invs / sizeof *invs; ii++)
                for (int planted = 0; planted < 3; planted++) {
                    int dt = dts[d];
                    int64_t n = sizes[si];
                    size_t bytes = (size_t)(n ? n : 1) * ampy_dtype_size(dt);
                    void *a = malloc(bytes), *b = malloc(bytes), *orig = malloc(bytes);
                    fill_random(a, dt, n);
                    if (planted && n)
                        plant(a, dt, planted == 1 ? n - 1 : (int64_t)(rnd32() % n), rnd32());
                    memcpy(orig, a, bytes);
                    memcpy(b, a, bytes);
                    float inv = invs[ii];
                    int fa = ampy_finite_run_portable(a, n, dt, inv);
                    /* portable flag == non-finite in what it left behind */
                    CHECK(fa == any_nonfinite(a, dt, n), "portable flag %s n=%lld inv=%g",
                          ampy_dtype_name(dt), (long long)n, inv);
                    if (inv == 1.0f)
                        CHECK(!memcmp(a, orig, bytes), "inv=1 wrote memory");
                    if (have_avx512()) {
                        int fb = ampy_finite_run_avx512(b, n, dt, inv);
                        CHECK(fa == fb && !memcmp(a, b, bytes), "avx512 != portable %s n=%lld inv=%g",
                              ampy_dtype_name(dt), (long long)n, inv);
                    }
                    free(a);
                    free(b);
                    free(orig);
                }
}

/* Every float16 / bfloat16 pattern times a set of factors: the two paths
 * agree bit for bit (hardware vcvtps2ph vs elem.h rounding). */
static void test_finite_exhaustive(void)
{
    if (!have_avx512())
        return;
    static const float invs[] = {0.5f, 3.0f, 1.0f / 3.0f, 1.0e-3f, 7.7e3f, 1.0f / 65536.0f};
    uint16_t *a = malloc(65536 * 2), *b = malloc(65536 * 2);
    for (int dt = AMPY_FLOAT16; dt <= AMPY_BFLOAT16; dt++)
        for (size_t k = 0; k < sizeof invs / sizeof *invs; k++) {
            for (int i = 0; i < 65536; i++)
                a[i] = b[i] = (uint16_t)i;
            ampy_finite_run_portable(a, 65536, dt, invs[k]);
            ampy_finite_run_avx512(b, 65536, dt, invs[k]);
            int bad = -1;
            for (int i = 0; i < 65536 && bad < 0; i++)
                if (a[i] != b[i])
                    bad = i;
            CHECK(bad < 0, "%s x %g: pattern 0x%04x -> 0x%04x portable, 0x%04x avx512",
                  ampy_dtype_name(dt), invs[k], bad, bad >= 0 ? a[bad] : 0, bad >= 0 ? b[bad] : 0);
        }
    free(a);
    free(b);
}

static void test_finite_multi(void)
{
    enum { NT = 9 };
    int64_t numel[NT] = {70001, 0, 3, 131073, 17, 300000, 1, 65536, 99999};
    int dtype[NT];
    void *data[NT], *ref[NT];
    for (int level = 0; level < 2; level++)
        for (int threads = 1; threads <= 2; threads++)
            for (int planted = -1; planted < NT; planted++) {
                if (level == 1 && !have_avx512())
                    continue;
                ampy_cpu_level_set(level ? -1 : AMPY_CPU_PORTABLE);
                ampy_set_num_threads(threads);
                int expect = 0;
                for (int i = 0; i < NT; i++) {
                    dtype[i] = (int)(rnd32() % 3);
                    size_t bytes = (size_t)(numel[i] ? numel[i] : 1) * ampy_dtype_size(dtype[i]);
                    data[i] = malloc(bytes);
                    ref[i] = malloc(bytes);
                    fill_random(data[i], dtype[i], numel[i]);
                    if (i == planted && numel[i])
                        plant(data[i], dtype[i], numel[i] - 1, rnd32());
                    memcpy(ref[i], data[i], bytes);
                    expect |= ampy_finite_run_portable(ref[i], numel[i], dtype[i], 0.25f);
                }
                float found = 0.0f, inv = 0.25f;
                CHECK(ampy_finite_check_unscale(NT, data, numel, dtype, &found, &inv) == AMPY_OK,
                      "multi status");
                CHECK(found == (expect ? 1.0f : 0.0f), "multi found %g expect %d (level %d thr %d)",
                      found, expect, level, threads);
                for (int i = 0; i < NT; i++) {
                    CHECK(!memcmp(data[i], ref[i], (size_t)numel[i] * ampy_dtype_size(dtype[i])),
                          "multi tensor %d differs", i);
                    free(data[i]);
                    free(ref[i]);
                }
            }
    ampy_cpu_level_set(-1);
    ampy_set_num_threads(1);
    /* beyond torch: a finite value that overflows when unscaled is flagged */
    uint16_t h = ampy_f32_to_f16(40000.0f);
    void *p = &h;
    int64_t one = 1;
    int dt = AMPY_FLOAT16;
    float found = 0.0f, inv = 2.0f;
    ampy_finite_check_unscale(1, &p, &one, &dt, &found, &inv);
    CHECK(found == 1.0f && h == 0x7C00, "overflow after unscale: found %g h 0x%04x", found, h);
    /* bad dtype: error, nothing written */
    int bad = AMPY_INT32;
    float x = 3.0f;
    p = &x;
    found = 0.0f;
    CHECK(ampy_finite_check_unscale(1, &p, &one, &bad, &found, &inv) == AMPY_ERR_DTYPE && x == 3.0f,
          "int32 rejected");
}

/* ---- optimizers ------------------------------------------------------------ */

typedef struct {
    int64_t n;
    int pdt, gdt;
    void *param, *grad;
    float *master, *m, *v, *vmax, step;
} adam_buf;

static void adam_alloc(adam_buf *b, int64_t n, int pdt, int gdt)
{
    b->n = n;
    b->pdt = pdt;
    b->gdt = gdt;
    b->param = malloc((size_t)n * ampy_dtype_size(pdt) + 4);
    b->grad = malloc((size_t)n * ampy_dtype_size(gdt) + 4);
    b->master = pdt == AMPY_FLOAT32 ? NULL : malloc((size_t)n * 4 + 4);
    b->m = calloc((size_t)n + 1, 4);
    b->v = calloc((size_t)n + 1, 4);
    b->vmax = calloc((size_t)n + 1, 4);
    b->step = 0.0f;
    float *w = b->master ? b->master : (float *)b->param;
    for (int64_t i = 0; i < n; i++) {
        w[i] = rndf(-1.0f, 1.0f);
        if (b->master)
            ((uint16_t *)b->param)[i] =
                pdt == AMPY_FLOAT16 ? ampy_f32_to_f16(w[i]) : ampy_f32_to_bf16(w[i]);
    }
}

static void grad_fill(adam_buf *b, float scale)
{
    for (int64_t i = 0; i < b->n; i++) {
        float g = rndf(-1.0f, 1.0f) * scale;
        if (b->gdt == AMPY_FLOAT32)
            ((float *)b->grad)[i] = g;
        else if (b->gdt == AMPY_FLOAT16)
            ((uint16_t *)b->grad)[i] = ampy_f32_to_f16(g);
        else
            ((uint16_t *)b->grad)[i] = ampy_f32_to_bf16(g);
    }
}

static ampy_adam_tensor adam_view(adam_buf *b)
{
    ampy_adam_tensor t = {b->param, b->master, b->grad, b->m, b->v, b->vmax, &b->step,
                          b->n, b->pdt, b->gdt};
    return t;
}

static void adam_free(adam_buf *b)
{
    free(b->param);
    free(b->grad);
    free(b->master);
    free(b->m);
    free(b->v);
    free(b->vmax);
}

static int adam_same(const adam_buf *a, const adam_buf *b)
{
    size_t n = (size_t)a->n;
    return !memcmp(a->param, b->param, n * ampy_dtype_size(a->pdt)) &&
           (!a->master || !memcmp(a->master, b->master, n * 4)) && !memcmp(a->m, b->m, n * 4) &&
           !memcmp(a->v, b->v, n * 4) && !memcmp(a->vmax, b->vmax, n * 4) &&
           !memcmp(&a->step, &b->step, 4);
}

static void adam_copy(adam_buf *d, const adam_buf *s)
{
    size_t n = (size_t)s->n;
    memcpy(d->param, s->param, n * ampy_dtype_size(s->pdt));
    memcpy(d->grad, s->grad, n * ampy_dtype_size(s->gdt));
    if (s->master)
        memcpy(d->master, s->master, n * 4);
    memcpy(d->m, s->m, n * 4);
    memcpy(d->v, s->v, n * 4);
    memcpy(d->vmax, s->vmax, n * 4);
    d->step = s->step;
}

/* Adam in double for one element (the float32 code must stay close). */
static void test_adam_paths(void)
{
    if (!have_avx512())
        printf("note: no AVX-512 on this CPU, SIMD path comparisons skipped\n");
    for (int cfg = 0; cfg < 48; cfg++) {
        int pdt = cfg % 3, gdt = (cfg / 3) % 3;
        ampy_adam_options o = {1e-3, 0.9, 0.999, 1e-8, (cfg & 16) ? 0.01 : 0.0,
                               (cfg / 9) & 1, (cfg / 5) & 1, (cfg & 32) != 0, 0};
        if (cfg == 47)
            o.beta1 = 0.3; /* the other lerp formula */
        int64_t n = 1 + (int64_t)(rnd32() % 3000);
        adam_buf a, b;
        adam_alloc(&a, n, pdt, gdt);
        adam_alloc(&b, n, pdt, gdt);
        for (int step = 0; step < 5; step++) {
            grad_fill(&a, 64.0f);
            adam_copy(&b, &a);
            float inv = 1.0f / 64.0f;
            ampy_adam_tensor ta = adam_view(&a), tb = adam_view(&b);
            ampy_cpu_level_set(AMPY_CPU_PORTABLE);
            int st_a = -1, st_b = -1;
            CHECK(ampy_optim_adam_step(1, &ta, &o, &inv, NULL, &st_a) == AMPY_OK && st_a == 1,
                  "adam status");
            ampy_cpu_level_set(-1);
            CHECK(ampy_optim_adam_step(1, &tb, &o, &inv, NULL, &st_b) == AMPY_OK, "adam status");
            if (!adam_same(&a, &b)) {
                CHECK(0, "adam avx512 != portable cfg %d step %d", cfg, step);
                break;
            }
        }
        CHECK(a.step == 5.0f, "step count %g", a.step);
        /* a skipped step changes nothing */
        adam_copy(&b, &a);
        float one = 1.0f;
        int st = -1;
        ampy_adam_tensor ta = adam_view(&a);
        CHECK(ampy_optim_adam_step(1, &ta, &o, NULL, &one, &st) == AMPY_OK && st == 0, "skip");
        CHECK(adam_same(&a, &b), "skipped adam step changed state");
        adam_free(&a);
        adam_free(&b);
    }
}

static void test_adam_vs_double(void)
{
    ampy_adam_options o = {1e-2, 0.9, 0.99, 1e-8, 0.1, 0, 0, 1, 0};
    adam_buf a;
    adam_alloc(&a, 1000, AMPY_FLOAT32, AMPY_FLOAT32);
    double *p = malloc(1000 * 8), *m = calloc(1000, 8), *v = calloc(1000, 8);
    for (int i = 0; i < 1000; i++)
        p[i] = ((float *)a.param)[i];
    double maxerr = 0;
    for (int step = 1; step <= 50; step++) {
        grad_fill(&a, 1.0f);
        ampy_adam_tensor t = adam_view(&a);
        ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL);
        for (int i = 0; i < 1000; i++) {
            double g = ((float *)a.grad)[i];
            p[i] *= 1 - o.lr * o.weight_decay;
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.99 * v[i] + 0.01 * g * g;
            double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.99, step);
            p[i] -= o.lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + o.eps);
            double e = fabs(p[i] - ((float *)a.param)[i]);
            maxerr = e > maxerr ? e : maxerr;
        }
    }
    CHECK(maxerr < 1e-5, "adamw vs double: max abs err %g", maxerr);
    adam_free(&a);
    free(p);
    free(m);
    free(v);
}

static void test_sgd(void)
{
    for (int cfg = 0; cfg < 36; cfg++) {
        int pdt = cfg % 3, gdt = (cfg / 3) % 3;
        int variant = cfg / 9; /* 0 plain, 1 momentum+damp, 2 nesterov, 3 maximize+wd */
        ampy_sgd_options o = {0.05, variant ? 0.9 : 0.0, variant == 1 ? 0.1 : 0.0,
                              variant == 3 ? 1e-2 : 0.0, variant == 2, variant == 3, 0};
        if (variant == 3)
            o.momentum = 0.5;
        int64_t n = 1 + (int64_t)(rnd32() % 2000);
        adam_buf a, b; /* reuse: m is the momentum buffer */
        adam_alloc(&a, n, pdt, gdt);
        adam_alloc(&b, n, pdt, gdt);
        for (int step = 0; step < 4; step++) {
            grad_fill(&a, 1.0f);
            adam_copy(&b, &a);
            ampy_sgd_tensor ta = {a.param, a.master, a.grad, a.m, n, pdt, gdt, step == 0};
            ampy_sgd_tensor tb = {b.param, b.master, b.grad, b.m, n, pdt, gdt, step == 0};
            ampy_cpu_level_set(AMPY_CPU_PORTABLE);
            CHECK(ampy_optim_sgd_step(1, &ta, &o, NULL, NULL, NULL) == AMPY_OK, "sgd status");
            ampy_cpu_level_set(-1);
            CHECK(ampy_optim_sgd_step(1, &tb, &o, NULL, NULL, NULL) == AMPY_OK, "sgd status");
            if (!adam_same(&a, &b)) {
                CHECK(0, "sgd avx512 != portable cfg %d step %d", cfg, step);
                break;
            }
            if (step == 0 && o.momentum != 0.0 && pdt == AMPY_FLOAT32 && gdt == AMPY_FLOAT32 &&
                o.weight_decay == 0.0 && !o.maximize)
                CHECK(!memcmp(a.m, a.grad, (size_t)n * 4), "first step: buf == grad");
        }
        adam_copy(&b, &a);
        float one = 1.0f;
        int st = -1;
        ampy_sgd_tensor ta = {a.param, a.master, a.grad, a.m, n, pdt, gdt, 0};
        CHECK(ampy_optim_sgd_step(1, &ta, &o, NULL, &one, &st) == AMPY_OK && st == 0, "sgd skip");
        CHECK(adam_same(&a, &b), "skipped sgd step changed state");
        adam_free(&a);
        adam_free(&b);
    }
}

static void test_optim_errors(void)
{
    adam_buf a;
    adam_alloc(&a, 10, AMPY_FLOAT16, AMPY_FLOAT32);
    ampy_adam_tensor t = adam_view(&a);
    ampy_adam_options o = {-1.0, 0.9, 0.999, 1e-8, 0.0, 0, 0, 0, 0};
    CHECK(ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL) == AMPY_ERR_VALUE &&
              !strcmp(ampy_last_error(), "Invalid learning rate: -1.0"),
          "lr message: %s", ampy_last_error());
    o.lr = 1e-3;
    o.beta1 = 1.0;
    CHECK(ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL) == AMPY_ERR_VALUE &&
              !strcmp(ampy_last_error(), "Invalid beta parameter at index 0: 1.0"),
          "beta1 message: %s", ampy_last_error());
    o.beta1 = 0.9;
    o.beta2 = -0.1;
    CHECK(ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL) == AMPY_ERR_VALUE &&
              !strcmp(ampy_last_error(), "Invalid beta parameter at index 1: -0.1"),
          "beta2 message: %s", ampy_last_error());
    o.beta2 = 0.999;
    o.eps = NAN;
    CHECK(ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL) == AMPY_ERR_VALUE, "eps nan");
    o.eps = 1e-8;
    t.master = NULL;
    CHECK(ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL) == AMPY_ERR_VALUE, "missing master");
    t = adam_view(&a);
    t.grad_dtype = AMPY_INT64;
    CHECK(ampy_optim_adam_step(1, &t, &o, NULL, NULL, NULL) == AMPY_ERR_DTYPE, "int64 grad");
    CHECK(a.step == 0.0f, "failed calls left the step alone");
    ampy_sgd_options so = {0.1, 0.0, 0.0, 0.0, 1, 0, 0};
    ampy_sgd_tensor st = {a.param, a.master, a.grad, a.m, 10, AMPY_FLOAT16, AMPY_FLOAT32, 1};
    CHECK(ampy_optim_sgd_step(1, &st, &so, NULL, NULL, NULL) == AMPY_ERR_VALUE &&
              !strcmp(ampy_last_error(), "Nesterov momentum requires a momentum and zero dampening"),
          "nesterov message: %s", ampy_last_error());
    so.nesterov = 0;
    so.momentum = -0.5;
    CHECK(ampy_optim_sgd_step(1, &st, &so, NULL, NULL, NULL) == AMPY_ERR_VALUE &&
              !strcmp(ampy_last_error(), "Invalid momentum value: -0.5"),
          "momentum message: %s", ampy_last_error());
    adam_free(&a);
}

/* Gradient write-back: the fused steps store grad * inv (rounded once to the
 * grad dtype) -- the bits of ampy_finite_run_portable -- on both CPU paths,
 * applied and skipped steps alike, and write_grads=0 leaves grads alone while
 * computing the same update. */
static int one_step(adam_buf *b, int sgd, int write, float inv, const float *found, int level)
{
    ampy_cpu_level_set(level);
    ampy_status st;
    if (sgd) {
        ampy_sgd_options so = {0.05, 0.9, 0.1, 0.01, 0, 0, write};
        ampy_sgd_tensor t = {b->param, b->master, b->grad, b->m, b->n, b->pdt, b->gdt, 0};
        st = ampy_optim_sgd_step(1, &t, &so, &inv, found, NULL);
    } else {
        ampy_adam_options o = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 0, 1, write};
        ampy_adam_tensor t = adam_view(b);
        st = ampy_optim_adam_step(1, &t, &o, &inv, found, NULL);
    }
    ampy_cpu_level_set(-1);
    return st == AMPY_OK;
}

static void test_write_back(void)
{
    const float inv = 1.0f / 3.0f, one = 1.0f;
    for (int cfg = 0; cfg < 36; cfg++) {
        int pdt = cfg % 3, gdt = (cfg / 3) % 3, sgd = (cfg / 9) & 1, skip = cfg >= 18;
        int64_t n = 1 + (int64_t)(rnd32() % 2000);
        adam_buf a, b, c;
        adam_alloc(&a, n, pdt, gdt);
        adam_alloc(&b, n, pdt, gdt);
        adam_alloc(&c, n, pdt, gdt);
        grad_fill(&a, 3000.0f);
        adam_copy(&b, &a);
        adam_copy(&c, &a);
        size_t gb = (size_t)n * ampy_dtype_size(gdt);
        void *want = malloc(gb + 4);
        memcpy(want, a.grad, gb);
        ampy_finite_run_portable(want, n, gdt, inv);
        const float *found = skip ? &one : NULL;
        CHECK(one_step(&a, sgd, 1, inv, found, AMPY_CPU_PORTABLE), "write-back status");
        CHECK(one_step(&b, sgd, 1, inv, found, -1), "write-back status");
        CHECK(one_step(&c, sgd, 0, inv, found, -1), "no write-back status");
        CHECK(!memcmp(a.grad, want, gb), "portable write-back cfg %d", cfg);
        CHECK(!memcmp(b.grad, want, gb), "simd write-back cfg %d", cfg);
        CHECK(adam_same(&a, &b) && adam_same(&a, &c), "write-back changed the update cfg %d",
              cfg);
        free(want);
        adam_free(&a);
        adam_free(&b);
        adam_free(&c);
    }
}

int main(void)
{
    ampy_set_num_threads(1);
    test_scaler();
    test_finite_paths();
    test_finite_exhaustive();
    test_finite_multi();
    test_adam_paths();
    test_adam_vs_double();
    test_sgd();
    test_optim_errors();
    test_write_back();
    printf("%s: %d checks, %d failures (cpu level %s)\n", failures ? "FAILED" : "ok", checks,
           failures, ampy_cpu_level_name(ampy_cpu_level_get()));
    return failures != 0;
}
