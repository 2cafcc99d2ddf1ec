/* test_rnn_math.c — unit tests of the recurrent cells' shared formulas
 * (ampy/rnn_math.h), the host build of the functions cuda/rnn.cu runs.
 *
 * Forward: each cell against its textbook definition evaluated here in long
 * double, for random pre-activations; the float versions within a few
 * float32 ulp (sigmoid and tanh through expf/tanhf, then a few roundings),
 * the double versions within a few double ulp. Backward: each gradient
 * against a central finite difference of the long double forward (step
 * 1e-6: truncation error ~1e-12, far below the bound). The argument check
 * returns its status for each bad argument.
 *
 * Run by `make ctest` and tests/test_rnn.py. Exit status 0 when every check
 * passes; each failure prints one line.
 */
#include <math.h>
#include <stdio.h>

#include "ampy/dtype.h"
#include "ampy/rnn_math.h"

#define CTEST_SEED 0x7F4A7C159E3779B9ull
#include "ctest.h"

typedef long double LD;

static double rndd(double lo, double hi) { return lo + (hi - lo) * (double)rnd32() / 4294967296.0; }
static LD sig(LD x) { return 1.0L / (1.0L + expl(-x)); }

/* the LSTM cell in long double: out[0] = h', out[1] = c' */
static void lstm_ref(const LD *a, LD cx, LD *out)
{
    LD i = sig(a[0]), f = sig(a[1]), g = tanhl(a[2]), o = sig(a[3]);
    out[1] = f * cx + i * g;
    out[0] = o * tanhl(out[1]);
}

/* the GRU cell: x[0..2], h[0..2] projections, hx the previous state */
static LD gru_ref(const LD *x, const LD *h, LD hx)
{
    LD r = sig(x[0] + h[0]), z = sig(x[1] + h[1]), n = tanhl(x[2] + r * h[2]);
    return (1.0L - z) * n + z * hx;
}

static int close_to(LD got, LD want, LD tol)
{
    return fabsl(got - want) <= tol * (1.0L + fabsl(want));
}

static void test_lstm(void)
{
    for (int it = 0; it < 2000; it++) {
        double a[4], cx = rndd(-3, 3), dh = rndd(-1, 1), dc = rndd(-1, 1);
        for (int k = 0; k < 4; k++)
            a[k] = rndd(-6, 6);
        LD al[4] = {a[0], a[1], a[2], a[3]}, ref[2];
        lstm_ref(al, cx, ref);
        float af[4] = {(float)a[0], (float)a[1], (float)a[2], (float)a[3]}, actf[5], cyf, hyf;
        LD alf[4] = {af[0], af[1], af[2], af[3]}, reff[2];
        lstm_ref(alf, (float)cx, reff);
        ampy_lstm_fwd_f(af, (float)cx, actf, &cyf, &hyf);
        CHECK(close_to(hyf, reff[0], 4e-7L) && close_to(cyf, reff[1], 4e-7L),
              "lstm f32 fwd: got (%g, %g), want (%Lg, %Lg)", hyf, cyf, reff[0], reff[1]);
        double act[5], cy, hy, da[4], dcx;
        ampy_lstm_fwd_d(a, cx, act, &cy, &hy);
        CHECK(close_to(hy, ref[0], 1e-15L) && close_to(cy, ref[1], 1e-15L),
              "lstm f64 fwd: got (%g, %g), want (%Lg, %Lg)", hy, cy, ref[0], ref[1]);
        CHECK(ampy_lstm_state_d(act[0], act[1], act[2], cx) == cy, "lstm state helper");
        ampy_lstm_bwd_d(act, cx, dh, dc, da, &dcx);
        const LD e = 1e-6L;
        for (int k = 0; k < 5; k++) {
            LD p[4] = {a[0], a[1], a[2], a[3]}, m[4] = {a[0], a[1], a[2], a[3]}, rp[2], rm[2];
            LD cp = cx, cm = cx;
            if (k < 4)
                p[k] += e, m[k] -= e;
            else
                cp += e, cm -= e;
            lstm_ref(p, cp, rp);
            lstm_ref(m, cm, rm);
            LD want = (dh * (rp[0] - rm[0]) + dc * (rp[1] - rm[1])) / (2 * e);
            LD got = k < 4 ? da[k] : dcx;
            CHECK(close_to(got, want, 1e-8L), "lstm bwd %d: got %Lg, want %Lg", k, got, want);
        }
        float daf[4], dcxf;
        ampy_lstm_bwd_f(actf, (float)cx, (float)dh, (float)dc, daf, &dcxf);
        CHECK(close_to(daf[0], da[0], 1e-4L) && close_to(dcxf, dcx, 1e-4L), "lstm f32 bwd");
    }
}

