/* test_shared_math.c — unit tests of the formulas the CPU and CUDA kernels
 * share through headers (optim_math.h, reduce_math.h, nn_math.h, random.h,
 * clip_math.h):
 * the host build of the very functions the GPU runs.
 *
 * Every expected value is computed here independently, in long double
 * (64-bit significand) from the textbook definition, and the shared
 * function's result must be its correct rounding: a float32 result the
 * nearest float to the long double value (either neighbour where that value
 * lies within 2^-40 relative of a midpoint, since the shared code rounds
 * through double on purpose, as torch does), a float64 result within a few
 * ulp. Half-precision roundings are checked against the nearest of all
 * 65,536 patterns, decoded here with ldexp. The argument checks are called
 * with each bad argument and must return its status and torch's message.
 *
 * Run by `make ctest` (ASan + UBSan). Exit status 0 when every check passes;
 * each failure prints one line.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/clip_math.h"
#include "ampy/elem.h"
#include "ampy/nn_math.h"
#include "ampy/optim_math.h"
#include "ampy/random.h"
#include "ampy/reduce_math.h"

#define CTEST_SEED 0x2545F4914F6CDD1Dull
#include "ctest.h"

/* uniform in [lo, hi) */
static double rndd(double lo, double hi) { return lo + (hi - lo) * (double)rnd32() / 4294967296.0; }

/* ---- rounding references ------------------------------------------------------ */

/* got is the float32 rounding of the exact value x: the nearest float, or
 * either neighbour when x is within 2^-40 (relative) of their midpoint. */
static int is_f32_rounding(float got, long double x)
{
    if (isnan(x))
        return isnan(got);
    float lo = (float)x; /* a rounding of x; check it against its neighbours */
    float below = nextafterf(lo, -INFINITY), above = nextafterf(lo, INFINITY);
    long double d = fabsl((long double)lo - x);
    if (fabsl((long double)below - x) < d)
        lo = below;
    else if (fabsl((long double)above - x) < d)
        lo = above;
    if (got == lo)
        return 1;
    if (!(got == nextafterf(lo, INFINITY) || got == nextafterf(lo, -INFINITY)))
        return 0;
    long double mid = ((long double)got + (long double)lo) / 2.0L;
    return fabsl(x - mid) <= fabsl(x) * 0x1p-40L;
}

/* got is within `ulps` float64 ulps of x */
static int near_f64(double got, long double x, double ulps)
{
    if (isnan(x))
        return isnan(got);
    if (isinf(x))
        return got == (double)x;
    long double ulp = ldexpl(1.0L, ilogbl(fabsl(x) > 0 ? x : DBL_MIN) - 52);
    return fabsl((long double)got - x) <= ulps * ulp;
}

/* The value of a float16 (bf16 = 0) or bfloat16 (bf16 = 1) pattern,
 * decoded from its fields (NaN patterns give NaN). */
static double half_value(uint16_t h, int bf16)
{
    int mbits = bf16 ? 7 : 10, ebits = bf16 ? 8 : 5, bias = bf16 ? 127 : 15;
    int e = (h >> mbits) & ((1 << ebits) - 1);
    int m = h & ((1 << mbits) - 1);
    double s = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp((double)m, 1 - bias - mbits);
    return s * ldexp((double)(m | (1 << mbits)), e - bias - mbits);
}

/* The nearest half value of x, ties to the even pattern, by searching all
 * finite patterns; beyond the largest finite value by more than half an ulp:
 * inf. */
static double nearest_half(double x, int bf16)
{
    double best = NAN, bd = INFINITY;
    uint16_t bp = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        double v = half_value((uint16_t)p, bf16);
        if (!isfinite(v))
            continue;
        double d = fabs(v - x);
        if (d < bd || (d == bd && !(p & 1) && (bp & 1))) {
            bd = d;
            best = v;
            bp = (uint16_t)p;
        }
    }
    double maxv = bf16 ? half_value(0x7F7F, 1) : 65504.0;
    double half_ulp = bf16 ? ldexp(1.0, 127 - 8) : 16.0;
    if (fabs(x) >= maxv + half_ulp)
        return x > 0 ? INFINITY : -INFINITY;
    return best;
}

/* ---- optimizer scalars ---------------------------------------------------------- */

static ampy_adam_options adam_opts(double lr, double b1, double b2, double eps, double wd,
                                   int decoupled, int maximize, int amsgrad)
{
    ampy_adam_options o;
    memset(&o, 0, sizeof o);
    o.lr = lr, o.beta1 = b1, o.beta2 = b2, o.eps = eps, o.weight_decay = wd;
    o.decoupled_weight_decay = decoupled, o.maximize = maximize, o.amsgrad = amsgrad;
    return o;
}

