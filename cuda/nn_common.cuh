/* nn_common.cuh — what the nn kernels of nn.cu, nn_norm.cu and nn_embed.cu share: loads and
 * stores as the CPU rows make them (ampy_nn_load1, nn_vec), fixed-order block sums,
 * the float test of the nn entry points and self-freeing device scratch. Everything sits in an anonymous
 * namespace: each .cu gets its own copy. */
#pragma once
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "ampy/nn.h"
#include "ampy/nn_math.h"
#include "ampy/random.h"

namespace {

#define NN_THREADS 256

/* ---- loads / stores ---------------------------------------------------------- */
template <typename T> __device__ __forceinline__ T ldT(const void *p, int dt, int64_t i);
template <> __device__ __forceinline__ float ldT<float>(const void *p, int dt, int64_t i)
{
    return ampy_ld_f(p, dt, i);
}
template <> __device__ __forceinline__ double ldT<double>(const void *p, int dt, int64_t i)
{
    return ((const double *)p)[i];
}
/* a row element rounded once into the row's dtype */
__device__ __forceinline__ void stT(void *p, int dt, int64_t i, float v) { ampy_st_f(p, dt, i, v); }
__device__ __forceinline__ void stT(void *p, int dt, int64_t i, double v) { ((double *)p)[i] = v; }
/* a weight vector entry as the CPU's nn_vec makes it: float (double for f64 rows) */
template <typename T> __device__ __forceinline__ T wvec(const void *w, int wdt, int64_t i, T fill)
{
    return w ? (T)ampy_nn_load1(w, wdt, i) : fill;
}
__device__ __forceinline__ float nexp(float x) { return ampy_nn_expf(x); }
__device__ __forceinline__ double nexp(double x) { return exp(x); }

/* Block sum in double, fixed order; every thread gets the result. */
__device__ double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}
template <typename T> __device__ T block_max(T v, T *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            T o = sh[threadIdx.x + w];
            sh[threadIdx.x] = o > sh[threadIdx.x] ? o : sh[threadIdx.x];
        }
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

unsigned grid_rows(int64_t M) { return (unsigned)(M < 65535 * 8 ? (M < 1 ? 1 : M) : 65535 * 8); }

/* Device scratch that frees itself. */
struct Scratch {
    int device;
    size_t n;
    void *p;
    Scratch(int d) : device(d), n(0), p(NULL) {}
    ampy_status get(size_t bytes)
    {
        n = bytes;
        return ampy_cuda_alloc(device, bytes ? bytes : 1, &p);
    }
    ~Scratch()
    {
        if (p)
            ampy_cuda_free(p, n ? n : 1, device);
    }
};

} // namespace
