/* cnn_pool3d.c — max_pool3d (with argmax indices), avg_pool3d,
 * adaptive_avg_pool3d and adaptive_max_pool3d over volumes (contracts in
 * ampy/cnn_pool3d.h); adaptive_max_pool2d and the 1-d pools run them with
 * depth (and height) 1.
 *
 * The loops restate torch's channels-first CPU kernels
 * (aten/src/ATen/native/cpu/MaxPoolKernel.cpp, AvgPoolKernel.cpp,
 * AdaptiveMaxPoolKernel.cpp, AdaptiveAvgPoolKernel.cpp): each output
 * visits its window depth, then row, then column; a maximum is replaced by
 * a value that is larger or NaN, so the first maximum wins ties and NaN
 * propagates; an average sums in float32 (float64 for float64 data) and
 * divides once. A window is a box: per dim a first index, an end and a
 * step (the dilation of a max pool, else 1). Volumes are split across the
 * thread pool, one volume per thread at a time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cnn_math.h"
#include "ampy/cnn_pool3d.h"
#include "ampy/dtype.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"

#define POOL3_GRAIN_ELEMS 16384

enum { K_MAX, K_AVG, K_ADAPTIVE_AVG, K_ADAPTIVE_MAX };

typedef struct {
    ampy_cnn_vol v;
    ampy_cnn_window3 w;
    int kind, include_pad, dt;
    int64_t divisor;
    const void *src;
    void *dst;
    int64_t *idx;
    const int64_t *tab[3]; /* window_table's rows of each dim */
} pool3_ctx;

/* The window of one output: per dim [lo, hi) in steps of st, and the
 * divisor of an average (0 for a window wholly in the padding). */
typedef struct {
    int64_t lo[3], hi[3], st[3], div;
} box3;

/* Output o's window in dim j: [*lo, *hi) in steps of *st, and (averages)
 * its length *pad counted over the padding, before the clip. */
static void dim_window(const pool3_ctx *k, int j, int64_t o, int64_t *lo, int64_t *hi,
                       int64_t *st, int64_t *pad)
{
    const int64_t n = k->v.in[j];
    *st = 1, *pad = 0;
    if (k->kind == K_ADAPTIVE_AVG || k->kind == K_ADAPTIVE_MAX) {
        *lo = ampy_cnn_adaptive_start(o, k->v.out[j], n);
        *hi = ampy_cnn_adaptive_end(o, k->v.out[j], n);
    } else if (k->kind == K_MAX) {
        int64_t a = o * k->w.s[j] - k->w.p[j], e = a + (k->w.k[j] - 1) * k->w.d[j] + 1;
        while (a < 0)
            a += k->w.d[j];
        *lo = a, *hi = e < n ? e : n, *st = k->w.d[j];
    } else {
        int64_t a = o * k->w.s[j] - k->w.p[j];
        int64_t e = a + k->w.k[j] < n + k->w.p[j] ? a + k->w.k[j] : n + k->w.p[j];
        *pad = e - a;
        *lo = a > 0 ? a : 0, *hi = e < n ? e : n;
    }
}

/* The per-dim windows of every output index, 4 entries each (lo, hi, st,
 * pad), dims one after the other: a table the loops read. */
static int64_t *window_table(const pool3_ctx *k)
{
    int64_t *t = (int64_t *)malloc(
        (size_t)(4 * (k->v.out[0] + k->v.out[1] + k->v.out[2]) + 1) * sizeof(int64_t));
    if (!t)
        return NULL;
    int64_t *e = t;
    for (int j = 0; j < 3; j++)
        for (int64_t o = 0; o < k->v.out[j]; o++, e += 4)
            dim_window(k, j, o, e, e + 1, e + 2, e + 3);
    return t;
}

static void box_of(const pool3_ctx *k, const int64_t o[3], box3 *b)
{
    int64_t pool = 1, inner = 1, empty = 0;
    for (int j = 0; j < 3; j++) {
        const int64_t *e = k->tab[j] + 4 * o[j];
        b->lo[j] = e[0], b->hi[j] = e[1], b->st[j] = e[2];
        pool *= e[3];
        inner *= e[1] - e[0];
        empty |= e[0] >= e[1];
    }
    b->div = empty ? 0 : (k->divisor > 0 ? k->divisor : (k->include_pad ? pool : inner));
}

