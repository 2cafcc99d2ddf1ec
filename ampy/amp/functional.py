"""ampy.amp.functional — the mixed-precision kernels as in-place functions.

These are the building blocks of ``GradScaler`` and of the fused optimizers,
each one call into libampy over a whole list of tensors (no Python loop over
tensors or elements):

- :func:`non_finite_check_and_unscale_` — torch's
  ``_amp_foreach_non_finite_check_and_unscale_``, for float32, float16 and
  bfloat16 grads mixed in one list.
- :func:`update_scale_` — torch's ``_amp_update_scale_``, bit for bit, plus
  optional ``min_scale`` / ``max_scale`` / ``hysteresis``.
- :func:`sgd_step_` and :func:`adam_step_` — torch.optim's SGD and
  Adam/AdamW (``foreach=False`` formulas, float32 math) fused into one pass
  that also unscales the grads (storing the unscaled values back into them,
  as torch's ``unscale_`` would), reads ``found_inf`` inside the kernel (a
  skipped step changes nothing but that write-back, step counts included)
  and keeps float32 master weights for float16/bfloat16 parameters.

The tensors of one call live on one device, the CPU or one GPU: the same
``_C`` binding checks the arguments and then runs libampy or the CUDA kernel
(cuda/amp.cu, cuda/optim.cu; these read ``found_inf`` on the device and never
synchronise, so on a GPU the optimizer steps return None instead of
"stepped"). Every tensor argument of the optimizer steps must be contiguous;
non-contiguous tensors are rejected (call ``.contiguous()``), never silently
copied. ``non_finite_check_and_unscale_`` also takes strided and
float64 gradients (torch's), unscaled in place.
``found_inf`` and ``inv_scale`` are 1-element float32 tensors. Arguments are
checked completely before any memory is written, so a call that raises
leaves every input unchanged. The tensors of one call must not overlap.
"""
from .. import _C

__all__ = ["non_finite_check_and_unscale_", "update_scale_", "sgd_step_", "adam_step_"]


def _as_list(x, name, fn):
    if isinstance(x, (list, tuple)):
        return x
    if x is None or not hasattr(x, "__iter__") or hasattr(x, "numel"):
        raise TypeError(f"{fn}: argument '{name}' must be a list or tuple of Tensors, "
                        f"not {type(x).__name__}")
    return list(x)


def _distinct(xs, name, fn):
    """The fused steps update their entries in parallel: a tensor listed twice
    would race with itself (and a grad would be unscaled twice)."""
    seen = {}
    for i, x in enumerate(xs):
        if x is not None and seen.setdefault(id(x), i) != i:
            raise ValueError(f"{fn}: {name}[{seen[id(x)]}] and {name}[{i}] are the same tensor; "
                             f"step a tensor listed twice with two calls")
    return xs


def _number(x, name, fn):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{fn}: '{name}' must be a float, not {type(x).__name__}")
    return float(x)


def _int(x, name, fn):
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"{fn}: '{name}' must be an int, not {type(x).__name__}")
    if not -2 ** 63 <= x < 2 ** 63:
        raise ValueError(f"{fn}: '{name}' must fit in int64, got {x}")
    return x


def non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    """Check ``grads`` for inf/NaN and multiply them by ``inv_scale``, in place.

    ``found_inf[0]`` is set to 1.0 when any element is inf or NaN (it is never
    cleared: zero it first). Unless ``inv_scale[0] == 1`` every element is
    replaced by ``x * inv_scale`` rounded once to the grad's dtype (float64:
    in double); a finite value that overflows only when unscaled is flagged
    too (torch misses that case). ``grads`` may mix float32, float16,
    bfloat16 and (CPU) float64 tensors of any strides, as torch's
    ``_amp_foreach_non_finite_check_and_unscale_``: a strided gradient is
    unscaled in place too (the same tensor object, its own memory). A
    tensor listed k times is unscaled k times, in list order, as torch.
    """
    fn = "non_finite_check_and_unscale_"
    grads = _as_list(grads, "grads", fn)
    rounds, seen = [], {}
    for g in grads:  # the k-th occurrence of a tensor goes to call k (entries run in parallel)
        k = seen.get(id(g), 0)
        seen[id(g)] = k + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(g)
    for part in rounds or [[]]:
        _unscale_once(part, found_inf, inv_scale)


def _unscale_once(grads, found_inf, inv_scale):
    """One kernel call over distinct tensors; strided ones through a
    contiguous copy that is copied back into them (same bits as in place)."""
    strided = [(i, g) for i, g in enumerate(grads)
               if hasattr(g, "is_contiguous") and not g.is_contiguous()]
    if strided:
        grads = list(grads)
        for i, g in strided:
            grads[i] = g.contiguous()
    _C._amp_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    if strided:
        with _no_grad():
            for i, g in strided:
                g.copy_(grads[i])


def _no_grad():
    from ..autograd import no_grad
    return no_grad()


