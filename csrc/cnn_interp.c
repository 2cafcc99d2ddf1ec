/* cnn_interp.c — 2-d interpolation (nearest, bilinear) of P planes,
 * forward and backward (contracts in ampy/cnn.h).
 *
 * Every output element reads one source element (nearest) or four
 * (bilinear) through the index maps of ampy/cnn_math.h (torch's
 * UpSample.h). The backward walks the outputs in order and adds each
 * gradient back onto its sources, in float32 for float32 and half data
 * (one rounding at the end for half data: torch's upsample backward
 * accumulates reduced types in float) and in float64 for float64.
 *
 * Bilinear float32 and half data take the table path: the neighbours and
 * lambdas of every output column and row are computed once per call, the
 * two source rows of an output row are widened to float32 once, and the
 * row is computed 16 outputs at a time with gathers on AVX-512 (the same
 * fused multiply-adds, so the same bits as the per-element loop). The
 * forward follows the form of torch's CPU kernel that the call takes
 * (cl_form): its generic form (rows, then columns) or its channels-last
 * form (lambda products, channel-dependent order). Its
 * backward keeps the two source columns an output column touches in
 * registers, adding in the per-element loop's order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cnn.h"
#include "ampy/cnn_math.h"
#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"
#include "cnn_half.h"
#include "simd.h"
#if defined(AMPY_X86_SIMD)
#include <immintrin.h>
#endif

#define IP_GRAIN_ELEMS 16384

static int64_t grain_for(int64_t per_plane)
{
    int64_t g = per_plane > 0 ? IP_GRAIN_ELEMS / per_plane : IP_GRAIN_ELEMS;
    return g < 1 ? 1 : g;
}

static size_t elem_size(int dt)
{
    return dt == AMPY_FLOAT64 ? 8 : (dt == AMPY_FLOAT32 ? 4 : 2);
}

/* The neighbours and lambdas of every destination index of one dim. */
typedef struct {
    int32_t *i0, *i1;
    float *l0, *l1;
} lin_table;

typedef struct {
    int64_t H, W, OH, OW;
    int mode, align;
    double sh, sw;
    double rh, rw;
    const void *src;
    void *dst;
    float *acc; /* backward of half data: P*H*W float32 sums, or NULL */
    int dt;
    lin_table th, tw; /* the table path's rows and columns */
    int cl;           /* forward in torch's channels-last form */
    int64_t C, vec_c; /* channels; those below vec_c are vector-block lanes */
} interp_ctx;

/* Whether plane p is a vector-block lane of torch's channels-last form. */
static inline int cl_lane(const interp_ctx *c, int64_t p)
{
    return c->cl && p % c->C < c->vec_c;
}