/* The box's maximum into *m; returns its flat index (NaN wins, first max
 * on ties). Values compare in double: every input value is exact there. */
static int64_t box_max(const pool3_ctx *k, const void *x, const box3 *b, double *m)
{
    const int64_t H = k->v.in[1], W = k->v.in[2];
    int64_t best = (b->lo[0] * H + b->lo[1]) * W + b->lo[2];
    double mx = -INFINITY;
    for (int64_t id = b->lo[0]; id < b->hi[0]; id += b->st[0])
        for (int64_t ih = b->lo[1]; ih < b->hi[1]; ih += b->st[1]) {
            const int64_t row = (id * H + ih) * W;
            if (k->dt == AMPY_FLOAT32) {
                const float *r = (const float *)x + row;
                for (int64_t iw = b->lo[2]; iw < b->hi[2]; iw += b->st[2]) {
                    const float val = r[iw];
                    if (val > mx || val != val)
                        mx = val, best = row + iw;
                }
                continue;
            }
            for (int64_t iw = b->lo[2]; iw < b->hi[2]; iw += b->st[2]) {
                const double val = ampy_nn_load1(x, k->dt, row + iw);
                if (val > mx || val != val)
                    mx = val, best = row + iw;
            }
        }
    *m = mx;
    return best;
}

/* The box's sum: float64 for float64 data, else float32; half data of an
 * adaptive average sums in its own type (each add rounded), as torch's
 * adaptive_avg_pool3d frame does with its scalar_t sum. */
static double box_sum(const pool3_ctx *k, const void *x, const box3 *b)
{
    const int64_t H = k->v.in[1], W = k->v.in[2];
    const int own = k->kind == K_ADAPTIVE_AVG && ampy_dtype_is_half(k->dt);
    double sd = 0.0;
    float sf = 0.0f;
    for (int64_t id = b->lo[0]; id < b->hi[0]; id++)
        for (int64_t ih = b->lo[1]; ih < b->hi[1]; ih++) {
            const int64_t row = (id * H + ih) * W;
            if (k->dt == AMPY_FLOAT64)
                for (int64_t iw = b->lo[2]; iw < b->hi[2]; iw++)
                    sd += ((const double *)x)[row + iw];
            else if (k->dt == AMPY_FLOAT32)
                for (int64_t iw = b->lo[2]; iw < b->hi[2]; iw++)
                    sf += ((const float *)x)[row + iw];
            else if (own)
                for (int64_t iw = b->lo[2]; iw < b->hi[2]; iw++)
                    sf = (float)ampy_cnn_round_to(k->dt, sf + ampy_cnn_ldf(x, k->dt, row + iw));
            else
                for (int64_t iw = b->lo[2]; iw < b->hi[2]; iw++)
                    sf += ampy_cnn_ldf(x, k->dt, row + iw);
        }
    return k->dt == AMPY_FLOAT64 ? sd : (double)sf;
}

/* The share of output gradient g spread over box b, rounded to the data
 * type as torch's scalar_t division rounds it. */
static double share_of(const pool3_ctx *k, const box3 *b, double g)
{
    const int dt = k->dt;
    if (k->kind == K_AVG)
        return dt == AMPY_FLOAT64 ? g / (double)b->div
                                  : ampy_cnn_round_to(dt, (float)g / (float)b->div);
    double d = g;
    for (int j = 0; j < 3; j++)
        d = dt == AMPY_FLOAT64 ? d / (double)(b->hi[j] - b->lo[j])
                               : ampy_cnn_round_to(dt, (float)d / (float)(b->hi[j] - b->lo[j]));
    return d;
}

/* One output of a forward: its value into y[o] (and its index). */
static void fwd_one(const pool3_ctx *k, const void *x, int64_t ob, const int64_t oc[3])
{
    box3 b;
    box_of(k, oc, &b);
    const int64_t o = ob + (oc[0] * k->v.out[1] + oc[1]) * k->v.out[2] + oc[2];
    if (k->kind == K_MAX || k->kind == K_ADAPTIVE_MAX) {
        double m;
        k->idx[o] = box_max(k, x, &b, &m);
        ampy_nn_store1(k->dst, k->dt, o, m); /* an input value: exact */
        return;
    }
    const double s = box_sum(k, x, &b);
    if (k->kind == K_AVG && b.div == 0) {
        ampy_nn_store1(k->dst, k->dt, o, 0.0);
    } else if (k->dt == AMPY_FLOAT64) {
        ((double *)k->dst)[o] = k->kind == K_AVG ? s / (double)b.div
                                                 : s / (double)(b.hi[0] - b.lo[0]) /
                                                       (double)(b.hi[1] - b.lo[1]) /
                                                       (double)(b.hi[2] - b.lo[2]);
    } else if (k->kind == K_AVG) {
        ampy_cnn_stf(k->dst, k->dt, o, (float)s / (float)b.div);
    } else { /* each division in the data type, as torch's scalar_t division */
        ampy_cnn_stf(k->dst, k->dt, o, (float)share_of(k, &b, s));
    }
}

