/* clip.cu — CUDA twin of csrc/clip.c: the total gradient norm and the scale
 * of clip_grad_norm_ over many tensors (ampy/clip.h), without a host wait.
 *
 * Pass 1 (multi-tensor apply, mta.cuh): one block per chunk of CHUNK
 * elements computes the chunk's partial p-norm accumulation in double
 * (clip_math.h) and stores it at a slot fixed by (tensor, chunk). Pass 2 (one
 * thread) merges each tensor's partials in chunk order, rounds the tensor's
 * norm to its dtype, and finishes and rounds the total into `out`: the bits
 * do not depend on the scheduling. The scale is one more multi-tensor pass
 * reading the coefficient from device memory.
 */
#include <math.h>

#include "ampy/clip.h"
#include "ampy/clip_math.h"
#include "mta.cuh"

struct NormMeta {
    static constexpr int kMaxT = 64, kMaxB = 256;
    void *addr[1][kMaxT];
    int64_t numel[kMaxT];
    int64_t part_base[kMaxT]; /* first partial slot of the tensor */
    int64_t tensor[kMaxT];    /* the tensor's index in the call */
    uint8_t dt[1][kMaxT];
    uint8_t block_tensor[kMaxB];
    int32_t block_chunk[kMaxB];
};

__device__ __forceinline__ double load_abs(const void *p, int dt, int64_t i)
{
    if (dt == AMPY_FLOAT64)
        return fabs(((const double *)p)[i]);
    return fabs((double)ampy_ld_f(p, dt, i));
}

/* meta_out[2 t] = chunks of tensor t, meta_out[2 t + 1] = its dtype. */
__global__ void __launch_bounds__(BLOCK) clip_partial_kernel(NormMeta m, double p, double *part,
                                                             int64_t *meta_out)
{
    __shared__ double red[BLOCK];
    const int t = m.block_tensor[blockIdx.x];
    const int64_t c = m.block_chunk[blockIdx.x];
    const int64_t base = c * CHUNK, end = min(m.numel[t], base + (int64_t)CHUNK);
    double acc = ampy_norm_init(p);
    for (int64_t i = base + threadIdx.x; i < end; i += BLOCK)
        acc = ampy_norm_step(acc, load_abs(m.addr[0][t], m.dt[0][t], i), p);
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            red[threadIdx.x] = ampy_norm_merge(red[threadIdx.x], red[threadIdx.x + s], p);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        part[m.part_base[t] + c] = red[0];
        if (c == 0) {
            meta_out[2 * m.tensor[t]] = (m.numel[t] + CHUNK - 1) / CHUNK;
            meta_out[2 * m.tensor[t] + 1] = m.dt[0][t];
        }
    }
}

__global__ void clip_finish_kernel(int64_t n, const double *part, const int64_t *meta, double p,
                                   int out_dtype, void *out)
{
    double total = ampy_norm_init(p);
    int64_t slot = 0;
    for (int64_t t = 0; t < n; t++) {
        double acc = ampy_norm_init(p);
        for (int64_t c = 0; c < meta[2 * t]; c++, slot++)
            acc = ampy_norm_merge(acc, part[slot], p);
        double norm = meta[2 * t] ? ampy_norm_finish(acc, p) : 0.0;
        total = ampy_norm_step(total, fabs(ampy_norm_round(norm, (int)meta[2 * t + 1])), p);
    }
    ampy_nn_store1(out, out_dtype, 0, n ? ampy_norm_round(ampy_norm_finish(total, p), out_dtype)
                                      : 0.0);
}

static ampy_status check_list(int64_t n, const void *const *data, const int64_t *numel,
                              const int *dtype, const char *fn)
{
    if (n < 0 || (n > 0 && (!data || !numel || !dtype)))
        return ampy_error(AMPY_ERR_VALUE, "%s (cuda): bad tensor list", fn);
    ampy_status s = check_numel(n, numel);
    if (s != AMPY_OK)
        return s;
    for (int64_t i = 0; i < n; i++) {
        if (!(float_dt(dtype[i]) || dtype[i] == AMPY_FLOAT64))
            return ampy_error(AMPY_ERR_DTYPE, "%s: tensor %lld has dtype %s; expected float32, "
                              "float16, bfloat16 or float64", fn, (long long)i,
                              ampy_dtype_name(dtype[i]));
        if (numel[i] > 0 && !data[i])
            return ampy_error(AMPY_ERR_VALUE, "%s: NULL tensor %lld", fn, (long long)i);
    }
    return AMPY_OK;
}

