/* ampy/rnn_math.h — the per-element gate math of the recurrent cells, shared
 * by the CPU kernels (csrc/rnn.c) and their CUDA twin (cuda/rnn.cu) as
 * AMPY_ELEM (host and device) functions, in float (float32, float16 and
 * bfloat16 storage) and double (float64 storage).
 *
 * The formulas and their order of operations are torch's native CPU cells
 * (aten/src/ATen/native/RNN.cpp), so float32 results round as torch's do:
 *   LSTM  gates = (W_hh h + b_hh) + (W_ih x + b_ih), chunked i, f, g, o;
 *         i, f, o = sigmoid, g = tanh; c' = f c + i g; h' = o tanh(c')
 *   GRU   r = sigmoid(h_r + x_r), z = sigmoid(h_z + x_z),
 *         n = tanh(x_n + r h_n)  (h_n = W_hn h + b_hn, inside the reset);
 *         h' = (h - n) z + n
 *   RNN   h' = tanh(x + h) or relu(x + h)
 * The backward functions are the chain rule of the same expressions, from
 * the activations the forward saved. Unit tests: tests/c/test_rnn_math.c.
 */
#ifndef AMPY_RNN_MATH_H
#define AMPY_RNN_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/elem.h"
#include "ampy/rnn.h"
#include "ampy/status.h"

/* Argument checks of ampy_rnn_cell_fwd / _bwd (host only): mode known, sizes
 * non-negative, dtype float32/float16/bfloat16/float64. */
static inline ampy_status ampy_rnn_check_args(int mode, int64_t B, int64_t H, int dtype)
{
    if (mode < AMPY_RNN_LSTM || mode > AMPY_RNN_RELU || B < 0 || H < 0)
        return AMPY_ERR_VALUE;
    if (dtype != AMPY_FLOAT32 && dtype != AMPY_FLOAT16 && dtype != AMPY_BFLOAT16 &&
        dtype != AMPY_FLOAT64)
        return AMPY_ERR_DTYPE;
    return AMPY_OK;
}

/* Gates per hidden unit of each mode (4, 3, 1, 1) and the activations the
 * forward saves per unit for the backward (LSTM i f g o tanh(c'): 5; GRU
 * r z n h_n: 4; RNN h': 1). */
AMPY_ELEM int ampy_rnn_gates(int mode)
{
    return mode == AMPY_RNN_LSTM ? 4 : mode == AMPY_RNN_GRU ? 3 : 1;
}
AMPY_ELEM int ampy_rnn_saved(int mode)
{
    return mode == AMPY_RNN_LSTM ? 5 : mode == AMPY_RNN_GRU ? 4 : 1;
}

