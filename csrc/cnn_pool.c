/* cnn_pool.c — max_pool2d (with argmax indices), avg_pool2d and
 * adaptive_avg_pool2d over planes, forward and backward (contracts in
 * ampy/cnn.h).
 *
 * The loops are torch's channels-first CPU kernels restated
 * (aten/src/ATen/native/cpu/MaxPoolKernel.cpp, AvgPoolKernel.cpp,
 * AdaptiveAvgPoolKernel.cpp): a window sum in float32 (float64 for float64
 * data) divided once, the backward's per-output share rounded to the data
 * type and added into the gradient in that type. Planes are split across
 * the thread pool; each plane is one thread's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/cnn.h"
#include "ampy/cnn_math.h"
#include "ampy/dtype.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"
#include "cnn_half.h"
#include "cnn_pool_max.h"
#include "simd.h"
#if defined(AMPY_X86_SIMD)
#include <immintrin.h>
#endif

#define POOL_GRAIN_ELEMS 16384

typedef struct {
    int64_t H, W, OH, OW;
    ampy_cnn_window win;
    int include_pad;
    int64_t divisor;
    const void *src;
    void *dst;
    int64_t *idx;
    const int64_t *cidx;
    int dt;
    float *wide; /* half data: the input widened to float32, plane by plane */
    int *failed; /* set when a range cannot allocate its buffer */
} pool_ctx;

static int64_t grain_for(int64_t per_plane)
{
    int64_t g = per_plane > 0 ? POOL_GRAIN_ELEMS / per_plane : POOL_GRAIN_ELEMS;
    return g < 1 ? 1 : g;
}

static size_t elem_size(int dt)
{
    return dt == AMPY_FLOAT64 ? 8 : (dt == AMPY_FLOAT32 ? 4 : 2);
}

/* dx[i] += v, rounded to dt as torch's `grad_input[i] += delta` does: the
 * value of ampy_cnn_add_to (cnn_math.h, the CUDA twin's), with the float sum
 * stored straight into dt instead of through a double round trip. */
static inline void add_at(void *p, int dt, int64_t i, double v)
{
    if (dt == AMPY_FLOAT64)
        ((double *)p)[i] += v;
    else
        ampy_cnn_stf(p, dt, i, ampy_cnn_ldf(p, dt, i) + (float)v);
}

/* v rounded to dt and read back (the per-output share of a backward). */
static inline double round_to(int dt, double v)
{
    return ampy_cnn_round_to(dt, v);
}

static ampy_status check_planes(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW, int dt,
                                const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    if (P < 0 || H < 0 || W < 0 || OH < 0 || OW < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    return AMPY_OK;
}

static ampy_status check_window(const ampy_cnn_window *w, const char *fn)
{
    if (!w || w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1 || w->ph < 0 || w->pw < 0 ||
        w->dh < 1 || w->dw < 1)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad kernel, stride, padding or dilation", fn);
    return AMPY_OK;
}

/* ---- max_pool2d ----------------------------------------------------------- */
/* float64 planes, compared in float64: the shared window (cnn_math.h), as the
 * CUDA twin computes it */
static void max_fwd_plane_d(const pool_ctx *k, int64_t ib, int64_t ob)
{
    for (int64_t oh = 0; oh < k->OH; oh++)
        for (int64_t ow = 0; ow < k->OW; ow++) {
            double m;
            int64_t best =
                ampy_cnn_max_window(k->src, k->dt, ib, k->H, k->W, oh, ow, &k->win, &m);
            ((double *)k->dst)[ob + oh * k->OW + ow] = m;
            k->idx[ob + oh * k->OW + ow] = best;
        }
}

static void max_fwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    const int64_t HW = k->H * k->W, O = k->OH * k->OW;
    float *wide = NULL;
    if (ampy_dtype_is_half(k->dt)) {
        wide = (float *)malloc((size_t)(HW + O) * sizeof(float));
        if (!wide) {
            *k->failed = 1;
            return;
        }
    }
    for (int64_t p = p0; p < p1; p++) {
        const int64_t ib = p * HW, ob = p * O;
        if (k->dt == AMPY_FLOAT64) {
            max_fwd_plane_d(k, ib, ob);
        } else if (k->dt == AMPY_FLOAT32) {
            ampy_cnn_max_plane_f32((const float *)k->src + ib, k->H, k->W, k->OH, k->OW, &k->win,
                                   (float *)k->dst + ob, k->idx + ob);
        } else {
            /* the maxima are input values, so rounding them back is exact */
            cnn_widen_half(k->dt, (const uint16_t *)k->src + ib, wide, HW);
            ampy_cnn_max_plane_f32(wide, k->H, k->W, k->OH, k->OW, &k->win, wide + HW,
                                   k->idx + ob);
            cnn_narrow_half(k->dt, wide + HW, (uint16_t *)k->dst + ob, O);
        }
    }
    free(wide);
}

