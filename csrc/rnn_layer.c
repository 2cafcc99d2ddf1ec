/* rnn_layer.c — one recurrent layer of one direction over all T steps
 * (ampy/rnn.h: ampy_rnn_layer_fwd / _bwd) on the CPU.
 *
 * Forward: per step one hidden GEMM gh = h W_hh^T + b_hh (ampy_gemm_bias)
 * and the fused cell of rnn.c, writing the step's output, cell state and
 * activations straight into the layer's (T, B, *) arrays.
 *
 * Backward: the time loop runs only what is sequential: the cell backward
 * (into the step's rows of one (T, B, G*H) gate-gradient array) and the
 * gradient of the previous hidden state, dh_{t-1} = dy_{t-1} + dgh_t W_hh,
 * computed as its transpose W_hh^T dgh_t^T from a row-major copy of W_hh^T
 * made once per call. Both per-step products put the weight in the A slot
 * (read in place, long side M = G*H or H) and the B = 32-ish rows in the
 * packed B slot: at B << G*H that packs far less than the row form. Their
 * float32 results go through a scratch and are transposed into place with
 * the bias / the addend (one rounding). After the loop the weight gradient
 * is ONE GEMM over all T*B rows, dW_hh = dGh^T Hprev, and the bias gradient
 * dGh's column sums (float32 accumulation, one rounding for the halves).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/gemm.h"
#include "ampy/rnn.h"
#include "ampy/rnn_math.h"
#include "rnn_kernel.h"
#include "rnn_layer_packed.h"

static size_t esize(int dt) { return dt == AMPY_FLOAT64 ? 8 : dt == AMPY_FLOAT32 ? 4 : 2; }

static _Atomic int packed_on = 1;

int ampy_rnn_layer_set_packed(int on) { return atomic_exchange(&packed_on, on != 0); }

/* The pack kind of a layer's K-term products of dtype dt, or -1: the
 * per-step GEMM path. */
static int layer_kind(int dt, int64_t K)
{
    return atomic_load(&packed_on) ? ampy_rnn_pack_kind(dt, K) : -1;
}

int ampy_rnn_layer_packed(int dtype, int64_t K) { return layer_kind(dtype, K) >= 0; }

static char *at(const void *p, int64_t elems, int dt)
{
    return (char *)p + (size_t)elems * esize(dt);
}

/* Time index of the s-th step. */
static int64_t tix(int64_t s, int64_t T, int reverse) { return reverse ? T - 1 - s : s; }

static float ld(const void *p, int dt, int64_t i)
{
    if (dt == AMPY_FLOAT32)
        return ((const float *)p)[i];
    const uint16_t v = ((const uint16_t *)p)[i];
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(v) : ampy_bf16_to_f32(v);
}

/* gh (B, G*H) = h (B, H) @ W_hh^T + b_hh, computed as its transpose
 * gh^T = W_hh h^T (M = G*H, N = B, K = H) into the scratch t (G*H, B):
 * the weight is the row-major A, read in place, and only the small h is
 * packed. The scratch is float32 (float64 for float64) and the bias is added
 * while it is transposed into gh: one rounding, as a bias epilogue. */
static ampy_status hidden_gemm(int64_t B, int64_t GH, int64_t H, int dt, const void *h,
                               const void *w_hh, const void *b_hh, void *t, void *gh)
{
    const int tdt = dt == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    ampy_status st = ampy_gemm(1, GH, B, H, 1.0, w_hh, dt, 0, H, 1, h, dt, 0, 1, H, 0.0, t, tdt,
                               0, B, 1);
    if (st != AMPY_OK)
        return st;
    for (int64_t g0 = 0; g0 < GH; g0 += 64) {
        const int64_t g1 = g0 + 64 < GH ? g0 + 64 : GH;
        for (int64_t b = 0; b < B; b++) {
            if (dt == AMPY_FLOAT64) {
                const double *tt = (const double *)t, *bb = (const double *)b_hh;
                double *o = (double *)gh + b * GH;
                for (int64_t g = g0; g < g1; g++)
                    o[g] = bb ? tt[g * B + b] + bb[g] : tt[g * B + b];
            } else if (dt == AMPY_FLOAT32) {
                const float *tt = (const float *)t, *bb = (const float *)b_hh;
                float *o = (float *)gh + b * GH;
                for (int64_t g = g0; g < g1; g++)
                    o[g] = bb ? tt[g * B + b] + bb[g] : tt[g * B + b];
            } else {
                const float *tt = (const float *)t;
                uint16_t *o = (uint16_t *)gh + b * GH;
                for (int64_t g = g0; g < g1; g++) {
                    const float v = tt[g * B + b] + (b_hh ? ld(b_hh, dt, g) : 0.0f);
                    o[g] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
                }
            }
        }
    }
    return AMPY_OK;
}