static void fwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool3_ctx *k = (const pool3_ctx *)vc;
    const int64_t IV = k->v.in[0] * k->v.in[1] * k->v.in[2];
    const int64_t OV = k->v.out[0] * k->v.out[1] * k->v.out[2];
    const size_t es = ampy_dtype_size((ampy_dtype)k->dt);
    for (int64_t p = p0; p < p1; p++) {
        const void *x = (const char *)k->src + (size_t)(p * IV) * es;
        int64_t oc[3];
        for (oc[0] = 0; oc[0] < k->v.out[0]; oc[0]++)
            for (oc[1] = 0; oc[1] < k->v.out[1]; oc[1]++)
                for (oc[2] = 0; oc[2] < k->v.out[2]; oc[2]++)
                    fwd_one(k, x, p * OV, oc);
    }
}

static void bwd_range(int64_t p0, int64_t p1, void *vc)
{
    const pool3_ctx *k = (const pool3_ctx *)vc;
    const int64_t H = k->v.in[1], W = k->v.in[2], IV = k->v.in[0] * H * W;
    const int64_t OV = k->v.out[0] * k->v.out[1] * k->v.out[2];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t o = 0; o < OV; o++) {
            const int64_t oc[3] = {o / (k->v.out[1] * k->v.out[2]),
                                   (o / k->v.out[2]) % k->v.out[1], o % k->v.out[2]};
            box3 b;
            box_of(k, oc, &b);
            if (k->kind == K_AVG && b.div == 0)
                continue;
            const double d = share_of(k, &b, ampy_nn_load1(k->src, k->dt, p * OV + o));
            for (int64_t id = b.lo[0]; id < b.hi[0]; id++)
                for (int64_t ih = b.lo[1]; ih < b.hi[1]; ih++)
                    for (int64_t iw = b.lo[2]; iw < b.hi[2]; iw++) {
                        const int64_t i = p * IV + (id * H + ih) * W + iw;
                        if (k->dt == AMPY_FLOAT64)
                            ((double *)k->dst)[i] += d;
                        else if (k->dt == AMPY_FLOAT32)
                            ((float *)k->dst)[i] += (float)d;
                        else
                            ampy_cnn_stf(k->dst, k->dt, i,
                                         ampy_cnn_ldf(k->dst, k->dt, i) + (float)d);
                    }
        }
}

