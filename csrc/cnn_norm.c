/* cnn_norm.c — batch_norm and group_norm over (N, C, S) tensors, forward
 * and backward (contracts in ampy/cnn.h).
 *
 * The formulas are torch's CPU kernels (aten/src/ATen/native/Normalization.cpp,
 * cpu/batch_norm_kernel.cpp, cpu/group_norm_kernel.cpp): batch statistics as
 * a double sum of x, the mean rounded to the compute type, then a double
 * sum of squared deviations; the output as x * alpha + beta with torch's
 * per-channel linear and constant terms. Channels (batch norm) and
 * (sample, group) rows (group norm) are split across the thread pool.
 */
#include <math.h>
#include <stdlib.h>

#include "ampy/cast.h"
#include "ampy/cnn.h"
#include "ampy/cnn_math.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"
#include "ampy/cpu.h"
#include "simd.h"

/* Elements per tile: the loops widen this many float16/bfloat16 values
 * to float32 at a time (a multiple of 4, see sum_block). */
#define CN_CHUNK 256

/* The n elements of a float32/float16/bfloat16 array at off as float32:
 * the array itself for float32, else buf filled by the vector cast of this
 * CPU level (the same bits as the scalar conversion). */
static const float *cn_in_f(const void *p, int dt, int64_t off, int64_t n, float *buf)
{
    if (dt == AMPY_FLOAT32)
        return (const float *)p + off;
    const uint16_t *h = (const uint16_t *)p + off;
    ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), (ampy_dtype)dt,
                                               AMPY_FLOAT32);
    if (k)
        k(h, buf, n);
    else if (dt == AMPY_FLOAT16)
        for (int64_t i = 0; i < n; i++)
            buf[i] = ampy_f16_to_f32(h[i]);
    else
        for (int64_t i = 0; i < n; i++)
            buf[i] = ampy_bf16_to_f32(h[i]);
    return buf;
}

/* The n float32 results in buf rounded once into a float16/bfloat16 array. */
static void cn_flush_f(void *p, int dt, int64_t off, int64_t n, const float *buf)
{
    if (dt == AMPY_FLOAT32)
        return;
    uint16_t *h = (uint16_t *)p + off;
    ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), AMPY_FLOAT32,
                                               (ampy_dtype)dt);
    if (k)
        k(buf, h, n);
    else if (dt == AMPY_FLOAT16)
        for (int64_t i = 0; i < n; i++)
            h[i] = ampy_f32_to_f16(buf[i]);
    else
        for (int64_t i = 0; i < n; i++)
            h[i] = ampy_f32_to_bf16(buf[i]);
}

#define CN_T float
#define CN_IN(p, off, n, buf) cn_in_f((p), dt, (off), (n), (buf))
#define CN_OUT(p, off, buf) (dt == AMPY_FLOAT32 ? (float *)(p) + (off) : (buf))
#define CN_FLUSH(p, off, n, buf) cn_flush_f((p), dt, (off), (n), (buf))
#define CN_FMA fmaf
#define CN_SFX f
#define CN_ATTR
#include "cnn_norm.inc"
#undef CN_SFX
#undef CN_ATTR
#if defined(AMPY_X86_SIMD)
#include "cnn_norm_vec4.h"
#define CN_VEC4 1
#define CN_SFX f_avx2
#define CN_ATTR AMPY_TARGET_AVX2
#include "cnn_norm.inc"
#undef CN_SFX
#undef CN_ATTR
#undef CN_VEC4
#define CN_HAVE_AVX2 1
#endif
#undef CN_T
#undef CN_IN
#undef CN_OUT
#undef CN_FLUSH
#undef CN_FMA

