/* cnn_norm.cu — batch_norm and group_norm over (N, C, S) tensors on the
 * device: the CUDA twins of cnn.h's norm functions (contracts in
 * ampy/cnn_cuda.h), reached from _C.cnn_batch_norm_* / _C.cnn_group_norm_*
 * through the ampy_cuda_api table.
 *
 * One block per channel (batch norm) or per (sample, group) row (group
 * norm): the statistics are double sums of the compute type's terms (float
 * for float32 / float16 / bfloat16 data, double for float64) reduced in a
 * fixed block tree (nn_common.cuh's block_sum), so they equal the CPU's
 * serial sums up to double rounding. Everything after the sums is the
 * CPU's arithmetic through ampy/cnn_math.h: invstd and the unbiased
 * variance (ampy_cnn_bn_train_invstd), torch's running-stat update
 * (ampy_cnn_bn_update_running, thread 0 of the channel's block; the binding
 * bumps the buffers' versions, num_batches_tracked stays the module's),
 * the per-channel alpha / beta (ampy_cnn_norm_affine) and group norm's
 * backward coefficients (ampy_cnn_gn_bwd_coef).
 */
#include "common.cuh"
#include "nn_common.cuh"
#include "ampy/cnn_cuda.h"
#include "ampy/cnn_math.h"

namespace {

/* the compute type's fused multiply-add (torch's compiled kernels fuse) */
__device__ __forceinline__ float fmaT(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fmaT(double a, double b, double c) { return fma(a, b, c); }

/* element i of channel c of an (N, C, S) tensor, i over the N*S of them */
__device__ __forceinline__ int64_t chan_at(int64_t i, int64_t C, int64_t S, int64_t c)
{
    return ((i / S) * C + c) * S + i % S;
}

template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
cnn_bn_fwd_kernel(int64_t N, int64_t C, int64_t S, const void *x, int dt, const void *w,
                  const void *b, void *rm, void *rv, int pdt, int training, double momentum,
                  double eps, void *y, double *smean, double *sinv)
{
    __shared__ double sh[NN_THREADS];
    const int f64 = dt == AMPY_FLOAT64;
    const int64_t cnt = N * S;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        double mean, invstd;
        if (training) {
            double s = 0.0;
            for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x)
                s += (double)ldT<T>(x, dt, chan_at(i, C, S, c));
            const T m = (T)(block_sum(s, sh) / (double)cnt);
            double q = 0.0;
            for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) {
                const T d = ldT<T>(x, dt, chan_at(i, C, S, c)) - m;
                q += (double)(d * d);
            }
            const double vs = block_sum(q, sh);
            double unbiased;
            mean = (double)m;
            invstd = ampy_cnn_bn_train_invstd(vs, (double)cnt, eps, f64, &unbiased);
            if (threadIdx.x == 0 && rm)
                ampy_cnn_bn_update_running(rm, rv, pdt, c, momentum, mean, unbiased, f64);
        } else {
            mean = ampy_nn_load1(rm, pdt, c);
            invstd = ampy_cnn_bn_eval_invstd(ampy_nn_load1(rv, pdt, c), eps, f64);
        }
        if (threadIdx.x == 0)
            smean[c] = mean, sinv[c] = invstd;
        double a, beta;
        ampy_cnn_norm_affine(invstd, w ? ampy_nn_load1(w, pdt, c) : 1.0, mean,
                             b ? ampy_nn_load1(b, pdt, c) : 0.0, f64, &a, &beta);
        for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) {
            const int64_t at = chan_at(i, C, S, c);
            if (f64)
                ((double *)y)[at] = fma(((const double *)x)[at], a, beta);
            else
                stT(y, dt, at, fmaf(ldT<float>(x, dt, at), (float)a, (float)beta));
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
cnn_bn_bwd_kernel(int64_t N, int64_t C, int64_t S, const void *x, int dt, const void *dy,
                  const void *w, int pdt, int training, const double *smean, const double *sinv,
                  void *dx, void *dw, void *db)
{
    __shared__ double sh[NN_THREADS];
    const int64_t cnt = N * S;
    for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
        const T mean = (T)smean[c], inv = (T)sinv[c];
        const T wc = (T)(w ? ampy_nn_load1(w, pdt, c) : 1.0);
        double s = 0.0, p = 0.0;
        for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) {
            const int64_t at = chan_at(i, C, S, c);
            const T g = ldT<T>(dy, dt, at);
            s += (double)g;
            p += (double)((ldT<T>(x, dt, at) - mean) * g);
        }
        const double sum = block_sum(s, sh), dotp = block_sum(p, sh);
        if (threadIdx.x == 0) {
            if (dw)
                ampy_nn_store1(dw, pdt, c, dotp * sinv[c]);
            if (db)
                ampy_nn_store1(db, pdt, c, sum);
        }
        if (!dx)
            continue;
        const T k = (T)dotp * inv * inv / (T)cnt, gmean = (T)sum / (T)cnt;
        for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) {
            const int64_t at = chan_at(i, C, S, c);
            const T g = ldT<T>(dy, dt, at);
            const T v = training ? fmaT(-(ldT<T>(x, dt, at) - mean), k, g - gmean) * inv * wc
                                 : g * inv * wc;
            stT(dx, dt, at, v);
        }
    }
}