static void test_gru(void)
{
    for (int it = 0; it < 2000; it++) {
        double x[3], h[3], hx = rndd(-1, 1), dh = rndd(-1, 1), act[4], dx[3], dhp[3];
        for (int k = 0; k < 3; k++)
            x[k] = rndd(-5, 5), h[k] = rndd(-5, 5);
        LD xl[3] = {x[0], x[1], x[2]}, hl[3] = {h[0], h[1], h[2]};
        LD ref = gru_ref(xl, hl, hx);
        double got = ampy_gru_fwd_d(x, h, hx, act);
        CHECK(close_to(got, ref, 1e-15L), "gru f64 fwd: got %g, want %Lg", got, ref);
        CHECK(act[3] == h[2], "gru saves h_n");
        CHECK(ampy_gru_state_d(act[2], act[1], hx) == got, "gru state helper");
        float xf[3] = {(float)x[0], (float)x[1], (float)x[2]}, hf[3], actf[4];
        for (int k = 0; k < 3; k++)
            hf[k] = (float)h[k];
        LD xlf[3] = {xf[0], xf[1], xf[2]}, hlf[3] = {hf[0], hf[1], hf[2]};
        float gotf = ampy_gru_fwd_f(xf, hf, (float)hx, actf);
        LD reff = gru_ref(xlf, hlf, (float)hx);
        CHECK(close_to(gotf, reff, 4e-7L), "gru f32 fwd: got %g, want %Lg", gotf, reff);
        double direct = ampy_gru_bwd_d(act, hx, dh, dx, dhp);
        const LD e = 1e-6L;
        for (int k = 0; k < 3; k++) {
            LD xp[3] = {x[0], x[1], x[2]}, xm[3] = {x[0], x[1], x[2]};
            LD hp[3] = {h[0], h[1], h[2]}, hm[3] = {h[0], h[1], h[2]};
            xp[k] += e, xm[k] -= e;
            LD wx = dh * (gru_ref(xp, hl, hx) - gru_ref(xm, hl, hx)) / (2 * e);
            hp[k] += e, hm[k] -= e;
            LD wh = dh * (gru_ref(xl, hp, hx) - gru_ref(xl, hm, hx)) / (2 * e);
            CHECK(close_to(dx[k], wx, 1e-8L), "gru bwd dx %d: got %g, want %Lg", k, dx[k], wx);
            CHECK(close_to(dhp[k], wh, 1e-8L), "gru bwd dh %d: got %g, want %Lg", k, dhp[k], wh);
        }
        LD wd = dh * (gru_ref(xl, hl, hx + e) - gru_ref(xl, hl, hx - e)) / (2 * e);
        CHECK(close_to(direct, wd, 1e-8L), "gru bwd direct: got %g, want %Lg", direct, wd);
        float dxf[3], dhpf[3];
        float directf = ampy_gru_bwd_f(actf, (float)hx, (float)dh, dxf, dhpf);
        CHECK(close_to(directf, direct, 1e-4L) && close_to(dxf[2], dx[2], 1e-4L), "gru f32 bwd");
    }
}

static void test_rnn(void)
{
    for (int it = 0; it < 2000; it++) {
        double x = rndd(-4, 4), h = rndd(-4, 4), dh = rndd(-1, 1);
        double y = ampy_rnn_fwd_d(AMPY_RNN_TANH, x, h);
        CHECK(close_to(y, tanhl((LD)x + h), 1e-15L), "tanh cell");
        CHECK(close_to(ampy_rnn_bwd_d(AMPY_RNN_TANH, y, dh), dh * (1 - tanhl((LD)x + h) *
                       tanhl((LD)x + h)), 1e-14L), "tanh cell bwd");
        double r = ampy_rnn_fwd_d(AMPY_RNN_RELU, x, h);
        CHECK(r == (x + h > 0 ? x + h : 0.0), "relu cell");
        CHECK(ampy_rnn_bwd_d(AMPY_RNN_RELU, r, dh) == (x + h > 0 ? dh : 0.0), "relu cell bwd");
        float yf = ampy_rnn_fwd_f(AMPY_RNN_TANH, (float)x, (float)h);
        CHECK(close_to(yf, tanhl((LD)(float)x + (float)h), 4e-7L), "tanh cell f32");
        CHECK(close_to(ampy_rnn_bwd_f(AMPY_RNN_RELU, 1.0f, 2.0f), 2.0L, 0), "relu f32 bwd");
        CHECK(close_to(ampy_rnn_sigmoid_f((float)x), sig((float)x), 4e-7L), "sigmoid f32");
        CHECK(close_to(ampy_rnn_sigmoid_d(x), sig(x), 1e-15L), "sigmoid f64");
        CHECK(ampy_lstm_state_f(1.0f, 0.5f, 2.0f, 4.0f) == 4.0f, "lstm state f32");
        CHECK(ampy_gru_state_f(1.0f, 0.25f, 3.0f) == 1.5f, "gru state f32");
    }
    double nan = NAN;
    CHECK(isnan(ampy_rnn_fwd_d(AMPY_RNN_RELU, nan, 0.0)), "relu keeps NaN");
}

static void test_checks(void)
{
    CHECK(ampy_rnn_gates(AMPY_RNN_LSTM) == 4 && ampy_rnn_gates(AMPY_RNN_GRU) == 3 &&
              ampy_rnn_gates(AMPY_RNN_TANH) == 1 && ampy_rnn_gates(AMPY_RNN_RELU) == 1,
          "gates per mode");
    CHECK(ampy_rnn_saved(AMPY_RNN_LSTM) == 5 && ampy_rnn_saved(AMPY_RNN_GRU) == 4 &&
              ampy_rnn_saved(AMPY_RNN_RELU) == 1, "saved per mode");
    CHECK(ampy_rnn_check_args(AMPY_RNN_LSTM, 2, 3, AMPY_FLOAT32) == AMPY_OK, "ok args");
    CHECK(ampy_rnn_check_args(7, 2, 3, AMPY_FLOAT32) == AMPY_ERR_VALUE, "bad mode");
    CHECK(ampy_rnn_check_args(AMPY_RNN_GRU, -1, 3, AMPY_FLOAT32) == AMPY_ERR_VALUE, "bad B");
    CHECK(ampy_rnn_check_args(AMPY_RNN_GRU, 1, -3, AMPY_FLOAT64) == AMPY_ERR_VALUE, "bad H");
    CHECK(ampy_rnn_check_args(AMPY_RNN_TANH, 1, 3, AMPY_INT64) == AMPY_ERR_DTYPE, "bad dtype");
}

int main(void)
{
    test_lstm();
    test_gru();
    test_rnn();
    test_checks();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
