/* sort.cu — stable row sorts and top-k on the device: the CUDA twins of
 * sort.h's ampy_sort / ampy_topk (contracts in ampy/sort_cuda.h), reached
 * from _C.sort / _C.topk through the ampy_cuda_api table.
 *
 * Each row becomes (key, position) pairs (keys as double for floating
 * dtypes, int64 for integers and bool) padded to a power of two L with
 * entries that sort after every real one, and a bitonic network orders them
 * by sort_math.h's total order (the CPU's: NaN largest, ties by position).
 * A total order has one sorted arrangement, so the positions are the CPU's
 * stable ones exactly, whatever the network. Rows with L <= 1024 run in one
 * block's shared memory (one block per row); longer rows in device scratch,
 * one launch per network stage. Top-k is the first k of the sort in the
 * requested direction. The values are the input elements, bit for bit.
 */
#include "common.cuh"
#include "ampy/sort_cuda.h"
#include "ampy/sort_math.h"

namespace {

#define SORT_THREADS 512

template <typename K> __device__ __forceinline__ K sort_key(const void *p, int dt, int64_t i);
template <> __device__ __forceinline__ double sort_key<double>(const void *p, int dt, int64_t i)
{
    return ampy_ld_d((const char *)p, dt, i);
}
template <> __device__ __forceinline__ int64_t sort_key<int64_t>(const void *p, int dt, int64_t i)
{
    return ampy_ld_i((const char *)p, dt, i);
}

/* a before b; positions >= n are the padding, after every real entry */
__device__ __forceinline__ bool before(double ak, int64_t ai, double bk, int64_t bi, int64_t n,
                                       int desc)
{
    if (ai >= n || bi >= n)
        return ai < bi;
    return ampy_sort_before_f(ak, ai, bk, bi, desc) != 0;
}
__device__ __forceinline__ bool before(int64_t ak, int64_t ai, int64_t bk, int64_t bi, int64_t n,
                                       int desc)
{
    if (ai >= n || bi >= n)
        return ai < bi;
    return ampy_sort_before_i(ak, ai, bk, bi, desc) != 0;
}

/* one compare-exchange of the bitonic network: entries i and i ^ j of the
 * stage with block size k */
template <typename K>
__device__ __forceinline__ void exchange(K *key, int64_t *pos, int64_t i, int64_t j, int64_t k,
                                         int64_t n, int desc)
{
    const int64_t l = i ^ j;
    if (l <= i)
        return;
    const bool up = (i & k) == 0;
    const bool swap = up ? before(key[l], pos[l], key[i], pos[i], n, desc)
                         : before(key[i], pos[i], key[l], pos[l], n, desc);
    if (swap) {
        const K tk = key[i];
        key[i] = key[l], key[l] = tk;
        const int64_t tp = pos[i];
        pos[i] = pos[l], pos[l] = tp;
    }
}

/* element e of a row written as the input's element at pos (its bits) */
__device__ __forceinline__ void put(const void *in, int64_t src, void *values, int64_t dst,
                                    size_t es)
{
    switch (es) {
    case 8: ((uint64_t *)values)[dst] = ((const uint64_t *)in)[src]; break;
    case 4: ((uint32_t *)values)[dst] = ((const uint32_t *)in)[src]; break;
    case 2: ((uint16_t *)values)[dst] = ((const uint16_t *)in)[src]; break;
    default: ((uint8_t *)values)[dst] = ((const uint8_t *)in)[src]; break;
    }
}

template <typename K>
__global__ void __launch_bounds__(SORT_THREADS)
sort_shared_kernel(int64_t rows, int64_t n, int64_t L, int64_t kout, const void *in, int dt,
                   size_t es, int desc, void *values, int64_t *indices)
{
    __shared__ K key[AMPY_SORT_CUDA_SHARED];
    __shared__ int64_t pos[AMPY_SORT_CUDA_SHARED];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
            pos[i] = i;
            key[i] = i < n ? sort_key<K>(in, dt, r * n + i) : (K)0;
        }
        __syncthreads();
        for (int64_t k = 2; k <= L; k <<= 1)
            for (int64_t j = k >> 1; j > 0; j >>= 1) {
                for (int64_t i = threadIdx.x; i < L; i += blockDim.x)
                    exchange(key, pos, i, j, k, n, desc);
                __syncthreads();
            }
        for (int64_t t = threadIdx.x; t < kout; t += blockDim.x) {
            put(in, r * n + pos[t], values, r * kout + t, es);
            indices[r * kout + t] = pos[t];
        }
        __syncthreads();
    }
}

template <typename K>
__global__ void sort_init_kernel(int64_t total, int64_t n, int64_t L, const void *in, int dt,
                                 K *key, int64_t *pos)
{
    AMPY_GRID_STRIDE(e, total)
    {
        const int64_t r = e / L, i = e % L;
        pos[e] = i;
        key[e] = i < n ? sort_key<K>(in, dt, r * n + i) : (K)0;
    }
}

