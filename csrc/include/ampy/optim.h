/* ampy/optim.h — fused multi-tensor SGD and Adam/AdamW steps with fp32
 * master weights (the optimizer half of GradScaler.step()).
 *
 * One pass over every element of every tensor does
 *     g = to_f32(grad) * inv_scale -> (maximize: -g) -> weight decay
 *       -> moments -> update of the fp32 weight -> store the model weight
 * where the fp32 weight is the parameter itself (float32 params) or its
 * fp32 master copy (float16/bfloat16 params, whose model weight is then
 * written rounded once from the new master value). The formulas and their
 * order of operations are torch.optim's single-tensor (foreach=False) code
 * in float32; elem.h (ampy_adam_elem, ampy_sgd_elem) documents each step.
 *
 * Gradient write-back (options.write_grads, with an inv_scale != 1): the same
 * pass stores g = to_f32(grad) * inv_scale back into grad, rounded once to
 * the grad's dtype -- the bits ampy_finite_check_unscale() would leave, so
 * after GradScaler.step() .grad holds unscaled gradients as after torch's
 * unscale_() + step(). The stored value is the unscaled gradient itself
 * (before maximize's negation and weight decay).
 *
 * Skipped steps: when *found_inf != 0 (read inside the call, before any
 * write) params, masters, moments and step counts keep their bits, and
 * *stepped (if given) is set to 0; only the gradient write-back (when asked
 * for) still happens, as torch's unscale_() runs before a skipped step. That
 * is the sync-free GradScaler.step() contract; the caller never branches.
 *
 * CPU paths: portable C and AVX-512 (csrc/optim_x86.c), chosen at run time
 * by ampy_cpu_level_get(); both give the same bits for every non-NaN input.
 * Large totals are split across ampy_parallel_for() as one flat range.
 *
 * Aliasing: within one tensor entry and across entries no two buffers may
 * overlap (grad, param, master, moments, step all distinct memory). Entries
 * are updated in parallel: a parameter listed twice must be stepped by two
 * calls (ampy.optim does), not by one.
 */
#ifndef AMPY_OPTIM_H
#define AMPY_OPTIM_H

#include <stdint.h>

#include "ampy/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Adam / AdamW ----------------------------------------------------------
 * Per step and tensor (torch.optim.Adam/AdamW, foreach=False):
 *   step += 1;  bc1 = 1 - beta1^step;  bc2 = 1 - beta2^step   (double)
 *   AdamW: w *= 1 - lr*wd          Adam: g += wd * w
 *   m = lerp(m, g, 1 - beta1);  v = v*beta2 + (1-beta2)*g*g
 *   amsgrad: vmax = max(vmax, v), used instead of v
 *   w += -(lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)                        */
typedef struct ampy_adam_tensor {
    void *param;           /* in,out  numel elements of param_dtype               */
    float *master;         /* in,out  fp32 master copy for float16/bfloat16 params;
                                      must be NULL for float32 params             */
    void *grad;            /* in(,out) numel elements of grad_dtype; written only
                                      with options.write_grads (see above)        */
    float *exp_avg;        /* in,out  first moment, numel float32                  */
    float *exp_avg_sq;     /* in,out  second moment, numel float32                 */
    float *max_exp_avg_sq; /* in,out  amsgrad only (else ignored, may be NULL)     */
    float *step;           /* in,out  one float32: steps taken so far (torch's
                                      state["step"]); incremented by 1 per applied
                                      step, exact up to 2^24                      */
    int64_t numel;         /* elements, >= 0                                       */
    int param_dtype;       /* AMPY_FLOAT32, AMPY_FLOAT16 or AMPY_BFLOAT16          */
    int grad_dtype;        /* AMPY_FLOAT32, AMPY_FLOAT16 or AMPY_BFLOAT16          */
} ampy_adam_tensor;