#define CN_T double
#define CN_SFX d
#define CN_ATTR
#define CN_IN(p, off, n, buf) ((void)(n), (void)(buf), (const double *)(p) + (off))
#define CN_OUT(p, off, buf) ((void)(buf), (double *)(p) + (off))
#define CN_FLUSH(p, off, n, buf) ((void)(p), (void)(off), (void)(n), (void)(buf))
#define CN_FMA fma
#include "cnn_norm.inc"
#undef CN_T
#undef CN_SFX
#undef CN_ATTR
#undef CN_IN
#undef CN_OUT
#undef CN_FLUSH
#undef CN_FMA

/* The float32 loops of the best copy this CPU runs (ampy_cpu_level_get(),
 * so AMPY_FORCE_PORTABLE / the forced level pick the portable one). */
typedef struct {
    void (*bn_stats)(const void *, int, int64_t, int64_t, int64_t, int64_t, double *, double *);
    void (*block_affine)(const void *, int, int64_t, int64_t, float, float, void *);
    void (*bn_bwd_chan)(const void *, const void *, int, int64_t, int64_t, int64_t, int64_t,
                        float, float, float, int, void *, double *, double *);
    void (*gn_stats)(const void *, int, int64_t, int64_t, double, double *, double *);
    void (*gn_bwd_row)(const void *, const void *, int, int64_t, int64_t, int64_t, int64_t,
                       const void *, int, const double *, const double *, double, double,
                       void *);
    void (*gn_sums)(const void *, const void *, int, int64_t, int64_t, double *, double *);
    void (*gn_stats4)(const void *, int, int64_t, int64_t, double, double *, double *);
    void (*gn_sums4)(const void *, const void *, int, int64_t, int64_t, double *, double *);
} cn_loops_f;

static const cn_loops_f loops_portable = {bn_stats_f, block_affine_f, bn_bwd_chan_f,
                                          gn_stats_f, gn_bwd_row_f, gn_sums_f,
                                          gn_stats4_f, gn_sums4_f};
#ifdef CN_HAVE_AVX2
static const cn_loops_f loops_avx2 = {bn_stats_f_avx2, block_affine_f_avx2, bn_bwd_chan_f_avx2,
                                      gn_stats_f_avx2, gn_bwd_row_f_avx2, gn_sums_f_avx2,
                                      gn_stats4_f_avx2, gn_sums4_f_avx2};
#endif

static const cn_loops_f *loops_f(void)
{
#ifdef CN_HAVE_AVX2
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX2)
        return &loops_avx2;
#endif
    return &loops_portable;
}

/* Plane-sized work is split so that a chunk holds at least this many elements. */
#define CN_GRAIN_ELEMS 32768

static int64_t grain_for(int64_t per_item)
{
    int64_t g = per_item > 0 ? CN_GRAIN_ELEMS / per_item : CN_GRAIN_ELEMS;
    return g < 1 ? 1 : g;
}