ampy_status ampy_rnn_layer_fwd(int mode, int reverse, int64_t T, int64_t B, int64_t H, int dt,
                               const void *gx, const void *w_hh, const void *b_hh,
                               const void *h0, const void *c0, void *y, void *cs, void *ws)
{
    ampy_status st = ampy_rnn_check_args(mode, B, H, dt);
    if (st != AMPY_OK || T < 0)
        return ampy_error(st != AMPY_OK ? st : AMPY_ERR_VALUE,
                          "rnn layer: bad mode, size or dtype");
    const int64_t G = ampy_rnn_gates(mode), GH = G * H, S = ampy_rnn_saved(mode);
    if (T == 0 || B == 0 || H == 0)
        return AMPY_OK;
    if (!gx || !w_hh || !h0 || !y || (mode == AMPY_RNN_LSTM && (!c0 || !cs)))
        return ampy_error(AMPY_ERR_VALUE, "rnn layer: a required array is missing");
    const int kind = layer_kind(dt, H);
    if (kind >= 0)
        return ampy_rnn_layer_fwd_packed(kind, mode, reverse, T, B, H, dt, gx, w_hh, b_hh, h0,
                                         c0, y, cs, ws);
    char *gh = (char *)malloc((size_t)(B * GH) * (esize(dt) + 8));
    if (!gh)
        return ampy_error(AMPY_ERR_NOMEM, "rnn layer: out of memory");
    const int wdt = dt == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    const void *h = h0, *c = c0;
    for (int64_t s = 0; s < T && st == AMPY_OK; s++) {
        const int64_t t = tix(s, T, reverse);
        st = hidden_gemm(B, GH, H, dt, h, w_hh, b_hh, gh + (size_t)(B * GH) * esize(dt), gh);
        if (st != AMPY_OK)
            break;
        void *hy = at(y, t * B * H, dt), *cy = cs ? at(cs, t * B * H, dt) : NULL;
        void *wst = ws ? at(ws, t * B * S * H, wdt) : NULL;
        st = ampy_rnn_cell_fwd(mode, B, H, dt, at(gx, t * B * GH, dt), gh, h, c, hy, cy, wst);
        h = hy;
        c = cy;
    }
    free(gh);
    return st;
}

/* d (n elements) = a + b in dt (b may be NULL: d = a). */
static void add_into(int dt, int64_t n, const void *a, const void *b, void *d)
{
    if (!b) {
        memmove(d, a, (size_t)n * esize(dt));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        if (dt == AMPY_FLOAT64) {
            ((double *)d)[i] = ((const double *)a)[i] + ((const double *)b)[i];
        } else if (dt == AMPY_FLOAT32) {
            ((float *)d)[i] = ((const float *)a)[i] + ((const float *)b)[i];
        } else if (dt == AMPY_FLOAT16) {
            const uint16_t *ua = (const uint16_t *)a, *ub = (const uint16_t *)b;
            ((uint16_t *)d)[i] = ampy_f32_to_f16(ampy_f16_to_f32(ua[i]) + ampy_f16_to_f32(ub[i]));
        } else {
            const uint16_t *ua = (const uint16_t *)a, *ub = (const uint16_t *)b;
            ((uint16_t *)d)[i] =
                ampy_f32_to_bf16(ampy_bf16_to_f32(ua[i]) + ampy_bf16_to_f32(ub[i]));
        }
    }
}

typedef struct bwd_bufs {
    void *dh, *dc, *dc2, *direct, *wt, *t;
} bwd_bufs;

/* dprev (B, H) = dgh_t (B, G*H) @ W_hh (+ add (B, H), or NULL), computed as
 * its transpose W_hh^T dgh_t^T (wt = W_hh^T stored row-major (H, G*H)) into
 * the float32 (float64) scratch t (H, B), then transposed with the addend:
 * one rounding. */
static ampy_status prev_gemm(int64_t B, int64_t GH, int64_t H, int dt, const void *dgh,
                             const void *wt, const void *add, void *t, void *dprev)
{
    const int tdt = dt == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    ampy_status st = ampy_gemm(1, H, B, GH, 1.0, wt, dt, 0, GH, 1, dgh, dt, 0, 1, GH, 0.0, t,
                               tdt, 0, B, 1);
    if (st != AMPY_OK)
        return st;
    for (int64_t b = 0; b < B; b++) {
        if (dt == AMPY_FLOAT64) {
            const double *tt = (const double *)t, *ad = (const double *)add;
            double *o = (double *)dprev + b * H;
            for (int64_t j = 0; j < H; j++)
                o[j] = ad ? tt[j * B + b] + ad[b * H + j] : tt[j * B + b];
        } else if (dt == AMPY_FLOAT32) {
            const float *tt = (const float *)t, *ad = (const float *)add;
            float *o = (float *)dprev + b * H;
            for (int64_t j = 0; j < H; j++)
                o[j] = ad ? tt[j * B + b] + ad[b * H + j] : tt[j * B + b];
        } else {
            const float *tt = (const float *)t;
            uint16_t *o = (uint16_t *)dprev + b * H;
            for (int64_t j = 0; j < H; j++) {
                const float v = tt[j * B + b] + (add ? ld(add, dt, b * H + j) : 0.0f);
                o[j] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
            }
        }
    }
    return AMPY_OK;
}