static void test_adam_scalars(void)
{
    static const double b1s[] = {0.0, 0.5, 0.8, 0.9, 0.95, 0.99};
    static const double b2s[] = {0.0, 0.9, 0.98, 0.99, 0.999, 0.9999};
    static const float steps[] = {1, 2, 3, 7, 10, 100, 1000, 12345, 1e6f, 16777216.0f};
    for (int k = 0; k < 4000; k++) {
        double lr = k < 2000 ? ldexp(rndd(1.0, 2.0), -(int)(rnd32() % 20)) : rndd(0.0, 1.0);
        double b1 = k % 3 ? b1s[k % 6] : rndd(0.0, 1.0);
        double b2 = k % 3 ? b2s[(k / 6) % 6] : rndd(0.0, 1.0);
        double eps = ldexp(1.0, -(int)(rnd32() % 40));
        double wd = k % 4 == 0 ? 0.0 : rndd(0.0, 0.1);
        int decoupled = (k >> 1) & 1, maximize = (k >> 2) & 1, amsgrad = (k >> 3) & 1;
        float step = steps[k % 10];
        ampy_adam_options o = adam_opts(lr, b1, b2, eps, wd, decoupled, maximize, amsgrad);
        ampy_adam_scalars s;
        ampy_adam_scalars_init(&o, 0.25f, k & 1, step, &s);

        long double bc1 = 1.0L - powl((long double)b1, (long double)step);
        long double bc2 = 1.0L - powl((long double)b2, (long double)step);
        CHECK(is_f32_rounding(s.neg_step_size, -((long double)lr / bc1)),
              "adam neg_step_size lr=%.17g b1=%.17g step=%g: %.9g", lr, b1, (double)step,
              (double)s.neg_step_size);
        CHECK(is_f32_rounding(s.bc2_sqrt, sqrtl(bc2)), "adam bc2_sqrt b2=%.17g step=%g: %.9g",
              b2, (double)step, (double)s.bc2_sqrt);
        CHECK(is_f32_rounding(s.w1, 1.0L - b1) && is_f32_rounding(s.w2, 1.0L - b2) &&
                  is_f32_rounding(s.beta2, b2),
              "adam w1/w2/beta2 b1=%.17g b2=%.17g", b1, b2);
        /* ATen's lerp rounds w - 1 in float from the float weight */
        CHECK(s.w1m1 == s.w1 - 1.0f && s.w1_small == (fabsf(s.w1) < 0.5f), "adam w1m1/w1_small");
        CHECK(s.eps == (float)eps, "adam eps");
        CHECK(s.neg == (maximize ? -1.0f : 1.0f), "adam neg");
        CHECK(s.decoupled == (decoupled && wd != 0.0), "adam decoupled");
        if (decoupled || wd == 0.0)
            CHECK(s.wd == 0.0f, "adam wd (decoupled or none)");
        else
            CHECK(s.wd == (float)wd, "adam wd (L2)");
        if (decoupled && wd != 0.0)
            CHECK(is_f32_rounding(s.decay_mul, 1.0L - (long double)lr * wd), "adam decay_mul");
        else
            CHECK(s.decay_mul == 1.0f, "adam decay_mul 1");
        CHECK(s.inv_scale == 0.25f && s.write_grad == (k & 1) && s.amsgrad == amsgrad,
              "adam inv_scale/write_grad/amsgrad");
    }
}

static void test_sgd_scalars(void)
{
    for (int k = 0; k < 500; k++) {
        ampy_sgd_options o;
        memset(&o, 0, sizeof o);
        o.lr = rndd(0.0, 1.0);
        o.momentum = k % 3 ? rndd(0.0, 1.0) : 0.0;
        o.dampening = k % 5 ? rndd(-1.0, 1.0) : 0.0;
        o.weight_decay = k % 2 ? rndd(0.0, 0.1) : 0.0;
        o.nesterov = k % 7 == 0;
        o.maximize = k % 4 == 0;
        ampy_sgd_scalars s;
        ampy_sgd_scalars_init(&o, 0.5f, k & 1, &s);
        CHECK(s.neg_lr == -(float)o.lr && s.momentum == (float)o.momentum &&
                  s.wd == (float)o.weight_decay,
              "sgd lr/momentum/wd");
        CHECK(is_f32_rounding(s.one_m_damp, 1.0L - (long double)o.dampening), "sgd 1 - dampening");
        CHECK(s.has_momentum == (o.momentum != 0.0) && s.nesterov == o.nesterov &&
                  s.neg == (o.maximize ? -1.0f : 1.0f) && s.inv_scale == 0.5f &&
                  s.write_grad == (k & 1),
              "sgd flags");
    }
}

static void test_optim_access(void)
{
    uint16_t h[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001}; /* 1, -2, 65504, 2^-24 */
    float f[2] = {1.5f, -0.0f};
    CHECK(ampy_optim_load_grad(h, AMPY_FLOAT16, 0) == 1.0f &&
              ampy_optim_load_grad(h, AMPY_FLOAT16, 1) == -2.0f &&
              ampy_optim_load_grad(h, AMPY_FLOAT16, 2) == 65504.0f &&
              ampy_optim_load_grad(h, AMPY_FLOAT16, 3) == ldexpf(1.0f, -24),
          "load_grad float16");
    CHECK(ampy_optim_load_grad(h, AMPY_BFLOAT16, 0) == (float)half_value(0x3C00, 1), "load_grad bf16");
    CHECK(ampy_optim_load_grad(f, AMPY_FLOAT32, 0) == 1.5f, "load_grad float32");
    for (int k = 0; k < 2000; k++) {
        float v = (float)ldexp(rndd(-2.0, 2.0), (int)(rnd32() % 40) - 30);
        uint16_t o16[1], ob[1];
        float o32[1];
        ampy_optim_store_grad(o16, AMPY_FLOAT16, 0, v);
        ampy_optim_store_grad(ob, AMPY_BFLOAT16, 0, v);
        ampy_optim_store_grad(o32, AMPY_FLOAT32, 0, v);
        if (k < 200) {
            CHECK(half_value(o16[0], 0) == nearest_half(v, 0), "store_grad f16 %.9g", (double)v);
            CHECK(half_value(ob[0], 1) == nearest_half(v, 1), "store_grad bf16 %.9g", (double)v);
        }
        CHECK(o32[0] == v, "store_grad f32");
    }
    uint16_t keep = 0x1234;
    ampy_optim_store_half(&keep, AMPY_FLOAT32, 0, 3.0f);
    CHECK(keep == 0x1234, "store_half leaves a float32 destination alone");
}

