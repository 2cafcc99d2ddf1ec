/* nn.cu — the fused loss kernels on the device: the CUDA twins of ampy/nn.h
 * for cross_entropy, nll_loss and mse_loss, reached from _C.nn_*
 * through the ampy_cuda_api table (layer_norm: nn_norm.cu; embedding, dropout
 * and the Philox fills: nn_embed.cu). Same arguments as the CPU functions plus
 * the device; every pointer is device memory.
 *
 * Per-element math is the CPU's (csrc/nn_rows.inc, csrc/nn_misc.c,
 * csrc/random.c): rows are read into float (float64 rows into double), the
 * same expressions in the same order of operations, ampy_nn_expf (nn.h) for
 * float exponentials, ampy_philox4x32 (random.h) for random bits, elem.h
 * conversions for every rounding, and --fmad=false so nothing is contracted.
 * What differs is the order of the double-precision row sums (a fixed block
 * tree instead of 16 running lanes): means, variances, log-sum-exps and loss
 * reductions agree to double rounding, so the float results match the CPU
 * except when two double sums straddle a float rounding boundary. Exact
 * matches: nll_loss with reduction='none' (and everything in nn_embed.cu).
 *
 * The target check (in [0, C) or equal to ignore_index) is a deferred
 * device-side check (common.cuh): targets_kernel records the first bad
 * row's target, the loss kernels give that row 0, and the CPU's
 * "Target 7 is out of bounds." is raised at the next synchronisation (in
 * sync-checks mode: at the forward, before any output is written). The
 * backward does not report again and gives a bad target's row a zero
 * gradient. torch.cuda reports the same with a device-side assert.
 */
#include "common.cuh"
#include "nn_common.cuh"

namespace {

/* ---- class-index losses: checks, total weight, sum of weights ------------------- */
/* out[0] = sum of w_t over rows not ignored, out[1] = sum of all C weights
 * (C without weights); *bad = the first bad row (ULLONG_MAX: none), whose
 * target is recorded as the deferred "Target %d is out of bounds." error
 * when `report` (the forward; the backward does not report twice). One block. */
__global__ void __launch_bounds__(NN_THREADS)
targets_kernel(int64_t M, int64_t C, const int64_t *t, const void *w, int dt, int64_t ignore,
               double *out, unsigned long long *bad, ampy_cuda_errslot slot, int report)
{
    __shared__ double sh[NN_THREADS];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        const int64_t ti = t[i];
        if (ti == ignore)
            continue;
        if (ti < 0 || ti >= C) {
            atomicMin(bad, (unsigned long long)i);
            continue;
        }
        s += w ? ampy_nn_load1(w, dt, ti) : 1.0;
    }
    s = block_sum(s, sh);
    double W = 0.0;
    for (int64_t j = threadIdx.x; w && j < C; j += blockDim.x)
        W += (double)(dt == AMPY_FLOAT64 ? ampy_nn_load1(w, dt, j) : (double)(float)ampy_nn_load1(w, dt, j));
    W = block_sum(W, sh);
    if (threadIdx.x == 0) {
        out[0] = s;
        out[1] = w ? W : (double)C;
        const unsigned long long b = atomicAdd(bad, 0ull); /* after block_sum's barriers */
        if (report && b != ~0ull)
            ampy_dev_fail(slot, AMPY_DEVERR_TARGET, 0, t[b], C);
    }
}

/* ---- cross_entropy ---------------------------------------------------------------- */
template <typename T>
__device__ double row_lse(const void *x, int dt, int64_t base, int64_t C, double *sh, T *shT)
{
    T m = ldT<T>(x, dt, base);
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) {
        const T v = ldT<T>(x, dt, base + i);
        m = v > m ? v : m;
    }
    m = block_max<T>(m, shT);
    if (m == (T)INFINITY || m == -(T)INFINITY)
        return (double)m;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
        s += (double)nexp(ldT<T>(x, dt, base + i) - m);
    s = block_sum(s, sh);
    return (double)m + log(s);
}

