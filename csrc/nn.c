/* nn.c — fused layer_norm and cross_entropy kernels (forward and backward).
 *
 * Each kernel walks rows: a row of a float16/bfloat16 tensor is converted to
 * float32 in a per-chunk scratch buffer (SIMD casts of cast.h), the row math
 * of nn_rows.inc runs in float32 (float64 for float64 tensors) with double
 * row sums, and results are rounded once on store. Formulas follow ATen's CPU
 * kernels (aten/src/ATen/native/cpu/layer_norm_kernel.cpp, LossNLL.cpp and
 * the label-smoothing branch of cross_entropy_loss in Loss.cpp); nn.h states
 * the contracts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/nn.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"
#include "simd.h"

/* ---- the row functions, instantiated from nn_rows.inc --------------------- */
#define NN_ROWS_STRUCT(T, name)                                                                  \
    typedef struct {                                                                             \
        double (*rdot)(const T *x, const T *y, int64_t n);                                       \
        void (*ln_stats)(const T *x, int64_t n, double eps, double *mean, double *rstd);         \
        void (*ln_fwd_row)(const T *x, int64_t n, const T *w, const T *b, double mean,          \
                           double rstd, T *y);                                                   \
        void (*ln_bwd_row)(const T *x, const T *dy, const T *w, int64_t n, double mean,         \
                           double rstd, T *dx, T *dw_acc, T *db_acc);                            \
        double (*row_lse)(const T *x, int64_t n);                                                \
        void (*ce_bwd_row)(const T *x, int64_t n, const T *w, double lse, double a, double c,   \
                           T *dx);                                                               \
    } name
NN_ROWS_STRUCT(float, nn_rows_f32);
NN_ROWS_STRUCT(double, nn_rows_f64);

#define NN_T float
#define NN_SFX f32
#define NN_ATTR
#define NN_EXP ampy_nn_expf
#define NN_ROWS_TYPE nn_rows_f32
#define NN_ROWS rows_f32_portable
#include "nn_rows.inc"
#undef NN_SFX
#undef NN_ATTR
#undef NN_ROWS

#if defined(__x86_64__) && defined(__GNUC__)
#define NN_SFX f32_avx512
#define NN_ATTR AMPY_TARGET_AVX512
#define NN_ROWS rows_f32_avx512
#include "nn_rows.inc"
#undef NN_SFX
#undef NN_ATTR
#undef NN_ROWS
#define NN_HAVE_AVX512 1
#endif
#undef NN_T
#undef NN_EXP
#undef NN_ROWS_TYPE

#define NN_T double
#define NN_SFX f64
#define NN_ATTR
#define NN_EXP exp
#define NN_ROWS_TYPE nn_rows_f64
#define NN_ROWS rows_f64
#include "nn_rows.inc"
#undef NN_T
#undef NN_SFX
#undef NN_ATTR
#undef NN_EXP
#undef NN_ROWS_TYPE
#undef NN_ROWS

static const nn_rows_f32 *rows_f32(void)
{
#ifdef NN_HAVE_AVX512
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512)
        return &rows_f32_avx512;
#endif
    return &rows_f32_portable;
}

/* ---- shared helpers (declared at the end of nn.h) ---------------------------- */
/* Row [off, off+n) of a float32/float16/bfloat16 array as float32: the
 * array itself for float32, else converted into `scratch`. */
/* (The SIMD cast kernel directly: ampy_cast_f16_to_f32 and friends go
 * through the general strided ampy_cast, whose set-up cost more than
 * converting a row of a few hundred elements. Same bits as elem.h.) */
const float *nn_row_f32(const void *src, int dt, int64_t off, int64_t n, float *scratch)
{
    if (dt == AMPY_FLOAT32)
        return (const float *)src + off;
    const uint16_t *h = (const uint16_t *)src + off;
    ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), dt, AMPY_FLOAT32);
    if (k)
        k(h, scratch, n);
    else if (dt == AMPY_FLOAT16)
        for (int64_t i = 0; i < n; i++)
            scratch[i] = ampy_f16_to_f32(h[i]);
    else
        for (int64_t i = 0; i < n; i++)
            scratch[i] = ampy_bf16_to_f32(h[i]);
    return scratch;
}