/* ---- the per-element loops (float64, nearest, and the table path's fallback) */
static void interp_fwd_range(int64_t p0, int64_t p1, void *vc)
{
    const interp_ctx *c = (const interp_ctx *)vc;
    const int dt = c->dt;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ib = p * c->H * c->W, o = p * c->OH * c->OW;
        const int lane = cl_lane(c, p);
        for (int64_t oh = 0; oh < c->OH; oh++) {
            int64_t h0, h1;
            double a0, a1;
            if (c->mode == AMPY_CNN_INTERP_NEAREST)
                h0 = ampy_cnn_nearest_src(oh, c->H, c->OH, c->sh), h1 = h0, a0 = 1, a1 = 0;
            else
                ampy_cnn_linear_src(oh, c->H, c->OH, c->rh, c->align, c->dt == AMPY_FLOAT64,
                                    &h0, &h1, &a0, &a1);
            for (int64_t ow = 0; ow < c->OW; ow++, o++) {
                if (c->mode == AMPY_CNN_INTERP_NEAREST) {
                    int64_t iw = ampy_cnn_nearest_src(ow, c->W, c->OW, c->sw);
                    ampy_nn_store1(c->dst, dt, o, ampy_nn_load1(c->src, dt, ib + h0 * c->W + iw));
                    continue;
                }
                int64_t w0, w1;
                double b0, b1;
                ampy_cnn_linear_src(ow, c->W, c->OW, c->rw, c->align, c->dt == AMPY_FLOAT64,
                                    &w0, &w1, &b0, &b1);
                const int64_t r0 = ib + h0 * c->W, r1 = ib + h1 * c->W;
                if (dt == AMPY_FLOAT64 && c->cl) {
                    const double *x = (const double *)c->src;
                    ((double *)c->dst)[o] = ampy_cnn_bilinear4_d(
                        x[r0 + w0], x[r0 + w1], x[r1 + w0], x[r1 + w1], a0, a1, b0, b1, lane);
                } else if (dt == AMPY_FLOAT64) {
                    const double *x = (const double *)c->src;
                    ((double *)c->dst)[o] = ampy_cnn_bilinear_d(x[r0 + w0], x[r0 + w1], x[r1 + w0],
                                                                x[r1 + w1], a0, a1, b0, b1);
                } else if (c->cl) {
                    const void *x = c->src;
                    ampy_cnn_stf(c->dst, dt, o,
                                 ampy_cnn_bilinear4_f(ampy_cnn_ldf(x, dt, r0 + w0),
                                                      ampy_cnn_ldf(x, dt, r0 + w1),
                                                      ampy_cnn_ldf(x, dt, r1 + w0),
                                                      ampy_cnn_ldf(x, dt, r1 + w1), (float)a0,
                                                      (float)a1, (float)b0, (float)b1, lane));
                } else {
                    const void *x = c->src;
                    ampy_cnn_stf(c->dst, dt, o,
                                 ampy_cnn_bilinear_f(ampy_cnn_ldf(x, dt, r0 + w0),
                                                     ampy_cnn_ldf(x, dt, r0 + w1),
                                                     ampy_cnn_ldf(x, dt, r1 + w0),
                                                     ampy_cnn_ldf(x, dt, r1 + w1), (float)a0,
                                                     (float)a1, (float)b0, (float)b1));
                }
            }
        }
    }
}

static inline void interp_add(const interp_ctx *c, int64_t i, double v)
{
    if (c->acc)
        c->acc[i] += (float)v;
    else if (c->dt == AMPY_FLOAT64)
        ((double *)c->dst)[i] += v;
    else
        ((float *)c->dst)[i] += (float)v;
}

static void interp_bwd_range(int64_t p0, int64_t p1, void *vc)
{
    const interp_ctx *c = (const interp_ctx *)vc;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ib = p * c->H * c->W, o = p * c->OH * c->OW;
        for (int64_t oh = 0; oh < c->OH; oh++) {
            int64_t h0, h1;
            double a0, a1;
            if (c->mode == AMPY_CNN_INTERP_NEAREST)
                h0 = ampy_cnn_nearest_src(oh, c->H, c->OH, c->sh), h1 = h0, a0 = 1, a1 = 0;
            else
                ampy_cnn_linear_src(oh, c->H, c->OH, c->rh, c->align, c->dt == AMPY_FLOAT64,
                                    &h0, &h1, &a0, &a1);
            for (int64_t ow = 0; ow < c->OW; ow++, o++) {
                double g = ampy_nn_load1(c->src, c->dt, o);
                if (c->mode == AMPY_CNN_INTERP_NEAREST) {
                    interp_add(c, ib + h0 * c->W + ampy_cnn_nearest_src(ow, c->W, c->OW, c->sw), g);
                    continue;
                }
                int64_t w0, w1;
                double b0, b1;
                ampy_cnn_linear_src(ow, c->W, c->OW, c->rw, c->align, c->dt == AMPY_FLOAT64,
                                    &w0, &w1, &b0, &b1);
                if (c->dt == AMPY_FLOAT64) {
                    interp_add(c, ib + h0 * c->W + w0, a0 * b0 * g);
                    interp_add(c, ib + h0 * c->W + w1, a0 * b1 * g);
                    interp_add(c, ib + h1 * c->W + w0, a1 * b0 * g);
                    interp_add(c, ib + h1 * c->W + w1, a1 * b1 * g);
                } else {
                    float gf = (float)g, fa0 = (float)a0, fa1 = (float)a1;
                    float fb0 = (float)b0, fb1 = (float)b1;
                    interp_add(c, ib + h0 * c->W + w0, fa0 * fb0 * gf);
                    interp_add(c, ib + h0 * c->W + w1, fa0 * fb1 * gf);
                    interp_add(c, ib + h1 * c->W + w0, fa1 * fb0 * gf);
                    interp_add(c, ib + h1 * c->W + w1, fa1 * fb1 * gf);
                }
            }
        }
    }
}