template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
ce_fwd_kernel(int64_t M, int64_t C, const void *x, int dt, const int64_t *t, const void *w,
              int64_t ignore, double ls, const double *tot, double *loss, double *lse_out)
{
    __shared__ double sh[NN_THREADS];
    __shared__ T shT[NN_THREADS];
    for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
        const int64_t tr = t[r];
        if (tr == ignore || tr < 0 || tr >= C) { /* a bad target: reported by targets_kernel */
            if (threadIdx.x == 0) {
                loss[r] = 0.0;
                if (lse_out)
                    lse_out[r] = 0.0;
            }
            continue;
        }
        const int64_t base = r * C;
        const double lse = row_lse<T>(x, dt, base, C, sh, shT);
        double wx = 0.0;
        if (ls > 0.0) {
            for (int64_t i = threadIdx.x; i < C; i += blockDim.x)
                wx += (double)ldT<T>(x, dt, base + i) * (w ? (double)wvec<T>(w, dt, i, (T)1) : 1.0);
            wx = block_sum(wx, sh);
        }
        if (threadIdx.x == 0) {
            const double xt = (double)ldT<T>(x, dt, base + tr);
            const double wt = w ? (double)wvec<T>(w, dt, tr, (T)1) : 1.0;
            loss[r] = ampy_ce_row_loss(wt, lse, xt, ls, C, tot[1], wx);
            if (lse_out)
                lse_out[r] = lse;
        }
    }
}

/* Loss reduction: NONE stores each row, SUM/MEAN one value (MEAN divides by
 * tot[0]). One block. */
__global__ void __launch_bounds__(NN_THREADS)
loss_reduce_kernel(int64_t M, const double *loss, int red, const double *tot, void *out, int dt,
                   double denom = 0.0)
{
    __shared__ double sh[NN_THREADS];
    if (red == AMPY_NN_REDUCTION_NONE) {
        for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
            ampy_nn_store1(out, dt, i, loss[i]);
        return;
    }
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
        s += loss[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0)
        ampy_nn_store1(out, dt, 0, red == AMPY_NN_REDUCTION_MEAN ? s / (tot ? tot[0] : denom) : s);
}

template <typename T>
__global__ void __launch_bounds__(NN_THREADS)
ce_bwd_kernel(int64_t M, int64_t C, const void *x, int dt, const int64_t *t, const void *w,
              int64_t ignore, double ls, int red, const void *dout, const double *lse_in,
              const double *tot, void *dx)
{
    __shared__ double sh[NN_THREADS];
    __shared__ T shT[NN_THREADS];
    const int none = red == AMPY_NN_REDUCTION_NONE;
    const double denom = red == AMPY_NN_REDUCTION_MEAN ? tot[0] : 1.0, W = tot[1];
    for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
        const int64_t tr = t[r], base = r * C;
        if (tr == ignore || tr < 0 || tr >= C) {
            for (int64_t k = threadIdx.x; k < C; k += blockDim.x)
                stT(dx, dt, base + k, (T)0);
            continue;
        }
        const double g = ampy_nn_load1(dout, dt, none ? r : 0);
        const double wt = w ? (double)wvec<T>(w, dt, tr, (T)1) : 1.0;
        double cn, cs;
        const double a = ampy_ce_row_grad_coef(g, wt, ls, C, W, denom, &cn, &cs);
        const double lse = lse_in ? lse_in[r] : row_lse<T>(x, dt, base, C, sh, shT);
        const T aa = (T)a, cc = (T)cs, l0 = (T)lse;
        for (int64_t k = threadIdx.x; k < C; k += blockDim.x) {
            T v = w ? aa * nexp(ldT<T>(x, dt, base + k) - l0) - cc * wvec<T>(w, dt, k, (T)1)
                    : aa * nexp(ldT<T>(x, dt, base + k) - l0) - cc;
            if (k == tr)
                v = (T)((double)v - cn);
            stT(dx, dt, base + k, v);
        }
    }
}

/* ---- nll_loss ------------------------------------------------------------------- */
__global__ void nll_rows_kernel(int64_t M, int64_t C, const void *x, int dt, const int64_t *t,
                                const void *w, int64_t ignore, double *loss)
{
    AMPY_GRID_STRIDE(i, M)
    {
        const int64_t ti = t[i];
        loss[i] = ti == ignore || ti < 0 || ti >= C /* bad: reported by targets_kernel */
                      ? 0.0
                      : -(w ? ampy_nn_load1(w, dt, ti) : 1.0) * ampy_nn_load1(x, dt, i * C + ti);
    }
}

__global__ void nll_bwd_kernel(int64_t M, int64_t C, int dt, const int64_t *t, const void *w,
                               int64_t ignore, int red, const void *dout, const double *tot,
                               void *dx)
{
    const double denom = red == AMPY_NN_REDUCTION_MEAN ? tot[0] : 1.0;
    AMPY_GRID_STRIDE(i, M)
    {
        const int64_t ti = t[i];
        if (ti == ignore || ti < 0 || ti >= C)
            continue;
        const double gi = ampy_nn_load1(dout, dt, red == AMPY_NN_REDUCTION_NONE ? i : 0);
        ampy_nn_store1(dx, dt, i * C + ti, -(w ? ampy_nn_load1(w, dt, ti) : 1.0) * gi / denom);
    }
}

