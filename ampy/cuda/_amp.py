"""The AMP kernels for CUDA tensors, with ampy.amp.functional's signatures.

ampy.amp.functional (owned by the AMP-kernel work) should call these when its
tensors are on CUDA, e.g. ``if grads and grads[0].is_cuda: return
ampy.cuda._amp.non_finite_check_and_unscale_(grads, found_inf, inv_scale)``.
Each is one multi-tensor launch (cuda/amp.cu, cuda/optim.cu) that reads
``found_inf`` / ``inv_scale`` on the device: nothing here synchronises, so the
optimizer steps return None instead of "stepped" (read ``found_inf`` when the
answer is needed; GradScaler already knows it).
"""
from .. import _C
from . import _K

__all__ = ["non_finite_check_and_unscale_", "update_scale_", "sgd_step_", "adam_step_"]


def _need(name):
    fn = getattr(_K, name, None) if _K is not None else None
    if fn is None:
        raise RuntimeError(f"ampy: the CUDA kernel {name} is not built (needs a GPU build with "
                           f"the AMP-kernel headers)")
    return fn


def _check_hyper(lr, eps=None, betas=None, weight_decay=0.0, momentum=None):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps is not None and not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if betas is not None:
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")
    if momentum is not None and not 0.0 <= momentum:
        raise ValueError(f"Invalid momentum value: {momentum}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    _need("_amp_non_finite_check_and_unscale_")(list(grads), found_inf, inv_scale)


def update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                  growth_interval, *, min_scale=None, max_scale=None, hysteresis=1,
                  hysteresis_tracker=None):
    _need("_amp_update_scale_")(scale, growth_tracker, found_inf, float(growth_factor),
                                float(backoff_factor), int(growth_interval), min_scale, max_scale,
                                int(hysteresis), hysteresis_tracker)


def sgd_step_(params, grads, momentum_buffers, *, lr, momentum=0, dampening=0, nesterov=False,
              weight_decay=0, maximize=False, master_params=None, inv_scale=None, found_inf=None):
    """As ampy.amp.functional.sgd_step_; a None momentum buffer (no state yet)
    is created here (zeros on the device) and stored into the list; the
    kernel then sets it to the gradient, as torch's ``buf = grad.clone()``."""
    _check_hyper(lr, weight_decay=weight_decay, momentum=momentum)
    params = list(params)
    if momentum_buffers is None:
        momentum_buffers = [None] * len(params)
    firsts = [b is None for b in momentum_buffers]
    if momentum != 0:
        for i, b in enumerate(momentum_buffers):
            if b is None:
                nb = _C._empty_device(tuple(params[i].shape), _C_float32(), params[i]._device_index)
                _K._fill(nb, 0.0)
                momentum_buffers[i] = nb
    _need("_amp_sgd_step_")(params, list(grads), list(momentum_buffers), master_params,
                            inv_scale, found_inf, float(lr), float(momentum), float(dampening),
                            bool(nesterov), float(weight_decay), bool(maximize), firsts)


def adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1, beta2,
               eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=False,
               master_params=None, inv_scale=None, found_inf=None):
    _check_hyper(lr, eps, (beta1, beta2), weight_decay)
    _need("_amp_adam_step_")(
        list(params), list(grads), list(exp_avgs), list(exp_avg_sqs),
        None if max_exp_avg_sqs is None else list(max_exp_avg_sqs), list(steps),
        None if master_params is None else list(master_params), inv_scale, found_inf,
        float(lr), float(beta1), float(beta2), float(eps), float(weight_decay), bool(amsgrad),
        bool(maximize), bool(decoupled_weight_decay))


def _C_float32():
    from .. import _dtype
    return _dtype.float32
