/* common.cuh — what every .cu file of cuda/ shares: error checking that turns a
 * CUDA failure into an ampy_status + message (never an abort), the device
 * guard, launch geometry with 64-bit element counts, and per-dtype loads and
 * stores built on elem.h (so the GPU rounds exactly as the CPU does).
 *
 * Pattern (llm.c's cudaCheck, without the exit):
 *     AMPY_CUDA_TRY(cudaMemsetAsync(p, 0, n, st), "cudaMemsetAsync");
 *     kernel<<<grid, block, 0, st>>>(...);
 *     AMPY_CUDA_LAUNCHED("cast_kernel");
 */
#ifndef AMPY_CUDA_COMMON_CUH
#define AMPY_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "ampy/cuda.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/iter.h"
#include "ampy/status.h"

/* Record "<what>: <CUDA error string>" and return AMPY_ERR_RUNTIME. */
ampy_status ampy_cuda_fail(cudaError_t e, const char *what);

#define AMPY_CUDA_TRY(call, what)                      \
    do {                                               \
        cudaError_t ampy_e_ = (call);                  \
        if (ampy_e_ != cudaSuccess)                    \
            return ampy_cuda_fail(ampy_e_, (what));    \
    } while (0)

/* After a kernel launch: a bad configuration or an earlier asynchronous
 * fault is reported here, naming the kernel. */
#define AMPY_CUDA_LAUNCHED(name) AMPY_CUDA_TRY(cudaGetLastError(), "launch of " name)

/* Make `device` current for the scope and fetch its stream; returns from the
 * enclosing function with the error on failure. */
#define AMPY_CUDA_ENTER(device, stream_var)                                       \
    AMPY_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");                        \
    cudaStream_t stream_var = (cudaStream_t)ampy_cuda_stream(device);             \
    if (!stream_var)                                                              \
        return AMPY_ERR_RUNTIME

/* Grid-stride loops: blocks of 256 threads, grid capped so one launch never
 * exceeds the hardware limit; the loop variable is int64_t. */
#define AMPY_CUDA_THREADS 256
static inline unsigned ampy_cuda_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > 65535 * 32 ? 65535 * 32 : b);
}
#define AMPY_GRID_STRIDE(i, n)                                                       \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)blockDim.x * gridDim.x)

/* ---- loads and stores by dtype (elem.h math) ------------------------------ */
/* A value's compute kind: float for float32/float16/bfloat16, double for
 * float64, int64 for integers and bool (csrc/cast.c's rule). */
AMPY_ELEM float ampy_ld_f(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_FLOAT16: return ampy_f16_to_f32(((const uint16_t *)p)[i]);
    case AMPY_BFLOAT16: return ampy_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMPY_FLOAT64: return (float)((const double *)p)[i];
    case AMPY_INT64: return (float)((const int64_t *)p)[i];
    case AMPY_INT32: return (float)((const int32_t *)p)[i];
    case AMPY_UINT8: return (float)((const uint8_t *)p)[i];
    case AMPY_BOOL: return ((const uint8_t *)p)[i] != 0 ? 1.0f : 0.0f;
    default: return ((const float *)p)[i];
    }
}

/* Store a float, rounded once to dt. */
AMPY_ELEM void ampy_st_f(void *p, int dt, int64_t i, float v)
{
    switch (dt) {
    case AMPY_FLOAT16: ((uint16_t *)p)[i] = ampy_f32_to_f16(v); break;
    case AMPY_BFLOAT16: ((uint16_t *)p)[i] = ampy_f32_to_bf16(v); break;
    case AMPY_FLOAT64: ((double *)p)[i] = (double)v; break;
    case AMPY_INT64: ((int64_t *)p)[i] = ampy_f64_to_i64(v); break;
    case AMPY_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)ampy_f64_to_i64(v); break;
    case AMPY_UINT8: ((uint8_t *)p)[i] = (uint8_t)ampy_f64_to_i64(v); break;
    case AMPY_BOOL: ((uint8_t *)p)[i] = v != 0.0f; break;
    default: ((float *)p)[i] = v; break;
    }
}