/* ---- the bilinear table path ---------------------------------------------- */
/* Fills t for n_out destination indices over n (float32 lambdas, as the
 * per-element loop rounds them). */
static void lin_fill(lin_table *t, int64_t n, int64_t n_out, double ratio, int align)
{
    for (int64_t o = 0; o < n_out; o++) {
        int64_t i0, i1;
        double l0, l1;
        ampy_cnn_linear_src(o, n, n_out, ratio, align, 0, &i0, &i1, &l0, &l1);
        t->i0[o] = (int32_t)i0, t->i1[o] = (int32_t)i1;
        t->l0[o] = (float)l0, t->l1[o] = (float)l1;
    }
}

/* One block holding both tables; NULL when out of memory. */
static void *lin_tables(interp_ctx *c)
{
    const int64_t n = c->OH + c->OW;
    char *m = (char *)malloc((size_t)n * (2 * sizeof(int32_t) + 2 * sizeof(float)));
    if (!m)
        return NULL;
    int32_t *ix = (int32_t *)m;
    float *lx = (float *)(m + (size_t)n * 2 * sizeof(int32_t));
    lin_table th = {ix, ix + c->OH, lx, lx + c->OH};
    lin_table tw = {ix + 2 * c->OH, ix + 2 * c->OH + c->OW, lx + 2 * c->OH,
                    lx + 2 * c->OH + c->OW};
    lin_fill(&th, c->H, c->OH, c->rh, c->align);
    lin_fill(&tw, c->W, c->OW, c->rw, c->align);
    c->th = th, c->tw = tw;
    return m;
}

typedef void (*bil_row_fn)(const float *s0, const float *s1, const lin_table *tw, float a0,
                           float a1, float *out, int64_t OW);
typedef void (*bil_row4_fn)(const float *s0, const float *s1, const lin_table *tw, float a0,
                            float a1, float *out, int64_t OW, int lane);

/* One output row in torch's channels-last form (ampy_cnn_bilinear4_f). */
static void bil_row4(const float *s0, const float *s1, const lin_table *tw, float a0, float a1,
                     float *out, int64_t OW, int lane)
{
    for (int64_t o = 0; o < OW; o++) {
        const int32_t i0 = tw->i0[o], i1 = tw->i1[o];
        out[o] = ampy_cnn_bilinear4_f(s0[i0], s0[i1], s1[i0], s1[i1], a0, a1, tw->l0[o],
                                      tw->l1[o], lane);
    }
}

/* out[ow] = (s0[w0] b0 + s0[w1] b1) a0 + (s1[w0] b0 + s1[w1] b1) a1, each
 * pair one fused multiply-add as in the per-element loop. */
static void bil_row(const float *s0, const float *s1, const lin_table *tw, float a0, float a1,
                    float *out, int64_t OW)
{
    for (int64_t o = 0; o < OW; o++) {
        const int32_t i0 = tw->i0[o], i1 = tw->i1[o];
        const float b0 = tw->l0[o], b1 = tw->l1[o];
        float t0 = fmaf(s0[i0], b0, s0[i1] * b1);
        float t1 = fmaf(s1[i0], b0, s1[i1] * b1);
        out[o] = fmaf(t0, a0, t1 * a1);
    }
}