/* ---- mse_loss (csrc/nn_misc.c) --------------------------------------------------------- */
__global__ void mse_elem_kernel(int64_t n, const void *x, const void *y, int dt, double *d)
{
    AMPY_GRID_STRIDE(i, n)
    {
        d[i] = ampy_mse_elem(ampy_nn_load1(x, dt, i), ampy_nn_load1(y, dt, i), dt);
    }
}

__global__ void mse_bwd_kernel(int64_t n, const void *x, const void *y, int dt, int red,
                               const void *dout, void *dx, void *dy)
{
    const double norm = red == AMPY_NN_REDUCTION_MEAN ? 2.0 / (double)n : 2.0;
    AMPY_GRID_STRIDE(i, n)
    {
        const double g = ampy_nn_load1(dout, dt, red == AMPY_NN_REDUCTION_NONE ? i : 0);
        const double v = ampy_mse_grad(ampy_nn_load1(x, dt, i), ampy_nn_load1(y, dt, i), norm, g, dt);
        if (dx)
            ampy_nn_store1(dx, dt, i, v);
        if (dy)
            ampy_nn_store1(dy, dt, i, -v);
    }
}

/* Check targets and compute tot[0] (MEAN denominator), tot[1] (sum of w).
 * tot must hold 2 doubles + 1 unsigned long long. */
ampy_status check_targets(int device, cudaStream_t st, int64_t M, int64_t C, const int64_t *t,
                          const void *w, int dt, int64_t ignore, int red, double *tot,
                          const char *fn, bool report = true)
{
    ampy_status s = ampy_nn_loss_check_args(M, C, dt, red, fn);
    if (s != AMPY_OK)
        return s;
    unsigned long long *flag = (unsigned long long *)(tot + 2);
    ampy_cuda_errslot slot;
    s = ampy_cuda_errslot_get(device, &slot);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_TRY(cudaMemsetAsync(flag, 0xFF, sizeof *flag, st), "cudaMemsetAsync");
    targets_kernel<<<1, NN_THREADS, 0, st>>>(M, C, t, w, dt, ignore, tot, flag, slot, report);
    AMPY_CUDA_LAUNCHED("targets_kernel");
    /* deferred: raised at the next sync; in sync-checks mode here, before any output */
    return report ? ampy_cuda_checked(device, st) : AMPY_OK;
}

} // namespace


