/* rnn_layer_packed.c — the time loops of one recurrent layer (ampy/rnn.h's
 * ampy_rnn_layer_fwd / _bwd) with the hidden weight packed once per call
 * and one parallel region over all steps (csrc/rnn_team.c).
 *
 * The hidden units are split into `parts` ranges of whole 16-unit blocks;
 * the thread running a part computes, per step, the gate columns of its own
 * units (i, f, g, o of units j0..j1: four panel ranges of the packed W_hh^T)
 * and then the cell of those units for every row, so the only sync per step
 * is the barrier before the next step's product reads the whole new h.
 * Each part packs its own panels in the first phase, on the core that then
 * reads them. The backward splits the same units: a part runs the cell
 * backward of its units (their gate-gradient columns) and, after the
 * barrier, the columns of its units of dh_{t-1} = dG_t W_hh (W_hh packed by
 * its own columns, K = G*H), whose next cell backward reads only those
 * columns again: one barrier per step as well.
 * Roundings are the GEMM path's (csrc/rnn_layer.c): float32 sums, the bias
 * or the addend added in float32, one rounding to the dtype.
 */
#include <stdlib.h>
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/parallel.h"
#include "ampy/rnn.h"
#include "ampy/rnn_math.h"
#include "rnn_kernel.h"
#include "rnn_layer_packed.h"
#include "rnn_team.h"
#include "rnn_units.h"

#define MIN_PART_FLOPS ((int64_t)1 << 20) /* per step and part: below, fewer parts */

static size_t esize(int dt) { return dt == AMPY_FLOAT32 ? 4 : 2; }
static char *at(const void *p, int64_t elems, int dt)
{
    return (char *)p + (size_t)elems * esize(dt);
}
static int64_t tix(int64_t s, int64_t T, int reverse) { return reverse ? T - 1 - s : s; }
static int64_t round16(int64_t x) { return (x + 15) / 16 * 16; }

static float ld(const void *p, int dt, int64_t i)
{
    if (dt == AMPY_FLOAT32)
        return ((const float *)p)[i];
    const uint16_t v = ((const uint16_t *)p)[i];
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(v) : ampy_bf16_to_f32(v);
}

static void st(void *p, int dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = dt == AMPY_FLOAT16 ? ampy_f32_to_f16(v) : ampy_f32_to_bf16(v);
}

/* v rounded to dt and read back (the value a stored dt array would hold). */
static float through(int dt, float v)
{
    if (dt == AMPY_FLOAT32)
        return v;
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(ampy_f32_to_f16(v))
                              : ampy_bf16_to_f32(ampy_f32_to_bf16(v));
}

/* Parts for G*H gate columns over B rows: at most the threads and the
 * 16-unit blocks, each worth MIN_PART_FLOPS per step. */
static int plan_parts(int64_t B, int64_t G, int64_t H)
{
    const int64_t blocks = (H + 15) / 16, flops = 2 * B * G * H * H;
    int64_t p = ampy_get_num_threads();
    if (p > blocks)
        p = blocks;
    if (p > flops / MIN_PART_FLOPS)
        p = flops / MIN_PART_FLOPS;
    if (p > RNN_TEAM_MAX)
        p = RNN_TEAM_MAX;
    return p < 1 ? 1 : (int)p;
}

/* Units [*u0, *u1) of part p of P. */
static void part_units(int64_t H, int P, int p, int64_t *u0, int64_t *u1)
{
    const int64_t blocks = (H + 15) / 16;
    *u0 = blocks * p / P * 16;
    const int64_t e = blocks * (p + 1) / P * 16;
    *u1 = e < H ? e : H;
}

/* ---- per-thread scratch -------------------------------------------------- */
typedef struct slots {
    int n;
    size_t each; /* floats per slot */
    float *mem;
} slots;

static ampy_status slots_alloc(slots *s, int n, size_t each)
{
    s->n = n;
    s->each = (each + 15) / 16 * 16;
    s->mem = (float *)calloc((size_t)n * s->each, sizeof(float));
    return s->mem ? AMPY_OK : ampy_error(AMPY_ERR_NOMEM, "rnn layer: out of memory");
}
static float *slot(const slots *s, int i) { return s->mem + (size_t)i * s->each; }

