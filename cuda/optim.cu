/* optim.cu — fused multi-tensor SGD and Adam/AdamW with fp32 master weights
 * on CUDA (ampy/amp_cuda.h), the twins of csrc/optim.c.
 *
 * One pass per element: load grad -> * inv_scale -> elem.h's update of the
 * fp32 (master) weight and moments -> store the half model weight rounded
 * once. With options.write_grads and an inv_scale, the unscaled gradient is
 * stored back into grad in the same pass (csrc/optim.c's write-back). found_inf
 * is read by every block before it writes anything, so a skipped step changes
 * nothing but the gradients (still unscaled, as torch's unscale_() before a
 * skipped step) and needs no host sync. Adam's per-tensor
 * constants depend on the step count, which lives on the device: thread 0 of
 * each block computes them (ampy_adam_scalars_init, optim_math.h) into
 * shared memory; a second small kernel then increments the counts.
 */
#include <math.h>

#include "ampy/optim_math.h"
#include "mta.cuh"

/* ---- Adam / AdamW ---------------------------------------------------------------- */
/* operands: 0 param, 1 master (or NULL), 2 grad, 3 exp_avg, 4 exp_avg_sq, 5 max_exp_avg_sq */
typedef MtaMeta<6, 20, 256> AdamMeta;

/* A skipped step's whole work for one block: grad[base, end) *= inv. */
static __device__ void unscale_chunk(void *grad, int gdt, int64_t base, int64_t end, float inv)
{
    for (int64_t i = base + threadIdx.x; i < end; i += BLOCK)
        ampy_optim_store_grad(grad, gdt, i, ampy_optim_load_grad(grad, gdt, i) * inv);
}

/* 1 when the kernel stores the unscaled gradients (the host's flag, and the
 * device's multiplier is not 1). */
static __device__ int write_back(int write, const float *inv_scale)
{
    return write && inv_scale && *inv_scale != 1.0f;
}

__global__ void __launch_bounds__(BLOCK) adam_kernel(AdamMeta m, ampy_adam_options o,
                                                     const float *inv_scale,
                                                     const float *found_inf)
{
    const int t = m.block_tensor[blockIdx.x];
    const int wg = write_back(o.write_grads, inv_scale);
    if (found_inf && *found_inf != 0.0f) {
        if (wg) {
            const int64_t b0 = (int64_t)m.block_chunk[blockIdx.x] * CHUNK;
            unscale_chunk(m.addr[2][t], m.dt[1][t], b0, min(m.numel[t], b0 + (int64_t)CHUNK),
                          *inv_scale);
        }
        return;
    }
    __shared__ ampy_adam_scalars s;
    if (threadIdx.x == 0)
        ampy_adam_scalars_init(&o, inv_scale ? *inv_scale : 1.0f, 0, *m.step[t] + 1.0f, &s);
    __syncthreads();
    const ampy_adam_scalars sc = s;
    const int64_t base = (int64_t)m.block_chunk[blockIdx.x] * CHUNK;
    const int64_t end = min(m.numel[t], base + (int64_t)CHUNK);
    void *param = m.addr[0][t];
    float *master = (float *)m.addr[1][t];
    void *grad = m.addr[2][t];
    float *ma = (float *)m.addr[3][t], *va = (float *)m.addr[4][t], *vx = (float *)m.addr[5][t];
    float *w = master ? master : (float *)param;
    const int pdt = m.dt[0][t], gdt = m.dt[1][t];
    for (int64_t i0 = base + threadIdx.x; i0 < end; i0 += (int64_t)BLOCK * ILP) {
        float g[ILP], p[ILP], mm[ILP], vv[ILP], vmax[ILP];
#pragma unroll
        for (int j = 0; j < ILP; j++) {
            int64_t i = i0 + (int64_t)j * BLOCK;
            if (i < end) {
                g[j] = ampy_optim_load_grad(grad, gdt, i);
                p[j] = w[i];
                mm[j] = ma[i];
                vv[j] = va[i];
                vmax[j] = sc.amsgrad ? vx[i] : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < ILP; j++) {
            int64_t i = i0 + (int64_t)j * BLOCK;
            if (i >= end)
                continue;
            if (wg)
                ampy_optim_store_grad(grad, gdt, i, g[j] * sc.inv_scale);
            ampy_adam_elem(g[j], &p[j], &mm[j], &vv[j], &vmax[j], &sc);
            w[i] = p[j];
            ma[i] = mm[j];
            va[i] = vv[j];
            if (sc.amsgrad)
                vx[i] = vmax[j];
            if (master)
                ampy_optim_store_half(param, pdt, i, p[j]);
        }
    }
}

#define STEP_BATCH 256
struct StepList {
    float *step[STEP_BATCH];
    int n;
};

__global__ void step_count_kernel(StepList l, const float *found_inf)
{
    if (found_inf && *found_inf != 0.0f)
        return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < l.n)
        *l.step[i] = *l.step[i] + 1.0f;
}