/* Where to compute a float32 output row: in place for float32, else scratch. */
static float *out_row(void *dst, int dt, int64_t off, float *scratch)
{
    return dt == AMPY_FLOAT32 ? (float *)dst + off : scratch;
}

/* Round a float32 row computed by out_row() into dst (no-op for float32). */
void nn_store_row_f32(const float *row, void *dst, int dt, int64_t off, int64_t n)
{
    if (dt != AMPY_FLOAT16 && dt != AMPY_BFLOAT16)
        return;
    uint16_t *h = (uint16_t *)dst + off;
    ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), AMPY_FLOAT32, dt);
    if (k)
        k(row, h, n);
    else if (dt == AMPY_FLOAT16)
        for (int64_t i = 0; i < n; i++)
            h[i] = ampy_f32_to_f16(row[i]);
    else
        for (int64_t i = 0; i < n; i++)
            h[i] = ampy_f32_to_bf16(row[i]);
}

/* A float32 (float64 for f64) copy of n elements of p (dtype dt), or `fill`
 * everywhere when p is NULL. Returned memory is malloc'ed (free it). */
void *nn_vec(const void *p, int dt, int64_t n, double fill)
{
    size_t isz = dt == AMPY_FLOAT64 ? 8 : 4;
    void *v = malloc((size_t)(n > 0 ? n : 1) * isz);
    if (!v)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        double x = p ? ampy_nn_load1(p, dt, i) : fill;
        if (isz == 8)
            ((double *)v)[i] = x;
        else
            ((float *)v)[i] = (float)x;
    }
    return v;
}

/* Chunks for M rows of cost `row_elems`: at most the thread count, each at
 * least ~32K elements of work, at least 1. */
int64_t nn_chunks(int64_t M, int64_t row_elems)
{
    int64_t per = (int64_t)32768 / (row_elems > 0 ? row_elems : 1);
    if (per < 1)
        per = 1;
    int64_t c = (M + per - 1) / per, t = ampy_get_num_threads();
    c = c < t ? c : t;
    return c < 1 ? 1 : c;
}

/* ---- layer_norm ------------------------------------------------------------ */
typedef struct {
    int64_t M, N, nchunks;
    const void *x, *dy;
    void *y; /* forward output or dx */
    int dt;
    const void *w, *b; /* float32 (float64) vectors of N */
    double eps;
    double *mean, *rstd;
    const double *cmean, *crstd;
    void *scratch;  /* per chunk: 3*N elements (f32 path) */
    void *partial;  /* per chunk: 2*N accumulators (dw, db), or NULL */
} ln_ctx;

static void ln_fwd_chunks(int64_t cb, int64_t ce, void *vc)
{
    ln_ctx *c = (ln_ctx *)vc;
    const int64_t N = c->N;
    for (int64_t k = cb; k < ce; k++) {
        int64_t r0 = c->M * k / c->nchunks, r1 = c->M * (k + 1) / c->nchunks;
        for (int64_t r = r0; r < r1; r++) {
            double mean, rstd;
            if (c->dt == AMPY_FLOAT64) {
                const double *x = (const double *)c->x + r * N;
                rows_f64.ln_stats(x, N, c->eps, &mean, &rstd);
                rows_f64.ln_fwd_row(x, N, c->w, c->b, mean, rstd, (double *)c->y + r * N);
            } else if (r + 1 < r1) {
                /* two rows: the second's statistics (serial sums, a division
                 * and a square root) overlap the first's output loop; each
                 * row's arithmetic is its own (the same bits as one by one) */
                const nn_rows_f32 *R = rows_f32();
                float *s = (float *)c->scratch + k * 4 * N;
                const float *x = nn_row_f32(c->x, c->dt, r * N, N, s);
                const float *x2 = nn_row_f32(c->x, c->dt, (r + 1) * N, N, s + N);
                float *y = out_row(c->y, c->dt, r * N, s + 2 * N);
                float *y2 = out_row(c->y, c->dt, (r + 1) * N, s + 3 * N);
                double mean2, rstd2;
                R->ln_stats(x, N, c->eps, &mean, &rstd);
                R->ln_stats(x2, N, c->eps, &mean2, &rstd2);
                R->ln_fwd_row(x, N, c->w, c->b, mean, rstd, y);
                R->ln_fwd_row(x2, N, c->w, c->b, mean2, rstd2, y2);
                nn_store_row_f32(y, c->y, c->dt, r * N, N);
                nn_store_row_f32(y2, c->y, c->dt, (r + 1) * N, N);
                if (c->mean) {
                    c->mean[r + 1] = mean2;
                    c->rstd[r + 1] = rstd2;
                }
                if (c->mean) {
                    c->mean[r] = mean;
                    c->rstd[r] = rstd;
                }
                r++;
                continue;
            } else {
                const nn_rows_f32 *R = rows_f32();
                float *s = (float *)c->scratch + k * 4 * N;
                const float *x = nn_row_f32(c->x, c->dt, r * N, N, s);
                float *y = out_row(c->y, c->dt, r * N, s + N);
                R->ln_stats(x, N, c->eps, &mean, &rstd);
                R->ln_fwd_row(x, N, c->w, c->b, mean, rstd, y);
                nn_store_row_f32(y, c->y, c->dt, r * N, N);
            }
            if (c->mean) {
                c->mean[r] = mean;
                c->rstd[r] = rstd;
            }
        }
    }
}