/* ---- entry points ---------------------------------------------------------------------- */
extern "C" ampy_status ampy_nn_cross_entropy_fwd_cuda(int device, int64_t M, int64_t C,
                                                      const void *x, int x_dtype,
                                                      const int64_t *target, const void *w,
                                                      int64_t ignore_index, double ls,
                                                      int reduction, void *out, double *lse)
{
    ampy_status s = ampy_ce_check_smoothing(ls);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_ENTER(device, st);
    Scratch sc(device);
    s = sc.get(((size_t)(M > 0 ? M : 1) + 3) * sizeof(double));
    if (s != AMPY_OK)
        return s;
    double *tot = (double *)sc.p, *loss = tot + 3;
    s = check_targets(device, st, M, C, target, w, x_dtype, ignore_index, reduction, tot,
                      "cross_entropy");
    if (s != AMPY_OK)
        return s;
    if (M > 0) {
        if (x_dtype == AMPY_FLOAT64)
            ce_fwd_kernel<double><<<grid_rows(M), NN_THREADS, 0, st>>>(
                M, C, x, x_dtype, target, w, ignore_index, ls, tot, loss, lse);
        else
            ce_fwd_kernel<float><<<grid_rows(M), NN_THREADS, 0, st>>>(
                M, C, x, x_dtype, target, w, ignore_index, ls, tot, loss, lse);
        AMPY_CUDA_LAUNCHED("ce_fwd_kernel");
    }
    loss_reduce_kernel<<<1, NN_THREADS, 0, st>>>(M, loss, reduction, tot, out, x_dtype);
    AMPY_CUDA_LAUNCHED("loss_reduce_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_cross_entropy_bwd_cuda(int device, int64_t M, int64_t C,
                                                      const void *x, int x_dtype,
                                                      const int64_t *target, const void *w,
                                                      int64_t ignore_index, double ls,
                                                      int reduction, const void *dout,
                                                      const double *lse, void *dx)
{
    ampy_status s = ampy_ce_check_smoothing(ls);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_ENTER(device, st);
    Scratch sc(device);
    s = sc.get(3 * sizeof(double));
    if (s != AMPY_OK)
        return s;
    double *tot = (double *)sc.p;
    /* the forward checked these targets: no read-back (no sync) here; a bad
     * target's row gets a zero gradient instead of an out-of-bounds access */
    s = check_targets(device, st, M, C, target, w, x_dtype, ignore_index, reduction, tot,
                      "cross_entropy_backward", false);
    if (s != AMPY_OK || M == 0 || C == 0)
        return s;
    if (x_dtype == AMPY_FLOAT64)
        ce_bwd_kernel<double><<<grid_rows(M), NN_THREADS, 0, st>>>(
            M, C, x, x_dtype, target, w, ignore_index, ls, reduction, dout, lse, tot, dx);
    else
        ce_bwd_kernel<float><<<grid_rows(M), NN_THREADS, 0, st>>>(
            M, C, x, x_dtype, target, w, ignore_index, ls, reduction, dout, lse, tot, dx);
    AMPY_CUDA_LAUNCHED("ce_bwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_nll_loss_fwd_cuda(int device, int64_t M, int64_t C, const void *x,
                                                 int x_dtype, const int64_t *target,
                                                 const void *w, int64_t ignore_index,
                                                 int reduction, void *out)
{
    AMPY_CUDA_ENTER(device, st);
    Scratch sc(device);
    ampy_status s = sc.get(((size_t)(M > 0 ? M : 1) + 3) * sizeof(double));
    if (s != AMPY_OK)
        return s;
    double *tot = (double *)sc.p, *loss = tot + 3;
    s = check_targets(device, st, M, C, target, w, x_dtype, ignore_index, reduction, tot,
                      "nll_loss");
    if (s != AMPY_OK)
        return s;
    if (M > 0) {
        nll_rows_kernel<<<ampy_cuda_blocks(M, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
            M, C, x, x_dtype, target, w, ignore_index, loss);
        AMPY_CUDA_LAUNCHED("nll_rows_kernel");
    }
    loss_reduce_kernel<<<1, NN_THREADS, 0, st>>>(M, loss, reduction, tot, out, x_dtype);
    AMPY_CUDA_LAUNCHED("loss_reduce_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_nll_loss_bwd_cuda(int device, int64_t M, int64_t C, int x_dtype,
                                                 const int64_t *target, const void *w,
                                                 int64_t ignore_index, int reduction,
                                                 const void *dout, void *dx)
{
    AMPY_CUDA_ENTER(device, st);
    Scratch sc(device);
    ampy_status s = sc.get(3 * sizeof(double));
    if (s != AMPY_OK)
        return s;
    double *tot = (double *)sc.p;
    s = check_targets(device, st, M, C, target, w, x_dtype, ignore_index, reduction, tot,
                      "nll_loss_backward", false);
    if (s != AMPY_OK)
        return s;
    if (M * C > 0)
        AMPY_CUDA_TRY(cudaMemsetAsync(dx, 0, (size_t)(M * C) * ampy_dtype_size((ampy_dtype)x_dtype),
                                      st),
                      "cudaMemsetAsync");
    if (M > 0) {
        nll_bwd_kernel<<<ampy_cuda_blocks(M, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
            M, C, x_dtype, target, w, ignore_index, reduction, dout, tot, dx);
        AMPY_CUDA_LAUNCHED("nll_bwd_kernel");
    }
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_mse_fwd_cuda(int device, int64_t n, const void *x, const void *y,
                                            int dtype, int reduction, void *out)
{
    ampy_status s = ampy_nn_mse_check_args(n, dtype, reduction, 0);
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_ENTER(device, st);
    Scratch sc(device);
    s = sc.get((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (s != AMPY_OK)
        return s;
    double *d = (double *)sc.p;
    if (n > 0) {
        mse_elem_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
            n, x, y, dtype, d);
        AMPY_CUDA_LAUNCHED("mse_elem_kernel");
    }
    loss_reduce_kernel<<<1, NN_THREADS, 0, st>>>(n, d, reduction, NULL, out, dtype, (double)n);
    AMPY_CUDA_LAUNCHED("loss_reduce_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_nn_mse_bwd_cuda(int device, int64_t n, const void *x, const void *y,
                                            int dtype, int reduction, const void *dout, void *dx,
                                            void *dy)
{
    ampy_status s = ampy_nn_mse_check_args(n, dtype, reduction, 1);
    if (s != AMPY_OK)
        return s;
    if (n == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    mse_bwd_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        n, x, y, dtype, reduction, dout, dx, dy);
    AMPY_CUDA_LAUNCHED("mse_bwd_kernel");
    return AMPY_OK;
}
