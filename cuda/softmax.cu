/* softmax.cu — softmax/log_softmax and cumsum/cumprod on the device: the
 * CUDA twins of ampy_softmax and ampy_scan (reduce.h), reached from
 * _C.softmax / _C.scan through the ampy_cuda_api table.
 *
 * Softmax: one block per line along `dim`; max (NaN propagates) in the
 * compute type (float for the float32 class, double for float64), sum of
 * exp(x - max) in double, then exp(x - max) / (R)sum or
 * (x - max) - (R)log(sum), as csrc/reduce_softmax.c. exp/log are CUDA's
 * (within a few ulp of glibc's).
 *
 * Scans: one thread per line, in order (csrc/reduce_softmax.c's scan_line).
 */
#include <math.h>
#include <string.h>

#include "common.cuh"
#include "ampy/reduce.h"

namespace {

#define RED_THREADS 256

/* ---- softmax ---------------------------------------------------------------- */
struct SmArgs {
    int nk;
    int64_t kshape[AMPY_MAX_DIMS], kin[AMPY_MAX_DIMS], kout[AMPY_MAX_DIMS];
    int64_t M, L, sin, sout; /* lines, line length, element strides along the line */
    const char *in;
    char *out;
    int in_dt, out_dt, log;
    int64_t isz, osz;
};

template <typename R> __device__ __forceinline__ R sm_ld(const char *p, int dt, int64_t i);
template <> __device__ __forceinline__ float sm_ld<float>(const char *p, int dt, int64_t i)
{
    return ampy_ld_f(p, dt, i);
}
template <> __device__ __forceinline__ double sm_ld<double>(const char *p, int dt, int64_t i)
{
    return ampy_ld_d(p, dt, i);
}
__device__ __forceinline__ void sm_st(char *p, int dt, int64_t i, float v) { ampy_st_f(p, dt, i, v); }
__device__ __forceinline__ void sm_st(char *p, int dt, int64_t i, double v) { ampy_st_d(p, dt, i, v); }

template <typename R> __global__ void __launch_bounds__(RED_THREADS) softmax_kernel(SmArgs A)
{
    __shared__ double shd[RED_THREADS];
    __shared__ R shr[RED_THREADS];
    const int64_t isz = A.isz, osz = A.osz;
    for (int64_t m = blockIdx.x; m < A.M; m += gridDim.x) {
        int64_t oin = 0, oout = 0, lin = m;
        for (int d = A.nk - 1; d >= 0; d--) {
            const int64_t n = A.kshape[d];
            const int64_t q = lin / n, k = lin - q * n;
            lin = q;
            oin += k * A.kin[d];
            oout += k * A.kout[d];
        }
        const char *in = A.in + oin * isz;
        char *out = A.out + oout * osz;
        /* max, NaN propagating */
        R mx = (R)-INFINITY;
        for (int64_t i = threadIdx.x; i < A.L; i += blockDim.x) {
            R v = sm_ld<R>(in, A.in_dt, i * A.sin);
            mx = (v > mx || v != v) ? v : mx;
        }
        shr[threadIdx.x] = mx;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) {
                R o = shr[threadIdx.x + w], s = shr[threadIdx.x];
                shr[threadIdx.x] = (o > s || o != o) ? o : s;
            }
            __syncthreads();
        }
        mx = shr[0];
        double sum = 0.0;
        for (int64_t i = threadIdx.x; i < A.L; i += blockDim.x)
            sum += (double)exp(sm_ld<R>(in, A.in_dt, i * A.sin) - mx);
        shd[threadIdx.x] = sum;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w)
                shd[threadIdx.x] += shd[threadIdx.x + w];
            __syncthreads();
        }
        sum = shd[0];
        __syncthreads();
        const R rs = (R)sum, ls = (R)log(sum);
        for (int64_t i = threadIdx.x; i < A.L; i += blockDim.x) {
            R v = sm_ld<R>(in, A.in_dt, i * A.sin);
            R y = A.log ? (v - mx) - ls : exp(v - mx) / rs;
            sm_st(out, A.out_dt, i * A.sout, y);
        }
    }
}

/* cumsum / cumprod along a line: one thread per line, in order, accumulated
 * in double (floating inputs) or wrapping uint64 (integers and bool), each
 * element rounded once: csrc/reduce_softmax.c's scan_line, so the same bits. */
__global__ void scan_kernel(SmArgs A, int prod, int is_int)
{
    AMPY_GRID_STRIDE(m, A.M)
    {
        int64_t oin = 0, oout = 0, lin = m;
        for (int d = A.nk - 1; d >= 0; d--) {
            const int64_t n = A.kshape[d];
            const int64_t q = lin / n, k = lin - q * n;
            lin = q;
            oin += k * A.kin[d];
            oout += k * A.kout[d];
        }
        const char *in = A.in + oin * A.isz;
        char *out = A.out + oout * A.osz;
        double acc = prod ? 1.0 : 0.0;
        uint64_t iacc = prod ? 1u : 0u;
        for (int64_t i = 0; i < A.L; i++) {
            if (is_int) {
                const uint64_t v = (uint64_t)ampy_ld_i(in, A.in_dt, i * A.sin);
                iacc = prod ? iacc * v : iacc + v;
                ampy_st_i(out, A.out_dt, i * A.sout, (int64_t)iacc);
            } else {
                const double v = ampy_ld_d(in, A.in_dt, i * A.sin);
                acc = prod ? acc * v : acc + v;
                ampy_st_d(out, A.out_dt, i * A.sout, acc);
            }
        }
    }
}

