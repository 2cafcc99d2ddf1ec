/* test_optim_adaptive_math.c — unit tests of optim_math.h's RMSprop /
 * Adagrad / Adadelta part (the host build of what cuda/optim_adaptive.cu
 * runs): the per-step scalars, the per-element updates and the argument
 * checks.
 *
 * Scalars: each must be the float32 rounding of its value computed here in
 * long double. Element updates: the expected new weight and state come from
 * the textbook formula in long double; the float32 code rounds once per
 * operation (at most 12 roundings of 2^-24 relative each on the longest
 * path, centered RMSprop with momentum), and the inputs are drawn so that no
 * subtraction cancels (v >= 2 ga^2, positive averages), so every result is
 * within 2^-19 relative of the reference (of the magnitudes of the two terms
 * for the momentum buffer and the lerp of grad_avg, whose terms may have
 * either sign). The checks must return each bad
 * argument's status with torch's message.
 *
 * Run by `make ctest` (ASan + UBSan) and by tests/test_shared_math.py.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/optim_math.h"

#define CTEST_SEED 0x6A09E667F3BCC908ull
#include "ctest.h"

static double rndd(double lo, double hi) { return lo + (hi - lo) * (double)rnd32() / 4294967296.0; }

/* got is the float32 rounding of x (nearest, or either neighbour within
 * 2^-40 relative of their midpoint: the code rounds through double). */
static int is_f32_rounding(float got, long double x)
{
    float f = (float)x;
    if (got == f)
        return 1;
    if (got != nextafterf(f, INFINITY) && got != nextafterf(f, -INFINITY))
        return 0;
    long double mid = ((long double)got + (long double)f) / 2.0L;
    return fabsl(x - mid) <= fabsl(x) * 0x1p-40L;
}

static int near(float got, long double x)
{
    return fabsl((long double)got - x) <= fabsl(x) * 0x1p-19L + 0x1p-60L;
}

/* a sum of two terms of either sign: relative to their magnitudes */
static int near_sum(float got, long double a, long double b)
{
    return fabsl((long double)got - (a + b)) <= (fabsl(a) + fabsl(b)) * 0x1p-19L;
}

static ampy_adaptive_options opts(int kind)
{
    ampy_adaptive_options o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.lr = rndd(1e-4, 1.0);
    o.alpha = rndd(0.5, 0.999);
    o.rho = rndd(0.5, 0.999);
    o.eps = rndd(1e-8, 1e-3);
    o.weight_decay = rnd32() % 2 ? rndd(0.0, 0.1) : 0.0;
    o.momentum = rnd32() % 2 ? rndd(0.1, 0.9) : 0.0;
    o.lr_decay = rnd32() % 2 ? rndd(0.0, 0.1) : 0.0;
    o.centered = rnd32() % 2;
    o.maximize = rnd32() % 3 == 0;
    return o;
}

static void test_scalars(void)
{
    for (int k = 0; k < 600; k++) {
        int kind = k % 3;
        ampy_adaptive_options o = opts(kind);
        float step = (float)(1 + rnd32() % 1000);
        ampy_adaptive_scalars s;
        ampy_adaptive_scalars_init(&o, 0.125f, k & 1, step, &s);
        long double decay = kind == AMPY_ADAPTIVE_ADADELTA ? o.rho : o.alpha;
        CHECK(s.decay == (float)decay && is_f32_rounding(s.w, 1.0L - decay), "decay / 1 - decay");
        CHECK(s.wm1 == s.w - 1.0f && s.w_small == (fabsf(s.w) < 0.5f), "wm1 / w_small");
        CHECK(s.eps == (float)o.eps && s.wd == (float)o.weight_decay, "eps / wd");
        CHECK(s.inv_scale == 0.125f && s.write_grad == (k & 1) &&
                  s.neg == (o.maximize ? -1.0f : 1.0f),
              "inv_scale / write_grad / neg");
        long double lr = o.lr;
        if (kind == AMPY_ADAPTIVE_ADAGRAD)
            lr = lr / (1.0L + ((long double)step - 1.0L) * o.lr_decay);
        CHECK(is_f32_rounding(s.neg_lr, -lr), "neg_lr kind %d step %g: %.9g", kind, (double)step,
              (double)s.neg_lr);
        CHECK(s.has_momentum == (kind == AMPY_ADAPTIVE_RMSPROP && o.momentum > 0.0) &&
                  s.centered == (kind == AMPY_ADAPTIVE_RMSPROP && o.centered),
              "momentum / centered flags");
    }
}

/* g as the update sees it, in long double */
static long double grad_ref(float g, float w, const ampy_adaptive_scalars *s)
{
    long double x = (long double)g * s->inv_scale * s->neg;
    return x + (long double)s->wd * w;
}