ampy_status ampy_cnn_max_pool2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const ampy_cnn_window *win, const void *x, int dtype,
                                    void *y, int64_t *idx)
{
    ampy_status s = check_planes(P, H, W, OH, OW, dtype, "max_pool2d");
    if (s == AMPY_OK)
        s = check_window(win, "max_pool2d");
    if (s != AMPY_OK)
        return s;
    if (P * OH * OW == 0)
        return AMPY_OK;
    if (!y || !idx || H * W == 0)
        return ampy_error(AMPY_ERR_VALUE, "max_pool2d: empty input plane or NULL output");
    int failed = 0;
    pool_ctx k = {H, W, OH, OW, *win, 0, 0, x, y, idx, NULL, dtype, NULL, &failed};
    ampy_parallel_for(P, grain_for(OH * OW * win->kh * win->kw), max_fwd_range, &k);
    if (failed)
        return ampy_error(AMPY_ERR_NOMEM, "max_pool2d: out of memory");
    return AMPY_OK;
}

static void max_bwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    const int64_t HW = k->H * k->W, O = k->OH * k->OW;
    for (int64_t p = p0; p < p1; p++) {
        const int64_t *ix = k->cidx + p * O;
        if (k->dt == AMPY_FLOAT32) {
            float *dx = (float *)k->dst + p * HW;
            const float *dy = (const float *)k->src + p * O;
            for (int64_t o = 0; o < O; o++)
                dx[ix[o]] += dy[o];
        } else if (k->dt == AMPY_FLOAT64) {
            double *dx = (double *)k->dst + p * HW;
            const double *dy = (const double *)k->src + p * O;
            for (int64_t o = 0; o < O; o++)
                dx[ix[o]] += dy[o];
        } else {
            uint16_t *dx = (uint16_t *)k->dst + p * HW;
            const uint16_t *dy = (const uint16_t *)k->src + p * O;
            for (int64_t o = 0; o < O; o++)
                ampy_cnn_stf(dx, k->dt, ix[o],
                             ampy_cnn_ldf(dx, k->dt, ix[o]) + ampy_cnn_ldf(dy, k->dt, o));
        }
    }
}

ampy_status ampy_cnn_max_pool2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const int64_t *idx, const void *dy, int dtype, void *dx)
{
    ampy_status s = check_planes(P, H, W, OH, OW, dtype, "max_pool2d_backward");
    if (s != AMPY_OK)
        return s;
    if (!dx)
        return ampy_error(AMPY_ERR_VALUE, "max_pool2d_backward: NULL output");
    for (int64_t i = 0; i < P * OH * OW; i++)
        if (idx[i] < 0 || idx[i] >= H * W)
            return ampy_error(AMPY_ERR_INDEX, "max_pool2d_backward: index %lld out of range",
                              (long long)idx[i]);
    memset(dx, 0, (size_t)(P * H * W) * elem_size(dtype));
    pool_ctx k = {H, W, OH, OW, {1, 1, 1, 1, 0, 0, 1, 1}, 0, 0, dy, dx, NULL, idx, dtype, NULL, NULL};
    ampy_parallel_for(P, grain_for(OH * OW), max_bwd_range, &k);
    return AMPY_OK;
}