static ampy_status ln_check(int64_t M, int64_t N, int x_dtype, const void *w, const void *b,
                            int w_dtype, double eps, const char *fn)
{
    if (M < 0 || N < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size (%lld, %lld)", fn, (long long)M,
                          (long long)N);
    if (!ampy_nn_is_float(x_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "%s: input must be a floating-point tensor", fn);
    if ((w || b) && (!ampy_nn_is_float(w_dtype) ||
                     ((x_dtype == AMPY_FLOAT64) != (w_dtype == AMPY_FLOAT64))))
        return ampy_error(AMPY_ERR_DTYPE, "%s: weight/bias dtype does not fit the input's", fn);
    if (!(eps >= 0.0))
        return ampy_error(AMPY_ERR_VALUE, "%s: eps must be >= 0, got %g", fn, eps);
    return AMPY_OK;
}

ampy_status ampy_nn_layer_norm_fwd(int64_t M, int64_t N, const void *x, int x_dtype,
                                   const void *w, const void *b, int w_dtype, double eps,
                                   void *y, double *mean, double *rstd)
{
    ampy_status s = ln_check(M, N, x_dtype, w, b, w_dtype, eps, "layer_norm");
    if (s != AMPY_OK)
        return s;
    if (M == 0 || N == 0)
        return AMPY_OK;
    int vdt = x_dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    ln_ctx c = {.M = M, .N = N, .x = x, .y = y, .dt = x_dtype, .eps = eps, .mean = mean,
                .rstd = rstd};
    c.nchunks = nn_chunks(M, N);
    void *wv = nn_vec(w, w ? w_dtype : vdt, N, 1.0), *bv = nn_vec(b, b ? w_dtype : vdt, N, 0.0);
    void *scr = malloc((size_t)c.nchunks * 4 * (size_t)N * sizeof(float));
    if (!wv || !bv || !scr) {
        free(wv), free(bv), free(scr);
        return ampy_error(AMPY_ERR_NOMEM, "layer_norm: out of memory");
    }
    c.w = wv, c.b = bv, c.scratch = scr;
    ampy_parallel_for(c.nchunks, 1, ln_fwd_chunks, &c);
    free(wv), free(bv), free(scr);
    return AMPY_OK;
}

static void ln_bwd_chunks(int64_t cb, int64_t ce, void *vc)
{
    ln_ctx *c = (ln_ctx *)vc;
    const int64_t N = c->N;
    for (int64_t k = cb; k < ce; k++) {
        int64_t r0 = c->M * k / c->nchunks, r1 = c->M * (k + 1) / c->nchunks;
        double mean, rstd;
        if (c->dt == AMPY_FLOAT64) {
            double *pw = c->partial ? (double *)c->partial + k * 2 * N : NULL;
            for (int64_t r = r0; r < r1; r++) {
                const double *x = (const double *)c->x + r * N;
                if (c->cmean)
                    mean = c->cmean[r], rstd = c->crstd[r];
                else
                    rows_f64.ln_stats(x, N, c->eps, &mean, &rstd);
                rows_f64.ln_bwd_row(x, (const double *)c->dy + r * N, c->w, N, mean, rstd,
                                    c->y ? (double *)c->y + r * N : NULL, pw, pw ? pw + N : NULL);
            }
            continue;
        }
        const nn_rows_f32 *R = rows_f32();
        float *s = (float *)c->scratch + k * 3 * N;
        float *pw = c->partial ? (float *)c->partial + k * 2 * N : NULL;
        for (int64_t r = r0; r < r1; r++) {
            const float *x = nn_row_f32(c->x, c->dt, r * N, N, s);
            const float *dy = nn_row_f32(c->dy, c->dt, r * N, N, s + N);
            float *dx = c->y ? out_row(c->y, c->dt, r * N, s + 2 * N) : NULL;
            if (c->cmean)
                mean = c->cmean[r], rstd = c->crstd[r];
            else
                R->ln_stats(x, N, c->eps, &mean, &rstd);
            R->ln_bwd_row(x, dy, c->w, N, mean, rstd, dx, pw, pw ? pw + N : NULL);
            if (dx)
                nn_store_row_f32(dx, c->y, c->dt, r * N, N);
        }
    }
}

ampy_status ampy_nn_layer_norm_bwd(int64_t M, int64_t N, const void *x, int x_dtype,
                                   const void *w, int w_dtype, const void *dy,
                                   const double *mean, const double *rstd, double eps,
                                   void *dx, void *dw, void *db)
{
    ampy_status s = ln_check(M, N, x_dtype, w, NULL, w_dtype, eps, "layer_norm_backward");
    if (s != AMPY_OK)
        return s;
    if ((dw || db) && !ampy_nn_is_float(w_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "layer_norm_backward: bad weight dtype");
    if (N == 0)
        return AMPY_OK;
    int vdt = x_dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    size_t vsz = vdt == AMPY_FLOAT64 ? 8 : 4;
    int want_w = dw || db;
    ln_ctx c = {.M = M, .N = N, .x = x, .dy = dy, .y = dx, .dt = x_dtype, .eps = eps,
                .cmean = (mean && rstd) ? mean : NULL, .crstd = (mean && rstd) ? rstd : NULL};
    c.nchunks = nn_chunks(M, 3 * N);
    void *wv = nn_vec(w, w ? w_dtype : vdt, N, 1.0);
    void *scr = malloc((size_t)c.nchunks * 3 * (size_t)N * sizeof(float));
    void *part = want_w ? calloc((size_t)c.nchunks * 2 * (size_t)N, vsz) : NULL;
    if (!wv || !scr || (want_w && !part)) {
        free(wv), free(scr), free(part);
        return ampy_error(AMPY_ERR_NOMEM, "layer_norm_backward: out of memory");
    }
    c.w = wv, c.scratch = scr, c.partial = part;
    if (M > 0 && (dx || want_w))
        ampy_parallel_for(c.nchunks, 1, ln_bwd_chunks, &c);
    for (int64_t j = 0; want_w && j < N; j++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t k = 0; k < c.nchunks; k++) {
            sw += vsz == 8 ? ((double *)part)[k * 2 * N + j] : ((float *)part)[k * 2 * N + j];
            sb += vsz == 8 ? ((double *)part)[k * 2 * N + N + j]
                           : ((float *)part)[k * 2 * N + N + j];
        }
        if (dw)
            ampy_nn_store1(dw, w_dtype, j, sw);
        if (db)
            ampy_nn_store1(db, w_dtype, j, sb);
    }
    free(wv), free(scr), free(part);
    return AMPY_OK;
}

/* ---- cross_entropy ----------------------------------------------------------- */
typedef struct {
    int64_t M, C, nchunks;
    const void *x;
    int dt;
    const int64_t *t;
    const void *w; /* float32 (float64) vector of C, or NULL */
    double W;      /* sum of the weights (C without weights) */
    int64_t ignore;
    double ls;
    double *loss, *lse_out; /* forward: M row losses; M lse or NULL */
    const double *lse_in;   /* backward: saved lse or NULL */
    double g, denom;        /* backward: scalar upstream grad, MEAN denominator */
    const void *dout;       /* backward, NONE: M upstream grads */
    int none;
    void *dx;
    float *scratch; /* per chunk 2*C floats */
} ce_ctx;

static double ce_weight(const ce_ctx *c, int64_t t)
{
    if (!c->w)
        return 1.0;
    return c->dt == AMPY_FLOAT64 ? ((const double *)c->w)[t] : ((const float *)c->w)[t];
}

static void ce_fwd_chunks(int64_t cb, int64_t ce, void *vc)
{
    ce_ctx *c = (ce_ctx *)vc;
    const int64_t C = c->C;
    const nn_rows_f32 *R = rows_f32();
    for (int64_t k = cb; k < ce; k++) {
        int64_t r0 = c->M * k / c->nchunks, r1 = c->M * (k + 1) / c->nchunks;
        for (int64_t r = r0; r < r1; r++) {
            int64_t t = c->t[r];
            if (t == c->ignore) {
                c->loss[r] = 0.0;
                if (c->lse_out)
                    c->lse_out[r] = 0.0;
                continue;
            }
            double lse, xt, wx = 0.0;
            if (c->dt == AMPY_FLOAT64) {
                const double *x = (const double *)c->x + r * C;
                lse = rows_f64.row_lse(x, C);
                xt = x[t];
                if (c->ls > 0.0)
                    wx = rows_f64.rdot(x, (const double *)c->w, C);
            } else {
                const float *x = nn_row_f32(c->x, c->dt, r * C, C, c->scratch + k * 2 * C);
                lse = R->row_lse(x, C);
                xt = x[t];
                if (c->ls > 0.0)
                    wx = R->rdot(x, (const float *)c->w, C);
            }
            c->loss[r] = ampy_ce_row_loss(ce_weight(c, t), lse, xt, c->ls, C, c->W, wx);
            if (c->lse_out)
                c->lse_out[r] = lse;
        }
    }
}

/* Validates the shared arguments of the class-index losses. */
ampy_status nn_check_targets(int64_t M, int64_t C, int x_dtype, const int64_t *target,
                             int64_t ignore_index, int reduction, const char *fn)
{
    ampy_status s = ampy_nn_loss_check_args(M, C, x_dtype, reduction, fn);
    if (s != AMPY_OK)
        return s;
    for (int64_t i = 0; i < M; i++) {
        int64_t t = target[i];
        if (t != ignore_index && (t < 0 || t >= C))
            return ampy_error(AMPY_ERR_INDEX, "Target %lld is out of bounds.", (long long)t);
    }
    return AMPY_OK;
}

/* Sum of w_t over rows not ignored (the MEAN denominator). */
double nn_total_weight(int64_t M, const int64_t *target, const void *w, int dt,
                       int64_t ignore_index)
{
    double s = 0.0;
    for (int64_t i = 0; i < M; i++)
        if (target[i] != ignore_index)
            s += w ? ampy_nn_load1(w, dt, target[i]) : 1.0;
    return s;
}

ampy_status ampy_nn_cross_entropy_fwd(int64_t M, int64_t C, const void *x, int x_dtype,
                                      const int64_t *target, const void *w, int64_t ignore_index,
                                      double ls, int reduction, void *out, double *lse)
{
    ampy_status s = nn_check_targets(M, C, x_dtype, target, ignore_index, reduction,
                                     "cross_entropy");
    if (s != AMPY_OK)
        return s;
    s = ampy_ce_check_smoothing(ls);
    if (s != AMPY_OK)
        return s;
    ce_ctx c = {.M = M, .C = C, .x = x, .dt = x_dtype, .t = target, .ignore = ignore_index,
                .ls = ls, .lse_out = lse};
    c.nchunks = nn_chunks(M, C);
    int vdt = x_dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    void *wv = w ? nn_vec(w, x_dtype, C, 1.0) : NULL;
    c.loss = malloc((size_t)(M > 0 ? M : 1) * sizeof(double));
    c.scratch = malloc((size_t)c.nchunks * 2 * (size_t)(C > 0 ? C : 1) * sizeof(float));
    if ((w && !wv) || !c.loss || !c.scratch) {
        free(wv), free(c.loss), free(c.scratch);
        return ampy_error(AMPY_ERR_NOMEM, "cross_entropy: out of memory");
    }
    c.w = wv;
    c.W = w ? 0.0 : (double)C;
    for (int64_t j = 0; w && j < C; j++)
        c.W += ampy_nn_load1(wv, vdt, j);
    if (M > 0)
        ampy_parallel_for(c.nchunks, 1, ce_fwd_chunks, &c);
    if (reduction == AMPY_NN_REDUCTION_NONE) {
        for (int64_t i = 0; i < M; i++)
            ampy_nn_store1(out, x_dtype, i, c.loss[i]);
    } else {
        double sum = 0.0;
        for (int64_t i = 0; i < M; i++)
            sum += c.loss[i];
        if (reduction == AMPY_NN_REDUCTION_MEAN)
            sum /= nn_total_weight(M, target, w, x_dtype, ignore_index);
        ampy_nn_store1(out, x_dtype, 0, sum);
    }
    free(wv), free(c.loss), free(c.scratch);
    return AMPY_OK;
}

static void ce_bwd_chunks(int64_t cb, int64_t ce, void *vc)
{
    ce_ctx *c = (ce_ctx *)vc;
    const int64_t C = c->C;
    const nn_rows_f32 *R = rows_f32();
    const size_t isz = ampy_dtype_size(c->dt);
    for (int64_t k = cb; k < ce; k++) {
        int64_t r0 = c->M * k / c->nchunks, r1 = c->M * (k + 1) / c->nchunks;
        float *s = c->scratch + k * 2 * C;
        for (int64_t r = r0; r < r1; r++) {
            int64_t t = c->t[r];
            if (t == c->ignore) {
                memset((char *)c->dx + (size_t)(r * C) * isz, 0, (size_t)C * isz);
                continue;
            }
            double g = c->none ? ampy_nn_load1(c->dout, c->dt, r) : c->g;
            double cn, cs;
            double a = ampy_ce_row_grad_coef(g, ce_weight(c, t), c->ls, C, c->W, c->denom, &cn, &cs);
            if (c->dt == AMPY_FLOAT64) {
                const double *x = (const double *)c->x + r * C;
                double *dx = (double *)c->dx + r * C;
                double lse = c->lse_in ? c->lse_in[r] : rows_f64.row_lse(x, C);
                rows_f64.ce_bwd_row(x, C, c->w, lse, a, cs, dx);
                dx[t] -= cn;
            } else {
                const float *x = nn_row_f32(c->x, c->dt, r * C, C, s);
                float *dx = out_row(c->dx, c->dt, r * C, s + C);
                double lse = c->lse_in ? c->lse_in[r] : R->row_lse(x, C);
                R->ce_bwd_row(x, C, c->w, lse, a, cs, dx);
                dx[t] = (float)((double)dx[t] - cn);
                nn_store_row_f32(dx, c->dx, c->dt, r * C, C);
            }
        }
    }
}

ampy_status ampy_nn_cross_entropy_bwd(int64_t M, int64_t C, const void *x, int x_dtype,
                                      const int64_t *target, const void *w, int64_t ignore_index,
                                      double ls, int reduction, const void *dout,
                                      const double *lse, void *dx)
{
    ampy_status s = nn_check_targets(M, C, x_dtype, target, ignore_index, reduction,
                                     "cross_entropy_backward");
    if (s != AMPY_OK)
        return s;
    s = ampy_ce_check_smoothing(ls);
    if (s != AMPY_OK)
        return s;
    if (M == 0 || C == 0)
        return AMPY_OK;
    ce_ctx c = {.M = M, .C = C, .x = x, .dt = x_dtype, .t = target, .ignore = ignore_index,
                .ls = ls, .lse_in = lse, .dout = dout, .dx = dx,
                .none = reduction == AMPY_NN_REDUCTION_NONE, .denom = 1.0};
    c.nchunks = nn_chunks(M, 2 * C);
    int vdt = x_dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    void *wv = w ? nn_vec(w, x_dtype, C, 1.0) : NULL;
    c.scratch = malloc((size_t)c.nchunks * 2 * (size_t)C * sizeof(float));
    if ((w && !wv) || !c.scratch) {
        free(wv), free(c.scratch);
        return ampy_error(AMPY_ERR_NOMEM, "cross_entropy_backward: out of memory");
    }
    c.w = wv;
    c.W = (double)C;
    if (w) {
        c.W = 0.0;
        for (int64_t j = 0; j < C; j++)
            c.W += ampy_nn_load1(wv, vdt, j);
    }
    if (!c.none)
        c.g = ampy_nn_load1(dout, x_dtype, 0);
    if (reduction == AMPY_NN_REDUCTION_MEAN)
        c.denom = nn_total_weight(M, target, w, x_dtype, ignore_index);
    ampy_parallel_for(c.nchunks, 1, ce_bwd_chunks, &c);
    free(wv), free(c.scratch);
    return AMPY_OK;
}
