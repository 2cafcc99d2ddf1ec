/* attention.cu — fused scaled dot-product attention on the device: the CUDA
 * twins of ampy_attention_fwd/bwd (attention.h), reached from
 * _C.attention_fwd/bwd through the ampy_cuda_api table.
 *
 * One thread block per (batch item, query row) walks the keys in chunks of
 * its threads (one key per thread): the online softmax of the CPU kernel
 * with a block max and a block sum per chunk, the output row accumulated in
 * shared memory, float accumulators (double for float64). The masking,
 * dropout keep draw and row normalisation are attention_math.h's, the CPU's
 * own functions; probabilities are rounded to the input dtype before they
 * multiply V (and dS before it multiplies K or Q), as on the CPU. The
 * backward adds dK and dV rows with atomics into float (double) scratch, so
 * their summation order is not fixed; dQ is per block and exact in order.
 */
#include <math.h>

#include "common.cuh"
#include "nn_common.cuh"
#include "ampy/attention.h"
#include "ampy/attention_math.h"
#include "ampy/cuda.h"

namespace {

#define ATTN_THREADS 128

struct Item {
    int64_t q, k, v, m;
};

__device__ Item item_of(const ampy_attn_problem &p, int64_t b)
{
    Item o = {0, 0, 0, 0};
    for (int d = p.nd - 1; d >= 0; d--) {
        int64_t n = p.batch[d], i = n ? b % n : 0;
        b = n ? b / n : 0;
        o.q += i * p.q.bs[d], o.k += i * p.k.bs[d], o.v += i * p.v.bs[d];
        o.m += i * p.mask.bs[d];
    }
    return o;
}

template <typename T> __device__ __forceinline__ T rnd_in(T x, int dt)
{
    if (dt == AMPY_FLOAT16)
        return (T)ampy_f16_to_f32(ampy_f32_to_f16((float)x));
    if (dt == AMPY_BFLOAT16)
        return (T)ampy_bf16_to_f32(ampy_f32_to_bf16((float)x));
    return x;
}

/* The masked, scaled score of query i and key j (-inf where masked out). */
template <typename T>
__device__ T score(const ampy_attn_problem &p, const Item &o, int64_t i, int64_t j)
{
    if (!ampy_attn_causal_keep(p.causal, i, j))
        return (T)-INFINITY;
    T s = 0;
    for (int64_t e = 0; e < p.E; e++)
        s += ldT<T>(p.q.data, p.dtype, o.q + i * p.q.rs + e * p.q.cs) *
             ldT<T>(p.k.data, p.dtype, o.k + j * p.k.rs + e * p.k.cs);
    s *= (T)p.scale;
    if (p.mask.data) {
        int64_t mi = o.m + i * p.mask.rs + j * p.mask.cs;
        if (p.mask_dtype == AMPY_BOOL)
            return ((const uint8_t *)p.mask.data)[mi] ? s : (T)-INFINITY;
        s += (T)ampy_nn_load1(p.mask.data, p.mask_dtype, mi);
    }
    return s;
}

template <typename T> __device__ T drop_factor(const ampy_attn_problem &p, int64_t b, int64_t i,
                                               int64_t j)
{
    if (p.dropout_p <= 0.0)
        return (T)1;
    uint64_t idx = (uint64_t)((b * p.Lq + i) * p.Lk + j);
    int keep = ampy_attn_keep(p.seed, p.offset, idx, (float)(1.0 - p.dropout_p));
    return keep ? (T)ampy_attn_drop_scale(p.dropout_p) : (T)0;
}

template <typename T>
__global__ void __launch_bounds__(ATTN_THREADS)
attn_fwd_kernel(ampy_attn_problem p, int64_t rows, void *out, T *lse)
{
    extern __shared__ unsigned char smem[];
    double *dred = (double *)smem;
    T *red = (T *)(dred + ATTN_THREADS), *pj = red + ATTN_THREADS, *o = pj + ATTN_THREADS;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t b = r / p.Lq, i = r % p.Lq;
        Item it = item_of(p, b);
        int64_t jend = p.causal && i + 1 < p.Lk ? i + 1 : p.Lk;
        T m = (T)-INFINITY, l = 0;
        for (int64_t e = threadIdx.x; e < p.Ev; e += blockDim.x)
            o[e] = 0;
        for (int64_t j0 = 0; j0 < jend; j0 += blockDim.x) {
            int64_t j = j0 + threadIdx.x, nb = jend - j0 < blockDim.x ? jend - j0 : blockDim.x;
            T s = j < jend ? score<T>(p, it, i, j) : (T)-INFINITY;
            T mx = block_max<T>(s, red), mn = isnan(mx) || mx > m ? mx : m;
            if (mn == (T)-INFINITY)
                continue;
            T e_ = j < jend ? nexp(s - mn) : (T)0, alpha = nexp(m - mn);
            T sum = (T)block_sum((double)e_, dred);
            l = l * alpha + sum, m = mn;
            pj[threadIdx.x] = rnd_in<T>(e_ * drop_factor<T>(p, b, i, j), p.dtype);
            __syncthreads();
            for (int64_t e = threadIdx.x; e < p.Ev; e += blockDim.x) {
                T acc = o[e] * alpha;
                for (int64_t t = 0; t < nb; t++)
                    acc += pj[t] * ldT<T>(p.v.data, p.dtype, it.v + (j0 + t) * p.v.rs + e * p.v.cs);
                o[e] = acc;
            }
            __syncthreads();
        }
        T w = (T)ampy_attn_row_inv((double)l);
        for (int64_t e = threadIdx.x; e < p.Ev; e += blockDim.x)
            stT(out, p.dtype, r * p.Ev + e, o[e] * w);
        if (threadIdx.x == 0 && lse)
            lse[r] = (T)ampy_attn_lse((double)m, (double)l);
        __syncthreads();
    }
}