/* wt (H, GH) = w (GH, H)^T, in blocks of 32 x 32, for element type E. */
#define TRANSPOSE(NAME, E)                                                                    \
    static void NAME(int64_t GH, int64_t H, const E *w, E *wt)                                \
    {                                                                                         \
        for (int64_t g0 = 0; g0 < GH; g0 += 32)                                               \
            for (int64_t h0 = 0; h0 < H; h0 += 32)                                            \
                for (int64_t g = g0; g < GH && g < g0 + 32; g++)                              \
                    for (int64_t h = h0; h < H && h < h0 + 32; h++)                           \
                        wt[h * GH + g] = w[g * H + h];                                        \
    }
TRANSPOSE(transpose64, uint64_t)
TRANSPOSE(transpose32, uint32_t)
TRANSPOSE(transpose16, uint16_t)

static void transpose(int dt, int64_t GH, int64_t H, const void *w, void *wt)
{
    if (esize(dt) == 8)
        transpose64(GH, H, (const uint64_t *)w, (uint64_t *)wt);
    else if (esize(dt) == 4)
        transpose32(GH, H, (const uint32_t *)w, (uint32_t *)wt);
    else
        transpose16(GH, H, (const uint16_t *)w, (uint16_t *)wt);
}

/* The time loop of the backward: dG (and dGh for GRU) for every step, and
 * the gradients of h0 / c0. */
static ampy_status bwd_steps(const ampy_rnn_layer_bwd_args *a, bwd_bufs *bb)
{
    const int mode = a->mode, dt = a->dtype;
    const int64_t T = a->T, B = a->B, H = a->H, BH = B * H;
    const int64_t GH = ampy_rnn_gates(mode) * H, S = ampy_rnn_saved(mode);
    const int wdt = dt == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    const int gru = mode == AMPY_RNN_GRU, lstm = mode == AMPY_RNN_LSTM;
    void *dgh_all = gru ? a->dgh : a->dgx;
    const int64_t t_last = tix(T - 1, T, a->reverse);
    if (a->dy || a->dhT)
        add_into(dt, BH, a->dy ? at(a->dy, t_last * BH, dt) : a->dhT,
                 a->dy ? a->dhT : NULL, bb->dh);
    else
        memset(bb->dh, 0, (size_t)BH * esize(dt));
    const void *dc = lstm ? a->dcT : NULL;
    for (int64_t s = T - 1; s >= 0; s--) {
        const int64_t t = tix(s, T, a->reverse);
        const int64_t tp = s > 0 ? tix(s - 1, T, a->reverse) : -1;
        const void *hprev = s > 0 ? at(a->y, tp * BH, dt) : a->h0;
        const void *cprev = lstm ? (s > 0 ? at(a->cs, tp * BH, dt) : a->c0) : NULL;
        void *dcx = lstm && (s > 0 || a->dc0) ? (s > 0 ? bb->dc : a->dc0) : NULL;
        ampy_status st = ampy_rnn_cell_bwd(mode, B, H, dt, at(a->ws, t * B * S * H, wdt),
                                           hprev, cprev, bb->dh, dc,
                                           at(a->dgx, t * B * GH, dt),
                                           gru ? at(a->dgh, t * B * GH, dt) : NULL,
                                           bb->direct, dcx);
        if (st != AMPY_OK)
            return st;
        if (dcx == bb->dc) {
            void *tmp = bb->dc;
            bb->dc = bb->dc2;
            bb->dc2 = tmp;
            dc = dcx;
        }
        void *dprev = s > 0 ? bb->dh : a->dh0;
        if (!dprev)
            continue;
        const void *dyp = s > 0 && a->dy ? at(a->dy, tp * BH, dt) : NULL;
        const void *add = dyp;
        if (gru) {
            add_into(dt, BH, bb->direct, dyp, bb->direct);
            add = bb->direct;
        }
        st = prev_gemm(B, GH, H, dt, at(dgh_all, t * B * GH, dt), bb->wt, add, bb->t, dprev);
        if (st != AMPY_OK)
            return st;
    }
    return AMPY_OK;
}

/* db (n) = the column sums of x (rows, n), accumulated in float32 for the
 * half types (one rounding) and in the storage type otherwise. */