/* ---- avg_pool2d ----------------------------------------------------------- */
/* The clipped window [h0, h1) x [w0, w1) of output (oh, ow) and its divisor;
 * returns 0 for a window that lies wholly in the padding. */
static int avg_window(const pool_ctx *k, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                      int64_t *w0, int64_t *w1, int64_t *div)
{
    return ampy_cnn_avg_window(k->H, k->W, oh, ow, &k->win, k->include_pad, k->divisor, h0, h1,
                               w0, w1, div);
}

static void avg_fwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    const int dt = k->dt;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ib = p * k->H * k->W, ob = p * k->OH * k->OW;
        for (int64_t oh = 0; oh < k->OH; oh++)
            for (int64_t ow = 0; ow < k->OW; ow++) {
                int64_t h0, h1, w0, w1, div, o = ob + oh * k->OW + ow;
                if (!avg_window(k, oh, ow, &h0, &h1, &w0, &w1, &div)) {
                    ampy_nn_store1(k->dst, dt, o, 0.0);
                    continue;
                }
                if (dt == AMPY_FLOAT64) {
                    double sum = 0.0;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            sum += ((const double *)k->src)[ib + ih * k->W + iw];
                    ((double *)k->dst)[o] = sum / (double)div;
                } else {
                    float sum = 0.0f;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            sum += ampy_cnn_ldf(k->src, dt, ib + ih * k->W + iw);
                    ampy_cnn_stf(k->dst, dt, o, sum / (float)div);
                }
            }
    }
}

static void avg_bwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ib = p * k->H * k->W, ob = p * k->OH * k->OW;
        for (int64_t oh = 0; oh < k->OH; oh++)
            for (int64_t ow = 0; ow < k->OW; ow++) {
                int64_t h0, h1, w0, w1, div;
                if (!avg_window(k, oh, ow, &h0, &h1, &w0, &w1, &div))
                    continue;
                double g = ampy_nn_load1(k->src, k->dt, ob + oh * k->OW + ow);
                double d = k->dt == AMPY_FLOAT64 ? g / (double)div
                                                 : round_to(k->dt, (float)g / (float)div);
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++)
                        add_at(k->dst, k->dt, ib + ih * k->W + iw, d);
            }
    }
}

static ampy_status avg_check(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                             const ampy_cnn_window *win, int dt, const void *out, const char *fn)
{
    ampy_status s = check_planes(P, H, W, OH, OW, dt, fn);
    if (s == AMPY_OK)
        s = check_window(win, fn);
    if (s == AMPY_OK && !out)
        s = ampy_error(AMPY_ERR_VALUE, "%s: NULL output", fn);
    return s;
}

ampy_status ampy_cnn_avg_pool2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const ampy_cnn_window *win, int count_include_pad,
                                    int64_t divisor_override, const void *x, int dtype, void *y)
{
    ampy_status s = avg_check(P, H, W, OH, OW, win, dtype, y, "avg_pool2d");
    if (s != AMPY_OK)
        return s;
    pool_ctx k = {H, W, OH, OW, *win, count_include_pad, divisor_override, x, y, NULL, NULL,
                  dtype, NULL, NULL};
    ampy_parallel_for(P, grain_for(OH * OW * win->kh * win->kw), avg_fwd_range, &k);
    return AMPY_OK;
}

ampy_status ampy_cnn_avg_pool2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                    const ampy_cnn_window *win, int count_include_pad,
                                    int64_t divisor_override, const void *dy, int dtype,
                                    void *dx)
{
    ampy_status s = avg_check(P, H, W, OH, OW, win, dtype, dx, "avg_pool2d_backward");
    if (s != AMPY_OK)
        return s;
    memset(dx, 0, (size_t)(P * H * W) * elem_size(dtype));
    pool_ctx k = {H, W, OH, OW, *win, count_include_pad, divisor_override, dy, dx, NULL, NULL,
                  dtype, NULL, NULL};
    ampy_parallel_for(P, grain_for(OH * OW * win->kh * win->kw), avg_bwd_range, &k);
    return AMPY_OK;
}