static int status_is(ampy_status got, ampy_status want, const char *msg)
{
    return got == want && (want == AMPY_OK || strstr(ampy_last_error(), msg) != NULL);
}

static void test_optim_checks(void)
{
    float w[2] = {0}, g[2] = {0}, m[2] = {0}, v[2] = {0}, step = 0;
    uint16_t wh[2] = {0};
    ampy_adam_tensor t = {w, NULL, g, m, v, NULL, &step, 2, AMPY_FLOAT32, AMPY_FLOAT32};
    ampy_adam_options o = adam_opts(1e-3, 0.9, 0.999, 1e-8, 0.0, 0, 0, 0);
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_OK, ""), "adam ok");
    CHECK(status_is(ampy_adam_check_args(1, &t, NULL), AMPY_ERR_VALUE, "NULL options"), "adam NULL");
    CHECK(status_is(ampy_adam_check_args(-1, &t, &o), AMPY_ERR_VALUE, "n < 0"), "adam n < 0");
    o.lr = -1.0;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "Invalid learning rate: -1.0"),
          "adam lr: %s", ampy_last_error());
    o.lr = 1e-3, o.eps = NAN;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "Invalid epsilon value: nan"),
          "adam eps: %s", ampy_last_error());
    o.eps = 1e-8, o.beta1 = 1.0;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE,
                    "Invalid beta parameter at index 0: 1.0"),
          "adam beta1: %s", ampy_last_error());
    o.beta1 = 0.9, o.beta2 = -0.25;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE,
                    "Invalid beta parameter at index 1: -0.25"),
          "adam beta2: %s", ampy_last_error());
    o.beta2 = 0.999, o.weight_decay = INFINITY;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "Invalid weight_decay value: inf"),
          "adam wd: %s", ampy_last_error());
    o.weight_decay = 0.1;
    CHECK(status_is(ampy_adam_check_args(1, NULL, &o), AMPY_ERR_VALUE, "NULL tensor list"), "adam list");
    t.grad_dtype = AMPY_INT32;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_DTYPE, "grad dtype int32"),
          "adam dtype: %s", ampy_last_error());
    t.grad_dtype = AMPY_FLOAT32, t.master = w;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "takes no master copy"),
          "adam master");
    t.master = NULL, t.param = wh, t.param_dtype = AMPY_FLOAT16;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "needs a float32 master copy"),
          "adam no master");
    t.param = w, t.param_dtype = AMPY_FLOAT32, t.numel = -1;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "has numel -1"), "adam numel");
    t.numel = 2, t.exp_avg = NULL;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "NULL step or moment buffer"),
          "adam moments");
    t.exp_avg = m, o.amsgrad = 1;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_ERR_VALUE, "NULL step or moment buffer"),
          "adam amsgrad buffer");
    t.numel = 0, t.exp_avg = NULL, t.param = NULL, t.grad = NULL;
    CHECK(status_is(ampy_adam_check_args(1, &t, &o), AMPY_OK, ""), "adam empty tensor needs no buffers");

    ampy_sgd_tensor st = {w, NULL, g, NULL, 2, AMPY_FLOAT32, AMPY_FLOAT32, 1};
    ampy_sgd_options so;
    memset(&so, 0, sizeof so);
    so.lr = 0.1;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_OK, ""), "sgd ok");
    so.momentum = 0.9;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_ERR_VALUE, "NULL momentum buffer"),
          "sgd buffer");
    st.momentum_buffer = m, so.dampening = 0.5, so.nesterov = 1;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_ERR_VALUE,
                    "Nesterov momentum requires a momentum and zero dampening"),
          "sgd nesterov");
    so.nesterov = 0, so.dampening = -INFINITY;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_ERR_VALUE, "Invalid dampening value: -inf"),
          "sgd dampening: %s", ampy_last_error());
    so.dampening = 0.0, so.momentum = -0.5;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_ERR_VALUE, "Invalid momentum value: -0.5"),
          "sgd momentum: %s", ampy_last_error());
    so.momentum = 0.0, so.lr = 1e300 * 1e300;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_ERR_VALUE, "Invalid learning rate: inf"),
          "sgd lr: %s", ampy_last_error());
    so.lr = 0.1, so.weight_decay = -1e-3;
    CHECK(status_is(ampy_sgd_check_args(1, &st, &so), AMPY_ERR_VALUE, "Invalid weight_decay value: -0.001"),
          "sgd wd: %s", ampy_last_error());
}

/* ---- reductions ------------------------------------------------------------------ */

