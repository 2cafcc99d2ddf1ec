/* cnn_resample.c — padding (constant, reflect, replicate, circular over
 * the last 1-3 dims), forward and backward (contracts in ampy/cnn.h;
 * interpolation is in cnn_interp.c).
 *
 * Every output element reads one source element through the index maps of
 * ampy/cnn_math.h (torch's ReflectionPad.cpp / ReplicationPadding.cpp). The
 * backward walks the outputs in order and adds each gradient back onto its
 * source in the gradient's dtype, as torch's pad backward does.
 */
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cnn.h"
#include "ampy/cpu.h"
#include "ampy/cnn_math.h"
#include "ampy/dtype.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"
#include "cnn_half.h"

#define RS_GRAIN_ELEMS 16384

static int64_t grain_for(int64_t per_plane)
{
    int64_t g = per_plane > 0 ? RS_GRAIN_ELEMS / per_plane : RS_GRAIN_ELEMS;
    return g < 1 ? 1 : g;
}

static size_t elem_size(int dt)
{
    return dt == AMPY_FLOAT64 ? 8 : (dt == AMPY_FLOAT32 ? 4 : 2);
}

/* ---- padding -------------------------------------------------------------- */
typedef struct {
    int64_t in[3], out[3], lo[3];
    int mode;
    double value;
    const void *src;
    void *dst;
    int dt;
} pad_ctx;

static ampy_status pad_setup(pad_ctx *c, int64_t P, int k, const int64_t *in, const int64_t *lo,
                             const int64_t *hi, int mode, int dt, const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    if (P < 0 || k < 1 || k > 3 || mode < AMPY_CNN_PAD_CONSTANT || mode > AMPY_CNN_PAD_CIRCULAR)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad block count, dims or mode", fn);
    for (int j = 0; j < 3; j++) {
        int s = j - (3 - k); /* leading dims that are not padded have size 1 */
        c->in[j] = s < 0 ? 1 : in[s];
        c->lo[j] = s < 0 ? 0 : lo[s];
        int64_t h = s < 0 ? 0 : hi[s];
        c->out[j] = c->in[j] + c->lo[j] + h;
        int64_t n = c->in[j], a = c->lo[j];
        int bad = n < 0 || c->out[j] < 0;
        if (mode != AMPY_CNN_PAD_CONSTANT && s >= 0)
            bad = bad || n < 1 ||
                  (mode == AMPY_CNN_PAD_REFLECT && (a >= n || h >= n || -a >= n || -h >= n)) ||
                  (mode == AMPY_CNN_PAD_CIRCULAR && (a > n || h > n));
        if (bad)
            return ampy_error(AMPY_ERR_VALUE, "%s: padding does not fit dim %d", fn, s);
    }
    c->mode = mode;
    c->dt = dt;
    return AMPY_OK;
}

/* The outputs [m0, m1) of a row read the contiguous sources m0 - lo ...:
 * the o2 range whose source index o2 - lo lies inside the row. */
static void pad_middle(const pad_ctx *c, int64_t *m0, int64_t *m1)
{
    int64_t a = c->lo[2] > 0 ? c->lo[2] : 0, b = c->lo[2] + c->in[2];
    if (b > c->out[2])
        b = c->out[2];
    *m0 = a;
    *m1 = b > a ? b : a;
}

/* one output row of the forward: outputs o.. of length out[2] from the
 * source row at s_row (-1: every element takes the value) */
static void pad_fwd_row(const pad_ctx *c, int64_t o, int64_t s_row, int64_t m0, int64_t m1)
{
    const int dt = c->dt;
    const size_t es = elem_size(dt);
    char *dst = (char *)c->dst;
    const char *src = (const char *)c->src;
    for (int64_t o2 = 0; o2 < c->out[2]; o2++) {
        if (o2 == m0 && s_row >= 0 && m1 > m0) {
            memcpy(dst + (size_t)(o + m0) * es, src + (size_t)(s_row + m0 - c->lo[2]) * es,
                   (size_t)(m1 - m0) * es);
            o2 = m1 - 1;
            continue;
        }
        int64_t d = ampy_cnn_pad_src(o2, c->in[2], c->lo[2], c->mode);
        if (s_row < 0 || d < 0)
            ampy_nn_store1(c->dst, dt, o + o2, c->value);
        else
            memcpy(dst + (size_t)(o + o2) * es, src + (size_t)(s_row + d) * es, es);
    }
}

/* dx[s] += dy[o] in the gradient's dtype (one rounding per add) */
static inline void pad_add1(const pad_ctx *c, int64_t s, int64_t o)
{
    if (c->dt == AMPY_FLOAT64)
        ((double *)c->dst)[s] += ((const double *)c->src)[o];
    else if (c->dt == AMPY_FLOAT32)
        ((float *)c->dst)[s] += ((const float *)c->src)[o];
    else
        ampy_cnn_stf(c->dst, c->dt, s,
                     ampy_cnn_ldf(c->dst, c->dt, s) + ampy_cnn_ldf(c->src, c->dt, o));
}