/* ---- adaptive_avg_pool2d -------------------------------------------------- */
static void adaptive_range(int64_t p0, int64_t p1, void *vc, int backward)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    const int dt = k->dt;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ib = p * k->H * k->W, ob = p * k->OH * k->OW;
        for (int64_t oh = 0; oh < k->OH; oh++) {
            int64_t h0 = ampy_cnn_adaptive_start(oh, k->OH, k->H);
            int64_t h1 = ampy_cnn_adaptive_end(oh, k->OH, k->H);
            for (int64_t ow = 0; ow < k->OW; ow++) {
                int64_t w0 = ampy_cnn_adaptive_start(ow, k->OW, k->W);
                int64_t w1 = ampy_cnn_adaptive_end(ow, k->OW, k->W);
                int64_t o = ob + oh * k->OW + ow;
                double kh = (double)(h1 - h0), kw = (double)(w1 - w0);
                if (backward) {
                    double g = ampy_nn_load1(k->src, dt, o);
                    double d = dt == AMPY_FLOAT64
                                   ? g / kh / kw
                                   : round_to(dt, round_to(dt, (float)g / (float)kh) /
                                                      (float)kw);
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            add_at(k->dst, dt, ib + ih * k->W + iw, d);
                } else if (dt == AMPY_FLOAT64) {
                    double sum = 0.0;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            sum += ((const double *)k->src)[ib + ih * k->W + iw];
                    ((double *)k->dst)[o] = sum / kh / kw;
                } else {
                    float sum = 0.0f;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++)
                            sum += ampy_cnn_ldf(k->src, dt, ib + ih * k->W + iw);
                    ampy_cnn_stf(k->dst, dt, o, sum / (float)kh / (float)kw);
                }
            }
        }
    }
}

/* float32 and half planes: the window sums over float32 rows (half data
 * widened once per plane), forward; the float32 backward's adds in place. */
static void adaptive_plane_f(const pool_ctx *k, const float *x, int64_t ob)
{
    for (int64_t oh = 0; oh < k->OH; oh++) {
        const int64_t h0 = ampy_cnn_adaptive_start(oh, k->OH, k->H);
        const int64_t h1 = ampy_cnn_adaptive_end(oh, k->OH, k->H);
        for (int64_t ow = 0; ow < k->OW; ow++) {
            const int64_t w0 = ampy_cnn_adaptive_start(ow, k->OW, k->W);
            const int64_t w1 = ampy_cnn_adaptive_end(ow, k->OW, k->W);
            float sum = 0.0f;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                    sum += x[ih * k->W + iw];
            ampy_cnn_stf(k->dst, k->dt, ob + oh * k->OW + ow,
                         sum / (float)(h1 - h0) / (float)(w1 - w0));
        }
    }
}

static void adaptive_bwd_plane_f(const pool_ctx *k, float *dx, const float *dy)
{
    for (int64_t oh = 0; oh < k->OH; oh++) {
        const int64_t h0 = ampy_cnn_adaptive_start(oh, k->OH, k->H);
        const int64_t h1 = ampy_cnn_adaptive_end(oh, k->OH, k->H);
        for (int64_t ow = 0; ow < k->OW; ow++) {
            const int64_t w0 = ampy_cnn_adaptive_start(ow, k->OW, k->W);
            const int64_t w1 = ampy_cnn_adaptive_end(ow, k->OW, k->W);
            const float d = dy[oh * k->OW + ow] / (float)(h1 - h0) / (float)(w1 - w0);
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                    dx[ih * k->W + iw] += d;
        }
    }
}

