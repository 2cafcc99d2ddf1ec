/* rnn.cu — the fused recurrent cells of ampy/rnn.h on the device, the twin
 * of csrc/rnn.c: one thread per (row, hidden unit), the per-element formulas
 * of ampy/rnn_math.h (the host build of which tests/c/test_rnn_math.c
 * checks), float for float32/float16/bfloat16 storage, double for float64.
 * The CPU's float forward takes sigmoid/tanh from vmath (1-3 ulp), the
 * device from expf/tanhf: the two agree to a few float32 ulp, not bits. */
#include "common.cuh"
#include "ampy/rnn_math.h"

namespace {

struct cell_args {
    int mode, dt;
    int64_t B, H;
    const void *gx, *gh, *hx, *cx, *ws, *dhy, *dcy;
    void *hy, *cy, *wso, *dgx, *dgh, *dhx, *dcx;
};

template <typename T> __device__ T ld(const void *p, int dt, int64_t i);
template <> __device__ float ld<float>(const void *p, int dt, int64_t i)
{
    return ampy_ld_f(p, dt, i);
}
template <> __device__ double ld<double>(const void *p, int dt, int64_t i)
{
    return ampy_ld_d((const char *)p, dt, i);
}
__device__ void st(void *p, int dt, int64_t i, float v) { ampy_st_f(p, dt, i, v); }
__device__ void st(void *p, int dt, int64_t i, double v) { ampy_st_d((char *)p, dt, i, v); }

/* rnn_math.h's float and double functions under one overloaded name each */
#define OVERLOAD(RF, RD, NAME, PARAMS_F, PARAMS_D, ARGS)                                         \
    __device__ RF NAME PARAMS_F { return ampy_##NAME##_f ARGS; }                                 \
    __device__ RD NAME PARAMS_D { return ampy_##NAME##_d ARGS; }
OVERLOAD(void, void, lstm_fwd, (const float *a, float cx, float *act, float *cy, float *hy),
         (const double *a, double cx, double *act, double *cy, double *hy), (a, cx, act, cy, hy))
OVERLOAD(float, double, gru_fwd, (const float *x, const float *h, float hx, float *act),
         (const double *x, const double *h, double hx, double *act), (x, h, hx, act))
OVERLOAD(float, double, rnn_fwd, (int m, float x, float h), (int m, double x, double h),
         (m, x, h))
OVERLOAD(void, void, lstm_bwd,
         (const float *a, float cx, float dh, float dc, float *da, float *dcx),
         (const double *a, double cx, double dh, double dc, double *da, double *dcx),
         (a, cx, dh, dc, da, dcx))
OVERLOAD(float, double, gru_bwd, (const float *a, float hx, float dh, float *dx, float *dhp),
         (const double *a, double hx, double dh, double *dx, double *dhp), (a, hx, dh, dx, dhp))
OVERLOAD(float, double, rnn_bwd, (int m, float y, float dh), (int m, double y, double dh),
         (m, y, dh))
#undef OVERLOAD

template <typename T>
__global__ void rnn_fwd_kernel(cell_args c)
{
    const int64_t H = c.H, G = ampy_rnn_gates(c.mode), S = ampy_rnn_saved(c.mode);
    AMPY_GRID_STRIDE(u, c.B * H)
    {
        const int64_t b = u / H, j = u % H, g0 = b * G * H;
        T x[4], h[4], act[5], cv, hv;
        for (int64_t k = 0; k < G; k++) {
            x[k] = ld<T>(c.gx, c.dt, g0 + k * H + j);
            h[k] = ld<T>(c.gh, c.dt, g0 + k * H + j);
        }
        if (c.mode == AMPY_RNN_LSTM) {
            T a[4] = {h[0] + x[0], h[1] + x[1], h[2] + x[2], h[3] + x[3]};
            lstm_fwd(a, ld<T>(c.cx, c.dt, u), act, &cv, &hv);
            st(c.cy, c.dt, u, cv);
        } else if (c.mode == AMPY_RNN_GRU) {
            hv = gru_fwd(x, h, ld<T>(c.hx, c.dt, u), act);
        } else {
            hv = act[0] = rnn_fwd(c.mode, x[0], h[0]);
        }
        st(c.hy, c.dt, u, hv);
        if (c.wso)
            for (int64_t k = 0; k < S; k++)
                ((T *)c.wso)[b * S * H + k * H + j] = act[k];
    }
}

template <typename T>
__global__ void rnn_bwd_kernel(cell_args c)
{
    const int64_t H = c.H, G = ampy_rnn_gates(c.mode), S = ampy_rnn_saved(c.mode);
    AMPY_GRID_STRIDE(u, c.B * H)
    {
        const int64_t b = u / H, j = u % H, g0 = b * G * H;
        T act[5], dx[4], dh = c.dhy ? ld<T>(c.dhy, c.dt, u) : (T)0;
        for (int64_t k = 0; k < S; k++)
            act[k] = ((const T *)c.ws)[b * S * H + k * H + j];
        if (c.mode == AMPY_RNN_LSTM) {
            T dcv, dc = c.dcy ? ld<T>(c.dcy, c.dt, u) : (T)0;
            lstm_bwd(act, ld<T>(c.cx, c.dt, u), dh, dc, dx, &dcv);
            if (c.dcx)
                st(c.dcx, c.dt, u, dcv);
        } else if (c.mode == AMPY_RNN_GRU) {
            T dhp[3];
            T direct = gru_bwd(act, ld<T>(c.hx, c.dt, u), dh, dx, dhp);
            for (int64_t k = 0; k < 3; k++)
                st(c.dgh, c.dt, g0 + k * H + j, dhp[k]);
            st(c.dhx, c.dt, u, direct);
        } else {
            dx[0] = rnn_bwd(c.mode, act[0], dh);
        }
        for (int64_t k = 0; k < G; k++)
            st(c.dgx, c.dt, g0 + k * H + j, dx[k]);
    }
}

ampy_status launch(int device, const cell_args &c, int fwd)
{
    const int64_t n = c.B * c.H;
    AMPY_CUDA_ENTER(device, st);
    const unsigned grid = ampy_cuda_blocks(n, AMPY_CUDA_THREADS);
    if (c.dt == AMPY_FLOAT64) {
        if (fwd)
            rnn_fwd_kernel<double><<<grid, AMPY_CUDA_THREADS, 0, st>>>(c);
        else
            rnn_bwd_kernel<double><<<grid, AMPY_CUDA_THREADS, 0, st>>>(c);
    } else {
        if (fwd)
            rnn_fwd_kernel<float><<<grid, AMPY_CUDA_THREADS, 0, st>>>(c);
        else
            rnn_bwd_kernel<float><<<grid, AMPY_CUDA_THREADS, 0, st>>>(c);
    }
    AMPY_CUDA_LAUNCHED("rnn_fwd_kernel/rnn_bwd_kernel");
    return AMPY_OK;
}

} // namespace

extern "C" ampy_status ampy_rnn_cell_fwd_cuda(int device, int mode, int64_t B, int64_t H,
                                              int dtype, const void *gx, const void *gh,
                                              const void *hx, const void *cx, void *hy, void *cy,
                                              void *ws)
{
    ampy_status s = ampy_rnn_check_args(mode, B, H, dtype);
    if (s != AMPY_OK)
        return s;
    if (B == 0 || H == 0)
        return AMPY_OK;
    cell_args c = {};
    c.mode = mode, c.dt = dtype, c.B = B, c.H = H;
    c.gx = gx, c.gh = gh, c.hx = hx, c.cx = cx, c.hy = hy, c.cy = cy, c.wso = ws;
    return launch(device, c, 1);
}

extern "C" ampy_status ampy_rnn_cell_bwd_cuda(int device, int mode, int64_t B, int64_t H,
                                              int dtype, const void *ws, const void *hx,
                                              const void *cx, const void *dhy, const void *dcy,
                                              void *dgx, void *dgh, void *dhx, void *dcx)
{
    ampy_status s = ampy_rnn_check_args(mode, B, H, dtype);
    if (s != AMPY_OK)
        return s;
    if (B == 0 || H == 0)
        return AMPY_OK;
    cell_args c = {};
    c.mode = mode, c.dt = dtype, c.B = B, c.H = H;
    c.ws = ws, c.hx = hx, c.cx = cx, c.dhy = dhy, c.dcy = dcy;
    c.dgx = dgx, c.dgh = dgh, c.dhx = dhx, c.dcx = dcx;
    return launch(device, c, 0);
}
