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
 * each block computes them (in double, as csrc/optim.c's adam_scalars) into
 * shared memory; a second small kernel then increments the counts.
 */
#if __has_include("ampy/optim.h") && __has_include("ampy/scaler.h")
#include <math.h>

#include "mta.cuh"

/* ---- Adam / AdamW ---------------------------------------------------------------- */
/* operands: 0 param, 1 master (or NULL), 2 grad, 3 exp_avg, 4 exp_avg_sq, 5 max_exp_avg_sq */
typedef MtaMeta<6, 20, 256> AdamMeta;

struct AdamHyper {
    double lr, beta1, beta2, eps, wd;
    int amsgrad, maximize, decoupled, write_grads;
};

/* csrc/optim.c adam_scalars, for the step about to be taken. */
static __device__ void adam_scalars_dev(const AdamHyper &o, float inv, float step,
                                        ampy_adam_scalars *s)
{
    double bc1 = 1.0 - pow(o.beta1, (double)step);
    double bc2 = 1.0 - pow(o.beta2, (double)step);
    double step_size = o.lr / bc1;
    s->inv_scale = inv;
    s->neg = o.maximize ? -1.0f : 1.0f;
    s->decoupled = o.decoupled && o.wd != 0.0;
    s->wd = (!o.decoupled && o.wd != 0.0) ? (float)o.wd : 0.0f;
    s->decay_mul = s->decoupled ? (float)(1.0 - o.lr * o.wd) : 1.0f;
    s->w1 = (float)(1.0 - o.beta1);
    s->w1m1 = s->w1 - 1.0f;
    s->w1_small = fabsf(s->w1) < 0.5f;
    s->beta2 = (float)o.beta2;
    s->w2 = (float)(1.0 - o.beta2);
    s->bc2_sqrt = (float)sqrt(bc2); /* == pow(bc2, 0.5): both correctly rounded */
    s->eps = (float)o.eps;
    s->neg_step_size = (float)(-step_size);
    s->amsgrad = o.amsgrad != 0;
    s->write_grad = 0; /* the kernel stores the grads itself */
}

/* The grad store of the write-back, in the grad's dtype. */
static __device__ void st_grad(void *g, int dt, int64_t i, float v)
{
    if (dt == AMPY_FLOAT32)
        ((float *)g)[i] = v;
    else
        st_half(g, dt, i, v);
}

/* A skipped step's whole work for one block: grad[base, end) *= inv. */
static __device__ void unscale_chunk(void *grad, int gdt, int64_t base, int64_t end, float inv)
{
    for (int64_t i = base + threadIdx.x; i < end; i += BLOCK)
        st_grad(grad, gdt, i, ld_grad(grad, gdt, i) * inv);
}

/* 1 when the kernel stores the unscaled gradients (the host's flag, and the
 * device's multiplier is not 1). */
static __device__ int write_back(int write, const float *inv_scale)
{
    return write && inv_scale && *inv_scale != 1.0f;
}

__global__ void __launch_bounds__(BLOCK) adam_kernel(AdamMeta m, AdamHyper o,
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
        adam_scalars_dev(o, inv_scale ? *inv_scale : 1.0f, *m.step[t] + 1.0f, &s);
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
                g[j] = ld_grad(grad, gdt, i);
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
                st_grad(grad, gdt, i, g[j] * sc.inv_scale);
            ampy_adam_elem(g[j], &p[j], &mm[j], &vv[j], &vmax[j], &sc);
            w[i] = p[j];
            ma[i] = mm[j];
            va[i] = vv[j];
            if (sc.amsgrad)
                vx[i] = vmax[j];
            if (master)
                st_half(param, pdt, i, p[j]);
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
    if (!o || n < 0 || (n > 0 && !t))
        return ampy_error(AMPY_ERR_VALUE, "adam_step (cuda): NULL options or tensor list");
    int64_t *numel = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!numel)
        return ampy_error(AMPY_ERR_NOMEM, "adam_step (cuda): out of memory");
    ampy_status s = AMPY_OK;
    for (int64_t i = 0; i < n && s == AMPY_OK; i++) {
        const ampy_adam_tensor *x = &t[i];
        numel[i] = x->numel;
        if (!float_dt(x->param_dtype) || !float_dt(x->grad_dtype))
            s = ampy_error(AMPY_ERR_DTYPE, "adam_step: tensor %lld: bad dtype", (long long)i);
        else if ((x->param_dtype == AMPY_FLOAT32) != (x->master == NULL) && x->numel > 0)
            s = ampy_error(AMPY_ERR_VALUE, "adam_step: tensor %lld: a float32 param takes no "
                           "master copy; a half param needs one", (long long)i);
        else if (!x->step || (x->numel > 0 && (!x->param || !x->grad || !x->exp_avg ||
                                               !x->exp_avg_sq ||
                                               (o->amsgrad && !x->max_exp_avg_sq))))
            s = ampy_error(AMPY_ERR_VALUE, "adam_step: tensor %lld: NULL buffer", (long long)i);
    }
    if (s == AMPY_OK)
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
    AdamHyper h = {o->lr,       o->beta1,    o->beta2,
                   o->eps,      o->weight_decay, o->amsgrad,
                   o->maximize, o->decoupled_weight_decay, o->write_grads};
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
                g[j] = ld_grad(grad, gdt, i);
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
                st_grad(grad, gdt, i, g[j] * s.inv_scale);
            ampy_sgd_elem(g[j], &p[j], &b[j], first, &s);
            w[i] = p[j];
            if (s.has_momentum)
                buf[i] = b[j];
            if (master)
                st_half(param, pdt, i, p[j]);
        }
    }
}