/* Loads and stores of any dtype through double or int64, rounding once (shared by
   ewise.cu, reduce.cu, nn.cu and cast.cu). */
AMPY_ELEM double ampy_ld_d(const char *p, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_FLOAT32: return (double)((const float *)p)[i];
    case AMPY_FLOAT16: return (double)ampy_f16_to_f32(((const uint16_t *)p)[i]);
    case AMPY_BFLOAT16: return (double)ampy_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMPY_FLOAT64: return ((const double *)p)[i];
    case AMPY_INT64: return (double)((const int64_t *)p)[i];
    case AMPY_INT32: return (double)((const int32_t *)p)[i];
    case AMPY_UINT8: return (double)((const uint8_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0 ? 1.0 : 0.0;
    }
}

AMPY_ELEM int64_t ampy_ld_i(const char *p, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_INT64: return ((const int64_t *)p)[i];
    case AMPY_INT32: return ((const int32_t *)p)[i];
    case AMPY_UINT8: return ((const uint8_t *)p)[i];
    case AMPY_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return ampy_f64_to_i64(ampy_ld_d(p, dt, i));
    }
}

AMPY_ELEM void ampy_st_d(char *p, int dt, int64_t i, double v)
{
    switch (dt) {
    case AMPY_FLOAT32: ((float *)p)[i] = (float)v; break;
    case AMPY_FLOAT16: ((uint16_t *)p)[i] = ampy_f64_to_f16(v); break;
    case AMPY_BFLOAT16: ((uint16_t *)p)[i] = ampy_f64_to_bf16(v); break;
    case AMPY_FLOAT64: ((double *)p)[i] = v; break;
    case AMPY_INT64: ((int64_t *)p)[i] = ampy_f64_to_i64(v); break;
    case AMPY_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)ampy_f64_to_i64(v); break;
    case AMPY_UINT8: ((uint8_t *)p)[i] = (uint8_t)ampy_f64_to_i64(v); break;
    default: ((uint8_t *)p)[i] = v != 0.0; break;
    }
}

AMPY_ELEM void ampy_st_i(char *p, int dt, int64_t i, int64_t v)
{
    switch (dt) {
    case AMPY_FLOAT32: ((float *)p)[i] = (float)v; break;
    case AMPY_FLOAT16: ((uint16_t *)p)[i] = ampy_f64_to_f16((double)v); break;
    case AMPY_BFLOAT16: ((uint16_t *)p)[i] = ampy_f64_to_bf16((double)v); break;
    case AMPY_FLOAT64: ((double *)p)[i] = (double)v; break;
    case AMPY_INT64: ((int64_t *)p)[i] = v; break;
    case AMPY_INT32: ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case AMPY_UINT8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}


AMPY_ELEM int64_t ampy_ld_i(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case AMPY_INT64: return ((const int64_t *)p)[i];
    case AMPY_INT32: return ((const int32_t *)p)[i];
    case AMPY_UINT8: return ((const uint8_t *)p)[i];
    case AMPY_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return ampy_f64_to_i64((double)ampy_ld_f(p, dt, i));
    }
}

/* An N-d strided walk for up to AMPY_CUDA_MAX_OPERANDS operands, passed to
 * kernels by value. strides[k][d]: ELEMENT stride of operand k along dim d
 * (0 broadcasts). offsets() maps a flat row-major index to each operand's
 * element offset with 64-bit arithmetic. */
#define AMPY_CUDA_MAX_OPERANDS 4
struct ampy_cuda_walk {
    int ndim, nops;
    int64_t shape[AMPY_MAX_DIMS];
    int64_t strides[AMPY_CUDA_MAX_OPERANDS][AMPY_MAX_DIMS];
};

static __device__ __forceinline__ void ampy_walk_offsets(const ampy_cuda_walk &w, int64_t lin,
                                                         int64_t *off)
{
#pragma unroll
    for (int k = 0; k < AMPY_CUDA_MAX_OPERANDS; k++)
        off[k] = 0;
    for (int d = w.ndim - 1; d >= 0; d--) {
        int64_t n = w.shape[d];
        int64_t q = lin / n, r = lin - q * n;
        lin = q;
#pragma unroll
        for (int k = 0; k < AMPY_CUDA_MAX_OPERANDS; k++)
            off[k] += r * w.strides[k][d];
    }
}