template <typename T>
__global__ void __launch_bounds__(ATTN_THREADS)
attn_bwd_kernel(ampy_attn_problem p, int64_t rows, const void *out, const void *dout,
                const T *lse, void *dq, T *dk, T *dv)
{
    extern __shared__ unsigned char smem[];
    double *dred = (double *)smem;
    T *ds = (T *)(dred + ATTN_THREADS), *dqa = ds + ATTN_THREADS;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t b = r / p.Lq, i = r % p.Lq;
        Item it = item_of(p, b);
        double dpart = 0;
        for (int64_t e = threadIdx.x; e < p.Ev; e += blockDim.x)
            dpart += (double)ldT<T>(dout, p.dtype, r * p.Ev + e) *
                     (double)ldT<T>(out, p.dtype, r * p.Ev + e);
        T D = (T)block_sum(dpart, dred), L = lse[r];
        for (int64_t e = threadIdx.x; e < p.E; e += blockDim.x)
            dqa[e] = 0;
        for (int64_t j0 = 0; j0 < p.Lk; j0 += blockDim.x) {
            int64_t j = j0 + threadIdx.x, nb = p.Lk - j0 < blockDim.x ? p.Lk - j0 : blockDim.x;
            T d = 0;
            if (j < p.Lk) {
                T pr = nexp(score<T>(p, it, i, j) - L), z = drop_factor<T>(p, b, i, j);
                T pd = rnd_in<T>(pr * z, p.dtype), dp = 0;
                for (int64_t e = 0; e < p.Ev; e++) {
                    T g = ldT<T>(dout, p.dtype, r * p.Ev + e);
                    dp += g * ldT<T>(p.v.data, p.dtype, it.v + j * p.v.rs + e * p.v.cs);
                    atomicAdd(dv + (b * p.Lk + j) * p.Ev + e, pd * g);
                }
                d = rnd_in<T>(pr * (dp * z - D) * (T)p.scale, p.dtype);
                for (int64_t e = 0; e < p.E; e++)
                    atomicAdd(dk + (b * p.Lk + j) * p.E + e,
                              d * ldT<T>(p.q.data, p.dtype, it.q + i * p.q.rs + e * p.q.cs));
            }
            ds[threadIdx.x] = d;
            __syncthreads();
            for (int64_t e = threadIdx.x; e < p.E; e += blockDim.x) {
                T acc = dqa[e];
                for (int64_t t = 0; t < nb; t++)
                    acc += ds[t] * ldT<T>(p.k.data, p.dtype, it.k + (j0 + t) * p.k.rs + e * p.k.cs);
                dqa[e] = acc;
            }
            __syncthreads();
        }
        for (int64_t e = threadIdx.x; e < p.E; e += blockDim.x)
            stT(dq, p.dtype, r * p.E + e, dqa[e]);
        __syncthreads();
    }
}