/* A operand of the kernel: dt rows as the kind reads them (float16 widened). */
static const void *kernel_rows(int dt, const void *x, int64_t n, float *wide)
{
    if (dt != AMPY_FLOAT16)
        return x;
    for (int64_t i = 0; i < n; i++)
        wide[i] = ampy_f16_to_f32(((const uint16_t *)x)[i]);
    return wide;
}

/* ---- forward --------------------------------------------------------------- */
typedef struct fwd_ctx {
    int mode, reverse, dt, P;
    int64_t T, B, H, G, nwmax;
    const void *gx, *w_hh, *b_hh, *h0, *c0;
    void *y, *cs, *ws;
    rnn_pack pk;
    slots sl;
} fwd_ctx;

/* gh of a part's columns = their sums + b_hh, rounded to dt: the GEMM
 * path's bias epilogue. Gate k of unit u0 + u of row b at
 * out[b * ldo + k * nw + u], u < n. */
static void add_bias(const fwd_ctx *x, float *out, int64_t ldo, int64_t nw, int64_t u0,
                     int64_t n)
{
    const int dt = x->dt;
    if (dt == AMPY_FLOAT32 && !x->b_hh)
        return;
    for (int64_t b = 0; b < x->B; b++)
        for (int64_t k = 0; k < x->G; k++) {
            float *restrict o = out + b * ldo + k * nw;
            const int64_t j = k * x->H + u0;
            if (dt == AMPY_FLOAT32) {
                const float *restrict bb = (const float *)x->b_hh + j;
                for (int64_t u = 0; u < n; u++)
                    o[u] += bb[u];
            } else {
                for (int64_t u = 0; u < n; u++)
                    o[u] = through(dt, o[u] + (x->b_hh ? ld(x->b_hh, dt, j + u) : 0.0f));
            }
        }
}

static ampy_status fwd_part(void *vc, int64_t s, int p, int si)
{
    const fwd_ctx *x = (const fwd_ctx *)vc;
    const int dt = x->dt;
    const int64_t B = x->B, H = x->H, G = x->G, GH = G * H, ppg = (H + 15) / 16;
    int64_t u0, u1;
    part_units(H, x->P, p, &u0, &u1);
    const int64_t nw = round16(u1 - u0), qa = u0 / 16, qn = nw / 16, ldo = G * nw;
    if (s == 0)
        for (int64_t k = 0; k < G; k++)
            ampy_rnn_pack(&x->pk, dt, x->w_hh, H, H * H, H, 1, k * ppg + qa, k * ppg + qa + qn);
    float *out = slot(&x->sl, si), *cell = out + B * ldo, *wide = cell + (G + 2) * x->nwmax;
    const int64_t t = tix(s, x->T, x->reverse), tp = s > 0 ? tix(s - 1, x->T, x->reverse) : 0;
    const void *hprev = s > 0 ? at(x->y, tp * B * H, dt) : x->h0;
    const void *a = kernel_rows(dt, hprev, B * H, wide);
    for (int64_t k = 0; k < G; k++)
        ampy_rnn_kernel(&x->pk, k * ppg + qa, k * ppg + qa + qn, B, a, H, out + k * nw, ldo);
    add_bias(x, out, ldo, nw, u0, u1 - u0);
    const int lstm = x->mode == AMPY_RNN_LSTM;
    const int64_t S = ampy_rnn_saved(x->mode);
    rnn_units_fwd f = {.mode = x->mode, .dtype = dt, .B = B, .H = H, .ldg = ldo, .gs = nw,
                       .gx = at(x->gx, t * B * GH, dt), .hx = hprev,
                       .cx = lstm ? (s > 0 ? at(x->cs, tp * B * H, dt) : x->c0) : NULL,
                       .gh = out, .hy = at(x->y, t * B * H, dt),
                       .cy = lstm ? at(x->cs, t * B * H, dt) : NULL,
                       .ws = x->ws ? (float *)x->ws + t * B * S * H : NULL};
    ampy_rnn_cell_fwd_units(&f, u0, u1, cell);
    return AMPY_OK;
}