extern "C" ampy_status ampy_optim_sgd_step_cuda(int device, int64_t n, const ampy_sgd_tensor *t,
                                                const ampy_sgd_options *o,
                                                const float *inv_scale, const float *found_inf)
{
    if (!o || n < 0 || (n > 0 && !t))
        return ampy_error(AMPY_ERR_VALUE, "sgd_step (cuda): NULL options or tensor list");
    if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
        return ampy_error(AMPY_ERR_VALUE, "Nesterov momentum requires a momentum and zero dampening");
    int64_t *numel = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!numel)
        return ampy_error(AMPY_ERR_NOMEM, "sgd_step (cuda): out of memory");
    ampy_status s = AMPY_OK;
    for (int64_t i = 0; i < n && s == AMPY_OK; i++) {
        const ampy_sgd_tensor *x = &t[i];
        numel[i] = x->numel;
        if (!float_dt(x->param_dtype) || !float_dt(x->grad_dtype))
            s = ampy_error(AMPY_ERR_DTYPE, "sgd_step: tensor %lld: bad dtype", (long long)i);
        else if (x->numel > 0 && ((x->param_dtype == AMPY_FLOAT32) != (x->master == NULL) ||
                                  !x->param || !x->grad ||
                                  (o->momentum != 0.0 && !x->momentum_buffer)))
            s = ampy_error(AMPY_ERR_VALUE, "sgd_step: tensor %lld: missing or extra buffer",
                           (long long)i);
    }
    if (s == AMPY_OK)
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
    ampy_sgd_scalars sc;
    sc.inv_scale = 1.0f;
    sc.neg = o->maximize ? -1.0f : 1.0f;
    sc.wd = (float)o->weight_decay;
    sc.has_momentum = o->momentum != 0.0;
    sc.momentum = (float)o->momentum;
    sc.one_m_damp = (float)(1.0 - o->dampening);
    sc.nesterov = o->nesterov != 0;
    sc.neg_lr = (float)(-o->lr);
    sc.write_grad = o->write_grads != 0; /* the kernel checks inv_scale on the device */
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

#endif /* has optim.h */