#if defined(AMPY_X86_SIMD)
AMPY_TARGET_AVX512 static void bil_row_avx512(const float *s0, const float *s1,
                                              const lin_table *tw, float a0, float a1, float *out,
                                              int64_t OW)
{
    const __m512 va0 = _mm512_set1_ps(a0), va1 = _mm512_set1_ps(a1), z = _mm512_setzero_ps();
    for (int64_t o = 0; o < OW; o += 16) {
        const __mmask16 m = OW - o >= 16 ? (__mmask16)0xFFFF
                                         : (__mmask16)((1u << (OW - o)) - 1u);
        const __m512i i0 = _mm512_maskz_loadu_epi32(m, tw->i0 + o);
        const __m512i i1 = _mm512_maskz_loadu_epi32(m, tw->i1 + o);
        const __m512 b0 = _mm512_maskz_loadu_ps(m, tw->l0 + o);
        const __m512 b1 = _mm512_maskz_loadu_ps(m, tw->l1 + o);
        __m512 t0 = _mm512_fmadd_ps(_mm512_mask_i32gather_ps(z, m, i0, s0, 4), b0,
                                    _mm512_mul_ps(_mm512_mask_i32gather_ps(z, m, i1, s0, 4), b1));
        __m512 t1 = _mm512_fmadd_ps(_mm512_mask_i32gather_ps(z, m, i0, s1, 4), b0,
                                    _mm512_mul_ps(_mm512_mask_i32gather_ps(z, m, i1, s1, 4), b1));
        _mm512_mask_storeu_ps(out + o, m, _mm512_fmadd_ps(t0, va0, _mm512_mul_ps(t1, va1)));
    }
}
#endif

#if defined(AMPY_X86_SIMD)
AMPY_TARGET_AVX512 static void bil_row4_avx512(const float *s0, const float *s1,
                                               const lin_table *tw, float a0, float a1,
                                               float *out, int64_t OW, int lane)
{
    const __m512 va0 = _mm512_set1_ps(a0), va1 = _mm512_set1_ps(a1), z = _mm512_setzero_ps();
    for (int64_t o = 0; o < OW; o += 16) {
        const __mmask16 m = OW - o >= 16 ? (__mmask16)0xFFFF
                                         : (__mmask16)((1u << (OW - o)) - 1u);
        const __m512i i0 = _mm512_maskz_loadu_epi32(m, tw->i0 + o);
        const __m512i i1 = _mm512_maskz_loadu_epi32(m, tw->i1 + o);
        const __m512 b0 = _mm512_maskz_loadu_ps(m, tw->l0 + o);
        const __m512 b1 = _mm512_maskz_loadu_ps(m, tw->l1 + o);
        const __m512 w00 = _mm512_mul_ps(va0, b0), w01 = _mm512_mul_ps(va0, b1);
        const __m512 w10 = _mm512_mul_ps(va1, b0), w11 = _mm512_mul_ps(va1, b1);
        const __m512 v00 = _mm512_mask_i32gather_ps(z, m, i0, s0, 4);
        const __m512 v01 = _mm512_mask_i32gather_ps(z, m, i1, s0, 4);
        const __m512 v10 = _mm512_mask_i32gather_ps(z, m, i0, s1, 4);
        const __m512 v11 = _mm512_mask_i32gather_ps(z, m, i1, s1, 4);
        __m512 r;
        if (lane)
            r = _mm512_fmadd_ps(
                v00, w00,
                _mm512_fmadd_ps(v01, w01, _mm512_fmadd_ps(v11, w11, _mm512_mul_ps(v10, w10))));
        else
            r = _mm512_fmadd_ps(
                v11, w11,
                _mm512_fmadd_ps(v10, w10, _mm512_fmadd_ps(v00, w00, _mm512_mul_ps(v01, w01))));
        _mm512_mask_storeu_ps(out + o, m, r);
    }
}
#endif

