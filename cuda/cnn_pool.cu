/* cnn_pool.cu — max_pool2d, avg_pool2d and adaptive_avg_pool2d on the
 * device: the CUDA twins of cnn.h's pools (contracts in ampy/cnn_cuda.h),
 * reached from _C.cnn_*_pool2d_* through the ampy_cuda_api table.
 *
 * One thread per output element for the forwards, computing its window with
 * the CPU's functions of ampy/cnn_math.h (ampy_cnn_max_window,
 * ampy_cnn_avg_window, the adaptive bounds), so each output is the CPU's.
 * The average backwards gather: one thread per input element walks the
 * outputs whose windows cover it (ampy_cnn_pool_cover /
 * ampy_cnn_adaptive_cover) in output order and adds each share with the
 * CPU's rounding (ampy_cnn_add_to): the CPU's bits, deterministic. The max
 * backward scatters each output gradient to its argmax with atomicAdd into
 * float32 (float64 for float64 data) and rounds half gradients once.
 */
#include "common.cuh"
#include "cnn_common.cuh"
#include "ampy/cnn_cuda.h"
#include "ampy/cnn_math.h"

namespace {

ampy_status check_pool(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW, int dt,
                       const ampy_cnn_window *w, const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    if (P < 0 || H < 0 || W < 0 || OH < 0 || OW < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    if (w && (w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1 || w->ph < 0 || w->pw < 0 ||
              w->dh < 1 || w->dw < 1))
        return ampy_error(AMPY_ERR_VALUE, "%s: bad kernel, stride, padding or dilation", fn);
    return AMPY_OK;
}

/* ---- max_pool2d --------------------------------------------------------------- */
__global__ void cnn_max_pool_fwd_kernel(int64_t n, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        ampy_cnn_window win, const void *x, int dt, void *y,
                                        int64_t *idx)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t ow = o % OW, r = o / OW, oh = r % OH, p = r / OH;
        double m;
        idx[o] = ampy_cnn_max_window(x, dt, p * H * W, H, W, oh, ow, &win, &m);
        ampy_nn_store1(y, dt, o, m);
    }
}

template <typename A>
__global__ void cnn_max_pool_bwd_kernel(int64_t n, int64_t HW, int64_t O, const int64_t *idx,
                                        const void *dy, int dt, A *acc)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t i = idx[o];
        if (i >= 0 && i < HW) /* a bad index was recorded by the range check */
            atomicAdd(&acc[(o / O) * HW + i], (A)ampy_nn_load1(dy, dt, o));
    }
}

/* ---- avg_pool2d --------------------------------------------------------------- */
__global__ void cnn_avg_pool_fwd_kernel(int64_t n, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        ampy_cnn_window win, int inc, int64_t divisor,
                                        const void *x, int dt, void *y)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t ow = o % OW, r = o / OW, oh = r % OH, ib = (r / OH) * H * W;
        int64_t h0, h1, w0, w1, div;
        if (!ampy_cnn_avg_window(H, W, oh, ow, &win, inc, divisor, &h0, &h1, &w0, &w1, &div)) {
            ampy_nn_store1(y, dt, o, 0.0);
            continue;
        }
        if (dt == AMPY_FLOAT64) {
            double sum = 0.0;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                    sum += ((const double *)x)[ib + ih * W + iw];
            ((double *)y)[o] = sum / (double)div;
        } else {
            float sum = 0.0f;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                    sum += ampy_cnn_ldf(x, dt, ib + ih * W + iw);
            ampy_cnn_stf(y, dt, o, sum / (float)div);
        }
    }
}

/* dx[i] = the shares dy[o] / divisor of the outputs whose windows hold i,
 * added in output order with the CPU's rounding */
__global__ void cnn_avg_pool_bwd_kernel(int64_t n, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        ampy_cnn_window win, int inc, int64_t divisor,
                                        const void *dy, int dt, void *dx)
{
    AMPY_GRID_STRIDE(i, n)
    {
        const int64_t iw = i % W, r = i / W, ih = r % H, ob = (r / H) * OH * OW;
        int64_t oh0, oh1, ow0, ow1;
        ampy_cnn_pool_cover(ih, win.kh, win.sh, win.ph, OH, &oh0, &oh1);
        ampy_cnn_pool_cover(iw, win.kw, win.sw, win.pw, OW, &ow0, &ow1);
        double acc = 0.0;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t h0, h1, w0, w1, div;
                if (!ampy_cnn_avg_window(H, W, oh, ow, &win, inc, divisor, &h0, &h1, &w0, &w1,
                                         &div) ||
                    ih < h0 || ih >= h1 || iw < w0 || iw >= w1)
                    continue;
                const double g = ampy_nn_load1(dy, dt, ob + oh * OW + ow);
                const double d = dt == AMPY_FLOAT64 ? g / (double)div
                                                    : ampy_cnn_round_to(dt, (float)g / (float)div);
                acc = ampy_cnn_add_to(dt, acc, d);
            }
        ampy_nn_store1(dx, dt, i, acc);
    }
}