/* fold x[0..n) into a class-cls accumulator the way either side must */
static ampy_reduce_acc fold(int cls, const double *x, int64_t n, double center)
{
    ampy_reduce_acc a = ampy_reduce_acc_init(cls);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        switch (cls) {
        case AMPY_RC_SUM: a.s += v; break;
        case AMPY_RC_PROD: a.s *= v; break;
        case AMPY_RC_SUMSQ: a.s += v * v; break;
        case AMPY_RC_DEV2: a.s += (v - center) * (v - center); break;
        case AMPY_RC_SUMEXP: a.s += exp(v - center); break;
        case AMPY_RC_NZ: a.is += v != 0.0; break;
        default:
            if (a.nan)
                break;
            if (v != v)
                a.nan = a.has = 1, a.best = v, a.bidx = i;
            else if (!a.has || (cls == AMPY_RC_MAX ? v > a.best : v < a.best))
                a.has = 1, a.best = v, a.bidx = i;
        }
    }
    return a;
}

/* one output of op over x[0..n), through the shared functions */
static int reduce_value(int op, const double *x, int64_t n, double corr, double *v, int64_t *iv)
{
    ampy_reduce_acc a = fold(ampy_reduce_first_cls(op), x, n, 0.0), b = a;
    double center = 0.0;
    if (ampy_reduce_second_cls(op) >= 0) {
        center = ampy_reduce_center(op, &a, n);
        b = fold(ampy_reduce_second_cls(op), x, n, center);
    }
    return ampy_reduce_finish(op, &a, &b, center, n, corr, 0, v, iv);
}

static void test_reduce_finish(void)
{
    double x[64];
    for (int k = 0; k < 300; k++) {
        int n = 1 + (int)(rnd32() % 64);
        for (int i = 0; i < n; i++)
            x[i] = rndd(-3.0, 3.0);
        long double s = 0, sq = 0, mx = -INFINITY;
        int64_t amax = 0, amin = 0, nz = 0;
        for (int i = 0; i < n; i++) {
            s += x[i], sq += (long double)x[i] * x[i];
            if (x[i] > mx)
                mx = x[i], amax = i;
            if (x[i] < x[amin])
                amin = i;
            nz += x[i] != 0.0;
        }
        long double mean = s / n, dev = 0, se = 0;
        for (int i = 0; i < n; i++)
            dev += ((long double)x[i] - mean) * ((long double)x[i] - mean), se += expl(x[i] - mx);
        double v, corr = (double)(k % 3);
        int64_t iv;
        CHECK(!reduce_value(AMPY_RED_MEAN, x, n, 0, &v, &iv) && near_f64(v, mean, 64), "mean");
        CHECK(!reduce_value(AMPY_RED_SUM, x, n, 0, &v, &iv) && near_f64(v, s, 64), "sum");
        long double den = n - corr > 0 ? n - corr : 0;
        CHECK(!reduce_value(AMPY_RED_VAR, x, n, corr, &v, &iv) &&
                  (den > 0 ? near_f64(v, dev / den, 256) : (isinf(v) || isnan(v))),
              "var n=%d correction=%g: %.17g vs %.17Lg", n, corr, v, den > 0 ? dev / den : 0);
        CHECK(!reduce_value(AMPY_RED_STD, x, n, corr, &v, &iv) &&
                  (den > 0 ? near_f64(v, sqrtl(dev / den), 256) : (isinf(v) || isnan(v))),
              "std n=%d correction=%g", n, corr);
        CHECK(!reduce_value(AMPY_RED_NORM2, x, n, 0, &v, &iv) && near_f64(v, sqrtl(sq), 64), "norm");
        CHECK(!reduce_value(AMPY_RED_LOGSUMEXP, x, n, 0, &v, &iv) && near_f64(v, mx + logl(se), 64),
              "logsumexp");
        CHECK(!reduce_value(AMPY_RED_MAX, x, n, 0, &v, &iv) && v == (double)mx, "max");
        CHECK(reduce_value(AMPY_RED_ARGMAX, x, n, 0, &v, &iv) && iv == amax, "argmax");
        CHECK(reduce_value(AMPY_RED_ARGMIN, x, n, 0, &v, &iv) && iv == amin, "argmin");
        CHECK(reduce_value(AMPY_RED_ALL, x, n, 0, &v, &iv) && iv == (nz == n), "all");
        CHECK(reduce_value(AMPY_RED_ANY, x, n, 0, &v, &iv) && iv == (nz > 0), "any");
    }
    /* var/std divisor: max(0, R - correction); correction 0, 1, R - 1, R, R + 1 */
    double y[4] = {1.0, 2.0, 3.0, 6.0}, v; /* mean 3, sum of squared deviations 14 */
    int64_t iv;
    static const double corr[] = {0.0, 1.0, 3.0, 0.5};
    static const double want[] = {14.0 / 4, 14.0 / 3, 14.0, 14.0 / 3.5};
    for (int k = 0; k < 4; k++) {
        reduce_value(AMPY_RED_VAR, y, 4, corr[k], &v, &iv);
        CHECK(v == want[k], "var correction %g: %.17g", corr[k], v);
    }
    reduce_value(AMPY_RED_VAR, y, 4, 4.0, &v, &iv);
    CHECK(isinf(v) && v > 0, "var correction == R: 14 / 0 = inf");
    reduce_value(AMPY_RED_VAR, y, 4, 5.0, &v, &iv);
    CHECK(isinf(v) && v > 0, "var correction > R: divisor clamps at 0");
    /* logsumexp: an infinite or absent maximum centres at 0 */
    double inf2[2] = {INFINITY, 1.0}, ninf[2] = {-INFINITY, -INFINITY};
    reduce_value(AMPY_RED_LOGSUMEXP, inf2, 2, 0, &v, &iv);
    CHECK(isinf(v) && v > 0, "logsumexp with +inf");
    reduce_value(AMPY_RED_LOGSUMEXP, ninf, 2, 0, &v, &iv);
    CHECK(isinf(v) && v < 0, "logsumexp of -inf only");
    reduce_value(AMPY_RED_LOGSUMEXP, ninf, 0, 0, &v, &iv);
    CHECK(isinf(v) && v < 0, "logsumexp of nothing");
    /* integer accumulation: sum/prod/max return the int64 field */
    ampy_reduce_acc a = ampy_reduce_acc_init(AMPY_RC_SUM);
    a.is = 41, a.s = 0.5;
    CHECK(ampy_reduce_finish(AMPY_RED_SUM, &a, &a, 0, 3, 0, 1, &v, &iv) && iv == 41, "int sum");
    CHECK(!ampy_reduce_finish(AMPY_RED_SUM, &a, &a, 0, 3, 0, 0, &v, &iv) && v == 0.5, "float sum");
    a = ampy_reduce_acc_init(AMPY_RC_PROD);
    CHECK(a.s == 1.0 && a.is == 1 && !a.has, "prod starts at 1");
    a = ampy_reduce_acc_init(AMPY_RC_NZ);
    CHECK(a.s == 0.0 && a.is == 0 && !a.has && !a.nan, "sums start at 0");
    /* NaN propagates through max */
    double wn[3] = {1.0, NAN, 5.0};
    CHECK(reduce_value(AMPY_RED_ARGMAX, wn, 3, 0, &v, &iv) && iv == 1, "argmax of NaN");
    /* all() of nothing is true, any() of nothing false */
    CHECK(reduce_value(AMPY_RED_ALL, wn, 0, 0, &v, &iv) && iv == 1, "all of nothing");
    CHECK(reduce_value(AMPY_RED_ANY, wn, 0, 0, &v, &iv) && iv == 0, "any of nothing");
}