def update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                  growth_interval, *, min_scale=None, max_scale=None, hysteresis=1,
                  hysteresis_tracker=None):
    """Update the loss scale in place, as ``torch._amp_update_scale_``.

    ``scale`` (float32), ``growth_tracker`` (int32) and ``found_inf`` (float32)
    are 1-element tensors. On overflow (``found_inf[0] != 0``) the scale is
    multiplied by ``backoff_factor`` and the tracker reset; otherwise the
    tracker counts up and, when it reaches ``growth_interval``, the scale is
    multiplied by ``growth_factor`` (unless that gives inf) and the tracker
    resets. Products are computed in double and stored as float32.

    Extras (off by default): ``min_scale`` / ``max_scale`` bound the scale;
    ``hysteresis=N`` backs off only after N consecutive overflows and needs
    ``hysteresis_tracker``, a 1-element int32 tensor initialised to N.
    """
    fn = "update_scale_"
    growth_factor = _number(growth_factor, "growth_factor", fn)
    backoff_factor = _number(backoff_factor, "backoff_factor", fn)
    growth_interval = _int(growth_interval, "growth_interval", fn)
    if min_scale is not None:
        min_scale = _number(min_scale, "min_scale", fn)
    if max_scale is not None:
        max_scale = _number(max_scale, "max_scale", fn)
    hysteresis = _int(hysteresis, "hysteresis", fn)
    _C._amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                          growth_interval, min_scale, max_scale, hysteresis, hysteresis_tracker)


def sgd_step_(params, grads, momentum_buffers, *, lr, momentum=0, dampening=0, nesterov=False,
              weight_decay=0, maximize=False, master_params=None, inv_scale=None, found_inf=None,
              unscale_grads=True):
    """One fused SGD step (torch.optim.SGD semantics) over lists of tensors.

    ``params`` are float32 (updated in place) or float16/bfloat16 with a
    float32 copy in ``master_params[i]`` (updated in place; the model weight
    is rewritten from it, rounded once). ``master_params`` entries for float32
    params are None. ``grads`` may be float32/float16/bfloat16 and are
    multiplied by ``inv_scale[0]`` when given; with ``unscale_grads=True``
    (the default) the unscaled values are also stored back into ``grads``
    (rounded once to their dtype, the bits ``non_finite_check_and_unscale_``
    gives), in the same pass, also on a skipped step -- as torch's
    ``unscale_`` + ``step``. False leaves the grads untouched (CPU only; the
    CUDA kernels always write back). ``momentum_buffers`` holds float32
    tensors or None; a None entry (no state yet, as in torch) gets a new
    buffer equal to the gradient, stored into the list. With
    ``found_inf[0] != 0`` nothing else changes. A tensor may appear only once
    in the lists.

    Returns True when the step was applied, False when it was skipped (None
    for CUDA tensors).
    """
    fn = "sgd_step_"
    params = _distinct(_as_list(params, "params", fn), "params", fn)
    grads = _distinct(_as_list(grads, "grads", fn), "grads", fn)
    if momentum_buffers is None:
        momentum_buffers = [None] * len(params)
    return _C._amp_sgd_step_(params, grads, momentum_buffers, master_params=master_params,
                             inv_scale=inv_scale, found_inf=found_inf, lr=_number(lr, "lr", fn),
                             momentum=_number(momentum, "momentum", fn),
                             dampening=_number(dampening, "dampening", fn),
                             nesterov=bool(nesterov),
                             weight_decay=_number(weight_decay, "weight_decay", fn),
                             maximize=bool(maximize), write_grads=bool(unscale_grads))


def adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1, beta2,
               eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=False,
               master_params=None, inv_scale=None, found_inf=None, unscale_grads=True):
    """One fused Adam (or AdamW, ``decoupled_weight_decay=True``) step.

    Formulas and float32 order of operations are torch.optim.Adam/AdamW's
    (``foreach=False``). ``exp_avgs``, ``exp_avg_sqs`` (and, with amsgrad,
    ``max_exp_avg_sqs``) are float32 tensors shaped like the params;
    ``steps`` are 1-element float32 tensors (torch's ``state["step"]``),
    incremented by the kernel only when the step is applied. Params, masters,
    grads, ``inv_scale``, ``found_inf`` and ``unscale_grads`` as in
    :func:`sgd_step_`.

    Returns True when the step was applied, False when it was skipped (None
    for CUDA tensors).
    """
    fn = "adam_step_"
    params = _distinct(_as_list(params, "params", fn), "params", fn)
    grads = _distinct(_as_list(grads, "grads", fn), "grads", fn)
    if max_exp_avg_sqs is not None:
        max_exp_avg_sqs = _as_list(max_exp_avg_sqs, "max_exp_avg_sqs", fn)
    return _C._amp_adam_step_(
        params, grads, _as_list(exp_avgs, "exp_avgs", fn),
        _as_list(exp_avg_sqs, "exp_avg_sqs", fn), max_exp_avg_sqs, _as_list(steps, "steps", fn),
        master_params=None if master_params is None else _as_list(master_params,
                                                                  "master_params", fn),
        inv_scale=inv_scale, found_inf=found_inf, lr=_number(lr, "lr", fn),
        beta1=_number(beta1, "beta1", fn), beta2=_number(beta2, "beta2", fn),
        eps=_number(eps, "eps", fn), weight_decay=_number(weight_decay, "weight_decay", fn),
        amsgrad=bool(amsgrad), maximize=bool(maximize),
        decoupled_weight_decay=bool(decoupled_weight_decay), write_grads=bool(unscale_grads))