template <typename K>
__global__ void sort_stage_kernel(int64_t total, int64_t n, int64_t L, int64_t j, int64_t k,
                                  int desc, K *key, int64_t *pos)
{
    AMPY_GRID_STRIDE(e, total)
    {
        const int64_t base = (e / L) * L;
        exchange(key + base, pos + base, e % L, j, k, n, desc);
    }
}

__global__ void sort_out_kernel(int64_t total, int64_t n, int64_t L, int64_t kout,
                                const int64_t *pos, const void *in, size_t es, void *values,
                                int64_t *indices)
{
    AMPY_GRID_STRIDE(e, total)
    {
        const int64_t r = e / kout, t = e % kout, p = pos[r * L + t];
        put(in, r * n + p, values, e, es);
        indices[e] = p;
    }
}

template <typename K>
ampy_status sort_global(int device, cudaStream_t st, int64_t rows, int64_t n, int64_t L,
                        int64_t kout, const void *in, int dt, size_t es, int desc, void *values,
                        int64_t *indices)
{
    const int64_t total = rows * L;
    const size_t kb = sizeof(K) * (size_t)total, pb = sizeof(int64_t) * (size_t)total;
    void *scratch = NULL;
    ampy_status s = ampy_cuda_alloc(device, kb + pb, &scratch);
    if (s != AMPY_OK)
        return s;
    K *key = (K *)scratch;
    int64_t *pos = (int64_t *)((char *)scratch + kb);
    const unsigned g = ampy_cuda_blocks(total, AMPY_CUDA_THREADS);
    sort_init_kernel<K><<<g, AMPY_CUDA_THREADS, 0, st>>>(total, n, L, in, dt, key, pos);
    cudaError_t e = cudaGetLastError();
    for (int64_t k = 2; k <= L && e == cudaSuccess; k <<= 1)
        for (int64_t j = k >> 1; j > 0 && e == cudaSuccess; j >>= 1) {
            sort_stage_kernel<K><<<g, AMPY_CUDA_THREADS, 0, st>>>(total, n, L, j, k, desc, key,
                                                                 pos);
            e = cudaGetLastError();
        }
    if (e == cudaSuccess && rows * kout > 0) {
        sort_out_kernel<<<ampy_cuda_blocks(rows * kout, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0,
                          st>>>(rows * kout, n, L, kout, pos, in, es, values, indices);
        e = cudaGetLastError();
    }
    ampy_cuda_free(scratch, kb + pb, device);
    AMPY_CUDA_TRY(e, "launch of sort_stage_kernel");
    return AMPY_OK;
}

/* rows sorted in direction desc, the first kout of each written */
ampy_status sort_rows(int device, ampy_dtype dt, int64_t rows, int64_t n, int64_t kout,
                      const void *in, int desc, void *values, int64_t *indices, const char *fn)
{
    if (!ampy_dtype_valid(dt))
        return ampy_error(AMPY_ERR_DTYPE, "%s: bad dtype", fn);
    if (rows < 0 || n < 0 || kout < 0 || kout > n)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad sizes", fn);
    if (rows == 0 || kout == 0)
        return AMPY_OK;
    if (!in || !values || !indices)
        return ampy_error(AMPY_ERR_VALUE, "%s: NULL argument", fn);
    if (n > AMPY_SORT_CUDA_MAX)
        return ampy_error(AMPY_ERR_VALUE, "%s: rows of %lld elements are longer than the CUDA "
                          "sort's limit of %lld", fn, (long long)n, (long long)AMPY_SORT_CUDA_MAX);
    int64_t L = 1;
    while (L < n)
        L <<= 1;
    const int fl = ampy_dtype_is_float(dt);
    const size_t es = ampy_dtype_size(dt);
    AMPY_CUDA_ENTER(device, st);
    if (L <= AMPY_SORT_CUDA_SHARED) {
        const unsigned g = (unsigned)(rows < 65535 * 8 ? rows : 65535 * 8);
        if (fl)
            sort_shared_kernel<double><<<g, SORT_THREADS, 0, st>>>(rows, n, L, kout, in, dt, es,
                                                                  desc, values, indices);
        else
            sort_shared_kernel<int64_t><<<g, SORT_THREADS, 0, st>>>(rows, n, L, kout, in, dt, es,
                                                                   desc, values, indices);
        AMPY_CUDA_LAUNCHED("sort_shared_kernel");
        return AMPY_OK;
    }
    return fl ? sort_global<double>(device, st, rows, n, L, kout, in, dt, es, desc, values,
                                    indices)
              : sort_global<int64_t>(device, st, rows, n, L, kout, in, dt, es, desc, values,
                                     indices);
}

} // namespace

extern "C" ampy_status ampy_sort_cuda(int device, ampy_dtype dtype, int64_t rows, int64_t n,
                                      const void *in, int descending, void *values,
                                      int64_t *indices)
{
    return sort_rows(device, dtype, rows, n, n, in, descending != 0, values, indices, "sort");
}

extern "C" ampy_status ampy_topk_cuda(int device, ampy_dtype dtype, int64_t rows, int64_t n,
                                      int64_t k, int largest, const void *in, void *values,
                                      int64_t *indices)
{
    return sort_rows(device, dtype, rows, n, k, in, largest != 0, values, indices, "topk");
}