ampy_status ampy_rnn_layer_fwd_packed(int kind, int mode, int reverse, int64_t T, int64_t B,
                                      int64_t H, int dt, const void *gx, const void *w_hh,
                                      const void *b_hh, const void *h0, const void *c0,
                                      void *y, void *cs, void *ws)
{
    const int64_t G = ampy_rnn_gates(mode), ppg = (H + 15) / 16;
    fwd_ctx x = {.mode = mode, .reverse = reverse, .dt = dt, .T = T, .B = B, .H = H, .G = G,
                 .gx = gx, .w_hh = w_hh, .b_hh = b_hh, .h0 = h0, .c0 = c0, .y = y, .cs = cs,
                 .ws = ws};
    x.P = plan_parts(B, G, H);
    int64_t u0, u1;
    part_units(H, x.P, 0, &u0, &u1);
    x.nwmax = round16(u1 - u0) + 16;
    x.pk = (rnn_pack){.kind = kind, .K = H, .kp = kind == RNN_PK_BF16 ? (H + 1) / 2 * 2 : H};
    x.pk.p = malloc((size_t)ampy_rnn_pack_bytes(kind, H, G * ppg));
    const size_t each = (size_t)(B * G * x.nwmax + (G + 2) * x.nwmax +
                                 (dt == AMPY_FLOAT16 ? B * H : 0));
    ampy_status st = x.pk.p ? slots_alloc(&x.sl, x.P, each)
                            : ampy_error(AMPY_ERR_NOMEM, "rnn layer: out of memory");
    if (st == AMPY_OK)
        st = ampy_rnn_team_run(T, x.P, fwd_part, &x);
    free(x.sl.mem);
    free(x.pk.p);
    return st;
}

/* ---- backward -------------------------------------------------------------- */
typedef struct bwd_ctx {
    const ampy_rnn_layer_bwd_args *a;
    int P;
    int64_t GH, nwmax;
    void *dh, *direct, *dcb[2];
    rnn_pack pk;
    slots sl;
} bwd_ctx;

/* dh's units [u0, u1) = dy at the last step + dhT (either may be absent). */
static void bwd_init(const bwd_ctx *x, int64_t u0, int64_t u1)
{
    const ampy_rnn_layer_bwd_args *a = x->a;
    const int dt = a->dtype;
    const int64_t B = a->B, H = a->H, tl = tix(a->T - 1, a->T, a->reverse);
    const void *dy = a->dy ? at(a->dy, tl * B * H, dt) : NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = b * H + u0; j < b * H + u1; j++) {
            if (dy && a->dhT)
                st(x->dh, dt, j, ld(dy, dt, j) + ld(a->dhT, dt, j));
            else if (dy || a->dhT)
                memcpy(at(x->dh, j, dt), at(dy ? dy : a->dhT, j, dt), esize(dt));
            else
                memset(at(x->dh, j, dt), 0, esize(dt));
        }
}

/* The units' columns of dh_{s-1} (or dh0) = dG_s W_hh + dy_{s-1} (+ the GRU
 * cell's direct part, itself rounded after adding dy, as the GEMM path). */
static void bwd_prev(const bwd_ctx *x, int64_t s, int64_t u0, int64_t u1, float *out,
                     float *wide)
{
    const ampy_rnn_layer_bwd_args *a = x->a;
    const int dt = a->dtype, gru = a->mode == AMPY_RNN_GRU;
    const int64_t B = a->B, H = a->H, GH = x->GH, nw = round16(u1 - u0);
    void *dprev = s > 0 ? x->dh : a->dh0;
    if (!dprev)
        return;
    const int64_t t = tix(s, a->T, a->reverse), tp = s > 0 ? tix(s - 1, a->T, a->reverse) : 0;
    const void *dyp = s > 0 && a->dy ? at(a->dy, tp * B * H, dt) : NULL;
    const void *dg = at(gru ? a->dgh : a->dgx, t * B * GH, dt);
    ampy_rnn_kernel(&x->pk, u0 / 16, u0 / 16 + nw / 16, B, kernel_rows(dt, dg, B * GH, wide),
                    GH, out, nw);
    for (int64_t b = 0; b < B; b++)
        for (int64_t u = 0; u < u1 - u0; u++) {
            const int64_t j = b * H + u0 + u;
            float add = dyp ? ld(dyp, dt, j) : 0.0f;
            if (gru)
                add = dyp ? through(dt, ld(x->direct, dt, j) + add) : ld(x->direct, dt, j);
            st(dprev, dt, j, out[b * nw + u] + add);
        }
}