extern "C" ampy_status ampy_optim_adam_step_cuda(int device, int64_t n, const ampy_adam_tensor *t,
                                                 const ampy_adam_options *o,
                                                 const float *inv_scale, const float *found_inf)
{
    ampy_status s = ampy_adam_check_args(n, t, o);
    if (s != AMPY_OK)
        return s;
    int64_t *numel = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!numel)
        return ampy_error(AMPY_ERR_NOMEM, "adam_step (cuda): out of memory");
    for (int64_t i = 0; i < n; i++)
        numel[i] = t[i].numel;
    s = check_numel(n, numel);
    if (s != AMPY_OK) {
        free(numel);
        return s;
    }
    cudaError_t e = cudaSetDevice(device);
    cudaStream_t st = (cudaStream_t)ampy_cuda_stream(device);
    if (e != cudaSuccess || !st) {
        free(numel);
        return e != cudaSuccess ? ampy_cuda_fail(e, "cudaSetDevice") : AMPY_ERR_RUNTIME;
    }
    const ampy_adam_options h = *o;
    auto fill = [&](AdamMeta &m, int slot, int64_t i) {
        const ampy_adam_tensor *x = &t[i];
        m.addr[0][slot] = x->param;
        m.addr[1][slot] = x->master;
        m.addr[2][slot] = (void *)x->grad;
        m.addr[3][slot] = x->exp_avg;
        m.addr[4][slot] = x->exp_avg_sq;
        m.addr[5][slot] = o->amsgrad ? x->max_exp_avg_sq : NULL;
        m.step[slot] = x->step;
        m.dt[0][slot] = (uint8_t)x->param_dtype;
        m.dt[1][slot] = (uint8_t)x->grad_dtype;
    };
    auto launch = [&](const AdamMeta &m, int nb) -> ampy_status {
        adam_kernel<<<nb, BLOCK, 0, st>>>(m, h, inv_scale, found_inf);
        AMPY_CUDA_LAUNCHED("adam_kernel");
        return AMPY_OK;
    };
    s = mta_run<AdamMeta>(n, numel, fill, launch);
    free(numel);
    /* every tensor's count, also of empty tensors (torch counts them too) */
    StepList l;
    l.n = 0;
    for (int64_t i = 0; i < n && s == AMPY_OK; i++) {
        l.step[l.n++] = t[i].step;
        if (l.n == STEP_BATCH || i == n - 1) {
            step_count_kernel<<<1, STEP_BATCH, 0, st>>>(l, found_inf);
            cudaError_t le = cudaGetLastError();
            if (le != cudaSuccess)
                return ampy_cuda_fail(le, "launch of step_count_kernel");
            l.n = 0;
        }
    }
    return s;
}

/* ---- SGD ------------------------------------------------------------------------- */
/* operands: 0 param, 1 master, 2 grad, 3 momentum buffer */
typedef MtaMeta<4, 36, 320> SgdMeta;

