/* cnn_common.cuh — what the scattering backwards of cnn_pool.cu and
 * cnn_resample.cu share: the accumulator a gradient is summed into with
 * atomicAdd (the gradient itself for float32 and float64, a zeroed float32
 * scratch for float16/bfloat16, rounded once into the gradient at the end).
 * In an anonymous namespace: each .cu gets its own copy. */
#pragma once
#include "common.cuh"
#include "ampy/cnn_math.h"

namespace {

__global__ void cnn_acc_round_kernel(int64_t n, const float *acc, int dt, void *dx)
{
    AMPY_GRID_STRIDE(i, n)
    ampy_cnn_stf(dx, dt, i, acc[i]);
}

struct CnnAcc {
    int device;
    cudaStream_t st;
    int dt;
    void *dx;
    int64_t n;
    void *ptr;     /* float * or double *: where atomicAdd adds */
    void *scratch; /* the float32 sums of half data, or NULL */
    CnnAcc(int d, cudaStream_t s, int dtype, void *out, int64_t count)
        : device(d), st(s), dt(dtype), dx(out), n(count), ptr(NULL), scratch(NULL)
    {
    }
    size_t bytes() const { return (size_t)n * (dt == AMPY_FLOAT64 ? 8 : 4); }
    ampy_status begin()
    {
        if (dt == AMPY_FLOAT32 || dt == AMPY_FLOAT64) {
            ptr = dx;
        } else {
            ampy_status s = ampy_cuda_alloc(device, bytes(), &scratch);
            if (s != AMPY_OK)
                return s;
            ptr = scratch;
        }
        AMPY_CUDA_TRY(cudaMemsetAsync(ptr, 0, bytes(), st), "cudaMemsetAsync");
        return AMPY_OK;
    }
    ampy_status finish()
    {
        if (!scratch)
            return AMPY_OK;
        cnn_acc_round_kernel<<<ampy_cuda_blocks(n, AMPY_CUDA_THREADS), AMPY_CUDA_THREADS, 0, st>>>(
            n, (const float *)scratch, dt, dx);
        AMPY_CUDA_LAUNCHED("cnn_acc_round_kernel");
        return AMPY_OK;
    }
    ~CnnAcc()
    {
        if (scratch)
            ampy_cuda_free(scratch, bytes(), device);
    }
};

} // namespace