/* ---- group_norm ------------------------------------------------------------------ */
template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
cnn_gn_fwd_kernel(int64_t R, int64_t G, int64_t Cg, int64_t S, const void *x, int dt,
                  const void *w, const void *b, int pdt, double eps, void *y, double *mean_out,
                  double *rstd_out)
{
    __shared__ double sh[NN_THREADS];
    const int64_t D = Cg * S;
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const int64_t off = r * D, c0 = (r % G) * Cg;
        double s = 0.0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
            s += (double)ldT<T>(x, dt, off + i);
        const double m = block_sum(s, sh) / (double)D;
        double q = 0.0;
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
            const double d = (double)ldT<T>(x, dt, off + i) - m;
            q += d * d;
        }
        const double vs = block_sum(q, sh);
        const double mean = (double)(T)m, rstd = (double)(T)(1.0 / sqrt(vs / (double)D + eps));
        if (threadIdx.x == 0)
            mean_out[r] = mean, rstd_out[r] = rstd;
        for (int64_t j = 0; j < Cg; j++) {
            double a, beta;
            ampy_cnn_norm_affine(rstd, w ? ampy_nn_load1(w, pdt, c0 + j) : 1.0, mean,
                                 b ? ampy_nn_load1(b, pdt, c0 + j) : 0.0, dt == AMPY_FLOAT64, &a,
                                 &beta);
            for (int64_t i = threadIdx.x; i < S; i += blockDim.x) {
                const int64_t at = off + j * S + i;
                stT(y, dt, at, fmaT(ldT<T>(x, dt, at), (T)a, (T)beta));
            }
        }
    }
}

/* per (n, c) plane q: ds = sum(dy x), db = sum(dy), products in double */
template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
cnn_gn_sums_kernel(int64_t Q, int64_t S, const void *x, const void *dy, int dt, double *ds,
                   double *db)
{
    __shared__ double sh[NN_THREADS];
    for (int64_t q = blockIdx.x; q < Q; q += gridDim.x) {
        double a = 0.0, c = 0.0;
        for (int64_t i = threadIdx.x; i < S; i += blockDim.x) {
            const double g = (double)ldT<T>(dy, dt, q * S + i);
            a += g * (double)ldT<T>(x, dt, q * S + i);
            c += g;
        }
        a = block_sum(a, sh);
        c = block_sum(c, sh);
        if (threadIdx.x == 0)
            ds[q] = a, db[q] = c;
    }
}