unsigned grid_for(int64_t M) { return (unsigned)(M < 65535 * 8 ? (M < 1 ? 1 : M) : 65535 * 8); }

} // namespace

extern "C" ampy_status ampy_scan_cuda(int device, int op, int ndim, const int64_t *shape,
                                      const void *in, const int64_t *in_strides,
                                      ampy_dtype in_dtype, int dim, void *out,
                                      const int64_t *out_strides, ampy_dtype out_dtype)
{
    const char *what = op == AMPY_SCAN_CUMPROD ? "cumprod (cuda)" : "cumsum (cuda)";
    if (ndim < 0 || ndim > AMPY_MAX_DIMS || !ampy_dtype_valid(in_dtype) ||
        !ampy_dtype_valid(out_dtype))
        return ampy_error(AMPY_ERR_VALUE, "%s: bad ndim %d or dtype", what, ndim);
    if (dim < 0 || dim >= (ndim > 0 ? ndim : 1))
        return ampy_error(AMPY_ERR_VALUE, "%s: dim %d out of range for %d dims", what, dim, ndim);
    SmArgs A;
    memset(&A, 0, sizeof A);
    A.isz = (int64_t)ampy_dtype_size(in_dtype);
    A.osz = (int64_t)ampy_dtype_size(out_dtype);
    A.L = ndim > 0 ? shape[dim] : 1;
    A.sin = ndim > 0 ? in_strides[dim] / A.isz : 0;
    A.sout = ndim > 0 ? out_strides[dim] / A.osz : 0;
    A.M = 1;
    for (int d = 0; d < ndim; d++) {
        if (d == dim)
            continue;
        A.M *= shape[d];
        if (shape[d] == 1)
            continue;
        A.kshape[A.nk] = shape[d];
        A.kin[A.nk] = in_strides[d] / A.isz;
        A.kout[A.nk] = out_strides[d] / A.osz;
        A.nk++;
    }
    if (A.M == 0 || A.L == 0)
        return AMPY_OK;
    A.in = (const char *)in;
    A.out = (char *)out;
    A.in_dt = in_dtype;
    A.out_dt = out_dtype;
    /* csrc/reduce_softmax.c: the kind is double when either side is floating */
    const int is_int = !(ampy_dtype_is_float(in_dtype) || ampy_dtype_is_float(out_dtype));
    AMPY_CUDA_ENTER(device, st);
    scan_kernel<<<ampy_cuda_blocks(A.M, 128), 128, 0, st>>>(A, op == AMPY_SCAN_CUMPROD, is_int);
    AMPY_CUDA_LAUNCHED("scan_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_softmax_cuda(int device, int ndim, const int64_t *shape,
                                         const void *in, const int64_t *in_strides,
                                         ampy_dtype in_dtype, int dim, void *out,
                                         const int64_t *out_strides, ampy_dtype out_dtype, int log)
{
    const char *what = log ? "log_softmax (cuda)" : "softmax (cuda)";
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad ndim %d", what, ndim);
    if (dim < 0 || dim >= (ndim > 0 ? ndim : 1))
        return ampy_error(AMPY_ERR_VALUE, "%s: dim %d out of range for %d dims", what, dim, ndim);
    if (!ampy_dtype_valid(in_dtype) || !ampy_dtype_is_float(in_dtype) ||
        !ampy_dtype_valid(out_dtype) || !ampy_dtype_is_float(out_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected floating tensors, got %s", what,
                          ampy_dtype_valid(in_dtype) ? ampy_dtype_name(in_dtype) : "?");
    SmArgs A;
    memset(&A, 0, sizeof A);
    const int64_t isz = (int64_t)ampy_dtype_size(in_dtype);
    const int64_t osz = (int64_t)ampy_dtype_size(out_dtype);
    A.L = ndim > 0 ? shape[dim] : 1;
    A.sin = ndim > 0 ? in_strides[dim] / isz : 0;
    A.sout = ndim > 0 ? out_strides[dim] / osz : 0;
    A.M = 1;
    for (int d = 0; d < ndim; d++) {
        if (d == dim)
            continue;
        A.M *= shape[d];
        if (shape[d] == 1)
            continue;
        A.kshape[A.nk] = shape[d];
        A.kin[A.nk] = in_strides[d] / isz;
        A.kout[A.nk] = out_strides[d] / osz;
        A.nk++;
    }
    if (A.M == 0 || A.L == 0)
        return AMPY_OK;
    A.in = (const char *)in;
    A.out = (char *)out;
    A.in_dt = in_dtype;
    A.out_dt = out_dtype;
    A.log = log;
    A.isz = isz;
    A.osz = osz;
    AMPY_CUDA_ENTER(device, st);
    if (in_dtype == AMPY_FLOAT64) /* csrc/reduce_softmax.c: the input's kind */
        softmax_kernel<double><<<grid_for(A.M), RED_THREADS, 0, st>>>(A);
    else
        softmax_kernel<float><<<grid_for(A.M), RED_THREADS, 0, st>>>(A);
    AMPY_CUDA_LAUNCHED("softmax_kernel");
    return AMPY_OK;
}