static ampy_status check(const ampy_cnn_vol *v, const ampy_cnn_window3 *w, int dt,
                         const void *out, int kind, const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    if (!v || !out || v->P < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size or NULL output", fn);
    for (int j = 0; j < 3; j++) {
        if (v->in[j] < 1 || v->out[j] < 0)
            return ampy_error(AMPY_ERR_VALUE, "%s: empty input or negative output size", fn);
        if (kind == K_ADAPTIVE_AVG || kind == K_ADAPTIVE_MAX)
            continue;
        if (!w || w->k[j] < 1 || w->s[j] < 1 || w->p[j] < 0 || w->d[j] < 1 ||
            (kind == K_MAX && w->p[j] * 2 > (w->k[j] - 1) * w->d[j] + 1))
            return ampy_error(AMPY_ERR_VALUE, "%s: bad kernel, stride, padding or dilation", fn);
    }
    return AMPY_OK;
}

static ampy_status run(pool3_ctx *k, int backward, const char *fn)
{
    ampy_status s = check(&k->v, &k->w, k->dt, k->dst, k->kind, fn);
    if (s == AMPY_OK && (k->kind == K_MAX || k->kind == K_ADAPTIVE_MAX) && !k->idx)
        s = ampy_error(AMPY_ERR_VALUE, "%s: NULL indices", fn);
    if (s != AMPY_OK)
        return s;
    const int64_t IV = k->v.in[0] * k->v.in[1] * k->v.in[2];
    const int64_t OV = k->v.out[0] * k->v.out[1] * k->v.out[2];
    int64_t *tab = window_table(k);
    if (!tab)
        return ampy_error(AMPY_ERR_NOMEM, "%s: out of memory", fn);
    k->tab[0] = tab, k->tab[1] = tab + 4 * k->v.out[0], k->tab[2] = k->tab[1] + 4 * k->v.out[1];
    if (backward)
        memset(k->dst, 0, (size_t)(k->v.P * IV) * ampy_dtype_size((ampy_dtype)k->dt));
    int64_t work = IV + OV, grain = work > 0 ? POOL3_GRAIN_ELEMS / work : 1;
    ampy_parallel_for(k->v.P, grain < 1 ? 1 : grain, backward ? bwd_range : fwd_range, k);
    free(tab);
    return AMPY_OK;
}

static const ampy_cnn_window3 NO_WINDOW = {{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}};

ampy_status ampy_cnn_max_pool3d_fwd(const ampy_cnn_vol *v, const ampy_cnn_window3 *w,
                                    const void *x, int dtype, void *y, int64_t *idx)
{
    if (!v || !w)
        return ampy_error(AMPY_ERR_VALUE, "max_pool3d: NULL sizes or window");
    pool3_ctx k = {*v, *w, K_MAX, 0, dtype, 0, x, y, idx, {NULL, NULL, NULL}};
    return run(&k, 0, "max_pool3d");
}

ampy_status ampy_cnn_avg_pool3d_fwd(const ampy_cnn_vol *v, const ampy_cnn_window3 *w,
                                    int count_include_pad, int64_t divisor_override,
                                    const void *x, int dtype, void *y)
{
    if (!v || !w)
        return ampy_error(AMPY_ERR_VALUE, "avg_pool3d: NULL sizes or window");
    pool3_ctx k = {*v, *w, K_AVG, count_include_pad, dtype, divisor_override, x, y, NULL,
                   {NULL, NULL, NULL}};
    return run(&k, 0, "avg_pool3d");
}

ampy_status ampy_cnn_avg_pool3d_bwd(const ampy_cnn_vol *v, const ampy_cnn_window3 *w,
                                    int count_include_pad, int64_t divisor_override,
                                    const void *dy, int dtype, void *dx)
{
    if (!v || !w)
        return ampy_error(AMPY_ERR_VALUE, "avg_pool3d_backward: NULL sizes or window");
    pool3_ctx k = {*v, *w, K_AVG, count_include_pad, dtype, divisor_override, dy, dx, NULL,
                   {NULL, NULL, NULL}};
    return run(&k, 1, "avg_pool3d_backward");
}

ampy_status ampy_cnn_adaptive_avg_pool3d_fwd(const ampy_cnn_vol *v, const void *x, int dtype,
                                             void *y)
{
    if (!v)
        return ampy_error(AMPY_ERR_VALUE, "adaptive_avg_pool3d: NULL sizes");
    pool3_ctx k = {*v, NO_WINDOW, K_ADAPTIVE_AVG, 0, dtype, 0, x, y, NULL, {NULL, NULL, NULL}};
    return run(&k, 0, "adaptive_avg_pool3d");
}

ampy_status ampy_cnn_adaptive_avg_pool3d_bwd(const ampy_cnn_vol *v, const void *dy, int dtype,
                                             void *dx)
{
    if (!v)
        return ampy_error(AMPY_ERR_VALUE, "adaptive_avg_pool3d_backward: NULL sizes");
    pool3_ctx k = {*v, NO_WINDOW, K_ADAPTIVE_AVG, 0, dtype, 0, dy, dx, NULL, {NULL, NULL, NULL}};
    return run(&k, 1, "adaptive_avg_pool3d_backward");
}

ampy_status ampy_cnn_adaptive_max_pool3d_fwd(const ampy_cnn_vol *v, const void *x, int dtype,
                                             void *y, int64_t *idx)
{
    if (!v)
        return ampy_error(AMPY_ERR_VALUE, "adaptive_max_pool3d: NULL sizes");
    pool3_ctx k = {*v, NO_WINDOW, K_ADAPTIVE_MAX, 0, dtype, 0, x, y, idx, {NULL, NULL, NULL}};
    return run(&k, 0, "adaptive_max_pool3d");
}