/* dx of row r = (n, g): rstd w_c dy + c2 x + c3 */
template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
cnn_gn_dx_kernel(int64_t R, int64_t G, int64_t Cg, int64_t S, const void *x, const void *dy,
                 int dt, const void *w, int pdt, const double *ds, const double *db,
                 const double *mean, const double *rstd, void *dx)
{
    __shared__ double coef[2];
    const int64_t C = G * Cg;
    for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
        const int64_t n = r / G, c0 = (r % G) * Cg, off = r * Cg * S;
        if (threadIdx.x == 0) {
            double dsw = 0.0, dbw = 0.0;
            for (int64_t j = 0; j < Cg; j++) {
                const double wc = w ? ampy_nn_load1(w, pdt, c0 + j) : 1.0;
                dsw += ds[n * C + c0 + j] * wc;
                dbw += db[n * C + c0 + j] * wc;
            }
            ampy_cnn_gn_bwd_coef(dsw, dbw, mean[r], rstd[r], Cg * S, &coef[0], &coef[1]);
        }
        __syncthreads();
        const T c2 = (T)coef[0], c3 = (T)coef[1];
        for (int64_t j = 0; j < Cg; j++) {
            const T c1 = (T)(rstd[r] * (w ? ampy_nn_load1(w, pdt, c0 + j) : 1.0));
            for (int64_t i = threadIdx.x; i < S; i += blockDim.x) {
                const int64_t at = off + j * S + i;
                stT(dx, dt, at, fmaT(c1, ldT<T>(dy, dt, at), fmaT(c2, ldT<T>(x, dt, at), c3)));
            }
        }
        __syncthreads();
    }
}

/* dw_c = sum_n (ds - db mean) rstd, db_c = sum_n db, in the CPU's order */
__global__ void cnn_gn_param_kernel(int64_t N, int64_t C, int64_t G, const double *ds,
                                    const double *db, const double *mean, const double *rstd,
                                    int pdt, void *dw, void *dbias)
{
    const int64_t Cg = C / G;
    AMPY_GRID_STRIDE(c, C)
    {
        double sw = 0.0, sb = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const int64_t r = n * G + c / Cg;
            sw += (ds[n * C + c] - db[n * C + c] * mean[r]) * rstd[r];
            sb += db[n * C + c];
        }
        if (dw)
            ampy_nn_store1(dw, pdt, c, sw);
        if (dbias)
            ampy_nn_store1(dbias, pdt, c, sb);
    }
}

