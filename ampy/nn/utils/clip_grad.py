"""Gradient clipping with torch.nn.utils' semantics and one fused pass.

`clip_grad_norm_` computes the total norm of all gradients with one
multi-tensor C pass per device (csrc/clip.c, cuda/clip.cu: every element read
once, per-tensor norms rounded to their tensor's dtype and the total to the
promoted dtype, as torch's `_foreach_norm` + `stack` + `vector_norm` give),
then multiplies every gradient by torch's clamped coefficient
`min(max_norm / (total + 1e-6), 1)` with one multi-tensor C pass. The total
and the coefficient stay tensors on the gradients' device, so a CUDA step
waits for nothing unless `error_if_nonfinite=True` asks to look at the total.
"""
import math
import types
import warnings

from ... import _C
from ... import _dtype as D
from ..._creation import empty, tensor
from ..._math_reduce import stack
from ..._tensor import Tensor
from ...autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]

_FLOATS = (D.float32, D.float16, D.bfloat16, D.float64)


def _as_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _by_device(grads):
    """{device: [grads]} in first-seen order."""
    out = {}
    for g in grads:
        out.setdefault(g.device, []).append(g)
    return out


def _check_float(grads, fn):
    for g in grads:
        if g.dtype not in _FLOATS:
            raise RuntimeError(f"{fn}: gradients must be floating point, got {g.dtype}")


def _device_total(grads, p):
    """The total norm of one device's grads: one fused C pass."""
    kinds = {g.dtype for g in grads}
    dt = kinds.pop()
    for other in kinds:
        dt = D.promote_types(dt, other)
    out = empty((), dtype=dt, device=grads[0].device)
    _C.clip_total_norm([g if g.is_contiguous() else g.contiguous() for g in grads], p, out)
    return out


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm_type-norm of the per-tensor norms of `tensors` (torch.nn.utils.get_total_norm).
    `foreach` is accepted for torch's signature: ampy always takes the fused pass."""
    tensors = _as_list(tensors)
    p = float(norm_type)
    if not tensors:
        return tensor(0.0)
    _check_float(tensors, "get_total_norm")
    if abs(p) == math.inf and any(t.numel() == 0 for t in tensors):
        what = "_foreach_norm cannot compute the infinity" if p > 0 else \
            "linalg.vector_norm cannot compute the -inf"
        raise RuntimeError(f"{what} norm on an empty tensor because the operation does not have "
                           f"an identity")
    first = tensors[0].device
    with no_grad():
        totals = [_device_total(ts, p) for ts in _by_device(tensors).values()]
        if len(totals) == 1:
            total = totals[0]
        else:
            total = stack([t.to(first) for t in totals]).norm(p)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is "
                           f"non-finite, so it cannot be clipped. To disable this error and scale "
                           f"the gradients by the non-finite norm anyway, set "
                           f"`error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the grads of `parameters` by min(max_norm / (total_norm + 1e-6), 1)
    in place (torch.nn.utils.clip_grads_with_norm_), one fused pass per device."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    with no_grad():
        # torch spells it max_norm / (total + 1e-6), and a number divided by
        # a tensor is tensor.reciprocal() * number in torch: two roundings in
        # the total's dtype, kept here so half totals give torch's bits
        coef = ((total_norm + 1e-6).reciprocal() * max_norm).clamp(max=1.0)
        for dev, gs in _by_device(grads).items():
            c = coef if coef.device == dev else coef.to(dev)
            fused = [g for g in gs if g.is_contiguous()]
            if fused:
                _C.clip_scale_(fused, c)
            for g in gs:
                if not g.is_contiguous():
                    g.mul_(c)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradient norm of an iterable of parameters in place and return
    the total norm of the grads (viewed as one vector), as torch.nn.utils.clip_grad_norm_:
    grads that are None are skipped; the norm is a 0-d tensor in the promoted
    dtype of the grads; norm_type may be inf; a non-finite total raises with
    error_if_nonfinite=True and otherwise scales the grads by it."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_gen = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_gen and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated spelling of clip_grad_norm_ (torch's FutureWarning)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every grad to [-clip_value, clip_value] in place."""
    parameters = _as_list(parameters)
    clip_value = float(clip_value)
    with no_grad():
        for p in parameters:
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
