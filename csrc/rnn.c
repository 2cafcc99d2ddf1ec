/* rnn.c — the fused recurrent cells of ampy/rnn.h on the CPU.
 *
 * One time step over B rows: the rows are split over the thread pool, each
 * row walks its H hidden units, loads the unit's gates from gx and gh,
 * applies ampy/rnn_math.h's formula and stores the new state and the saved
 * activations. float32/float16/bfloat16 compute in float: a row's gates are
 * widened into a scratch row and go through vmath's vector sigmoid/tanh
 * (vmath.h: 1-3 ulp, AVX-512 or portable by the CPU level), then the
 * shared state update; float64 runs the scalar formulas of rnn_math.h in
 * double. The backward needs no transcendentals (the forward saved the
 * activations) and is one scalar row loop per storage type.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/parallel.h"
#include "ampy/rnn.h"
#include "ampy/rnn_math.h"
#include "rnn_units.h"
#include "vmath.h"

typedef struct cell_ctx {
    int mode;
    int64_t H;
    int64_t j0, j1; /* the hidden units this call computes */
    const void *gx, *gh, *hx, *cx, *ws, *dhy, *dcy;
    void *hy, *cy, *wso, *dgx, *dgh, *dhx, *dcx;
} cell_ctx;

static inline float ld_f32(const float *p, int64_t i) { return p[i]; }
static inline void st_f32(float *p, int64_t i, float v) { p[i] = v; }
static inline float ld_f16(const uint16_t *p, int64_t i) { return ampy_f16_to_f32(p[i]); }
static inline void st_f16(uint16_t *p, int64_t i, float v) { p[i] = ampy_f32_to_f16(v); }
static inline float ld_bf16(const uint16_t *p, int64_t i) { return ampy_bf16_to_f32(p[i]); }
static inline void st_bf16(uint16_t *p, int64_t i, float v) { p[i] = ampy_f32_to_bf16(v); }
static inline double ld_f64(const double *p, int64_t i) { return p[i]; }
static inline void st_f64(double *p, int64_t i, double v) { p[i] = v; }

/* The scalar forward row loop for storage ST, compute type T (math suffix
 * M, workspace type T as well): float64's. */
#define FWD_ROWS(SFX, ST, T, M)                                                                 \
    static void fwd_##SFX(int64_t b0, int64_t b1, void *vc)                                     \
    {                                                                                           \
        const cell_ctx *c = (const cell_ctx *)vc;                                               \
        const int64_t H = c->H, G = ampy_rnn_gates(c->mode), S = ampy_rnn_saved(c->mode);        \
        const ST *gx = (const ST *)c->gx, *gh = (const ST *)c->gh;                              \
        const ST *hx = (const ST *)c->hx, *cx = (const ST *)c->cx;                              \
        ST *hy = (ST *)c->hy, *cy = (ST *)c->cy;                                                \
        T *ws = (T *)c->wso;                                                                    \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const int64_t g0 = b * G * H, s0 = b * H, w0 = b * S * H;                           \
            for (int64_t j = c->j0; j < c->j1; j++) {                                           \
                T act[5], x[4], h[4], cv, hv;                                                   \
                for (int64_t k = 0; k < G; k++) {                                               \
                    x[k] = ld_##SFX(gx, g0 + k * H + j);                                        \
                    h[k] = ld_##SFX(gh, g0 + k * H + j);                                        \
                }                                                                               \
                if (c->mode == AMPY_RNN_LSTM) {                                                 \
                    T a[4] = {h[0] + x[0], h[1] + x[1], h[2] + x[2], h[3] + x[3]};              \
                    ampy_lstm_fwd_##M(a, ld_##SFX(cx, s0 + j), act, &cv, &hv);                  \
                    st_##SFX(cy, s0 + j, cv);                                                   \
                } else if (c->mode == AMPY_RNN_GRU) {                                           \
                    hv = ampy_gru_fwd_##M(x, h, ld_##SFX(hx, s0 + j), act);                     \
                } else {                                                                        \
                    hv = act[0] = ampy_rnn_fwd_##M(c->mode, x[0], h[0]);                        \
                }                                                                               \
                st_##SFX(hy, s0 + j, hv);                                                       \
                if (ws)                                                                         \
                    for (int64_t k = 0; k < S; k++)                                             \
                        ws[w0 + k * H + j] = act[k];                                            \
            }                                                                                   \
        }                                                                                       \
    }