static void test_reduce_checks(void)
{
    for (int op = 0; op < AMPY_RED_NUM_OPS; op++) {
        CHECK(ampy_reduce_name(op) != NULL, "name of op %d", op);
        CHECK(status_is(ampy_reduce_check_args(op, 2, AMPY_FLOAT32, AMPY_FLOAT32), AMPY_OK, ""),
              "reduce ok");
        int float_only = op == AMPY_RED_MEAN || op == AMPY_RED_VAR || op == AMPY_RED_STD ||
                         op == AMPY_RED_NORM2 || op == AMPY_RED_LOGSUMEXP;
        CHECK(status_is(ampy_reduce_check_args(op, 2, AMPY_INT64, AMPY_INT64),
                        float_only ? AMPY_ERR_DTYPE : AMPY_OK, "expected a floating point input"),
              "reduce int input for %s", ampy_reduce_name(op));
        int no_identity = op == AMPY_RED_MAX || op == AMPY_RED_MIN || op == AMPY_RED_ARGMAX ||
                          op == AMPY_RED_ARGMIN;
        CHECK(status_is(ampy_reduce_check_nonempty(op, 0), no_identity ? AMPY_ERR_INDEX : AMPY_OK,
                        "expected a non-empty reduction"),
              "reduce empty %s", ampy_reduce_name(op));
        CHECK(status_is(ampy_reduce_check_nonempty(op, 1), AMPY_OK, ""), "reduce nonempty");
    }
    CHECK(!strcmp(ampy_reduce_name(AMPY_RED_NORM2), "norm") && !ampy_reduce_name(AMPY_RED_NUM_OPS) &&
              !ampy_reduce_name(-1),
          "reduce names");
    CHECK(status_is(ampy_reduce_check_args(-1, 1, 0, 0), AMPY_ERR_VALUE, "invalid op code -1"),
          "reduce op");
    CHECK(status_is(ampy_reduce_check_args(0, AMPY_MAX_DIMS + 1, 0, 0), AMPY_ERR_VALUE, "sum: bad ndim"),
          "reduce ndim");
    CHECK(status_is(ampy_reduce_check_args(0, 1, AMPY_NUM_DTYPES, 0), AMPY_ERR_VALUE,
                    "invalid dtype code"),
          "reduce dtype");
}

/* ---- cross-entropy ------------------------------------------------------------------ */