static bil_row4_fn bil_row4_pick(void)
{
#if defined(AMPY_X86_SIMD)
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512)
        return bil_row4_avx512;
#endif
    return bil_row4;
}

static bil_row_fn bil_row_pick(void)
{
#if defined(AMPY_X86_SIMD)
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512)
        return bil_row_avx512;
#endif
    return bil_row;
}

/* Source row h of plane base as float32: the data itself for float32, else
 * one of the two widened rows in slot (tag: the row each holds), never the
 * slot `keep`. Returns the slot used through *used. */
static const float *bil_src_row(const interp_ctx *c, int64_t base, int64_t h, float *slot[2],
                                int64_t tag[2], int keep, int *used)
{
    if (c->dt == AMPY_FLOAT32)
        return (const float *)c->src + base + h * c->W;
    for (int s = 0; s < 2; s++)
        if (tag[s] == h) {
            *used = s;
            return slot[s];
        }
    int s = keep == 0 ? 1 : 0;
    cnn_widen_half(c->dt, (const uint16_t *)c->src + base + h * c->W, slot[s], c->W);
    tag[s] = h;
    *used = s;
    return slot[s];
}

static void bil_fwd_range(int64_t p0, int64_t p1, void *vc)
{
    const interp_ctx *c = (const interp_ctx *)vc;
    const int half = c->dt != AMPY_FLOAT32;
    float *buf = half ? (float *)malloc((size_t)(2 * c->W + c->OW) * sizeof(float)) : NULL;
    if (half && !buf) {
        interp_fwd_range(p0, p1, vc);
        return;
    }
    const bil_row_fn row = bil_row_pick();
    const bil_row4_fn row4 = bil_row4_pick();
    float *slot[2] = {buf, buf ? buf + c->W : NULL};
    for (int64_t p = p0; p < p1; p++) {
        int64_t tag[2] = {-1, -1};
        const int lane = cl_lane(c, p);
        for (int64_t oh = 0; oh < c->OH; oh++) {
            int u0, u1;
            const float *s0 = bil_src_row(c, p * c->H * c->W, c->th.i0[oh], slot, tag, -1, &u0);
            const float *s1 = bil_src_row(c, p * c->H * c->W, c->th.i1[oh], slot, tag, u0, &u1);
            const int64_t o = (p * c->OH + oh) * c->OW;
            float *out = half ? buf + 2 * c->W : (float *)c->dst + o;
            if (c->cl)
                row4(s0, s1, &c->tw, c->th.l0[oh], c->th.l1[oh], out, c->OW, lane);
            else
                row(s0, s1, &c->tw, c->th.l0[oh], c->th.l1[oh], out, c->OW);
            if (half)
                cnn_narrow_half(c->dt, out, (uint16_t *)c->dst + o, c->OW);
        }
    }
    free(buf);
}

/* d[w0[o]] += (a b0[o]) g[o], d[w1[o]] += (a b1[o]) g[o] for o in order,
 * with the two columns of the current w0 held in registers (w1 is w0 or
 * w0 + 1; any order of w0 stays correct, every column is written back
 * before it is read again). */
static void bil_bwd_pass(float *d, const float *g, float a, const lin_table *tw, int64_t OW,
                         int64_t W)
{
    int64_t cur = tw->i0[0];
    float lo = d[cur], hi = cur + 1 < W ? d[cur + 1] : 0.0f;
    for (int64_t o = 0; o < OW; o++) {
        const int64_t k = tw->i0[o];
        if (k != cur) {
            d[cur] = lo;
            if (k == cur + 1) {
                lo = hi;
            } else {
                if (cur + 1 < W)
                    d[cur + 1] = hi;
                lo = d[k];
            }
            hi = k + 1 < W ? d[k + 1] : 0.0f;
            cur = k;
        }
        lo += a * tw->l0[o] * g[o];
        if (tw->i1[o] == k)
            lo += a * tw->l1[o] * g[o];
        else
            hi += a * tw->l1[o] * g[o];
    }
    d[cur] = lo;
    if (cur + 1 < W)
        d[cur + 1] = hi;
}