static void test_elements(void)
{
    for (int k = 0; k < 3000; k++) {
        int kind = k % 3;
        ampy_adaptive_options o = opts(kind);
        ampy_adaptive_scalars s;
        ampy_adaptive_scalars_init(&o, 0.5f, 0, (float)(1 + k % 50), &s);
        float g = (float)rndd(-2.0, 2.0), w = (float)rndd(-1.0, 1.0);
        float ga = (float)rndd(-0.3, 0.3), v = (float)rndd(0.0, 1.0) + 2.0f * ga * ga + 0.01f;
        float b = (float)rndd(-1.0, 1.0), acc = (float)rndd(0.0, 1.0);
        float p = w, s0 = v, s1 = kind == AMPY_ADAPTIVE_ADADELTA ? acc : b, s2 = ga;
        ampy_adaptive_elem(g, &p, &s0, &s1, &s2, &s);
        long double G = grad_ref(g, w, &s), W = w, dec = s.decay, om = s.w, lr = -(long double)s.neg_lr;
        if (kind == AMPY_ADAPTIVE_RMSPROP) {
            long double V = v * dec + om * G * G, avg, A = ga;
            if (s.centered) {
                A = ga + om * (G - ga);
                avg = sqrtl(V - A * A) + s.eps;
            } else {
                avg = sqrtl(V) + s.eps;
            }
            long double B1 = b * (long double)s.momentum, B2 = G / avg, B = B1 + B2;
            W = s.has_momentum ? W - lr * B : W - lr * G / avg;
            CHECK(near(s0, V) && (!s.centered || near_sum(s2, ga, A - ga)) && (!s.has_momentum || near_sum(s1, B1, B2)),
                  "rmsprop state k=%d", k);
        } else if (kind == AMPY_ADAPTIVE_ADAGRAD) {
            long double S = v + G * G;
            W = W - lr * G / (sqrtl(S) + s.eps);
            CHECK(near(s0, S), "adagrad sum k=%d", k);
        } else {
            long double V = v * dec + om * G * G;
            long double D = sqrtl(acc + (long double)s.eps) / sqrtl(V + s.eps) * G;
            long double AC = acc * dec + om * D * D;
            W = W - lr * D;
            CHECK(near(s0, V) && near(s1, AC), "adadelta state k=%d", k);
        }
        /* the weight: the update is small next to w, so compare the step taken */
        long double step_ref = W - w, step_got = (long double)p - w;
        CHECK(fabsl(step_got - step_ref) <= fabsl(step_ref) * 0x1p-18L + fabsl(W) * 0x1p-23L,
              "kind %d weight k=%d: %.9g vs %.12Lg", kind, k, (double)p, W);
        /* the separate entry points are the same functions */
        float q = w, t0 = v, t1 = s1 == b ? b : acc, t2 = ga;
        if (kind == AMPY_ADAPTIVE_RMSPROP) {
            t1 = b;
            ampy_rmsprop_elem(g, &q, &t0, &t1, &t2, &s);
        } else if (kind == AMPY_ADAPTIVE_ADAGRAD) {
            ampy_adagrad_elem(g, &q, &t0, &s);
        } else {
            t1 = acc;
            ampy_adadelta_elem(g, &q, &t0, &t1, &s);
        }
        CHECK(q == p && t0 == s0, "elem entry points agree k=%d", k);
        CHECK(ampy_adaptive_grad(g, w, &s) == fmaf(w, s.wd, g * 0.5f * s.neg) || s.wd == 0.0f,
              "adaptive_grad k=%d", k);
    }
}

static int status_is(ampy_status got, ampy_status want, const char *msg)
{
    return got == want && (want == AMPY_OK || strstr(ampy_last_error(), msg) != NULL);
}

static void test_checks(void)
{
    float w[2] = {0}, g[2] = {0}, a[2] = {0}, step = 0;
    ampy_adaptive_tensor t = {w, NULL, g, a, NULL, NULL, &step, 2, AMPY_FLOAT32, AMPY_FLOAT32};
    ampy_adaptive_options o;
    memset(&o, 0, sizeof o);
    o.kind = AMPY_ADAPTIVE_ADAGRAD, o.lr = 0.1;
    CHECK(status_is(ampy_adaptive_check_args(1, &t, &o), AMPY_OK, ""), "adagrad ok");
    o.lr_decay = -1.0;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid lr_decay value: -1.0"),
          "lr_decay: %s", ampy_last_error());
    o.lr_decay = 0.0, o.kind = AMPY_ADAPTIVE_ADADELTA, o.rho = 1.5;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid rho value: 1.5"),
          "rho: %s", ampy_last_error());
    o.rho = 0.9;
    CHECK(status_is(ampy_adaptive_check_args(1, &t, &o), AMPY_ERR_VALUE, "NULL step or state"),
          "adadelta needs acc_delta");
    o.kind = AMPY_ADAPTIVE_RMSPROP, o.alpha = NAN;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid alpha value: nan"),
          "alpha: %s", ampy_last_error());
    o.alpha = 0.99, o.momentum = -0.5;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid momentum value: -0.5"),
          "momentum: %s", ampy_last_error());
    o.momentum = 0.0, o.eps = -1e-3;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid epsilon value: -0.001"),
          "eps: %s", ampy_last_error());
    o.eps = 1e-8, o.lr = INFINITY;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid learning rate: inf"),
          "lr: %s", ampy_last_error());
    o.lr = 0.1, o.weight_decay = -2.0;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "Invalid weight_decay value: -2.0"),
          "wd: %s", ampy_last_error());
    o.weight_decay = 0.0, o.centered = 1;
    CHECK(status_is(ampy_adaptive_check_args(1, &t, &o), AMPY_ERR_VALUE, "NULL step or state"),
          "centered needs grad_avg");
    o.centered = 0, o.kind = 7;
    CHECK(status_is(ampy_adaptive_check_options(&o), AMPY_ERR_VALUE, "unknown kind"), "kind");
    o.kind = AMPY_ADAPTIVE_RMSPROP;
    CHECK(status_is(ampy_adaptive_check_args(-1, &t, &o), AMPY_ERR_VALUE, "n < 0"), "n < 0");
    t.grad_dtype = AMPY_INT64;
    CHECK(status_is(ampy_adaptive_check_args(1, &t, &o), AMPY_ERR_DTYPE, "grad dtype int64"),
          "dtype: %s", ampy_last_error());
    t.grad_dtype = AMPY_FLOAT32, t.step = NULL;
    CHECK(status_is(ampy_adaptive_check_args(1, &t, &o), AMPY_ERR_VALUE, "NULL step"), "step");
}

int main(void)
{
    test_scalars();
    test_elements();
    test_checks();
    printf("test_optim_adaptive_math: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