static void test_cross_entropy(void)
{
    enum { CMAX = 33 };
    double x[CMAX], w[CMAX];
    long double p[CMAX], logp[CMAX];
    for (int k = 0; k < 400; k++) {
        int C = 1 + (int)(rnd32() % CMAX), t = (int)(rnd32() % (uint32_t)C);
        int weighted = k & 1;
        double ls = k % 4 < 2 ? 0.0 : (k % 8 == 2 ? 1.0 : rndd(0.0, 1.0));
        long double mx = -INFINITY, se = 0, W = 0, wx = 0;
        for (int j = 0; j < C; j++) {
            x[j] = rndd(-8.0, 8.0);
            w[j] = weighted ? rndd(0.1, 2.0) : 1.0;
            mx = x[j] > mx ? x[j] : mx;
            W += w[j], wx += (long double)w[j] * x[j];
        }
        for (int j = 0; j < C; j++)
            se += expl(x[j] - mx);
        long double lse = mx + logl(se);
        for (int j = 0; j < C; j++)
            logp[j] = x[j] - lse, p[j] = expl(logp[j]);
        /* torch: (1 - ls) * nll(w, t) + ls / C * sum_j -w_j logp_j */
        long double smooth = 0;
        for (int j = 0; j < C; j++)
            smooth += -w[j] * logp[j];
        long double want = (1 - ls) * (-w[t] * logp[t]) + ls / C * smooth;
        double got = ampy_ce_row_loss(w[t], (double)lse, x[t], ls, C, (double)W, (double)wx);
        CHECK(fabsl(got - want) <= 1e-12L * (1 + fabsl(want)),
              "ce loss C=%d ls=%g: %.17g vs %.17Lg", C, ls, got, want);

        /* gradient of g * loss / denom: (1-ls) w_t (p_j - [j == t]) + ls/C (W p_j - w_j) */
        double g = rndd(-2.0, 2.0), denom = k % 3 ? rndd(0.5, 10.0) : 1.0, cn, cs;
        double a = ampy_ce_row_grad_coef(g, w[t], ls, C, (double)W, denom, &cn, &cs);
        for (int j = 0; j < C; j++) {
            long double dj = (long double)g / denom *
                             ((1 - ls) * w[t] * (p[j] - (j == t)) + ls / C * (W * p[j] - w[j]));
            long double mine = (long double)a * p[j] - (long double)cs * w[j] - (j == t ? cn : 0.0);
            CHECK(fabsl(mine - dj) <= 1e-12L * (1 + fabsl((long double)g * W / denom)),
                  "ce grad C=%d j=%d ls=%g: %.17Lg vs %.17Lg", C, j, ls, mine, dj);
        }
    }
}

/* ---- dropout, mse, loads/stores --------------------------------------------------------- */

static void test_dropout_scale(void)
{
    static const double ps[] = {0.0, 0.1, 0.2, 1.0 / 3, 0.5, 0.7, 0.9, 0.99, 0.999, 0.9999};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        double scale = 1.0 / (1.0 - ps[k]);
        CHECK(ampy_dropout_scale(AMPY_FLOAT64, scale) == scale, "dropout scale f64");
        CHECK(is_f32_rounding((float)ampy_dropout_scale(AMPY_FLOAT32, scale), 1.0L / (1.0L - ps[k])) &&
                  ampy_dropout_scale(AMPY_FLOAT32, scale) == (double)(float)ampy_dropout_scale(AMPY_FLOAT32, scale),
              "dropout scale f32 p=%g", ps[k]);
        CHECK(ampy_dropout_scale(AMPY_FLOAT16, scale) == nearest_half(scale, 0),
              "dropout scale f16 p=%g: %.17g vs %.17g", ps[k], ampy_dropout_scale(AMPY_FLOAT16, scale),
              nearest_half(scale, 0));
        CHECK(ampy_dropout_scale(AMPY_BFLOAT16, scale) == nearest_half(scale, 1),
              "dropout scale bf16 p=%g", ps[k]);
    }
}

static void test_mse(void)
{
    for (int k = 0; k < 3000; k++) {
        double x = ldexp(rndd(-1.0, 1.0), (int)(rnd32() % 16) - 8);
        double y = ldexp(rndd(-1.0, 1.0), (int)(rnd32() % 16) - 8);
        double g = rndd(-2.0, 2.0), norm = k % 2 ? 2.0 : 2.0 / (1 + rnd32() % 1000);
        long double d64 = ((long double)x - y) * ((long double)x - y);
        CHECK(near_f64(ampy_mse_elem(x, y, AMPY_FLOAT64), d64, 1.5), "mse f64");
        CHECK(near_f64(ampy_mse_grad(x, y, norm, g, AMPY_FLOAT64), (long double)norm * (x - y) * g, 2),
              "mse grad f64");
        /* float inputs: the difference and the square each rounded to float32 */
        float xf = (float)x, yf = (float)y;
        float df = (float)((long double)xf - yf);
        float sq = (float)((long double)df * df);
        CHECK(ampy_mse_elem(xf, yf, AMPY_FLOAT32) == sq, "mse f32");
        float gr = (float)((long double)(float)norm * df);
        gr = (float)((long double)gr * (float)g);
        CHECK(ampy_mse_grad(xf, yf, norm, g, AMPY_FLOAT32) == gr, "mse grad f32");
        if (k < 150) {
            double xh = nearest_half(x, 0), yh = nearest_half(y, 0);
            float dh = (float)((long double)(float)xh - (float)yh);
            CHECK(ampy_mse_elem(xh, yh, AMPY_FLOAT16) == nearest_half((float)((long double)dh * dh), 0),
                  "mse f16 rounds the element loss to float16");
            double xb = nearest_half(x, 1), yb = nearest_half(y, 1);
            float db = (float)((long double)(float)xb - (float)yb);
            CHECK(ampy_mse_elem(xb, yb, AMPY_BFLOAT16) == nearest_half((float)((long double)db * db), 1),
                  "mse bf16 rounds the element loss to bfloat16");
        }
    }
}