static ampy_status column_sums(int dt, int64_t rows, int64_t n, const void *x, void *db)
{
    if (dt == AMPY_FLOAT64) {
        double *acc = (double *)db;
        memset(acc, 0, (size_t)n * sizeof(double));
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++)
                acc[j] += ((const double *)x)[r * n + j];
        return AMPY_OK;
    }
    float *acc = dt == AMPY_FLOAT32 ? (float *)db : (float *)malloc((size_t)n * sizeof(float));
    if (!acc)
        return ampy_error(AMPY_ERR_NOMEM, "rnn layer backward: out of memory");
    memset(acc, 0, (size_t)n * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        if (dt == AMPY_FLOAT32) {
            const float *xr = (const float *)x + r * n;
            for (int64_t j = 0; j < n; j++)
                acc[j] += xr[j];
        } else {
            const uint16_t *xr = (const uint16_t *)x + r * n;
            for (int64_t j = 0; j < n; j++)
                acc[j] += dt == AMPY_FLOAT16 ? ampy_f16_to_f32(xr[j]) : ampy_bf16_to_f32(xr[j]);
        }
    }
    if (dt != AMPY_FLOAT32) {
        for (int64_t j = 0; j < n; j++)
            ((uint16_t *)db)[j] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(acc[j])
                                                     : ampy_f32_to_bf16(acc[j]);
        free(acc);
    }
    return AMPY_OK;
}

/* dW_hh = dGh^T Hprev and db_hh = dGh's column sums, over all T*B rows. */
static ampy_status weight_grads(const ampy_rnn_layer_bwd_args *a, void *hprev)
{
    const int dt = a->dtype;
    const int64_t T = a->T, B = a->B, H = a->H, BH = B * H, R = T * B;
    const int64_t GH = ampy_rnn_gates(a->mode) * H;
    const void *dgh = a->mode == AMPY_RNN_GRU ? a->dgh : a->dgx;
    ampy_status st = AMPY_OK;
    if (a->dw_hh) {
        /* the rows of Hprev in time order: h0 first (forward) or last (reverse) */
        const size_t row = (size_t)BH * esize(dt);
        if (a->reverse) {
            memcpy(hprev, at(a->y, BH, dt), (size_t)(T - 1) * row);
            memcpy(at(hprev, (T - 1) * BH, dt), a->h0, row);
        } else {
            memcpy(hprev, a->h0, row);
            memcpy(at(hprev, BH, dt), a->y, (size_t)(T - 1) * row);
        }
        st = ampy_gemm(1, GH, H, R, 1.0, dgh, dt, 0, 1, GH, hprev, dt, 0, H, 1, 0.0, a->dw_hh,
                       dt, 0, H, 1);
    }
    if (st == AMPY_OK && a->db_hh)
        st = column_sums(dt, R, GH, dgh, a->db_hh);
    return st;
}

ampy_status ampy_rnn_layer_bwd(const ampy_rnn_layer_bwd_args *a)
{
    ampy_status st = ampy_rnn_check_args(a->mode, a->B, a->H, a->dtype);
    if (st != AMPY_OK || a->T < 0)
        return ampy_error(st != AMPY_OK ? st : AMPY_ERR_VALUE,
                          "rnn layer backward: bad mode, size or dtype");
    const int dt = a->dtype, lstm = a->mode == AMPY_RNN_LSTM, gru = a->mode == AMPY_RNN_GRU;
    if (a->T == 0 || a->B == 0 || a->H == 0)
        return AMPY_OK;
    if (!a->ws || !a->y || !a->h0 || !a->w_hh || !a->dgx || (gru && !a->dgh) ||
        (lstm && (!a->cs || !a->c0)))
        return ampy_error(AMPY_ERR_VALUE, "rnn layer backward: a required array is missing");
    const size_t bh = (size_t)(a->B * a->H) * esize(dt);
    const int64_t GH = ampy_rnn_gates(a->mode) * a->H;
    const size_t wsz = (size_t)(GH * a->H) * esize(dt);
    const size_t hp = a->dw_hh ? (size_t)a->T * bh : 0;
    const size_t tsz = (size_t)(a->B * a->H) * 8;
    char *buf = (char *)malloc(4 * bh + wsz + hp + tsz);
    if (!buf)
        return ampy_error(AMPY_ERR_NOMEM, "rnn layer backward: out of memory");
    bwd_bufs bb = {buf, buf + bh, buf + 2 * bh, buf + 3 * bh, buf + 4 * bh,
                   buf + 4 * bh + wsz + hp};
    const int kind = layer_kind(dt, GH);
    if (kind >= 0) {
        st = ampy_rnn_layer_bwd_steps_packed(kind, a);
    } else {
        transpose(dt, GH, a->H, a->w_hh, bb.wt);
        st = bwd_steps(a, &bb);
    }
    if (st == AMPY_OK)
        st = weight_grads(a, buf + 4 * bh + wsz);
    free(buf);
    return st;
}