static ampy_status check_dtypes(int dt, int pdt, const char *fn)
{
    if (!ampy_nn_is_float(dt) || !ampy_nn_is_float(pdt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected floating-point tensors", fn);
    if ((dt == AMPY_FLOAT64) != (pdt == AMPY_FLOAT64))
        return ampy_error(AMPY_ERR_DTYPE, "%s: a float64 input needs float64 parameters", fn);
    return AMPY_OK;
}

static ampy_status check_sizes(int64_t N, int64_t C, int64_t S, const char *fn)
{
    if (N < 0 || C < 0 || S < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    return AMPY_OK;
}

/* ---- batch_norm forward --------------------------------------------------- */
typedef struct {
    int64_t N, C, S;
    const void *x, *w, *b;
    void *rm, *rv, *y;
    int dt, pdt, training;
    double momentum, eps;
    double *smean, *sinv;
} bn_fwd_ctx;

/* Half data of at most this many elements per channel is widened once per
 * channel into a float32 buffer that the statistics and the affine pass
 * both read (the same float32 values as widening tile by tile). */
#define CN_WIDE_MAX ((int64_t)1 << 20)

/* The N planes of channel c widened into wb (N*S floats), the planes two
 * ahead prefetched: each plane is a short run far from the next, which
 * the hardware prefetchers do not follow in time. */
static void cn_widen_channel(const void *x, int dt, int64_t N, int64_t C, int64_t S, int64_t c,
                            float *wb)
{
    const char *base = (const char *)x;
    const int64_t bytes = S * 2;
    for (int64_t n = 0; n < N; n++) {
        if (n + 2 < N)
            for (int64_t b = 0; b < bytes; b += 64)
                __builtin_prefetch(base + ((n + 2) * C + c) * bytes + b);
        cn_in_f(x, dt, (n * C + c) * S, S, wb + n * S);
    }
}

/* y of channel c = x * alpha + beta; wb: the channel's planes widened
 * (N*S floats) followed by N*S floats for the results, or NULL. */
static void bn_fwd_affine(const bn_fwd_ctx *k, int64_t c, double mean, double invstd, float *wb)
{
    const int dt = k->dt;
    const int64_t NS = k->N * k->S;
    double w = k->w ? ampy_nn_load1(k->w, k->pdt, c) : 1.0;
    double b = k->b ? ampy_nn_load1(k->b, k->pdt, c) : 0.0;
    double ad, bd; /* the shared coefficients (cnn_math.h; the CUDA twin uses them too) */
    ampy_cnn_norm_affine(invstd, w, mean, b, dt == AMPY_FLOAT64, &ad, &bd);
    for (int64_t n = 0; n < k->N; n++) {
        int64_t off = (n * k->C + c) * k->S;
        if (dt == AMPY_FLOAT64) {
            block_affine_d(k->x, dt, off, k->S, ad, bd, k->y);
            continue;
        }
        float a = (float)ad, beta = (float)bd;
        if (wb) {
            loops_f()->block_affine(wb, AMPY_FLOAT32, n * k->S, k->S, a, beta, wb + NS);
            cn_flush_f(k->y, dt, off, k->S, wb + NS + n * k->S);
        } else {
            loops_f()->block_affine(k->x, dt, off, k->S, a, beta, k->y);
        }
    }
}

static void bn_fwd_range(int64_t c0, int64_t c1, void *vc)
{
    bn_fwd_ctx *k = (bn_fwd_ctx *)vc;
    const int dt = k->dt;
    const int f64 = dt == AMPY_FLOAT64;
    float *wb = NULL;
    if (ampy_dtype_is_half(dt) && k->N * k->S <= CN_WIDE_MAX)
        wb = (float *)malloc((size_t)(2 * k->N * k->S) * sizeof(float));
    for (int64_t c = c0; c < c1; c++) {
        double mean, invstd;
        if (wb)
            cn_widen_channel(k->x, dt, k->N, k->C, k->S, c, wb);
        if (k->training) {
            double vs;
            if (f64)
                bn_stats_d(k->x, dt, k->N, k->C, k->S, c, &mean, &vs);
            else if (wb)
                loops_f()->bn_stats(wb, AMPY_FLOAT32, k->N, 1, k->S, 0, &mean, &vs);
            else
                loops_f()->bn_stats(k->x, dt, k->N, k->C, k->S, c, &mean, &vs);
            double unbiased;
            invstd = ampy_cnn_bn_train_invstd(vs, (double)(k->N * k->S), k->eps, f64, &unbiased);
            if (k->rm)
                ampy_cnn_bn_update_running(k->rm, k->rv, k->pdt, c, k->momentum, mean, unbiased,
                                           f64);
        } else {
            mean = ampy_nn_load1(k->rm, k->pdt, c);
            invstd = ampy_cnn_bn_eval_invstd(ampy_nn_load1(k->rv, k->pdt, c), k->eps, f64);
        }
        k->smean[c] = mean;
        k->sinv[c] = invstd;
        bn_fwd_affine(k, c, mean, invstd, wb);
    }
    free(wb);
}

ampy_status ampy_cnn_batch_norm_fwd(int64_t N, int64_t C, int64_t S, const void *x, int x_dtype,
                                    const void *w, const void *b, void *run_mean, void *run_var,
                                    int p_dtype, int training, double momentum, double eps,
                                    void *y, double *save_mean, double *save_invstd)
{
    ampy_status s = check_sizes(N, C, S, "batch_norm");
    if (s == AMPY_OK)
        s = check_dtypes(x_dtype, p_dtype, "batch_norm");
    if (s != AMPY_OK)
        return s;
    if (!y || !save_mean || !save_invstd || !(eps >= 0.0) || (!run_mean) != (!run_var) ||
        (!training && !run_mean))
        return ampy_error(AMPY_ERR_VALUE, "batch_norm: bad arguments");
    if (N * C * S == 0)
        return AMPY_OK;
    bn_fwd_ctx k = {N, C, S, x, w, b, run_mean, run_var, y, x_dtype, p_dtype, training,
                    momentum, eps, save_mean, save_invstd};
    ampy_parallel_for(C, grain_for(N * S), bn_fwd_range, &k);
    return AMPY_OK;
}

/* ---- batch_norm backward -------------------------------------------------- */
typedef struct {
    int64_t N, C, S;
    const void *x, *dy, *w;
    void *dx, *dw, *db;
    int dt, pdt, training;
    const double *smean, *sinv;
} bn_bwd_ctx;

/* Half channel c widened once (x and dy, N*S floats each, into wb) for
 * both passes of bn_bwd_chan, dx through the widened dy in place: the
 * float32 values, and so the bits, of widening tile by tile. */
static void bn_bwd_wide(const bn_bwd_ctx *k, int64_t c, float mean, float inv, float w,
                        float *wb, double *sum, double *dotp)
{
    const int64_t N = k->N, S = k->S, NS = N * S;
    cn_widen_channel(k->x, k->dt, N, k->C, S, c, wb);
    cn_widen_channel(k->dy, k->dt, N, k->C, S, c, wb + NS);
    loops_f()->bn_bwd_chan(wb, wb + NS, AMPY_FLOAT32, N, 1, S, 0, mean, inv, w, k->training,
                           k->dx ? wb + NS : NULL, sum, dotp);
    if (k->dx)
        for (int64_t n = 0; n < N; n++)
            cn_flush_f(k->dx, k->dt, (n * k->C + c) * S, S, wb + NS + n * S);
}

static void bn_bwd_range(int64_t c0, int64_t c1, void *vc)
{
    bn_bwd_ctx *k = (bn_bwd_ctx *)vc;
    const int dt = k->dt;
    float *wb = NULL;
    if (ampy_dtype_is_half(dt) && k->N * k->S <= CN_WIDE_MAX)
        wb = (float *)malloc((size_t)(2 * k->N * k->S) * sizeof(float));
    for (int64_t c = c0; c < c1; c++) {
        double sum, dotp, w = k->w ? ampy_nn_load1(k->w, k->pdt, c) : 1.0;
        double mean = k->smean[c], inv = k->sinv[c];
        if (dt == AMPY_FLOAT64)
            bn_bwd_chan_d(k->x, k->dy, dt, k->N, k->C, k->S, c, mean, inv, w, k->training,
                          k->dx, &sum, &dotp);
        else if (wb)
            bn_bwd_wide(k, c, (float)mean, (float)inv, (float)w, wb, &sum, &dotp);
        else
            loops_f()->bn_bwd_chan(k->x, k->dy, dt, k->N, k->C, k->S, c, (float)mean, (float)inv,
                          (float)w, k->training, k->dx, &sum, &dotp);
        if (k->dw)
            ampy_nn_store1(k->dw, k->pdt, c, dotp * inv);
        if (k->db)
            ampy_nn_store1(k->db, k->pdt, c, sum);
    }
    free(wb);
}

ampy_status ampy_cnn_batch_norm_bwd(int64_t N, int64_t C, int64_t S, const void *x, int x_dtype,
                                    const void *dy, const void *w, int p_dtype, int training,
                                    const double *save_mean, const double *save_invstd,
                                    void *dx, void *dw, void *db)
{
    ampy_status s = check_sizes(N, C, S, "batch_norm_backward");
    if (s == AMPY_OK)
        s = check_dtypes(x_dtype, p_dtype, "batch_norm_backward");
    if (s != AMPY_OK)
        return s;
    if (!save_mean || !save_invstd)
        return ampy_error(AMPY_ERR_VALUE, "batch_norm_backward: missing statistics");
    bn_bwd_ctx k = {N, C, S, x, dy, w, dx, dw, db, x_dtype, p_dtype, training, save_mean,
                    save_invstd};
    ampy_parallel_for(C, grain_for(N * S), bn_bwd_range, &k);
    return AMPY_OK;
}

/* ---- group_norm ----------------------------------------------------------- */
typedef struct {
    int64_t N, C, S, G;
    const void *x, *dy, *w, *b;
    void *y;
    int dt, pdt;
    double eps;
    double *mean, *rstd;
    const double *cmean, *crstd;
    double *ds, *db; /* backward: N*C per-channel sums */
} gn_ctx;

/* mean and rstd of rows [r0, r1), four at a time where four remain; x
 * holds the rows from row xr0 on (the input itself with xr0 = 0, or the
 * rows widened to float32 with dt = AMPY_FLOAT32). */
static void gn_row_stats(const gn_ctx *k, const void *x, int dt, int64_t xr0, int64_t r0,
                         int64_t r1)
{
    const int64_t D = (k->C / k->G) * k->S;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        if (dt == AMPY_FLOAT64)
            gn_stats4_d(x, dt, (r - xr0) * D, D, k->eps, k->mean + r, k->rstd + r);
        else
            loops_f()->gn_stats4(x, dt, (r - xr0) * D, D, k->eps, k->mean + r, k->rstd + r);
    }
    for (; r < r1; r++) {
        if (dt == AMPY_FLOAT64)
            gn_stats_d(x, dt, (r - xr0) * D, D, k->eps, k->mean + r, k->rstd + r);
        else
            loops_f()->gn_stats(x, dt, (r - xr0) * D, D, k->eps, k->mean + r, k->rstd + r);
    }
}

/* y of row r from x holding rows from xr0 on (as gn_row_stats); wb: NULL
 * to write y directly, else x is float32 and the results go through wb
 * (in place) into the half y. */
static void gn_row_affine(const gn_ctx *k, const void *x, int dt, int64_t xr0, int64_t r,
                          float *wb)
{
    const int64_t Cg = k->C / k->G, D = Cg * k->S;
    const double mean = k->mean[r], rstd = k->rstd[r];
    for (int64_t j = 0; j < Cg; j++) {
        int64_t c = (r % k->G) * Cg + j, off = (r - xr0) * D + j * k->S;
        double w = k->w ? ampy_nn_load1(k->w, k->pdt, c) : 1.0;
        double b = k->b ? ampy_nn_load1(k->b, k->pdt, c) : 0.0;
        double a, beta;
        ampy_cnn_norm_affine(rstd, w, mean, b, k->dt == AMPY_FLOAT64, &a, &beta);
        if (dt == AMPY_FLOAT64) {
            block_affine_d(x, dt, off, k->S, a, beta, k->y);
        } else if (wb) {
            loops_f()->block_affine(wb, AMPY_FLOAT32, off, k->S, (float)a, (float)beta, wb);
            cn_flush_f(k->y, k->dt, r * D + j * k->S, k->S, wb + off);
        } else {
            loops_f()->block_affine(x, dt, off, k->S, (float)a, (float)beta, k->y);
        }
    }
}

/* Half rows of at most this many elements are widened four at a time
 * into one float32 buffer that the statistics and the affine pass read
 * (the same float32 values as widening tile by tile). */
#define GN_WIDE_MAX ((int64_t)1 << 16)

static void gn_fwd_range(int64_t r0, int64_t r1, void *vc)
{
    gn_ctx *k = (gn_ctx *)vc;
    const int64_t D = (k->C / k->G) * k->S;
    float *wb = NULL;
    if (ampy_dtype_is_half(k->dt) && D <= GN_WIDE_MAX)
        wb = (float *)malloc((size_t)(4 * D) * sizeof(float));
    for (int64_t r = r0; r < r1; r += 4) {
        const int64_t re = r + 4 < r1 ? r + 4 : r1;
        if (wb) {
            cn_in_f(k->x, k->dt, r * D, (re - r) * D, wb);
            gn_row_stats(k, wb, AMPY_FLOAT32, r, r, re);
        } else {
            gn_row_stats(k, k->x, k->dt, 0, r, re);
        }
        for (int64_t q = r; q < re; q++) {
            if (wb)
                gn_row_affine(k, wb, AMPY_FLOAT32, r, q, wb);
            else
                gn_row_affine(k, k->x, k->dt, 0, q, NULL);
        }
    }
    free(wb);
}

static ampy_status gn_check(int64_t N, int64_t C, int64_t S, int64_t G, int dt, int pdt,
                            const char *fn)
{
    ampy_status s = check_sizes(N, C, S, fn);
    if (s == AMPY_OK)
        s = check_dtypes(dt, pdt, fn);
    if (s == AMPY_OK && (G < 1 || C % G != 0))
        s = ampy_error(AMPY_ERR_VALUE, "%s: channels must be divisible by groups", fn);
    return s;
}

ampy_status ampy_cnn_group_norm_fwd(int64_t N, int64_t C, int64_t S, int64_t G, const void *x,
                                    int x_dtype, const void *w, const void *b, int p_dtype,
                                    double eps, void *y, double *mean, double *rstd)
{
    ampy_status s = gn_check(N, C, S, G, x_dtype, p_dtype, "group_norm");
    if (s != AMPY_OK)
        return s;
    if (!y || !mean || !rstd || !(eps >= 0.0))
        return ampy_error(AMPY_ERR_VALUE, "group_norm: bad arguments");
    if (N == 0 || C == 0)
        return AMPY_OK;
    gn_ctx k = {N, C, S, G, x, NULL, w, b, y, x_dtype, p_dtype, eps, mean, rstd, NULL, NULL,
                NULL, NULL};
    ampy_parallel_for(N * G, grain_for((C / G) * S), gn_fwd_range, &k);
    return AMPY_OK;
}

/* ds = sum(dy x), db = sum(dy) of the Cg planes of row r, read from x and
 * dy at offset off (dt their dtype), four planes at a time. */
static void gn_row_sums(const gn_ctx *k, const void *x, const void *dy, int dt, int64_t off,
                        int64_t r)
{
    const int64_t Cg = k->C / k->G, S = k->S;
    double *ds = k->ds + r * Cg, *db = k->db + r * Cg;
    int64_t j = 0;
    for (; j + 4 <= Cg; j += 4) {
        if (dt == AMPY_FLOAT64)
            gn_sums4_d(x, dy, dt, off + j * S, S, ds + j, db + j);
        else
            loops_f()->gn_sums4(x, dy, dt, off + j * S, S, ds + j, db + j);
    }
    for (; j < Cg; j++) {
        if (dt == AMPY_FLOAT64)
            gn_sums_d(x, dy, dt, off + j * S, S, ds + j, db + j);
        else
            loops_f()->gn_sums(x, dy, dt, off + j * S, S, ds + j, db + j);
    }
}

/* Backward of rows [r0, r1): the per-channel sums, then dx. Half rows of
 * at most GN_WIDE_MAX elements are widened once (x and dy) and dx goes
 * through the widened dy in place; the float32 values, and so the bits,
 * are those of widening tile by tile. */
static void gn_bwd_range(int64_t r0, int64_t r1, void *vc)
{
    gn_ctx *k = (gn_ctx *)vc;
    const int dt = k->dt;
    const int64_t Cg = k->C / k->G, D = Cg * k->S;
    float *wb = NULL;
    if (ampy_dtype_is_half(dt) && D <= GN_WIDE_MAX)
        wb = (float *)malloc((size_t)(2 * D) * sizeof(float));
    for (int64_t r = r0; r < r1; r++) {
        const int64_t c0 = (r % k->G) * Cg;
        const double *ds = k->ds + r * Cg, *db = k->db + r * Cg;
        if (wb) {
            cn_in_f(k->x, dt, r * D, D, wb);
            cn_in_f(k->dy, dt, r * D, D, wb + D);
            gn_row_sums(k, wb, wb + D, AMPY_FLOAT32, 0, r);
            if (!k->y)
                continue;
            loops_f()->gn_bwd_row(wb, wb + D, AMPY_FLOAT32, 0, Cg, k->S, c0, k->w, k->pdt, ds,
                                  db, k->cmean[r], k->crstd[r], wb + D);
            cn_flush_f(k->y, dt, r * D, D, wb + D);
            continue;
        }
        gn_row_sums(k, k->x, k->dy, dt, r * D, r);
        if (!k->y)
            continue;
        if (dt == AMPY_FLOAT64)
            gn_bwd_row_d(k->x, k->dy, dt, r * D, Cg, k->S, c0, k->w, k->pdt, ds, db,
                         k->cmean[r], k->crstd[r], k->y);
        else
            loops_f()->gn_bwd_row(k->x, k->dy, dt, r * D, Cg, k->S, c0, k->w, k->pdt, ds, db,
                                  k->cmean[r], k->crstd[r], k->y);
    }
    free(wb);
}

static void gn_param_grads(const gn_ctx *k, void *dw, void *db)
{
    const int64_t Cg = k->C / k->G;
    for (int64_t c = 0; c < k->C; c++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t n = 0; n < k->N; n++) {
            int64_t r = n * k->G + c / Cg;
            sw += (k->ds[n * k->C + c] - k->db[n * k->C + c] * k->cmean[r]) * k->crstd[r];
            sb += k->db[n * k->C + c];
        }
        if (dw)
            ampy_nn_store1(dw, k->pdt, c, sw);
        if (db)
            ampy_nn_store1(db, k->pdt, c, sb);
    }
}

ampy_status ampy_cnn_group_norm_bwd(int64_t N, int64_t C, int64_t S, int64_t G, const void *x,
                                    int x_dtype, const void *dy, const void *w, int p_dtype,
                                    const double *mean, const double *rstd, void *dx, void *dw,
                                    void *db)
{
    ampy_status s = gn_check(N, C, S, G, x_dtype, p_dtype, "group_norm_backward");
    if (s != AMPY_OK)
        return s;
    if (!mean || !rstd)
        return ampy_error(AMPY_ERR_VALUE, "group_norm_backward: missing statistics");
    if (C > 0 && N > (int64_t)(SIZE_MAX / 16) / C)
        return ampy_error(AMPY_ERR_NOMEM, "group_norm_backward: size overflow");
    double *sums = (double *)malloc(sizeof(double) * (size_t)(2 * N * C + 1));
    if (!sums)
        return ampy_error(AMPY_ERR_NOMEM, "group_norm_backward: out of memory");
    gn_ctx k = {N, C, S, G, x, dy, w, NULL, dx, x_dtype, p_dtype, 0.0, NULL, NULL, mean, rstd,
                sums, sums + N * C};
    ampy_parallel_for(N * G, grain_for((C / G) * S), gn_bwd_range, &k);
    if (dw || db)
        gn_param_grads(&k, dw, db);
    free(sums);
    return AMPY_OK;
}