static void test_nn_access(void)
{
    double d[1];
    float f[1];
    uint16_t h[1];
    for (int k = 0; k < 300; k++) {
        double v = ldexp(rndd(-1.0, 1.0), (int)(rnd32() % 60) - 30);
        ampy_nn_store1(d, AMPY_FLOAT64, 0, v);
        ampy_nn_store1(f, AMPY_FLOAT32, 0, v);
        CHECK(ampy_nn_load1(d, AMPY_FLOAT64, 0) == v, "nn f64 round trip");
        CHECK(is_f32_rounding((float)ampy_nn_load1(f, AMPY_FLOAT32, 0), v), "nn f32 store rounds once");
        ampy_nn_store1(h, AMPY_FLOAT16, 0, v);
        CHECK(ampy_nn_load1(h, AMPY_FLOAT16, 0) == nearest_half(v, 0), "nn f16 store rounds once");
        ampy_nn_store1(h, AMPY_BFLOAT16, 0, v);
        CHECK(ampy_nn_load1(h, AMPY_BFLOAT16, 0) == nearest_half(v, 1), "nn bf16 store rounds once");
    }
    for (int dt = 0; dt < AMPY_NUM_DTYPES; dt++)
        CHECK(ampy_nn_is_float(dt) == (dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 ||
                                       dt == AMPY_BFLOAT16 || dt == AMPY_FLOAT64),
              "nn is_float %d", dt);
}