__global__ void __launch_bounds__(BLOCK) sgd_kernel(SgdMeta m, ampy_sgd_scalars s0,
                                                    const float *inv_scale,
                                                    const float *found_inf)
{
    const int t = m.block_tensor[blockIdx.x];
    const int64_t base = (int64_t)m.block_chunk[blockIdx.x] * CHUNK;
    const int64_t end = min(m.numel[t], base + (int64_t)CHUNK);
    const int wg = write_back(s0.write_grad, inv_scale);
    if (found_inf && *found_inf != 0.0f) {
        if (wg)
            unscale_chunk(m.addr[2][t], m.dt[1][t], base, end, *inv_scale);
        return;
    }
    ampy_sgd_scalars s = s0;
    s.inv_scale = inv_scale ? *inv_scale : 1.0f;
    s.write_grad = 0;
    void *param = m.addr[0][t];
    float *master = (float *)m.addr[1][t];
    void *grad = m.addr[2][t];
    float *buf = (float *)m.addr[3][t];
    float *w = master ? master : (float *)param;
    const int pdt = m.dt[0][t], gdt = m.dt[1][t], first = m.first[t];
    for (int64_t i0 = base + threadIdx.x; i0 < end; i0 += (int64_t)BLOCK * ILP) {
        float g[ILP], p[ILP], b[ILP];
#pragma unroll
        for (int j = 0; j < ILP; j++) {
            int64_t i = i0 + (int64_t)j * BLOCK;
            if (i < end) {
                g[j] = ampy_optim_load_grad(grad, gdt, i);
                p[j] = w[i];
                b[j] = (s.has_momentum && !first) ? buf[i] : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < ILP; j++) {
            int64_t i = i0 + (int64_t)j * BLOCK;
            if (i >= end)
                continue;
            if (wg)
                ampy_optim_store_grad(grad, gdt, i, g[j] * s.inv_scale);
            ampy_sgd_elem(g[j], &p[j], &b[j], first, &s);
            w[i] = p[j];
            if (s.has_momentum)
                buf[i] = b[j];
            if (master)
                ampy_optim_store_half(param, pdt, i, p[j]);
        }
    }
}

extern "C" ampy_status ampy_optim_sgd_step_cuda(int device, int64_t n, const ampy_sgd_tensor *t,
                                                const ampy_sgd_options *o,
                                                const float *inv_scale, const float *found_inf)
{
    ampy_status s = ampy_sgd_check_args(n, t, o);
    if (s != AMPY_OK)
        return s;
    int64_t *numel = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!numel)
        return ampy_error(AMPY_ERR_NOMEM, "sgd_step (cuda): out of memory");
    for (int64_t i = 0; i < n; i++)
        numel[i] = t[i].numel;
    s = check_numel(n, numel);
    cudaStream_t st = NULL;
    if (s == AMPY_OK) {
        cudaError_t e = cudaSetDevice(device);
        st = (cudaStream_t)ampy_cuda_stream(device);
        if (e != cudaSuccess)
            s = ampy_cuda_fail(e, "cudaSetDevice");
        else if (!st)
            s = AMPY_ERR_RUNTIME;
    }
    if (s != AMPY_OK) {
        free(numel);
        return s;
    }
    /* inv_scale is read and write_grad refined on the device (sgd_kernel) */
    ampy_sgd_scalars sc;
    ampy_sgd_scalars_init(o, 1.0f, o->write_grads != 0, &sc);
    auto fill = [&](SgdMeta &m, int slot, int64_t i) {
        const ampy_sgd_tensor *x = &t[i];
        m.addr[0][slot] = x->param;
        m.addr[1][slot] = x->master;
        m.addr[2][slot] = (void *)x->grad;
        m.addr[3][slot] = x->momentum_buffer;
        m.dt[0][slot] = (uint8_t)x->param_dtype;
        m.dt[1][slot] = (uint8_t)x->grad_dtype;
        m.first[slot] = (uint8_t)(x->momentum_first != 0);
    };
    auto launch = [&](const SgdMeta &m, int nb) -> ampy_status {
        sgd_kernel<<<nb, BLOCK, 0, st>>>(m, sc, inv_scale, found_inf);
        AMPY_CUDA_LAUNCHED("sgd_kernel");
        return AMPY_OK;
    };
    s = mta_run<SgdMeta>(n, numel, fill, launch);
    free(numel);
    return s;
}
