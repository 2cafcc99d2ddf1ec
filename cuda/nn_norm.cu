/* nn_norm.cu — layer_norm forward and backward on the device: the CUDA twins
 * of ampy_nn_layer_norm_fwd/bwd (nn.h), reached from _C.nn_layer_norm_* through
 * the ampy_cuda_api table. Rows are read as the CPU rows read them (float, double
 * for float64), statistics in double with a fixed-order block tree (the CPU uses
 * 16 running lanes: mean and rstd agree to double rounding). The weight/bias
 * gradients sum rows in double over fixed chunks, then combine the chunks in order.
 */
#include "common.cuh"
#include "nn_common.cuh"

namespace {

/* ---- layer_norm --------------------------------------------------------------- */
template <typename T>
__device__ void ln_stats(const void *x, int dt, int64_t base, int64_t N, double eps, double *mean,
                         double *rstd, double *sh)
{
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
        s += (double)ldT<T>(x, dt, base + i);
    const double m = block_sum(s, sh) / (double)N;
    double q = 0.0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        const double d = (double)ldT<T>(x, dt, base + i) - m;
        q += d * d;
    }
    const double var = block_sum(q, sh) / (double)N;
    *mean = m;
    *rstd = 1.0 / sqrt((var > 0.0 ? var : 0.0) + eps);
}

template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
ln_fwd_kernel(int64_t M, int64_t N, const void *x, int dt, const void *w, const void *b, int wdt,
              double eps, void *y, double *mean_out, double *rstd_out)
{
    __shared__ double sh[NN_THREADS];
    for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
        const int64_t base = r * N;
        double mean, rstd;
        ln_stats<T>(x, dt, base, N, eps, &mean, &rstd, sh);
        if (threadIdx.x == 0 && mean_out)
            mean_out[r] = mean, rstd_out[r] = rstd;
        const T s = (T)rstd, o = -(s * (T)mean);
        for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
            const T wi = wvec<T>(w, wdt, i, (T)1), bi = wvec<T>(b, wdt, i, (T)0);
            stT(y, dt, base + i, (T)((ldT<T>(x, dt, base + i) * s + o) * wi + bi));
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
ln_bwd_dx_kernel(int64_t M, int64_t N, const void *x, int dt, const void *w, int wdt,
                 const void *dy, const double *cmean, const double *crstd, double eps, void *dx,
                 double *mean_out, double *rstd_out)
{
    __shared__ double sh[NN_THREADS];
    for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
        const int64_t base = r * N;
        double mean, rstd;
        if (cmean)
            mean = cmean[r], rstd = crstd[r];
        else
            ln_stats<T>(x, dt, base, N, eps, &mean, &rstd, sh);
        if (threadIdx.x == 0 && mean_out)
            mean_out[r] = mean, rstd_out[r] = rstd;
        if (!dx)
            continue;
        const T m = (T)mean, rr = (T)rstd;
        double sg = 0.0, sgx = 0.0;
        for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
            const T g = ldT<T>(dy, dt, base + i) * wvec<T>(w, wdt, i, (T)1);
            sg += (double)g;
            sgx += (double)(g * ((ldT<T>(x, dt, base + i) - m) * rr));
        }
        sg = block_sum(sg, sh);
        sgx = block_sum(sgx, sh);
        const T a = (T)(sg / (double)N), c = (T)(sgx / (double)N);
        for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
            const T dyj = ldT<T>(dy, dt, base + j), wj = wvec<T>(w, wdt, j, (T)1);
            const T xh = (ldT<T>(x, dt, base + j) - m) * rr;
            stT(dx, dt, base + j, (T)(rr * ((dyj * wj - a) - xh * c)));
        }
    }
}

/* dw[j] = sum_r dy * xhat, db[j] = sum_r dy, terms computed in T and summed
 * in double: thread (j, g) sums the rows of chunk g of column j (coalesced
 * across j) into part[g][j] (2 doubles); ln_bwd_dw_final adds the G
 * partials of a column in chunk order (deterministic). */
template <typename T>
__global__ void ln_bwd_dw_kernel(int64_t M, int64_t N, const void *x, int dt, const void *dy,
                                 const double *mean, const double *rstd, int64_t chunk,
                                 double *part)
{
    const int64_t g = blockIdx.y;
    const int64_t r0 = g * chunk, r1 = r0 + chunk < M ? r0 + chunk : M;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < N;
         j += (int64_t)blockDim.x * gridDim.x) {
        double sw = 0.0, sb = 0.0;
        for (int64_t r = r0; r < r1; r++) {
            const T m = (T)mean[r], rr = (T)rstd[r];
            const T d = ldT<T>(dy, dt, r * N + j);
            sw += (double)(T)(d * ((ldT<T>(x, dt, r * N + j) - m) * rr));
            sb += (double)d;
        }
        part[(g * N + j) * 2] = sw;
        part[(g * N + j) * 2 + 1] = sb;
    }
}

__global__ void ln_bwd_dw_final(int64_t N, int64_t G, const double *part, void *dw, void *db,
                                int wdt)
{
    AMPY_GRID_STRIDE(j, N)
    {
        double sw = 0.0, sb = 0.0;
        for (int64_t g = 0; g < G; g++) {
            sw += part[(g * N + j) * 2];
            sb += part[(g * N + j) * 2 + 1];
        }
        if (dw)
            ampy_nn_store1(dw, wdt, j, sw);
        if (db)
            ampy_nn_store1(db, wdt, j, sb);
    }
}

} // namespace