/* The backward row loop (no transcendentals: every storage type). */
#define BWD_ROWS(SFX, ST, T, M)                                                                 \
    static void bwd_##SFX(int64_t b0, int64_t b1, void *vc)                                     \
    {                                                                                           \
        const cell_ctx *c = (const cell_ctx *)vc;                                               \
        const int64_t H = c->H, G = ampy_rnn_gates(c->mode), S = ampy_rnn_saved(c->mode);        \
        const T *ws = (const T *)c->ws;                                                         \
        const ST *hx = (const ST *)c->hx, *cx = (const ST *)c->cx;                              \
        const ST *dhy = (const ST *)c->dhy, *dcy = (const ST *)c->dcy;                          \
        ST *dgx = (ST *)c->dgx, *dgh = (ST *)c->dgh, *dhx = (ST *)c->dhx, *dcx = (ST *)c->dcx;  \
        for (int64_t b = b0; b < b1; b++) {                                                     \
            const int64_t g0 = b * G * H, s0 = b * H, w0 = b * S * H;                           \
            for (int64_t j = c->j0; j < c->j1; j++) {                                           \
                T act[5], dx[4], dh = dhy ? ld_##SFX(dhy, s0 + j) : (T)0;                       \
                for (int64_t k = 0; k < S; k++)                                                 \
                    act[k] = ws[w0 + k * H + j];                                                \
                if (c->mode == AMPY_RNN_LSTM) {                                                 \
                    T dcv, dc = dcy ? ld_##SFX(dcy, s0 + j) : (T)0;                             \
                    ampy_lstm_bwd_##M(act, ld_##SFX(cx, s0 + j), dh, dc, dx, &dcv);             \
                    if (dcx)                                                                    \
                        st_##SFX(dcx, s0 + j, dcv);                                             \
                } else if (c->mode == AMPY_RNN_GRU) {                                           \
                    T dhp[3];                                                                   \
                    T direct = ampy_gru_bwd_##M(act, ld_##SFX(hx, s0 + j), dh, dx, dhp);        \
                    for (int64_t k = 0; k < 3; k++)                                             \
                        st_##SFX(dgh, g0 + k * H + j, dhp[k]);                                  \
                    st_##SFX(dhx, s0 + j, direct);                                              \
                } else {                                                                        \
                    dx[0] = ampy_rnn_bwd_##M(c->mode, act[0], dh);                              \
                }                                                                               \
                for (int64_t k = 0; k < G; k++)                                                 \
                    st_##SFX(dgx, g0 + k * H + j, dx[k]);                                       \
            }                                                                                   \
        }                                                                                       \
    }

FWD_ROWS(f64, double, double, d)
BWD_ROWS(f32, float, float, f)
BWD_ROWS(f16, uint16_t, float, f)
BWD_ROWS(bf16, uint16_t, float, f)
BWD_ROWS(f64, double, double, d)

/* ---- the float forward: vector sigmoid/tanh over whole gate rows ---------------- */
static void load_row(const void *p, int dt, int64_t off, int64_t n, float *out)
{
    if (dt == AMPY_FLOAT32) {
        memcpy(out, (const float *)p + off, (size_t)n * sizeof(float));
    } else if (dt == AMPY_FLOAT16) {
        for (int64_t j = 0; j < n; j++)
            out[j] = ld_f16((const uint16_t *)p, off + j);
    } else {
        for (int64_t j = 0; j < n; j++)
            out[j] = ld_bf16((const uint16_t *)p, off + j);
    }
}

static void store_row(void *p, int dt, int64_t off, int64_t n, const float *in)
{
    if (dt == AMPY_FLOAT32) {
        memcpy((float *)p + off, in, (size_t)n * sizeof(float));
    } else if (dt == AMPY_FLOAT16) {
        for (int64_t j = 0; j < n; j++)
            st_f16((uint16_t *)p, off + j, in[j]);
    } else {
        for (int64_t j = 0; j < n; j++)
            st_bf16((uint16_t *)p, off + j, in[j]);
    }
}

/* Units j0 .. j0+n of row b: a = gx, t = gh on entry, gate k of each at
 * k * gs (gs >= n); s, u scratch (n each). */
