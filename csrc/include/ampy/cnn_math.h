/* ampy/cnn_math.h — what every cnn kernel (csrc/cnn_*.c) computes alike:
 * element loads and stores in the compute type, the window and index
 * formulas of the pools and interpolation (torch's
 * aten/src/ATen/native/Pool.h, AdaptivePooling.h, UpSample.h, restated), and
 * the output-size rule of a pooling dim. AMPY_ELEM: host and device.
 * Unit tests: tests/c/test_cnn_math.c.
 */
#ifndef AMPY_CNN_MATH_H
#define AMPY_CNN_MATH_H

#include <math.h>
#include <stdint.h>

#include "ampy/cnn.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/nn_math.h"

/* Element i of a float32 / float16 / bfloat16 array as float. */
AMPY_ELEM float ampy_cnn_ldf(const void *p, int dt, int64_t i)
{
    if (dt == AMPY_FLOAT32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
}

/* v rounded once into element i of a float32 / float16 / bfloat16 array. */
AMPY_ELEM void ampy_cnn_stf(void *p, int dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
}

/* v rounded to dt and read back (float64: v itself). */
AMPY_ELEM double ampy_cnn_round_to(int dt, double v)
{
    switch (dt) {
    case AMPY_FLOAT64: return v;
    case AMPY_FLOAT16: return ampy_f16_to_f32(ampy_f32_to_f16((float)v));
    case AMPY_BFLOAT16: return ampy_bf16_to_f32(ampy_f32_to_bf16((float)v));
    default: return (double)(float)v;
    }
}

/* acc + v as torch's `grad_input[i] += delta` computes it in dt: in double
 * for float64, else a float32 sum rounded once to dt. */
AMPY_ELEM double ampy_cnn_add_to(int dt, double acc, double v)
{
    return dt == AMPY_FLOAT64 ? acc + v : ampy_cnn_round_to(dt, (double)((float)acc + (float)v));
}

/* Output length of a pooling dim (torch's pooling_output_shape):
 * floor or ceil of (n + 2p - d(k-1) - 1) / s, plus 1; in ceil mode the last
 * window must start inside the input or its left padding. Negative when
 * the window does not fit (the caller raises). */
AMPY_ELEM int64_t ampy_cnn_pool_out(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d,
                                    int ceil_mode)
{
    int64_t num = n + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t q = num >= 0 ? num / s : -((-num + s - 1) / s); /* floor division */
    int64_t out = q + 1;
    if (ceil_mode && (out - 1) * s >= n + p)
        out--;
    return out;
}

/* First and one-past-last input index of adaptive window o of n_out over n:
 * floor(o n / n_out) and ceil((o + 1) n / n_out), in integers. */
AMPY_ELEM int64_t ampy_cnn_adaptive_start(int64_t o, int64_t n_out, int64_t n)
{
    return (o / n_out) * n + ((o % n_out) * n) / n_out;
}

AMPY_ELEM int64_t ampy_cnn_adaptive_end(int64_t o, int64_t n_out, int64_t n)
{
    return 1 + ((o + 1) * n - 1) / n_out;
}

/* The ratio an interpolation dim maps destination to source indices with
 * (torch's area_pixel_compute_scale, in float32 for float32 and half data,
 * in float64 for float64 data): align_corners: (n - 1) / (n_out - 1), 0 for
 * n_out <= 1; otherwise 1 / scale for a user scale factor (> 0), else
 * n / n_out. */
AMPY_ELEM double ampy_cnn_interp_ratio(int64_t n, int64_t n_out, int align_corners, double scale,
                                       int f64)
{
    if (align_corners) {
        if (n_out <= 1)
            return 0.0;
        return f64 ? (double)(n - 1) / (double)(n_out - 1)
                   : (double)((float)(n - 1) / (float)(n_out - 1));
    }
    if (scale > 0.0)
        return f64 ? 1.0 / scale : (double)(float)(1.0 / scale);
    return f64 ? (double)n / (double)n_out : (double)((float)n / (float)n_out);
}

/* Nearest source index (torch's nearest_idx, float32 for every dtype): the
 * identity and halving shortcuts, else min(floor(o * ratio), n - 1). */
AMPY_ELEM int64_t ampy_cnn_nearest_src(int64_t o, int64_t n, int64_t n_out, double scale)
{
    if (n_out == n)
        return o;
    if (n_out == 2 * n)
        return o >> 1;
    float r = scale > 0.0 ? (float)(1.0 / scale) : (float)n / (float)n_out;
    int64_t i = (int64_t)floorf((float)o * r);
    return i < n - 1 ? i : n - 1;
}

/* Bilinear neighbours i0, i1 and lambdas l0, l1 of destination index o
 * (torch's compute_source_index_and_lambda with the ratio above; the
 * half-pixel source index is one fused multiply-add, as torch's compiled
 * kernel computes it; on the host its floor is taken in float32 for
 * float64 data too, as torch's CPU floorf). f64 selects float64
 * arithmetic, else float32. */
AMPY_ELEM void ampy_cnn_linear_src(int64_t o, int64_t n, int64_t n_out, double ratio,
                                   int align_corners, int f64, int64_t *i0, int64_t *i1,
                                   double *l0, double *l1)
{
    if (n_out == n) {
        *i0 = *i1 = o;
        *l0 = 1.0;
        *l1 = 0.0;
        return;
    }
    double real, lam;
    if (f64) {
        real = align_corners ? ratio * (double)o : fma(ratio, (double)o + 0.5, -0.5);
    } else {
        float r = (float)ratio;
        real = align_corners ? (double)(r * (float)o) : (double)fmaf(r, (float)o + 0.5f, -0.5f);
    }
    if (!align_corners && real < 0.0)
        real = 0.0;
#if defined(__CUDA_ARCH__)
    int64_t k = (int64_t)floor(real);
#else
    int64_t k = (int64_t)floorf((float)real); /* torch's CPU floors in float32 */
#endif
    if (k > n - 1)
        k = n - 1;
    lam = f64 ? real - (double)k : (double)((float)real - (float)k);
    lam = lam < 0.0 ? 0.0 : (lam > 1.0 ? 1.0 : lam);
    *i0 = k;
    *i1 = k + (k < n - 1 ? 1 : 0);
    *l1 = lam;
    *l0 = f64 ? 1.0 - lam : (double)(1.0f - (float)lam);
}

/* Source index of padded output index o of a dim of n with left pad lo, or
 * -1 for the constant fill (mode as ampy_cnn_pad_mode). */
AMPY_ELEM int64_t ampy_cnn_pad_src(int64_t o, int64_t n, int64_t lo, int mode)
{
    int64_t i = o - lo;
    switch (mode) {
    case 1: /* reflect */
        if (i < 0)
            i = -i;
        if (i >= n)
            i = 2 * (n - 1) - i;
        return i;
    case 2: /* replicate */
        return i < 0 ? 0 : (i >= n ? n - 1 : i);
    case 3: /* circular */
        i %= n;
        return i < 0 ? i + n : i;
    default:
        return i >= 0 && i < n ? i : -1;
    }
}

/* ---- pooling windows -------------------------------------------------------- */
/* The largest element of max-pool window (oh, ow) of the plane at base
 * (NaN wins, the first maximum wins ties) into *m; returns its flat index
 * ih * W + iw in the plane. */
AMPY_ELEM int64_t ampy_cnn_max_window(const void *x, int dt, int64_t base, int64_t H, int64_t W,
                                      int64_t oh, int64_t ow, const ampy_cnn_window *w, double *m)
{
    int64_t h0 = oh * w->sh - w->ph, h1 = h0 + (w->kh - 1) * w->dh + 1;
    int64_t w0 = ow * w->sw - w->pw, w1 = w0 + (w->kw - 1) * w->dw + 1;
    h1 = h1 < H ? h1 : H;
    w1 = w1 < W ? w1 : W;
    while (h0 < 0)
        h0 += w->dh;
    while (w0 < 0)
        w0 += w->dw;
    int64_t best = h0 * W + w0;
    double v, mx = -INFINITY;
    for (int64_t ih = h0; ih < h1; ih += w->dh)
        for (int64_t iw = w0; iw < w1; iw += w->dw) {
            v = ampy_nn_load1(x, dt, base + ih * W + iw);
            if (v > mx || v != v) {
                mx = v;
                best = ih * W + iw;
            }
        }
    *m = mx;
    return best;
}

/* The clipped average-pool window [h0, h1) x [w0, w1) of output (oh, ow)
 * and its divisor (divisor_override when > 0, else the window's length
 * before the clip to the input when include_pad, else after it); returns 0
 * for a window wholly in the padding. */
AMPY_ELEM int ampy_cnn_avg_window(int64_t H, int64_t W, int64_t oh, int64_t ow,
                                  const ampy_cnn_window *w, int include_pad, int64_t divisor,
                                  int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1,
                                  int64_t *div)
{
    int64_t a = oh * w->sh - w->ph, b = ow * w->sw - w->pw;
    int64_t ae = a + w->kh < H + w->ph ? a + w->kh : H + w->ph;
    int64_t be = b + w->kw < W + w->pw ? b + w->kw : W + w->pw;
    int64_t pool = (ae - a) * (be - b);
    a = a > 0 ? a : 0, b = b > 0 ? b : 0;
    ae = ae < H ? ae : H, be = be < W ? be : W;
    *h0 = a, *h1 = ae, *w0 = b, *w1 = be;
    if (a >= ae || b >= be)
        return 0;
    *div = divisor > 0 ? divisor : (include_pad ? pool : (ae - a) * (be - b));
    return 1;
}

/* The outputs [*o0, *o1) of a pooling dim (kernel k, stride s, left pad p,
 * dilation 1, n_out outputs) whose window o*s - p ... o*s - p + k - 1
 * holds input index i: what a gathering backward visits. */
AMPY_ELEM void ampy_cnn_pool_cover(int64_t i, int64_t k, int64_t s, int64_t p, int64_t n_out,
                                   int64_t *o0, int64_t *o1)
{
    int64_t lo = i + p - k + 1, hi = i + p; /* o*s in [lo, hi] */
    int64_t a = lo <= 0 ? 0 : (lo + s - 1) / s;
    int64_t b = hi < 0 ? -1 : hi / s;
    *o0 = a;
    *o1 = b + 1 < n_out ? b + 1 : n_out;
    if (*o1 < *o0)
        *o1 = *o0;
}

/* The adaptive windows [*o0, *o1) of n_out over n that hold input index i
 * (the windows start and end monotonically: floor(i n_out / n) to
 * ceil((i + 1) n_out / n)). */
AMPY_ELEM void ampy_cnn_adaptive_cover(int64_t i, int64_t n, int64_t n_out, int64_t *o0,
                                       int64_t *o1)
{
    *o0 = ampy_cnn_adaptive_start(i, n, n_out);
    *o1 = ampy_cnn_adaptive_end(i, n, n_out);
}

/* ---- interpolation ---------------------------------------------------------- */
/* The bilinear value of the four neighbours (rows 0/1, columns 0/1) with
 * lambdas a (rows) and b (columns): a fused multiply-add per pair, as
 * torch's compiled kernel; float32 arithmetic, and float64 below. */
AMPY_ELEM float ampy_cnn_bilinear_f(float v00, float v01, float v10, float v11, float a0,
                                    float a1, float b0, float b1)
{
    float t0 = fmaf(v00, b0, v01 * b1), t1 = fmaf(v10, b0, v11 * b1);
    return fmaf(t0, a0, t1 * a1);
}

AMPY_ELEM double ampy_cnn_bilinear_d(double v00, double v01, double v10, double v11, double a0,
                                     double a1, double b0, double b1)
{
    double t0 = fma(v00, b0, v01 * b1), t1 = fma(v10, b0, v11 * b1);
    return fma(t0, a0, t1 * a1);
}

/* torch's channels-last bilinear value: the lambda products w00 = a0 b0,
 * w01 = a0 b1, w10 = a1 b0, w11 = a1 b1 weight the four neighbours; a
 * channel of the scalar tail adds them left to right, a vector-block lane
 * right to left (lane != 0), each add one fused multiply-add as torch's
 * compiled kernel. float32 arithmetic, and float64 below. */
AMPY_ELEM float ampy_cnn_bilinear4_f(float v00, float v01, float v10, float v11, float a0,
                                     float a1, float b0, float b1, int lane)
{
    const float w00 = a0 * b0, w01 = a0 * b1, w10 = a1 * b0, w11 = a1 * b1;
    if (lane)
        return fmaf(v00, w00, fmaf(v01, w01, fmaf(v11, w11, v10 * w10)));
    return fmaf(v11, w11, fmaf(v10, w10, fmaf(v00, w00, v01 * w01)));
}

AMPY_ELEM double ampy_cnn_bilinear4_d(double v00, double v01, double v10, double v11, double a0,
                                      double a1, double b0, double b1, int lane)
{
    const double w00 = a0 * b0, w01 = a0 * b1, w10 = a1 * b0, w11 = a1 * b1;
    if (lane)
        return fma(v00, w00, fma(v01, w01, fma(v11, w11, v10 * w10)));
    return fma(v11, w11, fma(v10, w10, fma(v00, w00, v01 * w01)));
}

/* ---- batch_norm / group_norm ------------------------------------------------ */
/* invstd of a training batch from the channel's var_sum vs over cnt
 * elements, and the unbiased variance for the running stats: torch keeps
 * var_sum in the parameter type (float32 unless f64) and divides there;
 * invstd is 0 for zero variance and eps, rounded to float32 unless f64. */
AMPY_ELEM double ampy_cnn_bn_train_invstd(double vs, double cnt, double eps, int f64,
                                          double *unbiased)
{
    double var;
    if (f64) {
        var = vs / cnt;
        *unbiased = vs / (cnt - 1.0);
    } else {
        float vsf = (float)vs;
        var = (double)(vsf / (float)cnt);
        *unbiased = (double)(vsf / (float)(cnt - 1.0));
    }
    double invstd = var == 0.0 && eps == 0.0 ? 0.0 : 1.0 / sqrt(var + eps);
    return f64 ? invstd : (double)(float)invstd;
}

/* invstd in evaluation, from the running variance rv. */
AMPY_ELEM double ampy_cnn_bn_eval_invstd(double rv, double eps, int f64)
{
    return f64 ? 1.0 / sqrt(rv + eps) : (double)(1.0f / sqrtf((float)rv + (float)eps));
}

/* The running-stat update of channel c (momentum m): in double for f64,
 * else torch's float32 arithmetic (the mean's two products and a sum, the
 * variance's one fused multiply-add). */
AMPY_ELEM void ampy_cnn_bn_update_running(void *run_mean, void *run_var, int pdt, int64_t c,
                                          double m, double mean, double unbiased, int f64)
{
    double rm = ampy_nn_load1(run_mean, pdt, c), rv = ampy_nn_load1(run_var, pdt, c);
    if (f64) {
        ampy_nn_store1(run_mean, pdt, c, m * mean + (1.0 - m) * rm);
        ampy_nn_store1(run_var, pdt, c, m * unbiased + (1.0 - m) * rv);
    } else {
        float mf = (float)m, om = 1.0f - mf;
        float pm = mf * (float)mean, pr = om * (float)rm;
        ampy_nn_store1(run_mean, pdt, c, (double)(pm + pr));
        ampy_nn_store1(run_var, pdt, c, (double)fmaf(mf, (float)unbiased, om * (float)rv));
    }
}

/* The per-channel linear and constant terms of a norm's output
 * y = x * alpha + beta: alpha = scale * w, beta = b - mean * alpha (one
 * fused multiply-add), in float32 unless f64 (scale: invstd or rstd). */
AMPY_ELEM void ampy_cnn_norm_affine(double scale, double w, double mean, double b, int f64,
                                    double *alpha, double *beta)
{
    if (f64) {
        *alpha = scale * w;
        *beta = fma(-mean, *alpha, b);
    } else {
        float a = (float)scale * (float)w;
        *alpha = (double)a;
        *beta = (double)fmaf(-(float)mean, a, (float)b);
    }
}

/* Group norm backward's c2 and c3 of a row (dx = rstd w_c dy + c2 x + c3)
 * from dsw = sum_c ds_c w_c and dbw = sum_c db_c w_c over the row's
 * channels, D elements per row (double). */
AMPY_ELEM void ampy_cnn_gn_bwd_coef(double dsw, double dbw, double mean, double rstd, int64_t D,
                                    double *c2, double *c3)
{
    double s = 1.0 / (double)D;
    *c2 = (dbw * mean - dsw) * rstd * rstd * rstd * s;
    *c3 = -*c2 * mean - dbw * rstd * s;
}

#endif /* AMPY_CNN_MATH_H */
