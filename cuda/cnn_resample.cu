/* cnn_resample.cu — padding (constant, reflect, replicate, circular over the
 * last 1-3 dims) and 2-d interpolation (nearest, bilinear) on the device:
 * the CUDA twins of cnn.h's pad and interp functions (contracts in
 * ampy/cnn_cuda.h), reached from _C.cnn_pad_* / _C.cnn_interp2d_* through
 * the ampy_cuda_api table.
 *
 * One thread per output element; its sources come from the CPU's index maps
 * of ampy/cnn_math.h (ampy_cnn_pad_src, ampy_cnn_nearest_src,
 * ampy_cnn_linear_src with the ratio of ampy_cnn_interp_ratio) and its value
 * from the same arithmetic (ampy_cnn_bilinear_f/_d), so every forward output
 * is the CPU's. The backwards add each output's gradient back onto its
 * sources with atomicAdd, into float32 (float64 for float64 data) and round
 * half gradients once (cnn_common.cuh): sums of several outputs meeting at
 * one source (the padded edges, upsampling) come in an unspecified order.
 */
#include "common.cuh"
#include "cnn_common.cuh"
#include "ampy/cnn_cuda.h"
#include "ampy/cnn_math.h"

namespace {

/* the padding of k dims as three (leading dims of size 1 unpadded) */
struct PadGeom {
    int64_t in[3], out[3], lo[3];
    int mode;
};

ampy_status pad_geom(PadGeom *g, int64_t P, int k, const int64_t *in, const int64_t *lo,
                     const int64_t *hi, int mode, int dt, const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    if (P < 0 || k < 1 || k > 3 || mode < AMPY_CNN_PAD_CONSTANT || mode > AMPY_CNN_PAD_CIRCULAR)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad block count, dims or mode", fn);
    for (int j = 0; j < 3; j++) {
        const int s = j - (3 - k);
        const int64_t n = s < 0 ? 1 : in[s], a = s < 0 ? 0 : lo[s], h = s < 0 ? 0 : hi[s];
        g->in[j] = n, g->lo[j] = a, g->out[j] = n + a + h;
        int bad = n < 0 || g->out[j] < 0;
        if (mode != AMPY_CNN_PAD_CONSTANT && s >= 0)
            bad = bad || n < 1 ||
                  (mode == AMPY_CNN_PAD_REFLECT && (a >= n || h >= n || -a >= n || -h >= n)) ||
                  (mode == AMPY_CNN_PAD_CIRCULAR && (a > n || h > n));
        if (bad)
            return ampy_error(AMPY_ERR_VALUE, "%s: padding does not fit dim %d", fn, s);
    }
    g->mode = mode;
    return AMPY_OK;
}

/* Source offset of output o (flat over P blocks) or -1 for the fill value. */
__device__ __forceinline__ int64_t pad_source(const PadGeom &g, int64_t o)
{
    const int64_t o2 = o % g.out[2], t = o / g.out[2], o1 = t % g.out[1], t2 = t / g.out[1];
    const int64_t o0 = t2 % g.out[0], p = t2 / g.out[0];
    const int64_t a = ampy_cnn_pad_src(o0, g.in[0], g.lo[0], g.mode);
    const int64_t b = ampy_cnn_pad_src(o1, g.in[1], g.lo[1], g.mode);
    const int64_t d = ampy_cnn_pad_src(o2, g.in[2], g.lo[2], g.mode);
    if (a < 0 || b < 0 || d < 0)
        return -1;
    return ((p * g.in[0] + a) * g.in[1] + b) * g.in[2] + d;
}

__global__ void cnn_pad_fwd_kernel(int64_t n, PadGeom g, double value, const void *x, int dt,
                                   void *y)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t s = pad_source(g, o);
        if (s < 0)
            ampy_nn_store1(y, dt, o, value);
        else if (dt == AMPY_FLOAT64)
            ((double *)y)[o] = ((const double *)x)[s];
        else if (dt == AMPY_FLOAT32)
            ((float *)y)[o] = ((const float *)x)[s];
        else
            ((uint16_t *)y)[o] = ((const uint16_t *)x)[s];
    }
}

template <typename A>
__global__ void cnn_pad_bwd_kernel(int64_t n, PadGeom g, const void *dy, int dt, A *acc)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t s = pad_source(g, o);
        if (s >= 0)
            atomicAdd(&acc[s], (A)ampy_nn_load1(dy, dt, o));
    }
}

/* ---- interpolation ------------------------------------------------------------- */
struct InterpGeom {
    int64_t H, W, OH, OW;
    int mode, align, f64;
    double sh, sw, rh, rw;
};