static void fwd_row_vm(const cell_ctx *c, int dt, int64_t b, int64_t gs, float *a,
                       const float *t, float *s, float *u)
{
    const ampy_vm_table *vm = ampy_vm();
    const int64_t H = c->H, S = ampy_rnn_saved(c->mode), j0 = c->j0, n = c->j1 - c->j0;
    float *ws = c->wso ? (float *)c->wso + b * S * H + j0 : NULL;
    if (c->mode == AMPY_RNN_LSTM) {
        for (int64_t k = 0; k < 4; k++)
            for (int64_t j = 0; j < n; j++)
                a[k * gs + j] = t[k * gs + j] + a[k * gs + j];
        vm->op[AMPY_VM_SIGMOID](a, a, gs + n);
        vm->op[AMPY_VM_TANH](a + 2 * gs, a + 2 * gs, n);
        vm->op[AMPY_VM_SIGMOID](a + 3 * gs, a + 3 * gs, n);
        load_row(c->cx, dt, b * H + j0, n, s);
        for (int64_t j = 0; j < n; j++)
            s[j] = ampy_lstm_state_f(a[j], a[gs + j], a[2 * gs + j], s[j]);
        store_row(c->cy, dt, b * H + j0, n, s);
        vm->op[AMPY_VM_TANH](s, u, n);
        for (int64_t j = 0; j < n; j++)
            s[j] = a[3 * gs + j] * u[j];
        if (ws) {
            for (int64_t k = 0; k < 4; k++)
                memcpy(ws + k * H, a + k * gs, (size_t)n * sizeof(float));
            memcpy(ws + 4 * H, u, (size_t)n * sizeof(float));
        }
    } else if (c->mode == AMPY_RNN_GRU) {
        for (int64_t k = 0; k < 2; k++)
            for (int64_t j = 0; j < n; j++)
                a[k * gs + j] = t[k * gs + j] + a[k * gs + j];
        vm->op[AMPY_VM_SIGMOID](a, a, gs + n);
        for (int64_t j = 0; j < n; j++)
            a[2 * gs + j] = a[2 * gs + j] + t[2 * gs + j] * a[j];
        vm->op[AMPY_VM_TANH](a + 2 * gs, a + 2 * gs, n);
        load_row(c->hx, dt, b * H + j0, n, u);
        for (int64_t j = 0; j < n; j++)
            s[j] = ampy_gru_state_f(a[2 * gs + j], a[gs + j], u[j]);
        if (ws) {
            for (int64_t k = 0; k < 3; k++)
                memcpy(ws + k * H, a + k * gs, (size_t)n * sizeof(float));
            memcpy(ws + 3 * H, t + 2 * gs, (size_t)n * sizeof(float));
        }
    } else {
        if (c->mode == AMPY_RNN_TANH) {
            for (int64_t j = 0; j < n; j++)
                s[j] = t[j] + a[j];
            vm->op[AMPY_VM_TANH](s, s, n);
        } else {
            for (int64_t j = 0; j < n; j++)
                s[j] = ampy_rnn_fwd_f(AMPY_RNN_RELU, a[j], t[j]);
        }
        if (ws)
            memcpy(ws, s, (size_t)n * sizeof(float));
    }
    store_row(c->hy, dt, b * H + j0, n, s);
}

typedef struct vm_ctx {
    const cell_ctx *c;
    int dt;
    ampy_status st;
} vm_ctx;

static void fwd_vm(int64_t b0, int64_t b1, void *vc)
{
    vm_ctx *v = (vm_ctx *)vc;
    const cell_ctx *c = v->c;
    const int64_t GH = ampy_rnn_gates(c->mode) * c->H;
    float *buf = (float *)malloc((size_t)(2 * GH + 2 * c->H) * sizeof(float));
    if (!buf) {
        v->st = AMPY_ERR_NOMEM;
        return;
    }
    float *a = buf, *t = buf + GH, *s = t + GH, *u = s + c->H;
    for (int64_t b = b0; b < b1; b++) {
        load_row(c->gx, v->dt, b * GH, GH, a);
        load_row(c->gh, v->dt, b * GH, GH, t);
        fwd_row_vm(c, v->dt, b, c->H, a, t, s, u);
    }
    free(buf);
}

/* The float32 LSTM backward: one straight loop per row over the units (the
 * same formula, ampy_lstm_bwd_f, inlined where the compiler vectorises it). */
static void bwd_lstm_f32(int64_t b0, int64_t b1, void *vc)
{
    const cell_ctx *c = (const cell_ctx *)vc;
    const int64_t H = c->H;
    for (int64_t b = b0; b < b1; b++) {
        const float *restrict ws = (const float *)c->ws + b * 5 * H;
        const float *restrict cx = (const float *)c->cx + b * H;
        const float *restrict dh = c->dhy ? (const float *)c->dhy + b * H : NULL;
        const float *restrict dc = c->dcy ? (const float *)c->dcy + b * H : NULL;
        float *restrict dg = (float *)c->dgx + b * 4 * H;
        float *restrict dcx = c->dcx ? (float *)c->dcx + b * H : NULL;
        for (int64_t j = c->j0; j < c->j1; j++) {
            const float act[5] = {ws[j], ws[H + j], ws[2 * H + j], ws[3 * H + j], ws[4 * H + j]};
            float da[4], dcv;
            ampy_lstm_bwd_f(act, cx[j], dh ? dh[j] : 0.0f, dc ? dc[j] : 0.0f, da, &dcv);
            dg[j] = da[0];
            dg[H + j] = da[1];
            dg[2 * H + j] = da[2];
            dg[3 * H + j] = da[3];
            if (dcx)
                dcx[j] = dcv;
        }
    }
}