/* x rounded to bfloat16 (bf) or float16 and read back. */
static inline float half_round(int bf, float x)
{
    return bf ? ampy_bf16_to_f32(ampy_f32_to_bf16(x)) : ampy_f16_to_f32(ampy_f32_to_f16(x));
}

/* row[i] = round(row[i] + d) for i in [w0, w1): torch's `grad_input[i] +=
 * delta` in a half type (a float32 sum rounded once). */
static inline void half_add_run(int bf, float *row, int64_t w0, int64_t w1, float d)
{
    if (bf)
        for (int64_t iw = w0; iw < w1; iw++)
            row[iw] = ampy_bf16_to_f32(ampy_f32_to_bf16(row[iw] + d));
    else
        for (int64_t iw = w0; iw < w1; iw++)
            row[iw] = ampy_f16_to_f32(ampy_f32_to_f16(row[iw] + d));
}

#if defined(AMPY_X86_SIMD)
/* half_add_run for float16, 16 lanes at a time (the hardware conversion
 * rounds to nearest even, as the scalar one). */
AMPY_TARGET_AVX512 static void f16_add_run_avx512(float *row, int64_t n, float d)
{
    const __m512 vd = _mm512_set1_ps(d);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, row + i), vd);
        const __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_mask_storeu_ps(row + i, m, _mm512_cvtph_ps(h));
    }
}
#endif

/* The half backward of one plane into acc (H*W float32 values, each a half
 * value; zero on entry), from dy widened to g: every add rounded as torch
 * rounds it, and every input element takes its adds in torch's order
 * (outputs row by row, then by column), though the loop walks the input
 * rows of an output row's windows one at a time. d: OW floats of scratch. */
static void adaptive_bwd_plane_h(const pool_ctx *k, float *acc, const float *g, float *d)
{
    const int bf = k->dt == AMPY_BFLOAT16;
#if defined(AMPY_X86_SIMD)
    const int vec = !bf && ampy_cpu_level_get() >= AMPY_CPU_AVX512;
#endif
    for (int64_t oh = 0; oh < k->OH; oh++) {
        const int64_t h0 = ampy_cnn_adaptive_start(oh, k->OH, k->H);
        const int64_t h1 = ampy_cnn_adaptive_end(oh, k->OH, k->H);
        for (int64_t ow = 0; ow < k->OW; ow++) {
            const int64_t w0 = ampy_cnn_adaptive_start(ow, k->OW, k->W);
            const int64_t w1 = ampy_cnn_adaptive_end(ow, k->OW, k->W);
            d[ow] = half_round(bf, half_round(bf, g[oh * k->OW + ow] / (float)(h1 - h0)) /
                                       (float)(w1 - w0));
        }
        for (int64_t ih = h0; ih < h1; ih++)
            for (int64_t ow = 0; ow < k->OW; ow++) {
                const int64_t w0 = ampy_cnn_adaptive_start(ow, k->OW, k->W);
                const int64_t w1 = ampy_cnn_adaptive_end(ow, k->OW, k->W);
#if defined(AMPY_X86_SIMD)
                if (vec) {
                    f16_add_run_avx512(acc + ih * k->W + w0, w1 - w0, d[ow]);
                    continue;
                }
#endif
                half_add_run(bf, acc + ih * k->W, w0, w1, d[ow]);
            }
    }
}

/* Half planes [p0, p1) backward through float32 scratch; false when out of
 * memory. */