/* ---- adaptive_avg_pool2d ------------------------------------------------------ */
__global__ void cnn_adaptive_fwd_kernel(int64_t n, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        const void *x, int dt, void *y)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t ow = o % OW, r = o / OW, oh = r % OH, ib = (r / OH) * H * W;
        const int64_t h0 = ampy_cnn_adaptive_start(oh, OH, H);
        const int64_t h1 = ampy_cnn_adaptive_end(oh, OH, H);
        const int64_t w0 = ampy_cnn_adaptive_start(ow, OW, W);
        const int64_t w1 = ampy_cnn_adaptive_end(ow, OW, W);
        if (dt == AMPY_FLOAT64) {
            double sum = 0.0;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                    sum += ((const double *)x)[ib + ih * W + iw];
            ((double *)y)[o] = sum / (double)(h1 - h0) / (double)(w1 - w0);
        } else {
            float sum = 0.0f;
            for (int64_t ih = h0; ih < h1; ih++)
                for (int64_t iw = w0; iw < w1; iw++)
                    sum += ampy_cnn_ldf(x, dt, ib + ih * W + iw);
            ampy_cnn_stf(y, dt, o, sum / (float)(h1 - h0) / (float)(w1 - w0));
        }
    }
}

__global__ void cnn_adaptive_bwd_kernel(int64_t n, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                        const void *dy, int dt, void *dx)
{
    AMPY_GRID_STRIDE(i, n)
    {
        const int64_t iw = i % W, r = i / W, ih = r % H, ob = (r / H) * OH * OW;
        int64_t oh0, oh1, ow0, ow1;
        ampy_cnn_adaptive_cover(ih, H, OH, &oh0, &oh1);
        ampy_cnn_adaptive_cover(iw, W, OW, &ow0, &ow1);
        double acc = 0.0;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            const double kh = (double)(ampy_cnn_adaptive_end(oh, OH, H) -
                                       ampy_cnn_adaptive_start(oh, OH, H));
            for (int64_t ow = ow0; ow < ow1; ow++) {
                const double kw = (double)(ampy_cnn_adaptive_end(ow, OW, W) -
                                           ampy_cnn_adaptive_start(ow, OW, W));
                const double g = ampy_nn_load1(dy, dt, ob + oh * OW + ow);
                const double d =
                    dt == AMPY_FLOAT64
                        ? g / kh / kw
                        : ampy_cnn_round_to(dt, ampy_cnn_round_to(dt, (float)g / (float)kh) /
                                                    (float)kw);
                acc = ampy_cnn_add_to(dt, acc, d);
            }
        }
        ampy_nn_store1(dx, dt, i, acc);
    }
}

} // namespace