typedef struct ampy_adam_options {
    double lr;           /* >= 0, finite                              */
    double beta1, beta2; /* each in [0, 1)                            */
    double eps;          /* >= 0, finite                              */
    double weight_decay; /* >= 0, finite                              */
    int amsgrad;         /* keep max_exp_avg_sq and divide by it      */
    int maximize;        /* ascend: use -grad                         */
    int decoupled_weight_decay; /* 1: AdamW; 0: Adam (L2 added to grad) */
    int write_grads;     /* 1: store grad * inv_scale back into grad    */
} ampy_adam_options;

/* One Adam/AdamW step over n tensors.
 *   n          in   number of tensors, >= 0
 *   t          in   n tensor entries (the memory they point at is in,out)
 *   o          in   hyper-parameters (validated with torch's messages, e.g.
 *                   "Invalid learning rate: -1.0")
 *   inv_scale  in   one float32 multiplying every gradient, or NULL (= 1)
 *   found_inf  in   one float32, or NULL (= never skip); non-zero skips
 *   stepped    out  1 when the step was applied, 0 when skipped; may be NULL
 * Returns AMPY_OK; AMPY_ERR_VALUE (bad hyper-parameter, negative numel, NULL
 * buffer, master given or missing), AMPY_ERR_DTYPE (bad dtype) or
 * AMPY_ERR_NOMEM, always before writing anything. */
ampy_status ampy_optim_adam_step(int64_t n, const ampy_adam_tensor *t, const ampy_adam_options *o,
                                 const float *inv_scale, const float *found_inf, int *stepped);

/* ---- SGD --------------------------------------------------------------------
 * Per step (torch.optim.SGD, foreach=False):
 *   g += wd * w
 *   momentum != 0: buf = first ? g : buf*momentum + (1 - dampening)*g
 *                  g = nesterov ? g + momentum*buf : buf
 *   w -= lr * g                                                               */
typedef struct ampy_sgd_tensor {
    void *param;            /* in,out  as in ampy_adam_tensor                  */
    float *master;          /* in,out  as in ampy_adam_tensor                  */
    void *grad;             /* in(,out) as in ampy_adam_tensor                 */
    float *momentum_buffer; /* in,out  numel float32; may be NULL when
                                       momentum == 0                           */
    int64_t numel;
    int param_dtype, grad_dtype;
    int momentum_first;     /* in      1: the buffer holds no state yet (torch's
                                       None): this step sets buf = g. Its old
                                       contents are not read.                   */
} ampy_sgd_tensor;

typedef struct ampy_sgd_options {
    double lr;           /* >= 0, finite                                        */
    double momentum;     /* >= 0, finite                                        */
    double dampening;    /* finite (torch does not restrict it)                 */
    double weight_decay; /* >= 0, finite                                        */
    int nesterov;        /* requires momentum > 0 and dampening == 0            */
    int maximize;
    int write_grads;     /* as in ampy_adam_options                             */
} ampy_sgd_options;

/* One SGD step over n tensors; arguments and statuses as for
 * ampy_optim_adam_step. */
ampy_status ampy_optim_sgd_step(int64_t n, const ampy_sgd_tensor *t, const ampy_sgd_options *o,
                                const float *inv_scale, const float *found_inf, int *stepped);

/* ---- internal: per-path kernels over elements [b, e) of one tensor, for the
 * test suite. `s` points at an ampy_adam_scalars / ampy_sgd_scalars (elem.h). */
void ampy_optim_adam_run_portable(const ampy_adam_tensor *t, int64_t b, int64_t e, const void *s);
void ampy_optim_adam_run_avx512(const ampy_adam_tensor *t, int64_t b, int64_t e, const void *s);
void ampy_optim_sgd_run_portable(const ampy_sgd_tensor *t, int64_t b, int64_t e, const void *s);
void ampy_optim_sgd_run_avx512(const ampy_sgd_tensor *t, int64_t b, int64_t e, const void *s);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_OPTIM_H */