/* d[i] = round(d[i] + g[i]) for half d and g, in tiles of PAD_TILE */
#define PAD_TILE 256
static void pad_add_half(int dt, uint16_t *d, const uint16_t *g, int64_t n)
{
    float a[PAD_TILE], b[PAD_TILE];
    for (int64_t t = 0; t < n; t += PAD_TILE) {
        const int64_t m = n - t < PAD_TILE ? n - t : PAD_TILE;
        cnn_widen_half(dt, d + t, a, m);
        cnn_widen_half(dt, g + t, b, m);
        for (int64_t i = 0; i < m; i++)
            a[i] += b[i];
        cnn_narrow_half(dt, a, d + t, m);
    }
}

/* one output row of the backward, its gradients added in output order */
static void pad_bwd_row(const pad_ctx *c, int64_t o, int64_t s_row, int64_t m0, int64_t m1)
{
    if (s_row < 0)
        return;
    for (int64_t o2 = 0; o2 < c->out[2]; o2++) {
        if (o2 == m0 && m1 > m0) {
            const int64_t s0 = s_row + m0 - c->lo[2], n = m1 - m0;
            if (c->dt == AMPY_FLOAT32) {
                float *d = (float *)c->dst + s0;
                const float *g = (const float *)c->src + o + m0;
                for (int64_t i = 0; i < n; i++)
                    d[i] += g[i];
            } else if (c->dt == AMPY_FLOAT64) {
                for (int64_t i = 0; i < n; i++)
                    pad_add1(c, s0 + i, o + m0 + i);
            } else {
                pad_add_half(c->dt, (uint16_t *)c->dst + s0, (const uint16_t *)c->src + o + m0, n);
            }
            o2 = m1 - 1;
            continue;
        }
        int64_t d = ampy_cnn_pad_src(o2, c->in[2], c->lo[2], c->mode);
        if (d >= 0)
            pad_add1(c, s_row + d, o + o2);
    }
}

static void pad_range(int64_t p0, int64_t p1, void *vc, int backward)
{
    const pad_ctx *c = (const pad_ctx *)vc;
    const int64_t isz = c->in[0] * c->in[1] * c->in[2], osz = c->out[0] * c->out[1] * c->out[2];
    int64_t m0, m1;
    pad_middle(c, &m0, &m1);
    for (int64_t p = p0; p < p1; p++) {
        int64_t o = p * osz;
        for (int64_t o0 = 0; o0 < c->out[0]; o0++)
            for (int64_t o1 = 0; o1 < c->out[1]; o1++, o += c->out[2]) {
                int64_t a = ampy_cnn_pad_src(o0, c->in[0], c->lo[0], c->mode);
                int64_t b = ampy_cnn_pad_src(o1, c->in[1], c->lo[1], c->mode);
                int64_t s_row = a < 0 || b < 0 ? -1 : p * isz + (a * c->in[1] + b) * c->in[2];
                if (backward)
                    pad_bwd_row(c, o, s_row, m0, m1);
                else
                    pad_fwd_row(c, o, s_row, m0, m1);
            }
    }
}

static void pad_fwd_range(int64_t p0, int64_t p1, void *vc) { pad_range(p0, p1, vc, 0); }
static void pad_bwd_range(int64_t p0, int64_t p1, void *vc) { pad_range(p0, p1, vc, 1); }

ampy_status ampy_cnn_pad_fwd(int64_t P, int k, const int64_t *in, const int64_t *lo,
                             const int64_t *hi, int mode, double value, const void *x, int dtype,
                             void *y)
{
    pad_ctx c;
    ampy_status s = pad_setup(&c, P, k, in, lo, hi, mode, dtype, "pad");
    if (s != AMPY_OK)
        return s;
    c.value = value, c.src = x, c.dst = y;
    int64_t osz = c.out[0] * c.out[1] * c.out[2];
    if (P * osz == 0)
        return AMPY_OK;
    if (!y)
        return ampy_error(AMPY_ERR_VALUE, "pad: NULL output");
    ampy_parallel_for(P, grain_for(osz), pad_fwd_range, &c);
    return AMPY_OK;
}

ampy_status ampy_cnn_pad_bwd(int64_t P, int k, const int64_t *in, const int64_t *lo,
                             const int64_t *hi, int mode, const void *dy, int dtype, void *dx)
{
    pad_ctx c;
    ampy_status s = pad_setup(&c, P, k, in, lo, hi, mode, dtype, "pad_backward");
    if (s != AMPY_OK)
        return s;
    c.value = 0.0, c.src = dy, c.dst = dx;
    int64_t isz = c.in[0] * c.in[1] * c.in[2];
    if (P * isz == 0)
        return AMPY_OK;
    if (!dx)
        return ampy_error(AMPY_ERR_VALUE, "pad_backward: NULL output");
    memset(dx, 0, (size_t)(P * isz) * elem_size(dtype));
    ampy_parallel_for(P, grain_for(c.out[0] * c.out[1] * c.out[2]), pad_bwd_range, &c);
    return AMPY_OK;
}