extern "C" ampy_status ampy_cnn_max_pool2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                    int64_t OH, int64_t OW,
                                                    const ampy_cnn_window *win, const void *x,
                                                    int dtype, void *y, int64_t *idx)
{
    ampy_status s = check_pool(P, H, W, OH, OW, dtype, win, "max_pool2d");
    if (s != AMPY_OK || !win)
        return s != AMPY_OK ? s : ampy_error(AMPY_ERR_VALUE, "max_pool2d: no window");
    const int64_t n = P * OH * OW;
    if (n == 0)
        return AMPY_OK;
    if (!y || !idx || H * W == 0)
        return ampy_error(AMPY_ERR_VALUE, "max_pool2d: empty input plane or NULL output");
    AMPY_CUDA_ENTER(device, st);
    cnn_max_pool_fwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, H, W, OH, OW, *win, x, dtype, y, idx);
    AMPY_CUDA_LAUNCHED("cnn_max_pool_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_max_pool2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                    int64_t OH, int64_t OW, const int64_t *idx,
                                                    const void *dy, int dtype, void *dx)
{
    ampy_status s = check_pool(P, H, W, OH, OW, dtype, NULL, "max_pool2d_backward");
    if (s != AMPY_OK)
        return s;
    if (!dx)
        return ampy_error(AMPY_ERR_VALUE, "max_pool2d_backward: NULL output");
    const int64_t n = P * OH * OW, nx = P * H * W;
    if (nx == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    if (n > 0) {
        s = ampy_cuda_check_range(device, st, n, idx, H * W, 0, AMPY_DEVERR_INDEX, 0);
        if (s != AMPY_OK)
            return s;
    }
    CnnAcc acc(device, st, dtype, dx, nx);
    if ((s = acc.begin()) != AMPY_OK)
        return s;
    if (n > 0) {
        const unsigned g = ampy_cuda_blocks(n, AMPY_CUDA_THREADS);
        if (dtype == AMPY_FLOAT64)
            cnn_max_pool_bwd_kernel<double><<<g, AMPY_CUDA_THREADS, 0, st>>>(
                n, H * W, OH * OW, idx, dy, dtype, (double *)acc.ptr);
        else
            cnn_max_pool_bwd_kernel<float><<<g, AMPY_CUDA_THREADS, 0, st>>>(
                n, H * W, OH * OW, idx, dy, dtype, (float *)acc.ptr);
        AMPY_CUDA_LAUNCHED("cnn_max_pool_bwd_kernel");
    }
    return acc.finish();
}

extern "C" ampy_status ampy_cnn_avg_pool2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                    int64_t OH, int64_t OW,
                                                    const ampy_cnn_window *win,
                                                    int count_include_pad,
                                                    int64_t divisor_override, const void *x,
                                                    int dtype, void *y)
{
    ampy_status s = check_pool(P, H, W, OH, OW, dtype, win, "avg_pool2d");
    if (s == AMPY_OK && (!win || !y))
        s = ampy_error(AMPY_ERR_VALUE, "avg_pool2d: NULL window or output");
    const int64_t n = P * OH * OW;
    if (s != AMPY_OK || n == 0)
        return s;
    AMPY_CUDA_ENTER(device, st);
    cnn_avg_pool_fwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, H, W, OH, OW, *win, count_include_pad, divisor_override, x, dtype, y);
    AMPY_CUDA_LAUNCHED("cnn_avg_pool_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_avg_pool2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                    int64_t OH, int64_t OW,
                                                    const ampy_cnn_window *win,
                                                    int count_include_pad,
                                                    int64_t divisor_override, const void *dy,
                                                    int dtype, void *dx)
{
    ampy_status s = check_pool(P, H, W, OH, OW, dtype, win, "avg_pool2d_backward");
    if (s == AMPY_OK && (!win || !dx))
        s = ampy_error(AMPY_ERR_VALUE, "avg_pool2d_backward: NULL window or output");
    const int64_t n = P * H * W;
    if (s != AMPY_OK || n == 0)
        return s;
    AMPY_CUDA_ENTER(device, st);
    cnn_avg_pool_bwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, H, W, OH, OW, *win, count_include_pad, divisor_override, dy, dtype, dx);
    AMPY_CUDA_LAUNCHED("cnn_avg_pool_bwd_kernel");
    return AMPY_OK;
}

static ampy_status adaptive_check(int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                                  int dt, const void *out, const char *fn)
{
    ampy_status s = check_pool(P, H, W, OH, OW, dt, NULL, fn);
    if (s == AMPY_OK && (!out || (P > 0 && (H < 1 || W < 1))))
        s = ampy_error(AMPY_ERR_VALUE, "%s: empty plane or NULL output", fn);
    return s;
}

extern "C" ampy_status ampy_cnn_adaptive_avg_pool2d_fwd_cuda(int device, int64_t P, int64_t H,
                                                             int64_t W, int64_t OH, int64_t OW,
                                                             const void *x, int dtype, void *y)
{
    ampy_status s = adaptive_check(P, H, W, OH, OW, dtype, y, "adaptive_avg_pool2d");
    const int64_t n = P * OH * OW;
    if (s != AMPY_OK || n == 0)
        return s;
    AMPY_CUDA_ENTER(device, st);
    cnn_adaptive_fwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, H, W, OH, OW, x, dtype, y);
    AMPY_CUDA_LAUNCHED("cnn_adaptive_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_adaptive_avg_pool2d_bwd_cuda(int device, int64_t P, int64_t H,
                                                             int64_t W, int64_t OH, int64_t OW,
                                                             const void *dy, int dtype, void *dx)
{
    ampy_status s = adaptive_check(P, H, W, OH, OW, dtype, dx, "adaptive_avg_pool2d_backward");
    const int64_t n = P * H * W;
    if (s != AMPY_OK || n == 0)
        return s;
    AMPY_CUDA_ENTER(device, st);
    if (OH == 0 || OW == 0)
        return ampy_fill_cuda(device, dx, (ampy_dtype)dtype, n, 0.0);
    cnn_adaptive_bwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, H, W, OH, OW, dy, dtype, dx);
    AMPY_CUDA_LAUNCHED("cnn_adaptive_bwd_kernel");
    return AMPY_OK;
}