extern "C" ampy_status ampy_nn_layer_norm_fwd_cuda(int device, int64_t M, int64_t N, const void *x,
                                                   int x_dtype, const void *w, const void *b,
                                                   int w_dtype, double eps, void *y, double *mean,
                                                   double *rstd)
{
    if (M < 0 || N < 0 || !(eps >= 0.0) || !y)
        return ampy_error(AMPY_ERR_VALUE, "layer_norm: bad size, eps or output");
    if (!ampy_nn_is_float(x_dtype) || ((w || b) && !ampy_nn_is_float(w_dtype)) ||
        ((w || b) && (x_dtype == AMPY_FLOAT64) != (w_dtype == AMPY_FLOAT64)))
        return ampy_error(AMPY_ERR_DTYPE, "layer_norm: unsupported dtypes");
    if (M == 0 || N == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    if (x_dtype == AMPY_FLOAT64)
        ln_fwd_kernel<double><<<grid_rows(M), NN_THREADS, 0, st>>>(M, N, x, x_dtype, w, b, w_dtype,
                                                                    eps, y, mean, rstd);
    else
        ln_fwd_kernel<float><<<grid_rows(M), NN_THREADS, 0, st>>>(M, N, x, x_dtype, w, b, w_dtype,
                                                                   eps, y, mean, rstd);
    AMPY_CUDA_LAUNCHED("ln_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_layer_norm_bwd_cuda(int device, int64_t M, int64_t N, const void *x,
                                                   int x_dtype, const void *w, int w_dtype,
                                                   const void *dy, const double *mean,
                                                   const double *rstd, double eps, void *dx,
                                                   void *dw, void *db)
{
    if (M < 0 || N < 0 || !(eps >= 0.0))
        return ampy_error(AMPY_ERR_VALUE, "layer_norm_backward: bad size or eps");
    if (!ampy_nn_is_float(x_dtype) || ((w || dw || db) && !ampy_nn_is_float(w_dtype)))
        return ampy_error(AMPY_ERR_DTYPE, "layer_norm_backward: unsupported dtypes");
    if (N == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    const bool want_w = dw || db;
    if (M == 0) {
        if (dw)
            AMPY_CUDA_TRY(cudaMemsetAsync(dw, 0, (size_t)N * ampy_dtype_size((ampy_dtype)w_dtype), st),
                          "cudaMemsetAsync");
        if (db)
            AMPY_CUDA_TRY(cudaMemsetAsync(db, 0, (size_t)N * ampy_dtype_size((ampy_dtype)w_dtype), st),
                          "cudaMemsetAsync");
        return AMPY_OK;
    }
    const bool have = mean && rstd;
    Scratch stats(device);
    double *sm = NULL, *sr = NULL;
    if (want_w && !have) { /* the dw/db pass needs each row's statistics */
        ampy_status s = stats.get((size_t)M * 2 * sizeof(double));
        if (s != AMPY_OK)
            return s;
        sm = (double *)stats.p, sr = sm + M;
    }
    if (dx || sm) {
        if (x_dtype == AMPY_FLOAT64)
            ln_bwd_dx_kernel<double><<<grid_rows(M), NN_THREADS, 0, st>>>(
                M, N, x, x_dtype, w, w_dtype, dy, have ? mean : NULL, have ? rstd : NULL, eps, dx,
                sm, sr);
        else
            ln_bwd_dx_kernel<float><<<grid_rows(M), NN_THREADS, 0, st>>>(
                M, N, x, x_dtype, w, w_dtype, dy, have ? mean : NULL, have ? rstd : NULL, eps, dx,
                sm, sr);
        AMPY_CUDA_LAUNCHED("ln_bwd_dx_kernel");
    }
    if (want_w) {
        const double *pm = have ? mean : sm, *pr = have ? rstd : sr;
        /* about 128K threads, at least 16 rows each, at most 1024 chunks */
        int64_t G = (131072 + N - 1) / N;
        G = G > M / 16 ? M / 16 : G;
        G = G < 1 ? 1 : (G > 1024 ? 1024 : G);
        const int64_t chunk = (M + G - 1) / G;
        Scratch part(device);
        ampy_status s = part.get((size_t)(G * N) * 2 * sizeof(double));
        if (s != AMPY_OK)
            return s;
        const unsigned gx = ampy_cuda_blocks(N, 128) > 65535 ? 65535 : ampy_cuda_blocks(N, 128);
        dim3 grid(gx, (unsigned)G);
        if (x_dtype == AMPY_FLOAT64)
            ln_bwd_dw_kernel<double><<<grid, 128, 0, st>>>(M, N, x, x_dtype, dy, pm, pr, chunk,
                                                           (double *)part.p);
        else
            ln_bwd_dw_kernel<float><<<grid, 128, 0, st>>>(M, N, x, x_dtype, dy, pm, pr, chunk,
                                                          (double *)part.p);
        AMPY_CUDA_LAUNCHED("ln_bwd_dw_kernel");
        ln_bwd_dw_final<<<ampy_cuda_blocks(N, 128), 128, 0, st>>>(N, G, (const double *)part.p,
                                                                 dw, db, w_dtype);
        AMPY_CUDA_LAUNCHED("ln_bwd_dw_final");
    }
    return AMPY_OK;
}
