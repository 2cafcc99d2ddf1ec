"""The fused RMSprop, Adagrad and Adadelta steps (csrc/optim_adaptive.c,
cuda/optim_adaptive.cu): the kernels under ampy.optim's optimizers of those
names, in the calling convention of ``sgd_step_`` / ``adam_step_``.

Params are float32 (updated in place) or float16/bfloat16 with a float32
copy in ``master_params[i]`` (None for float32 params). Every state list
holds float32 tensors shaped like the params; ``steps`` are 1-element
float32 tensors (torch's ``state["step"]``), incremented only when the step
is applied. ``grads`` are multiplied by ``inv_scale[0]`` when given, and the
unscaled values are stored back into them with ``unscale_grads=True``, also
on a skipped step (``found_inf[0] != 0``), which changes nothing else. A
tensor may appear only once in the lists. Each returns True when the step
was applied, False when it was skipped (None for CUDA tensors).
"""
from .. import _C
from .functional import _as_list, _distinct, _number

__all__ = ["rmsprop_step_", "adagrad_step_", "adadelta_step_"]

_RMSPROP, _ADAGRAD, _ADADELTA = 0, 1, 2


def _run(kind, fn, params, grads, states, steps, master_params, inv_scale, found_inf,
         unscale_grads, **hyper):
    params = _distinct(_as_list(params, "params", fn), "params", fn)
    grads = _distinct(_as_list(grads, "grads", fn), "grads", fn)
    lists = [None if s is None else _as_list(s, name, fn)
             for s, name in zip(states, ("state0", "state1", "state2"))]
    hyper = {k: (v if isinstance(v, bool) else _number(v, k, fn)) for k, v in hyper.items()}
    return _C._amp_adaptive_step_(
        kind, params, grads, lists[0], lists[1], lists[2], _as_list(steps, "steps", fn),
        master_params=None if master_params is None else _as_list(master_params,
                                                                  "master_params", fn),
        inv_scale=inv_scale, found_inf=found_inf, write_grads=bool(unscale_grads), **hyper)


def rmsprop_step_(params, grads, square_avgs, momentum_buffers, grad_avgs, steps, *, lr, alpha,
                  eps, weight_decay, momentum, centered, maximize, master_params=None,
                  inv_scale=None, found_inf=None, unscale_grads=True):
    """One fused torch.optim.RMSprop step (foreach=False formulas in float32).
    ``momentum_buffers`` is needed when momentum > 0, ``grad_avgs`` when
    centered (else None)."""
    return _run(_RMSPROP, "rmsprop_step_", params, grads,
                (square_avgs, momentum_buffers, grad_avgs), steps, master_params, inv_scale,
                found_inf, unscale_grads, lr=lr, alpha=alpha, eps=eps,
                weight_decay=weight_decay, momentum=momentum, centered=bool(centered),
                maximize=bool(maximize))


def adagrad_step_(params, grads, sums, steps, *, lr, lr_decay, weight_decay, eps, maximize,
                  master_params=None, inv_scale=None, found_inf=None, unscale_grads=True):
    """One fused torch.optim.Adagrad step (dense gradients)."""
    return _run(_ADAGRAD, "adagrad_step_", params, grads, (sums, None, None), steps,
                master_params, inv_scale, found_inf, unscale_grads, lr=lr, lr_decay=lr_decay,
                weight_decay=weight_decay, eps=eps, maximize=bool(maximize))


def adadelta_step_(params, grads, square_avgs, acc_deltas, steps, *, lr, rho, eps, weight_decay,
                   maximize, master_params=None, inv_scale=None, found_inf=None,
                   unscale_grads=True):
    """One fused torch.optim.Adadelta step."""
    return _run(_ADADELTA, "adadelta_step_", params, grads, (square_avgs, acc_deltas, None),
                steps, master_params, inv_scale, found_inf, unscale_grads, lr=lr, rho=rho,
                eps=eps, weight_decay=weight_decay, maximize=bool(maximize))
