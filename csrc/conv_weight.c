/* conv_weight.c — the weight and bias gradients of conv.c's convolution
 * (contracts in ampy/conv.h).
 *
 * dw[g] = sum over the batch of dy[n, g] @ col[n, g]^T. A block of images is
 * unfolded as for the forward, dy's rows of the block are laid side by side
 * (nb * OH * OW columns), and one GEMM per block takes the whole block as its
 * K dimension, accumulating into a float32 (float64) dw with beta = 1, so the
 * sum over the batch is never rounded to half precision; dw is rounded once
 * at the end.
 */
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/cast.h"
#include "ampy/conv.h"
#include "ampy/conv_math.h"
#include "ampy/elem.h"
#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "conv_impl.h"
#include "conv_weight.h"

/* dy's block [n0, n0 + nb) as O rows of nb * P columns. */
static void gather_dy(const char *dy, int64_t nb, int64_t O, int64_t P, size_t es, char *out)
{
    for (int64_t n = 0; n < nb; n++)
        for (int64_t o = 0; o < O; o++)
            memcpy(out + (size_t)(o * nb * P + n * P) * es, dy + (size_t)((n * O + o) * P) * es,
                   (size_t)P * es);
}

static ampy_status weight_blocks(const ampy_conv2d_geom *g, ampy_dtype dtype, const void *x,
                                 const int64_t *xs, const void *dy, void *acc, ampy_dtype adt)
{
    size_t es = ampy_dtype_size(dtype);
    int64_t G = g->groups, Cg = g->C / G, Og = g->O / G, P = g->OH * g->OW;
    int64_t Kg = Cg * g->KH * g->KW;
    int64_t NB = ampy_conv_block_images(g, es);
    size_t cbytes = (size_t)(g->C * g->KH * g->KW) * (size_t)(NB * P) * es;
    size_t dbytes = NB > 1 ? (size_t)(g->O * NB * P) * es : 0;
    char *col = ampy_alloc(cbytes), *dyb = dbytes ? ampy_alloc(dbytes) : NULL;
    if (!col || (dbytes && !dyb)) {
        ampy_free(col, cbytes);
        ampy_free(dyb, dbytes);
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate %zu bytes", cbytes + dbytes);
    }
    ampy_status s = AMPY_OK;
    for (int64_t n0 = 0; n0 < g->N && s == AMPY_OK; n0 += NB) {
        int64_t nb = g->N - n0 < NB ? g->N - n0 : NB, ld = nb * P;
        ampy_conv_im2col_block(g, (const char *)x + (size_t)(n0 * xs[0]) * es, xs, es, nb, col,
                               ld);
        const char *a = (const char *)dy + (size_t)(n0 * g->O * P) * es;
        if (nb > 1) {
            gather_dy(a, nb, g->O, P, es, dyb);
            a = dyb;
        }
        /* dw[g]^T (Kg x Og) = col[g] @ dy[g]^T: this orientation (the long K
         * against the short Og as N) runs faster than dy @ col^T; the result
         * is written through dw's transposed strides. */
        int64_t shape[1] = {G}, a_bs[1] = {Kg * ld}, b_bs[1] = {Og * ld}, c_bs[1] = {Og * Kg};
        s = ampy_gemm_batched(1, shape, Kg, Og, ld, 1.0, col, dtype, a_bs, ld, 1, a, dtype, b_bs,
                              1, ld, n0 == 0 ? 0.0 : 1.0, acc, adt, c_bs, 1, Kg);
    }
    ampy_free(col, cbytes);
    ampy_free(dyb, dbytes);
    return s;
}

/* ---- the path choice ----------------------------------------------------------- */
enum { PATH_AUTO, PATH_IM2COL, PATH_SHIFTED };
static const char *const path_names[] = {"auto", "im2col", "shifted"};
static int path_choice = PATH_AUTO;

ampy_status ampy_conv_wgrad_set_path(const char *name)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, path_names[i]) == 0) {
            path_choice = i;
            return AMPY_OK;
        }
    return ampy_error(AMPY_ERR_VALUE, "conv2d: unknown weight-gradient path '%s' (expected "
                      "auto, im2col or shifted)", name ? name : "(null)");
}

/* Where the shifted-view kernel beat the im2col GEMM (1 thread, a loaded
 * machine, ResNet-18 layers at batch 32, bench_conv.py --split): every
 * unit-stride layer but bfloat16 1x1, and the strided ones with outputs of
 * 10x10 or more (64x56x56 -> 128, 3x3 / 2: float32 25 vs 43 ms, bfloat16 14
 * vs 20 ms; the 1x1 / 2 in float32 6.1 vs 7.0 ms); on the 7x7 output of
 * 256x14x14 -> 512, 3x3 / 2 the GEMM won (float32 27 vs 30 ms, bfloat16 14
 * vs 17 ms), and bfloat16 1x1 kernels (2.9 vs 3.4 ms). */
static int shifted_wins(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    if ((g->sh > 1 || g->sw > 1) && g->OH * g->OW < 100)
        return 0;
    return dtype == AMPY_FLOAT32 || g->KH * g->KW > 1;
}

const char *ampy_conv_wgrad_path(const ampy_conv2d_geom *g, ampy_dtype dtype)
{
    if (path_choice == PATH_IM2COL || !ampy_conv_wgrad_shifted_ok(g, dtype))
        return "im2col";
    return path_choice == PATH_SHIFTED || shifted_wins(g, dtype) ? "shifted" : "im2col";
}