/* The cell backward of step s for units [u0, u1). */
static void bwd_cell(const bwd_ctx *x, int64_t s, int64_t u0, int64_t u1)
{
    const ampy_rnn_layer_bwd_args *a = x->a;
    const int dt = a->dtype, lstm = a->mode == AMPY_RNN_LSTM, gru = a->mode == AMPY_RNN_GRU;
    const int64_t T = a->T, B = a->B, H = a->H, BH = B * H, S = ampy_rnn_saved(a->mode);
    const int64_t t = tix(s, T, a->reverse), tp = s > 0 ? tix(s - 1, T, a->reverse) : 0;
    const void *hprev = s > 0 ? at(a->y, tp * BH, dt) : a->h0;
    const void *cprev = lstm ? (s > 0 ? at(a->cs, tp * BH, dt) : a->c0) : NULL;
    const void *dc = lstm ? (s == T - 1 ? a->dcT : x->dcb[(s + 1) & 1]) : NULL;
    void *dcx = lstm ? (s > 0 ? x->dcb[s & 1] : a->dc0) : NULL;
    ampy_rnn_cell_bwd_units(a->mode, B, H, dt, u0, u1, (const float *)a->ws + t * B * S * H,
                            hprev, cprev, x->dh, dc, at(a->dgx, t * x->GH * B, dt),
                            gru ? at(a->dgh, t * x->GH * B, dt) : NULL, x->direct, dcx);
}

/* Phase i: the previous-state product of step T-i (i > 0), then the cell
 * backward of step T-1-i (i < T). */
static ampy_status bwd_part(void *vc, int64_t i, int p, int si)
{
    const bwd_ctx *x = (const bwd_ctx *)vc;
    const ampy_rnn_layer_bwd_args *a = x->a;
    int64_t u0, u1;
    part_units(a->H, x->P, p, &u0, &u1);
    float *out = slot(&x->sl, si), *wide = out + a->B * x->nwmax;
    if (i == 0) {
        const int64_t qa = u0 / 16, qn = round16(u1 - u0) / 16;
        ampy_rnn_pack(&x->pk, a->dtype, a->w_hh, a->H, 0, 1, a->H, qa, qa + qn);
        bwd_init(x, u0, u1);
    } else {
        bwd_prev(x, a->T - i, u0, u1, out, wide);
    }
    if (i < a->T)
        bwd_cell(x, a->T - 1 - i, u0, u1);
    return AMPY_OK;
}

ampy_status ampy_rnn_layer_bwd_steps_packed(int kind, const ampy_rnn_layer_bwd_args *a)
{
    const int dt = a->dtype;
    const int64_t B = a->B, H = a->H, GH = ampy_rnn_gates(a->mode) * H, ppg = (H + 15) / 16;
    bwd_ctx x = {.a = a, .GH = GH};
    x.P = plan_parts(B, ampy_rnn_gates(a->mode), H);
    int64_t u0, u1;
    part_units(H, x.P, 0, &u0, &u1);
    x.nwmax = round16(u1 - u0) + 16;
    x.pk = (rnn_pack){.kind = kind, .K = GH, .kp = kind == RNN_PK_BF16 ? (GH + 1) / 2 * 2 : GH};
    const size_t bh = (size_t)(B * H) * esize(dt);
    char *buf = (char *)malloc(4 * bh + (size_t)ampy_rnn_pack_bytes(kind, GH, ppg));
    x.dh = buf;
    x.direct = buf + bh;
    x.dcb[0] = buf + 2 * bh;
    x.dcb[1] = buf + 3 * bh;
    x.pk.p = buf + 4 * bh;
    const size_t each = (size_t)(B * x.nwmax + (dt == AMPY_FLOAT16 ? B * GH : 0));
    ampy_status st = buf ? slots_alloc(&x.sl, x.P, each)
                         : ampy_error(AMPY_ERR_NOMEM, "rnn layer backward: out of memory");
    if (st == AMPY_OK)
        st = ampy_rnn_team_run(a->T + 1, x.P, bwd_part, &x);
    free(x.sl.mem);
    free(buf);
    return st;
}