ampy_status interp_geom(InterpGeom *g, int64_t P, int64_t H, int64_t W, int64_t OH, int64_t OW,
                        int mode, int align, double sh, double sw, int dt, const char *fn)
{
    if (!ampy_nn_is_float(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating-point tensor", fn);
    mode = AMPY_CNN_INTERP_MODE(mode); /* the channel count is for the CPU's form only */
    if (P < 0 || H < 1 || W < 1 || OH < 1 || OW < 1 ||
        (mode != AMPY_CNN_INTERP_NEAREST && mode != AMPY_CNN_INTERP_BILINEAR) || sh < 0 || sw < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad sizes, mode or scale", fn);
    const int f64 = dt == AMPY_FLOAT64;
    *g = InterpGeom{H, W, OH, OW, mode, align, f64, sh, sw,
                    ampy_cnn_interp_ratio(H, OH, align, sh, f64),
                    ampy_cnn_interp_ratio(W, OW, align, sw, f64)};
    return AMPY_OK;
}

/* the (up to) four sources of output (oh, ow) and their weights */
struct Taps {
    int64_t h0, h1, w0, w1;
    double a0, a1, b0, b1;
};

__device__ __forceinline__ Taps interp_taps(const InterpGeom &g, int64_t oh, int64_t ow)
{
    Taps t;
    if (g.mode == AMPY_CNN_INTERP_NEAREST) {
        t.h0 = t.h1 = ampy_cnn_nearest_src(oh, g.H, g.OH, g.sh);
        t.w0 = t.w1 = ampy_cnn_nearest_src(ow, g.W, g.OW, g.sw);
        t.a0 = t.b0 = 1.0, t.a1 = t.b1 = 0.0;
    } else {
        ampy_cnn_linear_src(oh, g.H, g.OH, g.rh, g.align, g.f64, &t.h0, &t.h1, &t.a0, &t.a1);
        ampy_cnn_linear_src(ow, g.W, g.OW, g.rw, g.align, g.f64, &t.w0, &t.w1, &t.b0, &t.b1);
    }
    return t;
}

__global__ void cnn_interp_fwd_kernel(int64_t n, InterpGeom g, const void *x, int dt, void *y)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t ow = o % g.OW, r = o / g.OW, oh = r % g.OH, ib = (r / g.OH) * g.H * g.W;
        const Taps t = interp_taps(g, oh, ow);
        const int64_t r0 = ib + t.h0 * g.W, r1 = ib + t.h1 * g.W;
        if (g.mode == AMPY_CNN_INTERP_NEAREST) {
            ampy_nn_store1(y, dt, o, ampy_nn_load1(x, dt, r0 + t.w0));
        } else if (dt == AMPY_FLOAT64) {
            const double *xd = (const double *)x;
            ((double *)y)[o] = ampy_cnn_bilinear_d(xd[r0 + t.w0], xd[r0 + t.w1], xd[r1 + t.w0],
                                                   xd[r1 + t.w1], t.a0, t.a1, t.b0, t.b1);
        } else {
            ampy_cnn_stf(y, dt, o,
                         ampy_cnn_bilinear_f(ampy_cnn_ldf(x, dt, r0 + t.w0),
                                             ampy_cnn_ldf(x, dt, r0 + t.w1),
                                             ampy_cnn_ldf(x, dt, r1 + t.w0),
                                             ampy_cnn_ldf(x, dt, r1 + t.w1), (float)t.a0,
                                             (float)t.a1, (float)t.b0, (float)t.b1));
        }
    }
}

/* the CPU's four products (a * b * g, float32 for float and half data) */
template <typename A>
__global__ void cnn_interp_bwd_kernel(int64_t n, InterpGeom g, const void *dy, int dt, A *acc)
{
    AMPY_GRID_STRIDE(o, n)
    {
        const int64_t ow = o % g.OW, r = o / g.OW, oh = r % g.OH, ib = (r / g.OH) * g.H * g.W;
        const Taps t = interp_taps(g, oh, ow);
        const int64_t r0 = ib + t.h0 * g.W, r1 = ib + t.h1 * g.W;
        const double gv = ampy_nn_load1(dy, dt, o);
        if (g.mode == AMPY_CNN_INTERP_NEAREST) {
            atomicAdd(&acc[r0 + t.w0], (A)gv);
        } else if (dt == AMPY_FLOAT64) {
            atomicAdd(&acc[r0 + t.w0], (A)(t.a0 * t.b0 * gv));
            atomicAdd(&acc[r0 + t.w1], (A)(t.a0 * t.b1 * gv));
            atomicAdd(&acc[r1 + t.w0], (A)(t.a1 * t.b0 * gv));
            atomicAdd(&acc[r1 + t.w1], (A)(t.a1 * t.b1 * gv));
        } else {
            const float gf = (float)gv, a0 = (float)t.a0, a1 = (float)t.a1;
            const float b0 = (float)t.b0, b1 = (float)t.b1;
            atomicAdd(&acc[r0 + t.w0], (A)(a0 * b0 * gf));
            atomicAdd(&acc[r0 + t.w1], (A)(a0 * b1 * gf));
            atomicAdd(&acc[r1 + t.w0], (A)(a1 * b0 * gf));
            atomicAdd(&acc[r1 + t.w1], (A)(a1 * b1 * gf));
        }
    }
}

} // namespace