/* Fill a walk over `shape` and drop dims of size 1 (fewer divisions). Returns
 * the element count. */
static inline int64_t ampy_walk_init(ampy_cuda_walk *w, int ndim, const int64_t *shape, int nops,
                                     const int64_t *const *strides)
{
    int64_t n = 1;
    w->ndim = 0;
    w->nops = nops;
    for (int d = 0; d < ndim; d++) {
        n *= shape[d];
        if (shape[d] == 1)
            continue;
        w->shape[w->ndim] = shape[d];
        for (int k = 0; k < AMPY_CUDA_MAX_OPERANDS; k++)
            w->strides[k][w->ndim] = k < nops ? strides[k][d] : 0;
        w->ndim++;
    }
    return n;
}

/* ---- deferred device-side argument checks (check.cu) ----------------------
 * Checks that need device data (index ranges, class targets, integer
 * division by zero) do not make the host wait: a kernel that finds a bad
 * value records the FIRST failure of the device in a small record of mapped
 * pinned host memory (claimed with one atomicCAS on a device word), skips
 * the bad element, and the host raises the error at the next point where it
 * synchronises anyway (ampy_cuda_memcpy to the host: item/tolist/numpy/.cpu(),
 * ampy_cuda_synchronize). torch's CUDA kernels do the same with device-side
 * asserts (which, unlike this, leave the CUDA context unusable).
 * ampy_cuda_set_sync_checks(1) (ampy.cuda.set_sync_checks(True), or
 * AMPY_CUDA_SYNC_CHECKS=1 at import) makes every checking op synchronise
 * right after its check kernel and raise before anything is written, as
 * the CPU does. */
enum {
    AMPY_DEVERR_NONE = 0,
    AMPY_DEVERR_INDEX = 1,    /* index %v is out of bounds for dimension %arg with size %size */
    AMPY_DEVERR_TARGET = 2,   /* Target %v is out of bounds.                                   */
    AMPY_DEVERR_EMBEDDING = 3, /* index out of range in self                                  */
    AMPY_DEVERR_ZERODIV = 4,  /* integer division by zero                                     */
};
struct ampy_cuda_err {
    unsigned int code; /* AMPY_DEVERR_*, 0: none */
    int arg;
    long long value, size;
};
struct ampy_cuda_errslot {
    unsigned int *claim; /* device word: 0 free, 1 taken */
    ampy_cuda_err *rec;  /* device view of the mapped host record */
};
/* The device's slot (created on first use). */
ampy_status ampy_cuda_errslot_get(int device, ampy_cuda_errslot *out);
/* After launching a check kernel on st: in sync-checks mode wait for it and
 * return the recorded error (nothing after it has been queued yet); else
 * AMPY_OK at once. */
ampy_status ampy_cuda_checked(int device, cudaStream_t st);
/* After a host synchronisation: the recorded error of `device` (then
 * cleared), or AMPY_OK. */
ampy_status ampy_cuda_deferred_error(int device);
extern "C" void ampy_cuda_set_sync_checks(int on);
extern "C" int ampy_cuda_get_sync_checks(void);

static __device__ __forceinline__ void ampy_dev_fail(ampy_cuda_errslot s, unsigned code, int arg,
                                                     int64_t value, int64_t size)
{
    if (atomicCAS(s.claim, 0u, 1u) == 0u) {
        s.rec->arg = arg;
        s.rec->value = (long long)value;
        s.rec->size = (long long)size;
        __threadfence_system();
        s.rec->code = code;
        __threadfence_system();
    }
}

/* A kernel checking idx[0..P) against [0, n) ([-n, n) when negative_ok): the
 * first bad one is recorded as (code, value, arg, n); then ampy_cuda_checked.
 * Kernels that use the indices must still skip bad ones themselves. */
ampy_status ampy_cuda_check_range(int device, cudaStream_t st, int64_t P, const int64_t *idx,
                                  int64_t n, int negative_ok, unsigned code, int arg);

#endif /* AMPY_CUDA_COMMON_CUH */
