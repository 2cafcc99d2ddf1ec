/* multinomial.cu — categorical sampling from weight rows on the device: the
 * CUDA twin of ampy_multinomial (contract in ampy/multinomial_cuda.h),
 * reached from _C.multinomial through the ampy_cuda_api table.
 *
 * With replacement: one block per row; its first thread writes the running
 * sums serially (the CPU's order, so the same doubles), then every thread
 * maps its draws through ampy_mn_search (multinomial_math.h). Without
 * replacement: each category's key ampy_mn_key(p, u), then the ns largest
 * keys of each row by the CUDA top-k (cuda/sort.cu: key descending, ties in
 * category order, the CPU's qsort order).
 */
#include "common.cuh"
#include "ampy/multinomial_cuda.h"
#include "ampy/multinomial_math.h"
#include "ampy/sort_cuda.h"

namespace {

#define MN_THREADS 256

__global__ void __launch_bounds__(MN_THREADS)
mn_replacement_kernel(int64_t rows, int64_t ncat, const double *p, int64_t ns, const double *u,
                      double *cdf, int64_t *out)
{
    __shared__ int64_t last;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        double *c = cdf + r * ncat;
        if (threadIdx.x == 0) {
            double acc = 0.0;
            int64_t l = 0;
            for (int64_t j = 0; j < ncat; j++) {
                const double v = p[r * ncat + j];
                acc += v;
                c[j] = acc;
                if (v > 0.0)
                    l = j;
            }
            last = l;
        }
        __syncthreads();
        for (int64_t s = threadIdx.x; s < ns; s += blockDim.x)
            out[r * ns + s] = ampy_mn_search(c, ncat, last, u[r * ns + s]);
        __syncthreads();
    }
}

__global__ void mn_key_kernel(int64_t n, const double *p, const double *u, double *key)
{
    AMPY_GRID_STRIDE(e, n)
    key[e] = ampy_mn_key(p[e], u[e]);
}

} // namespace

extern "C" ampy_status ampy_multinomial_cuda(int device, int64_t rows, int64_t ncat,
                                             const double *p, int64_t ns, int replacement,
                                             const double *u, int64_t *out)
{
    if (rows < 0 || ncat <= 0 || ns <= 0 || (!replacement && ns > ncat))
        return ampy_error(AMPY_ERR_VALUE, "multinomial: bad sizes (rows %lld, categories %lld, "
                          "samples %lld)", (long long)rows, (long long)ncat, (long long)ns);
    if (rows == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    const size_t nk = (size_t)(rows * ncat), nv = replacement ? 0 : (size_t)(rows * ns);
    void *scratch = NULL;
    ampy_status s = ampy_cuda_alloc(device, sizeof(double) * (nk + nv), &scratch);
    if (s != AMPY_OK)
        return s;
    double *buf = (double *)scratch;
    if (replacement) {
        const unsigned g = (unsigned)(rows < 65535 * 8 ? rows : 65535 * 8);
        mn_replacement_kernel<<<g, MN_THREADS, 0, st>>>(rows, ncat, p, ns, u, buf, out);
        cudaError_t e = cudaGetLastError();
        ampy_cuda_free(scratch, sizeof(double) * (nk + nv), device);
        AMPY_CUDA_TRY(e, "launch of mn_replacement_kernel");
        return AMPY_OK;
    }
    mn_key_kernel<<<ampy_cuda_blocks((int64_t)nk, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
        (int64_t)nk, p, u, buf);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        s = ampy_topk_cuda(device, AMPY_FLOAT64, rows, ncat, ns, 1, buf, buf + nk, out);
    ampy_cuda_free(scratch, sizeof(double) * (nk + nv), device);
    AMPY_CUDA_TRY(e, "launch of mn_key_kernel");
    return s;
}