extern "C" ampy_status ampy_clip_total_norm_cuda(int device, int64_t n, const void *const *data,
                                                 const int64_t *numel, const int *dtype, double p,
                                                 int out_dtype, void *out)
{
    ampy_status s = check_list(n, data, numel, dtype, "clip_total_norm");
    if (s != AMPY_OK)
        return s;
    if (p != p || !out)
        return ampy_error(AMPY_ERR_VALUE, "clip_total_norm (cuda): NaN order or NULL out");
    int64_t nchunks = 0;
    for (int64_t i = 0; i < n; i++)
        nchunks += (numel[i] + CHUNK - 1) / CHUNK;
    AMPY_CUDA_ENTER(device, st);
    const size_t meta_bytes = sizeof(int64_t) * (size_t)(2 * n + 1);
    const size_t bytes = sizeof(double) * (size_t)(nchunks + 1) + meta_bytes;
    void *buf = NULL;
    s = ampy_cuda_alloc(device, bytes, &buf);
    if (s != AMPY_OK)
        return s;
    int64_t *meta = (int64_t *)buf;
    double *part = (double *)((char *)buf + meta_bytes);
    AMPY_CUDA_TRY(cudaMemsetAsync(meta, 0, meta_bytes, st), "cudaMemsetAsync");
    int64_t next_slot = 0, last = -1;
    auto fill = [&](NormMeta &m, int slot, int64_t i) {
        if (i != last) { /* a tensor continued in a new launch keeps its slots */
            m.part_base[slot] = next_slot;
            next_slot += (numel[i] + CHUNK - 1) / CHUNK;
            last = i;
        } else {
            m.part_base[slot] = next_slot - (numel[i] + CHUNK - 1) / CHUNK;
        }
        m.addr[0][slot] = (void *)data[i];
        m.dt[0][slot] = (uint8_t)dtype[i];
        m.tensor[slot] = i;
    };
    auto launch = [&](const NormMeta &m, int nb) -> ampy_status {
        clip_partial_kernel<<<nb, BLOCK, 0, st>>>(m, p, part, meta);
        AMPY_CUDA_LAUNCHED("clip_partial_kernel");
        return AMPY_OK;
    };
    s = mta_run<NormMeta>(n, numel, fill, launch);
    if (s == AMPY_OK) {
        clip_finish_kernel<<<1, 1, 0, st>>>(n, part, meta, p, out_dtype, out);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            s = ampy_cuda_fail(e, "launch of clip_finish_kernel");
    }
    ampy_cuda_free(buf, bytes, device); /* stream-ordered: the kernels finish first */
    return s;
}

typedef MtaMeta<1, 64, 320> ScaleMeta;

__global__ void __launch_bounds__(BLOCK) clip_scale_kernel(ScaleMeta m, const void *coef,
                                                           int coef_dtype)
{
    const int t = m.block_tensor[blockIdx.x];
    const int64_t base = (int64_t)m.block_chunk[blockIdx.x] * CHUNK;
    const int64_t end = min(m.numel[t], base + (int64_t)CHUNK);
    const double cd = coef_dtype == AMPY_FLOAT64 ? *(const double *)coef
                                                 : (double)ampy_ld_f(coef, coef_dtype, 0);
    const int dt = m.dt[0][t];
    void *p = m.addr[0][t];
    for (int64_t i = base + threadIdx.x; i < end; i += BLOCK) {
        if (dt == AMPY_FLOAT64)
            ((double *)p)[i] *= cd;
        else
            ampy_st_f(p, dt, i, ampy_ld_f(p, dt, i) * (float)cd);
    }
}

extern "C" ampy_status ampy_clip_scale_cuda(int device, int64_t n, void *const *data,
                                            const int64_t *numel, const int *dtype,
                                            const void *coef, int coef_dtype)
{
    ampy_status s = check_list(n, (const void *const *)data, numel, dtype, "clip_scale_");
    if (s != AMPY_OK)
        return s;
    if (!coef || !(float_dt(coef_dtype) || coef_dtype == AMPY_FLOAT64))
        return ampy_error(AMPY_ERR_VALUE, "clip_scale_ (cuda): bad coefficient");
    AMPY_CUDA_ENTER(device, st);
    auto fill = [&](ScaleMeta &m, int slot, int64_t i) {
        m.addr[0][slot] = data[i];
        m.dt[0][slot] = (uint8_t)dtype[i];
    };
    auto launch = [&](const ScaleMeta &m, int nb) -> ampy_status {
        clip_scale_kernel<<<nb, BLOCK, 0, st>>>(m, coef, coef_dtype);
        AMPY_CUDA_LAUNCHED("clip_scale_kernel");
        return AMPY_OK;
    };
    return mta_run<ScaleMeta>(n, numel, fill, launch);
}