static ampy_range_fn pick_bwd(int mode, int dtype)
{
    if (mode == AMPY_RNN_LSTM && dtype == AMPY_FLOAT32)
        return bwd_lstm_f32;
    switch (dtype) {
    case AMPY_FLOAT32: return bwd_f32;
    case AMPY_FLOAT16: return bwd_f16;
    case AMPY_BFLOAT16: return bwd_bf16;
    default: return bwd_f64;
    }
}

/* Rows per task: about 16K gate elements, at least one row. */
static int64_t grain(int mode, int64_t H)
{
    int64_t per_row = ampy_rnn_gates(mode) * H;
    return per_row >= 16384 ? 1 : 16384 / (per_row > 0 ? per_row : 1);
}

ampy_status ampy_rnn_cell_fwd(int mode, int64_t B, int64_t H, int dtype, const void *gx,
                              const void *gh, const void *hx, const void *cx, void *hy, void *cy,
                              void *ws)
{
    ampy_status st = ampy_rnn_check_args(mode, B, H, dtype);
    if (st != AMPY_OK)
        return ampy_error(st, "rnn cell: bad mode, size or dtype");
    if (B == 0 || H == 0)
        return AMPY_OK;
    if (!gx || !gh || !hy || (mode == AMPY_RNN_LSTM && (!cx || !cy)) ||
        (mode == AMPY_RNN_GRU && !hx))
        return ampy_error(AMPY_ERR_VALUE, "rnn cell: a required array is missing");
    cell_ctx c = {.mode = mode, .H = H, .j0 = 0, .j1 = H, .gx = gx, .gh = gh, .hx = hx,
                  .cx = cx, .hy = hy, .cy = cy, .wso = ws};
    if (dtype == AMPY_FLOAT64) {
        ampy_parallel_for(B, grain(mode, H), fwd_f64, &c);
        return AMPY_OK;
    }
    vm_ctx v = {.c = &c, .dt = dtype, .st = AMPY_OK};
    ampy_parallel_for(B, grain(mode, H), fwd_vm, &v);
    return v.st == AMPY_OK ? AMPY_OK : ampy_error(v.st, "rnn cell: out of memory");
}

ampy_status ampy_rnn_cell_bwd(int mode, int64_t B, int64_t H, int dtype, const void *ws,
                              const void *hx, const void *cx, const void *dhy, const void *dcy,
                              void *dgx, void *dgh, void *dhx, void *dcx)
{
    ampy_status st = ampy_rnn_check_args(mode, B, H, dtype);
    if (st != AMPY_OK)
        return ampy_error(st, "rnn cell backward: bad mode, size or dtype");
    if (B == 0 || H == 0)
        return AMPY_OK;
    if (!ws || !dgx || (mode == AMPY_RNN_LSTM && !cx) ||
        (mode == AMPY_RNN_GRU && (!hx || !dgh || !dhx)))
        return ampy_error(AMPY_ERR_VALUE, "rnn cell backward: a required array is missing");
    cell_ctx c = {.mode = mode, .H = H, .j0 = 0, .j1 = H, .ws = ws, .hx = hx, .cx = cx,
                  .dhy = dhy, .dcy = dcy, .dgx = dgx, .dgh = dgh, .dhx = dhx, .dcx = dcx};
    ampy_parallel_for(B, grain(mode, H), pick_bwd(mode, dtype), &c);
    return AMPY_OK;
}

void ampy_rnn_cell_fwd_units(const rnn_units_fwd *f, int64_t j0, int64_t j1, float *scratch)
{
    const int64_t H = f->H, G = ampy_rnn_gates(f->mode), GH = G * H, gs = f->gs;
    cell_ctx c = {.mode = f->mode, .H = H, .j0 = j0, .j1 = j1, .hx = f->hx, .cx = f->cx,
                  .hy = f->hy, .cy = f->cy, .wso = f->ws};
    float *a = scratch, *s = a + G * gs, *u = s + gs;
    for (int64_t b = 0; b < f->B; b++) {
        for (int64_t k = 0; k < G; k++)
            load_row(f->gx, f->dtype, b * GH + k * H + j0, j1 - j0, a + k * gs);
        fwd_row_vm(&c, f->dtype, b, gs, a, f->gh + b * f->ldg, s, u);
    }
}

void ampy_rnn_cell_bwd_units(int mode, int64_t B, int64_t H, int dtype, int64_t j0, int64_t j1,
                             const void *ws, const void *hx, const void *cx, const void *dhy,
                             const void *dcy, void *dgx, void *dgh, void *dhx, void *dcx)
{
    cell_ctx c = {.mode = mode, .H = H, .j0 = j0, .j1 = j1, .ws = ws, .hx = hx, .cx = cx,
                  .dhy = dhy, .dcy = dcy, .dgx = dgx, .dgh = dgh, .dhx = dhx, .dcx = dcx};
    pick_bwd(mode, dtype)(0, B, &c);
}