ampy_status check_norm(int64_t N, int64_t C, int64_t S, int dt, int pdt, const char *fn)
{
    if (N < 0 || C < 0 || S < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: negative size", fn);
    if (!ampy_nn_is_float(dt) || !ampy_nn_is_float(pdt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected floating-point tensors", fn);
    if ((dt == AMPY_FLOAT64) != (pdt == AMPY_FLOAT64))
        return ampy_error(AMPY_ERR_DTYPE, "%s: a float64 input needs float64 parameters", fn);
    return AMPY_OK;
}

} // namespace

#define NORM_LAUNCH(kernel, blocks, ...)                                                         \
    do {                                                                                         \
        if (x_dtype == AMPY_FLOAT64)                                                             \
            kernel<double><<<grid_rows(blocks), NN_THREADS, 0, st>>>(__VA_ARGS__);               \
        else                                                                                     \
            kernel<float><<<grid_rows(blocks), NN_THREADS, 0, st>>>(__VA_ARGS__);                \
        AMPY_CUDA_LAUNCHED(#kernel);                                                             \
    } while (0)

extern "C" ampy_status ampy_cnn_batch_norm_fwd_cuda(int device, int64_t N, int64_t C, int64_t S,
                                                    const void *x, int x_dtype, const void *w,
                                                    const void *b, void *run_mean, void *run_var,
                                                    int p_dtype, int training, double momentum,
                                                    double eps, void *y, double *save_mean,
                                                    double *save_invstd)
{
    ampy_status s = check_norm(N, C, S, x_dtype, p_dtype, "batch_norm");
    if (s != AMPY_OK)
        return s;
    if (!y || !save_mean || !save_invstd || !(eps >= 0.0) || (!run_mean) != (!run_var) ||
        (!training && !run_mean))
        return ampy_error(AMPY_ERR_VALUE, "batch_norm: bad arguments");
    if (N * C * S == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    NORM_LAUNCH(cnn_bn_fwd_kernel, C, N, C, S, x, x_dtype, w, b, run_mean, run_var, p_dtype,
                training, momentum, eps, y, save_mean, save_invstd);
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_batch_norm_bwd_cuda(int device, int64_t N, int64_t C, int64_t S,
                                                    const void *x, int x_dtype, const void *dy,
                                                    const void *w, int p_dtype, int training,
                                                    const double *save_mean,
                                                    const double *save_invstd, void *dx,
                                                    void *dw, void *db)
{
    ampy_status s = check_norm(N, C, S, x_dtype, p_dtype, "batch_norm_backward");
    if (s != AMPY_OK)
        return s;
    if (!save_mean || !save_invstd)
        return ampy_error(AMPY_ERR_VALUE, "batch_norm_backward: missing statistics");
    if (C == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    NORM_LAUNCH(cnn_bn_bwd_kernel, C, N, C, S, x, x_dtype, dy, w, p_dtype, training, save_mean,
                save_invstd, dx, dw, db);
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_group_norm_fwd_cuda(int device, int64_t N, int64_t C, int64_t S,
                                                    int64_t G, const void *x, int x_dtype,
                                                    const void *w, const void *b, int p_dtype,
                                                    double eps, void *y, double *mean,
                                                    double *rstd)
{
    ampy_status s = check_norm(N, C, S, x_dtype, p_dtype, "group_norm");
    if (s == AMPY_OK && (G < 1 || C % G != 0))
        s = ampy_error(AMPY_ERR_VALUE, "group_norm: channels must be divisible by groups");
    if (s != AMPY_OK)
        return s;
    if (!y || !mean || !rstd || !(eps >= 0.0))
        return ampy_error(AMPY_ERR_VALUE, "group_norm: bad arguments");
    if (N == 0 || C == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    NORM_LAUNCH(cnn_gn_fwd_kernel, N * G, N * G, G, C / G, S, x, x_dtype, w, b, p_dtype, eps, y,
                mean, rstd);
    return AMPY_OK;
}

extern "C" ampy_status ampy_cnn_group_norm_bwd_cuda(int device, int64_t N, int64_t C, int64_t S,
                                                    int64_t G, const void *x, int x_dtype,
                                                    const void *dy, const void *w, int p_dtype,
                                                    const double *mean, const double *rstd,
                                                    void *dx, void *dw, void *db)
{
    ampy_status s = check_norm(N, C, S, x_dtype, p_dtype, "group_norm_backward");
    if (s == AMPY_OK && (G < 1 || C % G != 0))
        s = ampy_error(AMPY_ERR_VALUE,
                       "group_norm_backward: channels must be divisible by groups");
    if (s != AMPY_OK)
        return s;
    if (!mean || !rstd)
        return ampy_error(AMPY_ERR_VALUE, "group_norm_backward: missing statistics");
    if (C > 0 && N > (int64_t)(SIZE_MAX / 16) / C)
        return ampy_error(AMPY_ERR_NOMEM, "group_norm_backward: size overflow");
    if (C == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    Scratch sums(device);
    if ((s = sums.get(sizeof(double) * (size_t)(2 * N * C))) != AMPY_OK)
        return s;
    double *ds = (double *)sums.p, *dbs = ds + N * C;
    if (N > 0) {
        NORM_LAUNCH(cnn_gn_sums_kernel, N * C, N * C, S, x, dy, x_dtype, ds, dbs);
        if (dx)
            NORM_LAUNCH(cnn_gn_dx_kernel, N * G, N * G, G, C / G, S, x, dy, x_dtype, w, p_dtype,
                        ds, dbs, mean, rstd, dx);
    }
    if (dw || db) {
        cnn_gn_param_kernel<<<ampy_cuda_blocks(C, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
            N, C, G, ds, dbs, mean, rstd, p_dtype, dw, db);
        AMPY_CUDA_LAUNCHED("cnn_gn_param_kernel");
    }
    return AMPY_OK;
}