/* One output row whose two source rows are one row d: the four adds of
 * each output in the per-element loop's order. */
static void bil_bwd_same_row(float *d, const float *g, float a0, float a1, const lin_table *tw,
                             int64_t OW)
{
    for (int64_t o = 0; o < OW; o++) {
        const float b0 = tw->l0[o], b1 = tw->l1[o];
        d[tw->i0[o]] += a0 * b0 * g[o];
        d[tw->i1[o]] += a0 * b1 * g[o];
        d[tw->i0[o]] += a1 * b0 * g[o];
        d[tw->i1[o]] += a1 * b1 * g[o];
    }
}

/* The table path's backward of planes [p0, p1): sums into c->acc (half
 * data, rounded into dx per plane here) or into dx (float32). */
static void bil_bwd_range(int64_t p0, int64_t p1, void *vc)
{
    const interp_ctx *c = (const interp_ctx *)vc;
    const int half = c->dt != AMPY_FLOAT32;
    const int64_t HW = c->H * c->W;
    float *gbuf = half ? (float *)malloc((size_t)c->OW * sizeof(float)) : NULL;
    if (half && !gbuf) {
        interp_bwd_range(p0, p1, vc);
        for (int64_t i = p0 * HW; i < p1 * HW; i++)
            ampy_cnn_stf(c->dst, c->dt, i, c->acc[i]);
        return;
    }
    for (int64_t p = p0; p < p1; p++) {
        float *acc = half ? c->acc + p * HW : (float *)c->dst + p * HW;
        for (int64_t oh = 0; oh < c->OH; oh++) {
            const int64_t o = (p * c->OH + oh) * c->OW;
            const float *g = (const float *)c->src + o;
            if (half) {
                cnn_widen_half(c->dt, (const uint16_t *)c->src + o, gbuf, c->OW);
                g = gbuf;
            }
            const int64_t h0 = c->th.i0[oh], h1 = c->th.i1[oh];
            const float a0 = c->th.l0[oh], a1 = c->th.l1[oh];
            if (h0 == h1) {
                bil_bwd_same_row(acc + h0 * c->W, g, a0, a1, &c->tw, c->OW);
            } else {
                bil_bwd_pass(acc + h0 * c->W, g, a0, &c->tw, c->OW, c->W);
                bil_bwd_pass(acc + h1 * c->W, g, a1, &c->tw, c->OW, c->W);
            }
        }
        if (half)
            cnn_narrow_half(c->dt, acc, (uint16_t *)c->dst + p * HW, HW);
    }
    free(gbuf);
}

/* The table path: bilinear float32 / half data whose indices fit int32. */
static int bil_tables_apply(const interp_ctx *c)
{
    return c->mode == AMPY_CNN_INTERP_BILINEAR && c->dt != AMPY_FLOAT64 && c->W <= INT32_MAX &&
           c->H <= INT32_MAX;
}

/* torch's bilinear CPU kernel takes its channels-last form for outputs with
 * OH + OW <= 128, and for three channels on one thread (ampy's thread count
 * stands for torch's); its generic form otherwise. */
static int cl_form(int mode, int64_t OH, int64_t OW, int64_t C)
{
    return mode == AMPY_CNN_INTERP_BILINEAR &&
           (OH + OW <= 128 || (C == 3 && ampy_get_num_threads() == 1));
}

/* Lanes of the vector blocks of torch's channels-last kernel for dtype dt
 * (measured against torch 2.13's builds): 32 bytes of float64, and 64 bytes
 * of the other types where the machine has AVX-512 (torch's dispatch picks
 * its AVX-512 kernels there), else 32. */