template <typename T> __global__ void attn_store_kernel(const T *src, void *dst, int dt, int64_t n)
{
    AMPY_GRID_STRIDE(i, n) { stT(dst, dt, i, src[i]); }
}

int64_t items(const ampy_attn_problem *p)
{
    int64_t n = 1;
    for (int d = 0; d < p->nd; d++)
        n *= p->batch[d];
    return n;
}

template <typename T>
ampy_status attn_bwd(int device, const ampy_attn_problem *p, const void *out, const void *dout,
                     const void *lse, void *dq, void *dk, void *dv)
{
    int64_t nb = items(p), nk = nb * p->Lk * p->E, nv = nb * p->Lk * p->Ev;
    Scratch sk(device), sv(device);
    ampy_status s = sk.get((size_t)nk * sizeof(T));
    if (s == AMPY_OK)
        s = sv.get((size_t)nv * sizeof(T));
    if (s != AMPY_OK)
        return s;
    AMPY_CUDA_ENTER(device, st);
    AMPY_CUDA_TRY(cudaMemsetAsync(sk.p, 0, (size_t)nk * sizeof(T), st), "attention dK scratch");
    AMPY_CUDA_TRY(cudaMemsetAsync(sv.p, 0, (size_t)nv * sizeof(T), st), "attention dV scratch");
    size_t sh = (ATTN_THREADS + (size_t)p->E) * sizeof(T) + ATTN_THREADS * sizeof(double);
    int64_t rows = nb * p->Lq;
    if (rows > 0) {
        attn_bwd_kernel<T><<<grid_rows(rows), ATTN_THREADS, sh, st>>>(
            *p, rows, out, dout, (const T *)lse, dq, (T *)sk.p, (T *)sv.p);
        AMPY_CUDA_LAUNCHED("attn_bwd_kernel");
    }
    if (nk > 0) {
        attn_store_kernel<T><<<ampy_cuda_blocks(nk, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0,
                               st>>>((const T *)sk.p, dk, p->dtype, nk);
        AMPY_CUDA_LAUNCHED("attn_store_kernel");
    }
    if (nv > 0) {
        attn_store_kernel<T><<<ampy_cuda_blocks(nv, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0,
                               st>>>((const T *)sv.p, dv, p->dtype, nv);
        AMPY_CUDA_LAUNCHED("attn_store_kernel");
    }
    return AMPY_OK; /* the scratch goes back to the stream-ordered cache */
}

} // namespace

extern "C" ampy_status ampy_attention_fwd_cuda(int device, const ampy_attn_problem *p, void *out,
                                               void *lse)
{
    ampy_status s = ampy_attn_check(p);
    if (s != AMPY_OK)
        return s;
    int64_t rows = items(p) * p->Lq;
    if (rows == 0)
        return AMPY_OK;
    AMPY_CUDA_ENTER(device, st);
    size_t es = p->dtype == AMPY_FLOAT64 ? sizeof(double) : sizeof(float);
    size_t sh = (2 * ATTN_THREADS + (size_t)p->Ev) * es + ATTN_THREADS * sizeof(double);
    if (p->dtype == AMPY_FLOAT64)
        attn_fwd_kernel<double><<<grid_rows(rows), ATTN_THREADS, sh, st>>>(*p, rows, out,
                                                                           (double *)lse);
    else
        attn_fwd_kernel<float><<<grid_rows(rows), ATTN_THREADS, sh, st>>>(*p, rows, out,
                                                                          (float *)lse);
    AMPY_CUDA_LAUNCHED("attn_fwd_kernel");
    return AMPY_OK;
}

extern "C" ampy_status ampy_attention_bwd_cuda(int device, const ampy_attn_problem *p,
                                               const void *out, const void *dout, const void *lse,
                                               void *dq, void *dk, void *dv)
{
    ampy_status s = ampy_attn_check(p);
    if (s != AMPY_OK)
        return s;
    if (items(p) == 0)
        return AMPY_OK;
    return p->dtype == AMPY_FLOAT64 ? attn_bwd<double>(device, p, out, dout, lse, dq, dk, dv)
                                    : attn_bwd<float>(device, p, out, dout, lse, dq, dk, dv);
}