static int adaptive_bwd_half(const pool_ctx *k, int64_t p0, int64_t p1)
{
    const int64_t HW = k->H * k->W, OHW = k->OH * k->OW;
    float *buf = (float *)malloc((size_t)(HW + OHW + k->OW + 1) * sizeof(float));
    if (!buf)
        return 0;
    float *g = buf + HW, *d = g + OHW;
    ampy_cast_kernel narrow = ampy_cast_simd_kernel(ampy_cpu_level_get(), AMPY_FLOAT32,
                                                    (ampy_dtype)k->dt);
    for (int64_t p = p0; p < p1; p++) {
        memset(buf, 0, (size_t)HW * sizeof(float));
        cnn_widen_half(k->dt, (const uint16_t *)k->src + p * OHW, g, OHW);
        adaptive_bwd_plane_h(k, buf, g, d);
        uint16_t *dx = (uint16_t *)k->dst + p * HW;
        if (narrow)
            narrow(buf, dx, HW);
        else
            for (int64_t i = 0; i < HW; i++)
                ampy_cnn_stf(dx, k->dt, i, buf[i]);
    }
    free(buf);
    return 1;
}

static void adaptive_fwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    const int64_t HW = k->H * k->W;
    if (k->dt == AMPY_FLOAT64 || k->OH * k->OW == 0) {
        adaptive_range(p0, p1, vc, 0);
        return;
    }
    for (int64_t p = p0; p < p1; p++) {
        const float *x = (const float *)k->src + p * HW;
        if (k->dt != AMPY_FLOAT32) {
            cnn_widen_half(k->dt, (const uint16_t *)k->src + p * HW, k->wide + p * HW, HW);
            x = k->wide + p * HW;
        }
        adaptive_plane_f(k, x, p * k->OH * k->OW);
    }
}

static void adaptive_bwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool_ctx *k = (const pool_ctx *)vc;
    if (k->dt == AMPY_FLOAT64 || (k->dt != AMPY_FLOAT32 && !adaptive_bwd_half(k, p0, p1))) {
        adaptive_range(p0, p1, vc, 1);
        return;
    }
    if (k->dt != AMPY_FLOAT32)
        return;
    for (int64_t p = p0; p < p1; p++)
        adaptive_bwd_plane_f(k, (float *)k->dst + p * k->H * k->W,
                             (const float *)k->src + p * k->OH * k->OW);
}

static ampy_status adaptive_check(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW, int dt,
                                  const void *out, const char *fn)
{
    ampy_status s = check_planes(P, H, W, OH, OW, dt, fn);
    if (s == AMPY_OK && (!out || (P > 0 && (H < 1 || W < 1))))
        s = ampy_error(AMPY_ERR_VALUE, "%s: empty plane or NULL output", fn);
    return s;
}

ampy_status ampy_cnn_adaptive_avg_pool2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH,
                                             int64_t OW, const void *x, int dtype, void *y)
{
    ampy_status s = adaptive_check(P, H, W, OH, OW, dtype, y, "adaptive_avg_pool2d");
    if (s != AMPY_OK)
        return s;
    pool_ctx k = {H, W, OH, OW, {1, 1, 1, 1, 0, 0, 1, 1}, 0, 0, x, y, NULL, NULL, dtype, NULL, NULL};
    if (ampy_dtype_is_half(dtype) && P * OH * OW > 0) {
        k.wide = (float *)malloc((size_t)(P * H * W) * sizeof(float));
        if (!k.wide)
            return ampy_error(AMPY_ERR_NOMEM, "adaptive_avg_pool2d: out of memory");
    }
    ampy_parallel_for(P, grain_for(H * W + OH * OW), adaptive_fwd_range, &k);
    free(k.wide);
    return AMPY_OK;
}

ampy_status ampy_cnn_adaptive_avg_pool2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH,
                                             int64_t OW, const void *dy, int dtype, void *dx)
{
    ampy_status s = adaptive_check(P, H, W, OH, OW, dtype, dx, "adaptive_avg_pool2d_backward");
    if (s != AMPY_OK)
        return s;
    memset(dx, 0, (size_t)(P * H * W) * elem_size(dtype));
    pool_ctx k = {H, W, OH, OW, {1, 1, 1, 1, 0, 0, 1, 1}, 0, 0, dy, dx, NULL, NULL, dtype, NULL, NULL};
    ampy_parallel_for(P, grain_for(H * W + OH * OW), adaptive_bwd_range, &k);
    return AMPY_OK;
}
