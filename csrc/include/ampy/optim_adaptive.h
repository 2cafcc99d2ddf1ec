/* ampy/optim_adaptive.h — fused multi-tensor RMSprop, Adagrad and Adadelta
 * steps with fp32 master weights: the per-coordinate adaptive-rate
 * optimizers of torch.optim, beside optim.h's SGD and Adam.
 *
 * One pass over every element of every tensor does
 *     g = to_f32(grad) * inv_scale -> (maximize: -g) -> weight decay
 *       -> running averages -> update of the fp32 weight -> store the model weight
 * with optim.h's conventions: the fp32 weight is the parameter (float32) or
 * its master copy (float16/bfloat16, written back rounded once); gradient
 * write-back with options.write_grads and an inv_scale != 1; a skipped step
 * (*found_inf != 0) leaves params, masters, averages and step counts alone
 * and only unscales the gradients; no two buffers may overlap. The formulas
 * are torch.optim's single-tensor (foreach=False) code in float32, each
 * ATen op rounded where torch rounds it (optim_math.h, ampy_rmsprop_elem and
 * its neighbours, spells out every operation).
 *
 * CPU: portable C and AVX-512 (csrc/optim_x86.c), chosen at run time by
 * ampy_cpu_level_get(), split across ampy_parallel_for() as one flat range
 * over all tensors. CUDA: cuda/optim_adaptive.cu.
 */
#ifndef AMPY_OPTIM_ADAPTIVE_H
#define AMPY_OPTIM_ADAPTIVE_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which update a call applies (ampy_adaptive_options.kind). */
enum {
    AMPY_ADAPTIVE_RMSPROP = 0,
    AMPY_ADAPTIVE_ADAGRAD = 1,
    AMPY_ADAPTIVE_ADADELTA = 2,
};

/* One tensor. The state buffers are numel float32 each, named as torch's
 * state keys:
 *               state0       state1                       state2
 *   RMSprop     square_avg   momentum_buffer (momentum>0)  grad_avg (centered)
 *   Adagrad     sum          -                             -
 *   Adadelta    square_avg   acc_delta                     -
 * A buffer the configuration does not use is ignored and may be NULL. */
typedef struct ampy_adaptive_tensor {
    void *param;     /* in,out  numel elements of param_dtype                    */
    float *master;   /* in,out  fp32 master copy of a float16/bfloat16 param;
                                NULL for float32 params                          */
    void *grad;      /* in(,out) numel elements of grad_dtype                     */
    float *state0;   /* in,out  see the table above                              */
    float *state1;
    float *state2;
    float *step;     /* in,out  one float32, torch's state["step"]; +1 per
                                applied step                                     */
    int64_t numel;   /* >= 0                                                     */
    int param_dtype; /* AMPY_FLOAT32, AMPY_FLOAT16 or AMPY_BFLOAT16              */
    int grad_dtype;  /* AMPY_FLOAT32, AMPY_FLOAT16 or AMPY_BFLOAT16              */
} ampy_adaptive_tensor;

/* Hyper-parameters; each kind reads its own (the others are ignored).
 *   RMSprop (lr, alpha, eps, weight_decay, momentum, centered):
 *     v = v*alpha + (1-alpha)*g*g
 *     centered: ga = lerp(ga, g, 1-alpha); avg = sqrt(v - ga*ga) + eps
 *     else:     avg = sqrt(v) + eps
 *     momentum > 0: buf = buf*momentum + g/avg; w -= lr*buf
 *     else:         w -= lr*g/avg
 *   Adagrad (lr, lr_decay, weight_decay, eps):
 *     clr = lr / (1 + (step-1)*lr_decay)    (double, step after the increment)
 *     sum += g*g; w -= clr*g/(sqrt(sum) + eps)
 *   Adadelta (lr, rho, eps, weight_decay):
 *     v = v*rho + (1-rho)*g*g
 *     d = sqrt(acc + eps) / sqrt(v + eps) * g
 *     acc = acc*rho + (1-rho)*d*d; w -= lr*d
 * weight_decay adds wd*w to g first (after maximize's negation). */
typedef struct ampy_adaptive_options {
    int kind;            /* AMPY_ADAPTIVE_*                                 */
    double lr;           /* >= 0, finite                                    */
    double alpha;        /* RMSprop: >= 0, finite                           */
    double rho;          /* Adadelta: in [0, 1]                             */
    double eps;          /* >= 0, finite                                    */
    double weight_decay; /* >= 0, finite                                    */
    double momentum;     /* RMSprop: >= 0, finite                           */
    double lr_decay;     /* Adagrad: >= 0, finite                           */
    int centered;        /* RMSprop                                         */
    int maximize;        /* ascend: use -grad                               */
    int write_grads;     /* 1: store grad * inv_scale back into grad        */
} ampy_adaptive_options;

/* One step over n tensors.
 *   n          in   number of tensors, >= 0
 *   t          in   n tensor entries (the memory they point at is in,out)
 *   o          in   hyper-parameters (validated with torch's messages, e.g.
 *                   "Invalid learning rate: -1.0", "Invalid rho value: 1.5")
 *   inv_scale  in   one float32 multiplying every gradient, or NULL (= 1)
 *   found_inf  in   one float32, or NULL (= never skip); non-zero skips
 *   stepped    out  1 when the step was applied, 0 when skipped; may be NULL
 * Returns AMPY_OK; AMPY_ERR_VALUE (bad kind or hyper-parameter, negative
 * numel, NULL buffer, master given or missing), AMPY_ERR_DTYPE or
 * AMPY_ERR_NOMEM, always before writing anything. */
ampy_status ampy_optim_adaptive_step(int64_t n, const ampy_adaptive_tensor *t,
                                     const ampy_adaptive_options *o, const float *inv_scale,
                                     const float *found_inf, int *stepped);

/* The same on a CUDA device (cuda/optim_adaptive.cu): every pointer of t is a
 * device pointer, inv_scale and found_inf too; found_inf is read on the
 * device (no host sync), so the caller cannot learn whether it stepped. */
ampy_status ampy_optim_adaptive_step_cuda(int device, int64_t n, const ampy_adaptive_tensor *t,
                                          const ampy_adaptive_options *o,
                                          const float *inv_scale, const float *found_inf);

/* internal, for the test suite: the per-path loops over elements [b, e) of
 * one tensor (portable C; AVX-512 in csrc/optim_x86.c, the same bits for
 * every non-NaN input); `s` points at an ampy_adaptive_scalars (optim_math.h). */
void ampy_optim_adaptive_run_portable(const ampy_adaptive_tensor *t, int64_t b, int64_t e,
                                      const void *s);
void ampy_optim_adaptive_run_avx512(const ampy_adaptive_tensor *t, int64_t b, int64_t e,
                                    const void *s);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_OPTIM_ADAPTIVE_H */
