/* optim_adaptive.cu — fused multi-tensor RMSprop / Adagrad / Adadelta with
 * fp32 master weights on CUDA, the twins of csrc/optim_adaptive.c.
 *
 * One pass per element: load grad -> optim_math.h's update of the fp32
 * (master) weight and state -> store the half model weight rounded once;
 * with options.write_grads and an inv_scale the unscaled gradient is stored
 * back in the same pass. found_inf is read by every block before it writes,
 * so a skipped step only unscales the gradients and needs no host sync.
 * The per-tensor constants depend on the device-resident step count (Adagrad's
 * lr decay): thread 0 of each block computes them into shared memory; a
 * second small kernel then increments the counts.
 */
#include <math.h>

#include "ampy/optim_adaptive.h"
#include "ampy/optim_math.h"
#include "mta.cuh"

/* operands: 0 param, 1 master (or NULL), 2 grad, 3 state0, 4 state1, 5 state2 */
typedef MtaMeta<6, 20, 256> AdaptiveMeta;

__global__ void __launch_bounds__(BLOCK) adaptive_kernel(AdaptiveMeta m, ampy_adaptive_options o,
                                                         const float *inv_scale,
                                                         const float *found_inf)
{
    const int t = m.block_tensor[blockIdx.x];
    const int64_t base = (int64_t)m.block_chunk[blockIdx.x] * CHUNK;
    const int64_t end = min(m.numel[t], base + (int64_t)CHUNK);
    void *grad = m.addr[2][t];
    const int gdt = m.dt[1][t];
    const int wg = o.write_grads && inv_scale && *inv_scale != 1.0f;
    if (found_inf && *found_inf != 0.0f) {
        if (wg)
            for (int64_t i = base + threadIdx.x; i < end; i += BLOCK)
                ampy_optim_store_grad(grad, gdt, i, ampy_optim_load_grad(grad, gdt, i) * *inv_scale);
        return;
    }
    __shared__ ampy_adaptive_scalars s;
    if (threadIdx.x == 0)
        ampy_adaptive_scalars_init(&o, inv_scale ? *inv_scale : 1.0f, 0, *m.step[t] + 1.0f, &s);
    __syncthreads();
    const ampy_adaptive_scalars sc = s;
    void *param = m.addr[0][t];
    float *master = (float *)m.addr[1][t];
    float *s0 = (float *)m.addr[3][t], *s1 = (float *)m.addr[4][t], *s2 = (float *)m.addr[5][t];
    float *w = master ? master : (float *)param;
    const int pdt = m.dt[0][t];
    for (int64_t i = base + threadIdx.x; i < end; i += BLOCK) {
        float g = ampy_optim_load_grad(grad, gdt, i);
        float p = w[i], a = s0[i], b = s1 ? s1[i] : 0.0f, c = s2 ? s2[i] : 0.0f;
        if (wg)
            ampy_optim_store_grad(grad, gdt, i, g * sc.inv_scale);
        ampy_adaptive_elem(g, &p, &a, &b, &c, &sc);
        w[i] = p;
        s0[i] = a;
        if (s1)
            s1[i] = b;
        if (s2)
            s2[i] = c;
        if (master)
            ampy_optim_store_half(param, pdt, i, p);
    }
}

#define STEP_BATCH 256
struct AdaptiveSteps {
    float *step[STEP_BATCH];
    int n;
};

__global__ void adaptive_count_kernel(AdaptiveSteps l, const float *found_inf)
{
    if (found_inf && *found_inf != 0.0f)
        return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < l.n)
        *l.step[i] = *l.step[i] + 1.0f;
}

/* Every tensor's count, also of empty tensors (torch counts them too). */
static ampy_status count_steps(int64_t n, const ampy_adaptive_tensor *t, const float *found_inf,
                               cudaStream_t st)
{
    AdaptiveSteps l;
    l.n = 0;
    for (int64_t i = 0; i < n; i++) {
        l.step[l.n++] = t[i].step;
        if (l.n == STEP_BATCH || i == n - 1) {
            adaptive_count_kernel<<<1, STEP_BATCH, 0, st>>>(l, found_inf);
            cudaError_t le = cudaGetLastError();
            if (le != cudaSuccess)
                return ampy_cuda_fail(le, "launch of adaptive_count_kernel");
            l.n = 0;
        }
    }
    return AMPY_OK;
}

extern "C" ampy_status ampy_optim_adaptive_step_cuda(int device, int64_t n,
                                                     const ampy_adaptive_tensor *t,
                                                     const ampy_adaptive_options *o,
                                                     const float *inv_scale,
                                                     const float *found_inf)
{
    ampy_status s = ampy_adaptive_check_args(n, t, o);
    if (s != AMPY_OK)
        return s;
    int64_t *numel = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!numel)
        return ampy_error(AMPY_ERR_NOMEM, "adaptive_step (cuda): out of memory");
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
    const ampy_adaptive_options h = *o;
    const bool use1 = (o->kind == AMPY_ADAPTIVE_RMSPROP && o->momentum > 0.0) ||
                      o->kind == AMPY_ADAPTIVE_ADADELTA;
    const bool use2 = o->kind == AMPY_ADAPTIVE_RMSPROP && o->centered;
    auto fill = [&](AdaptiveMeta &m, int slot, int64_t i) {
        const ampy_adaptive_tensor *x = &t[i];
        m.addr[0][slot] = x->param;
        m.addr[1][slot] = x->master;
        m.addr[2][slot] = x->grad;
        m.addr[3][slot] = x->state0;
        m.addr[4][slot] = use1 ? x->state1 : NULL;
        m.addr[5][slot] = use2 ? x->state2 : NULL;
        m.step[slot] = x->step;
        m.dt[0][slot] = (uint8_t)x->param_dtype;
        m.dt[1][slot] = (uint8_t)x->grad_dtype;
    };
    auto launch = [&](const AdaptiveMeta &m, int nb) -> ampy_status {
        adaptive_kernel<<<nb, BLOCK, 0, st>>>(m, h, inv_scale, found_inf);
        AMPY_CUDA_LAUNCHED("adaptive_kernel");
        return AMPY_OK;
    };
    s = mta_run<AdaptiveMeta>(n, numel, fill, launch);
    free(numel);
    return s == AMPY_OK ? count_steps(n, t, found_inf, st) : s;
}