ampy_status ampy_conv2d_backward_weight(const ampy_conv2d_geom *g, ampy_dtype dtype,
                                        const void *x, const int64_t *xs, const void *dy,
                                        void *dw)
{
    ampy_status s = ampy_conv2d_check(g);
    if (s != AMPY_OK)
        return s;
    if (dtype != AMPY_FLOAT32 && dtype != AMPY_FLOAT64 && !ampy_dtype_is_half(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "conv2d: unsupported dtype");
    int64_t n = g->O * (g->C / g->groups) * g->KH * g->KW;
    size_t es = ampy_dtype_size(dtype);
    if (g->N * g->OH * g->OW == 0) {
        memset(dw, 0, (size_t)n * es);
        return AMPY_OK;
    }
    if (strcmp(ampy_conv_wgrad_path(g, dtype), "shifted") == 0) {
        int fallback = 0;
        s = ampy_conv_wgrad_shifted(g, dtype, x, xs, dy, dw, &fallback);
        if (s != AMPY_OK || !fallback)
            return s;
    }
    if (!ampy_dtype_is_half(dtype))
        return weight_blocks(g, dtype, x, xs, dy, dw, dtype);
    float *acc = ampy_alloc((size_t)n * sizeof(float));
    if (!acc)
        return ampy_error(AMPY_ERR_NOMEM, "conv2d: cannot allocate the weight accumulator");
    s = weight_blocks(g, dtype, x, xs, dy, acc, AMPY_FLOAT32);
    if (s == AMPY_OK)
        s = dtype == AMPY_FLOAT16 ? ampy_cast_f32_to_f16(acc, dw, n)
                                  : ampy_cast_f32_to_bf16(acc, dw, n);
    ampy_free(acc, (size_t)n * sizeof(float));
    return s;
}

/* ---- bias gradient ------------------------------------------------------------ */
typedef struct {
    int64_t N, O, P;
    ampy_dtype dtype;
    const void *dy;
    void *db;
} bias_ctx;

#define BIAS_LANES 4   /* channels summed side by side        */
#define BIAS_SEG 256   /* elements of a plane row per pass    */

/* out[i] = dy element `base + i` as a double (exact), i < n. */
static void load_run(const void *p, int64_t base, int64_t n, ampy_dtype dt, double *out)
{
    switch (dt) {
    case AMPY_FLOAT16:
        for (int64_t i = 0; i < n; i++)
            out[i] = ampy_f16_to_f32(((const uint16_t *)p)[base + i]);
        break;
    case AMPY_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            out[i] = ampy_bf16_to_f32(((const uint16_t *)p)[base + i]);
        break;
    case AMPY_FLOAT32:
        for (int64_t i = 0; i < n; i++)
            out[i] = ((const float *)p)[base + i];
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            out[i] = ((const double *)p)[base + i];
        break;
    }
}

static void store_bias(void *db, int64_t o, double acc, ampy_dtype dt)
{
    switch (dt) {
    case AMPY_FLOAT16: ((uint16_t *)db)[o] = ampy_f64_to_f16(acc); break;
    case AMPY_BFLOAT16: ((uint16_t *)db)[o] = ampy_f64_to_bf16(acc); break;
    case AMPY_FLOAT32: ((float *)db)[o] = (float)acc; break;
    default: ((double *)db)[o] = acc; break;
    }
}

/* db[o] = the float64 sum over n, then positions ascending, of dy[n][o],
 * rounded once. BIAS_LANES channels are summed side by side, each in its
 * own chain in that same order (the same bits as one channel at a time;
 * the independent chains hide the add latency). */
static void bias_range(int64_t begin, int64_t end, void *vctx)
{
    const bias_ctx *c = vctx;
    double buf[BIAS_LANES][BIAS_SEG];
    for (int64_t o0 = begin; o0 < end; o0 += BIAS_LANES) {
        int64_t on = end - o0 < BIAS_LANES ? end - o0 : BIAS_LANES;
        double acc[BIAS_LANES] = {0.0};
        memset(buf, 0, sizeof buf);
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t i0 = 0; i0 < c->P; i0 += BIAS_SEG) {
                int64_t len = c->P - i0 < BIAS_SEG ? c->P - i0 : BIAS_SEG;
                for (int64_t k = 0; k < on; k++)
                    load_run(c->dy, (n * c->O + o0 + k) * c->P + i0, len, c->dtype, buf[k]);
                for (int64_t i = 0; i < len; i++)
                    for (int64_t k = 0; k < BIAS_LANES; k++)
                        acc[k] += buf[k][i];
            }
        for (int64_t k = 0; k < on; k++)
            store_bias(c->db, o0 + k, acc[k], c->dtype);
    }
}

ampy_status ampy_conv_backward_bias(int64_t N, int64_t O, int64_t P, ampy_dtype dtype,
                                    const void *dy, void *db)
{
    if (N < 0 || O < 0 || P < 0)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: negative size");
    if (dtype != AMPY_FLOAT32 && dtype != AMPY_FLOAT64 && !ampy_dtype_is_half(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "conv2d: unsupported dtype");
    bias_ctx c = {N, O, P, dtype, dy, db};
    int64_t per = N * P > 0 ? N * P : 1;
    ampy_parallel_for(O, per >= 32768 ? 1 : 32768 / per, bias_range, &c);
    return AMPY_OK;
}