static void test_nn_checks(void)
{
    CHECK(status_is(ampy_nn_loss_check_args(2, 3, AMPY_FLOAT32, 1, "cross_entropy"), AMPY_OK, ""), "ce ok");
    CHECK(status_is(ampy_nn_loss_check_args(-1, 3, AMPY_FLOAT32, 1, "nll_loss"), AMPY_ERR_VALUE,
                    "nll_loss: negative size"),
          "loss size");
    CHECK(status_is(ampy_nn_loss_check_args(2, 3, AMPY_INT64, 1, "cross_entropy"), AMPY_ERR_DTYPE,
                    "cross_entropy: input must be a floating-point tensor"),
          "loss dtype");
    CHECK(status_is(ampy_nn_loss_check_args(2, 3, AMPY_FLOAT16, 3, "cross_entropy"), AMPY_ERR_VALUE,
                    "3 is not a valid value for reduction"),
          "loss reduction");
    CHECK(status_is(ampy_ce_check_smoothing(0.0), AMPY_OK, "") &&
              status_is(ampy_ce_check_smoothing(1.0), AMPY_OK, ""),
          "ls ok");
    CHECK(status_is(ampy_ce_check_smoothing(1.5), AMPY_ERR_VALUE,
                    "label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
          "ls 1.5");
    CHECK(status_is(ampy_ce_check_smoothing(NAN), AMPY_ERR_VALUE, "label_smoothing"), "ls nan");
    CHECK(status_is(ampy_nn_mse_check_args(0, AMPY_FLOAT64, 0, 0), AMPY_OK, ""), "mse ok");
    CHECK(status_is(ampy_nn_mse_check_args(4, AMPY_BOOL, 0, 0), AMPY_ERR_DTYPE,
                    "mse_loss: input must be a floating-point tensor"),
          "mse dtype");
    CHECK(status_is(ampy_nn_mse_check_args(4, AMPY_FLOAT32, -1, 1), AMPY_ERR_VALUE,
                    "mse_loss_backward: bad reduction -1"),
          "mse bwd reduction");
    CHECK(status_is(ampy_nn_mask_scale_check_args(-3, AMPY_FLOAT32), AMPY_ERR_VALUE,
                    "dropout: negative size"),
          "dropout size");
    CHECK(status_is(ampy_nn_mask_scale_check_args(3, AMPY_UINT8), AMPY_ERR_DTYPE, "dropout: input"),
          "dropout dtype");
    CHECK(status_is(ampy_nn_embedding_check_args(1, 2, 3, AMPY_INT64, "embedding"), AMPY_OK, ""),
          "embedding any dtype");
    CHECK(status_is(ampy_nn_embedding_check_args(1, -2, 3, AMPY_FLOAT32, "embedding"), AMPY_ERR_VALUE,
                    "embedding: negative size"),
          "embedding size");
    CHECK(status_is(ampy_nn_embedding_check_args(1, 2, 3, -1, "embedding_backward"), AMPY_ERR_DTYPE,
                    "embedding_backward: invalid dtype"),
          "embedding dtype");
}

/* ---- random fills ------------------------------------------------------------------------- */

static void test_random_value(void)
{
    enum { N = 200000 };
    long double su = 0, sn = 0, sn2 = 0;
    int64_t ones = 0;
    int in_range = 1;
    for (uint64_t i = 0; i < N; i++) {
        double u = ampy_random_value(AMPY_RANDOM_UNIFORM, i, 42, -1.0, 3.0);
        in_range &= u >= -1.0 && u < 3.0;
        su += u;
        double z = ampy_random_value(AMPY_RANDOM_NORMAL, i, 42, 2.0, 0.5);
        sn += z, sn2 += (long double)(z - 2.0) * (z - 2.0);
        double bern = ampy_random_value(AMPY_RANDOM_BERNOULLI, i, 42, 0.3, 0.0);
        in_range &= bern == 0.0 || bern == 1.0;
        ones += bern == 1.0;
        in_range &= ampy_random_value(AMPY_RANDOM_INTEGER, i, 42, 0.0, 0.0) == 0.0;
    }
    CHECK(in_range, "uniform in [a, b), bernoulli in {0, 1}, integer kind 0");
    /* 6 standard errors */
    CHECK(fabsl(su / N - 1.0L) < 6 * 4 / sqrtl(12.0L * N), "uniform mean %Lg", su / N);
    CHECK(fabsl(sn / N - 2.0L) < 6 * 0.5L / sqrtl(N), "normal mean %Lg", sn / N);
    CHECK(fabsl(sn2 / N - 0.25L) < 6 * 0.25L * sqrtl(2.0L / N), "normal variance %Lg", sn2 / N);
    CHECK(fabsl((long double)ones / N - 0.3L) < 6 * sqrtl(0.21L / N), "bernoulli rate");
    /* the value depends on (counter, seed) only */
    CHECK(ampy_random_value(AMPY_RANDOM_NORMAL, 7, 9, 0, 1) == ampy_random_value(AMPY_RANDOM_NORMAL, 7, 9, 0, 1) &&
              ampy_random_value(AMPY_RANDOM_UNIFORM, 7, 9, 0, 1) != ampy_random_value(AMPY_RANDOM_UNIFORM, 8, 9, 0, 1),
          "random value is a function of counter and seed");
    /* uniform: a + (b - a) * u with u = (r >> 8) / 2^24, from the first philox word */
    uint32_t r[4];
    ampy_philox4x32(5, 11, r);
    CHECK(ampy_random_value(AMPY_RANDOM_UNIFORM, 5, 11, 1.0, 2.0) ==
              1.0 + (double)ldexpl((long double)(r[0] >> 8), -24),
          "uniform value from the first word");
    CHECK(status_is(ampy_fill_random_check_args(AMPY_FLOAT32, 4, AMPY_RANDOM_NORMAL), AMPY_OK, ""),
          "fill ok");
    CHECK(status_is(ampy_fill_random_check_args(AMPY_NUM_DTYPES, 4, 0), AMPY_ERR_DTYPE,
                    "fill_random: invalid dtype"),
          "fill dtype");
    CHECK(status_is(ampy_fill_random_check_args(AMPY_FLOAT32, 4, AMPY_RANDOM_BERNOULLI + 1),
                    AMPY_ERR_VALUE, "fill_random: bad kind 4 or size 4"),
          "fill kind");
    CHECK(status_is(ampy_fill_random_check_args(AMPY_FLOAT32, -4, 0), AMPY_ERR_VALUE, "size -4"),
          "fill size");
}

/* clip_math.h: a p-norm accumulated element by element, merged from two
 * halves, and finished, against long double sums; the rounding to each
 * float dtype against the nearest value. */
static void test_clip_norm(void)
{
    const double orders[] = {1.0, 2.0, 3.0, 0.5, 0.0, INFINITY, -INFINITY};
    for (int o = 0; o < 7; o++) {
        double p = orders[o], acc = ampy_norm_init(p), lo = ampy_norm_init(p);
        double hi = ampy_norm_init(p);
        long double sum = 0.0L, mx = 0.0L, mn = INFINITY;
        for (int i = 0; i < 200; i++) {
            double a = i % 17 == 0 ? 0.0 : fabs(rndd(-3.0, 3.0));
            acc = ampy_norm_step(acc, a, p);
            if (i < 100)
                lo = ampy_norm_step(lo, a, p);
            else
                hi = ampy_norm_step(hi, a, p);
            sum += p == 0.0 ? (a != 0.0) : powl(a, p);
            mx = a > mx ? a : mx;
            mn = a < mn ? a : mn;
        }
        long double want = p == INFINITY ? mx : p == -INFINITY ? mn : p == 0.0 ? sum
                           : powl(sum, 1.0L / p);
        CHECK(near_f64(ampy_norm_finish(acc, p), want, 512), "norm p=%g: %.17g vs %.17Lg", p,
              ampy_norm_finish(acc, p), want);
        CHECK(near_f64(ampy_norm_finish(ampy_norm_merge(lo, hi, p), p), want, 512),
              "merged norm p=%g", p);
    }
    CHECK(isnan(ampy_norm_step(1.0, NAN, INFINITY)) && isnan(ampy_norm_step(NAN, 2.0, INFINITY)),
          "a NaN element makes the max norm NaN");
    CHECK(isnan(ampy_norm_step(1.0, NAN, -INFINITY)), "a NaN element makes the min norm NaN");
    for (int k = 0; k < 2000; k++) {
        double v = ldexp(rndd(-1.0, 1.0), (int)(rnd32() % 40) - 20);
        CHECK(ampy_norm_round(v, AMPY_FLOAT16) == nearest_half(v, 0), "norm f16 %.17g", v);
        CHECK(ampy_norm_round(v, AMPY_BFLOAT16) == nearest_half(v, 1), "norm bf16 %.17g", v);
        CHECK(ampy_norm_round(v, AMPY_FLOAT32) == (double)(float)v, "norm f32");
        CHECK(ampy_norm_round(v, AMPY_FLOAT64) == v, "norm f64");
    }
}

int main(void)
{
    test_adam_scalars();
    test_sgd_scalars();
    test_optim_access();
    test_optim_checks();
    test_reduce_finish();
    test_reduce_checks();
    test_cross_entropy();
    test_dropout_scale();
    test_mse();
    test_nn_access();
    test_nn_checks();
    test_random_value();
    test_clip_norm();
    printf("test_shared_math: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