static int64_t torch_vec_lanes(int dt)
{
    const int wide = dt != AMPY_FLOAT64 && (ampy_cpu_features() & AMPY_CPU_HAS_AVX512);
    return (wide ? 64 : 32) / (int64_t)elem_size(dt);
}

static ampy_status interp_setup(interp_ctx *c, int64_t P, int64_t H, int64_t W, int64_t OH,
                                int64_t OW, int mode, int align, double sh, double sw, int dt,
                                const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    const int64_t C = AMPY_CNN_INTERP_CHANNELS(mode) ? (int64_t)AMPY_CNN_INTERP_CHANNELS(mode) : 1;
    mode = AMPY_CNN_INTERP_MODE(mode);
    if (P < 0 || H < 1 || W < 1 || OH < 1 || OW < 1 ||
        (mode != AMPY_CNN_INTERP_NEAREST && mode != AMPY_CNN_INTERP_BILINEAR) || sh < 0 || sw < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad sizes, mode or scale", fn);
    interp_ctx k = {H, W, OH, OW, mode, align, sh, sw,
                    ampy_cnn_interp_ratio(H, OH, align, sh, dt == AMPY_FLOAT64),
                    ampy_cnn_interp_ratio(W, OW, align, sw, dt == AMPY_FLOAT64),
                    NULL, NULL, NULL, dt, {NULL, NULL, NULL, NULL}, {NULL, NULL, NULL, NULL},
                    cl_form(mode, OH, OW, C), C, 0};
    k.vec_c = C - C % torch_vec_lanes(dt);
    *c = k;
    return AMPY_OK;
}

ampy_status ampy_cnn_interp2d_fwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                  int mode, int align_corners, double scale_h, double scale_w,
                                  const void *x, int dtype, void *y)
{
    interp_ctx c;
    ampy_status s = interp_setup(&c, P, H, W, OH, OW, mode, align_corners, scale_h, scale_w,
                                 dtype, "interpolate");
    if (s != AMPY_OK)
        return s;
    if (!y)
        return ampy_error(AMPY_ERR_VALUE, "interpolate: NULL output");
    c.src = x, c.dst = y;
    void *tables = bil_tables_apply(&c) ? lin_tables(&c) : NULL;
    ampy_parallel_for(P, grain_for(OH * OW), tables ? bil_fwd_range : interp_fwd_range, &c);
    free(tables);
    return AMPY_OK;
}

ampy_status ampy_cnn_interp2d_bwd(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                  int mode, int align_corners, double scale_h, double scale_w,
                                  const void *dy, int dtype, void *dx)
{
    interp_ctx c;
    ampy_status s = interp_setup(&c, P, H, W, OH, OW, mode, align_corners, scale_h, scale_w,
                                 dtype, "interpolate_backward");
    if (s != AMPY_OK)
        return s;
    if (!dx)
        return ampy_error(AMPY_ERR_VALUE, "interpolate_backward: NULL output");
    int64_t n = P * H * W;
    c.src = dy, c.dst = dx;
    if (ampy_dtype_is_half(dtype)) {
        c.acc = (float *)calloc((size_t)(n > 0 ? n : 1), sizeof(float));
        if (!c.acc)
            return ampy_error(AMPY_ERR_NOMEM, "interpolate_backward: out of memory");
    } else {
        memset(dx, 0, (size_t)n * elem_size(dtype));
    }
    void *tables = bil_tables_apply(&c) ? lin_tables(&c) : NULL;
    ampy_parallel_for(P, grain_for(OH * OW), tables ? bil_bwd_range : interp_bwd_range, &c);
    if (c.acc && !tables) {
        for (int64_t i = 0; i < n; i++)
            ampy_cnn_stf(dx, dtype, i, c.acc[i]);
    }
    free(c.acc);
    free(tables);
    return AMPY_OK;
}