extern "C" ampy_status ampy_cnn_pad_fwd_cuda(int device, int64_t P, int k, const int64_t *in,
                                             const int64_t *lo, const int64_t *hi, int mode,
                                             double value, const void *x, int dtype, void *y)
{
    PadGeom g;
    ampy_status s = pad_geom(&g, P, k, in, lo, hi, mode, dtype, "pad");
    if (s != AMPY_OK)
        return s;
    const int64_t n = P * g.out[0] * g.out[1] * g.out[2];
    if (n == 0)
        return AMPY_OK;
    if (!y)
        return ampy_error(AMPY_ERR_VALUE, "pad: NULL output");
    AMPY_CUDA_ENTER(device, st);
    cnn_pad_fwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, g, value, x, dtype, y);
    AMPY_CUDA_LAUNCHED("cnn_pad_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_pad_bwd_cuda(int device, int64_t P, int k, const int64_t *in,
                                             const int64_t *lo, const int64_t *hi, int mode,
                                             const void *dy, int dtype, void *dx)
{
    PadGeom g;
    ampy_status s = pad_geom(&g, P, k, in, lo, hi, mode, dtype, "pad_backward");
    if (s != AMPY_OK)
        return s;
    const int64_t nx = P * g.in[0] * g.in[1] * g.in[2], n = P * g.out[0] * g.out[1] * g.out[2];
    if (nx == 0)
        return AMPY_OK;
    if (!dx)
        return ampy_error(AMPY_ERR_VALUE, "pad_backward: NULL output");
    AMPY_CUDA_ENTER(device, st);
    CnnAcc acc(device, st, dtype, dx, nx);
    if ((s = acc.begin()) != AMPY_OK)
        return s;
    if (n > 0) {
        const unsigned b = ampy_cuda_blocks(n, AMPY_CUDA_THREADS);
        if (dtype == AMPY_FLOAT64)
            cnn_pad_bwd_kernel<double><<<b, AMPY_CUDA_THREADS, 0, st>>>(n, g, dy, dtype,
                                                                       (double *)acc.ptr);
        else
            cnn_pad_bwd_kernel<float><<<b, AMPY_CUDA_THREADS, 0, st>>>(n, g, dy, dtype,
                                                                      (float *)acc.ptr);
        AMPY_CUDA_LAUNCHED("cnn_pad_bwd_kernel");
    }
    return acc.finish();
}

extern "C" ampy_status ampy_cnn_interp2d_fwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                  int64_t OH, int64_t OW, int mode,
                                                  int align_corners, double scale_h,
                                                  double scale_w, const void *x, int dtype,
                                                  void *y)
{
    InterpGeom g;
    ampy_status s = interp_geom(&g, P, H, W, OH, OW, mode, align_corners, scale_h, scale_w,
                                dtype, "interpolate");
    if (s == AMPY_OK && !y)
        s = ampy_error(AMPY_ERR_VALUE, "interpolate: NULL output");
    const int64_t n = P * OH * OW;
    if (s != AMPY_OK || n == 0)
        return s;
    AMPY_CUDA_ENTER(device, st);
    cnn_interp_fwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, g, x, dtype, y);
    AMPY_CUDA_LAUNCHED("cnn_interp_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_interp2d_bwd_cuda(int device, int64_t P, int64_t H, int64_t W,
                                                  int64_t OH, int64_t OW, int mode,
                                                  int align_corners, double scale_h,
                                                  double scale_w, const void *dy, int dtype,
                                                  void *dx)
{
    InterpGeom g;
    ampy_status s = interp_geom(&g, P, H, W, OH, OW, mode, align_corners, scale_h, scale_w,
                                dtype, "interpolate_backward");
    if (s == AMPY_OK && !dx)
        s = ampy_error(AMPY_ERR_VALUE, "interpolate_backward: NULL output");
    const int64_t nx = P * H * W, n = P * OH * OW;
    if (s != AMPY_OK || nx == 0)
        return s;
    AMPY_CUDA_ENTER(device, st);
    CnnAcc acc(device, st, dtype, dx, nx);
    if ((s = acc.begin()) != AMPY_OK)
        return s;
    const unsigned b = ampy_cuda_blocks(n, AMPY_CUDA_THREADS);
    if (dtype == AMPY_FLOAT64)
        cnn_interp_bwd_kernel<double><<<b, AMPY_CUDA_THREADS, 0, st>>>(n, g, dy, dtype,
                                                                      (double *)acc.ptr);
    else
        cnn_interp_bwd_kernel<float><<<b, AMPY_CUDA_THREADS, 0, st>>>(n, g, dy, dtype,
                                                                     (float *)acc.ptr);
    AMPY_CUDA_LAUNCHED("cnn_interp_bwd_kernel");
    return acc.finish();
}