/* One definition per compute type T (suffix S) with its exp and tanh. */
#define AMPY_RNN_MATH(T, S, EXP, TANH)                                                         \
    AMPY_ELEM T ampy_rnn_sigmoid_##S(T x) { return (T)1 / ((T)1 + EXP(-x)); }                  \
                                                                                               \
    /* The state updates after the activations: LSTM c' = f c + i g, GRU                       \
     * h' = (h - n) z + n (callers with vector activations use these alone). */                \
    AMPY_ELEM T ampy_lstm_state_##S(T i, T f, T g, T cx)                                       \
    {                                                                                          \
        T fc = f * cx, ig = i * g;                                                             \
        return fc + ig;                                                                        \
    }                                                                                          \
    AMPY_ELEM T ampy_gru_state_##S(T n, T z, T hx) { return (hx - n) * z + n; }                \
                                                                                               \
    /* a[0..3]: pre-activations i f g o; act[0..4] <- i f g o tanh(c'). */                     \
    AMPY_ELEM void ampy_lstm_fwd_##S(const T *a, T cx, T *act, T *cy, T *hy)                   \
    {                                                                                          \
        T i = ampy_rnn_sigmoid_##S(a[0]), f = ampy_rnn_sigmoid_##S(a[1]);                      \
        T g = TANH(a[2]), o = ampy_rnn_sigmoid_##S(a[3]);                                      \
        T c = ampy_lstm_state_##S(i, f, g, cx), tc = TANH(c);                                  \
        act[0] = i, act[1] = f, act[2] = g, act[3] = o, act[4] = tc;                           \
        *cy = c;                                                                               \
        *hy = o * tc;                                                                          \
    }                                                                                          \
                                                                                               \
    /* dh, dc: gradients of h', c'; da[0..3] <- of the pre-activations; *dcx <- of c. */       \
    AMPY_ELEM void ampy_lstm_bwd_##S(const T *act, T cx, T dh, T dc, T *da, T *dcx)            \
    {                                                                                          \
        T i = act[0], f = act[1], g = act[2], o = act[3], tc = act[4];                         \
        T dct = dc + dh * o * ((T)1 - tc * tc);                                                \
        da[0] = dct * g * i * ((T)1 - i);                                                      \
        da[1] = dct * cx * f * ((T)1 - f);                                                     \
        da[2] = dct * i * ((T)1 - g * g);                                                      \
        da[3] = dh * tc * o * ((T)1 - o);                                                      \
        *dcx = dct * f;                                                                        \
    }                                                                                          \
                                                                                               \
    /* x[0..2], h[0..2]: input and hidden projections r z n; act <- r z n h_n. */              \
    AMPY_ELEM T ampy_gru_fwd_##S(const T *x, const T *h, T hx, T *act)                         \
    {                                                                                          \
        T r = ampy_rnn_sigmoid_##S(h[0] + x[0]), z = ampy_rnn_sigmoid_##S(h[1] + x[1]);        \
        T rh = h[2] * r;                                                                       \
        T n = TANH(x[2] + rh);                                                                 \
        act[0] = r, act[1] = z, act[2] = n, act[3] = h[2];                                     \
        return ampy_gru_state_##S(n, z, hx);                                                   \
    }                                                                                          \
                                                                                               \
    /* dh: gradient of h'; dx[0..2], dhp[0..2] <- of the input and hidden                      \
     * projections; returns the direct part of the gradient of h (z dh). */                    \
    AMPY_ELEM T ampy_gru_bwd_##S(const T *act, T hx, T dh, T *dx, T *dhp)                      \
    {                                                                                          \
        T r = act[0], z = act[1], n = act[2], hn = act[3];                                     \
        T dn = dh * ((T)1 - z) * ((T)1 - n * n);                                               \
        T dz = dh * (hx - n) * z * ((T)1 - z);                                                 \
        T dr = dn * hn * r * ((T)1 - r);                                                       \
        dx[0] = dr, dx[1] = dz, dx[2] = dn;                                                    \
        dhp[0] = dr, dhp[1] = dz, dhp[2] = dn * r;                                             \
        return dh * z;                                                                         \
    }                                                                                          \
                                                                                               \
    /* Elman cell: a = x + h (torch's add order), tanh or relu. */                             \
    AMPY_ELEM T ampy_rnn_fwd_##S(int mode, T x, T h)                                           \
    {                                                                                          \
        T a = h + x;                                                                           \
        return mode == AMPY_RNN_TANH ? TANH(a) : (a > (T)0 ? a : a != a ? a : (T)0);           \
    }                                                                                          \
                                                                                               \
    /* dh: gradient of y = the forward's result; of the pre-activation. */                     \
    AMPY_ELEM T ampy_rnn_bwd_##S(int mode, T y, T dh)                                          \
    {                                                                                          \
        return mode == AMPY_RNN_TANH ? dh * ((T)1 - y * y) : (y > (T)0 ? dh : (T)0);           \
    }

AMPY_RNN_MATH(float, f, expf, tanhf)
AMPY_RNN_MATH(double, d, exp, tanh)
#undef AMPY_RNN_MATH

#endif /* AMPY_RNN_MATH_H */
