"""torch.nn.functional.instance_norm.

torch's own reduction (aten/src/ATen/native/Normalization.cpp,
instance_norm): the input viewed as (1, N*C, ...) is batch-normalised, so
each (sample, channel) gets its own statistics, with weight, bias and the
running stats repeated N times; the repeated running stats, updated by
batch_norm, are then averaged over the batch back into the caller's
tensors (also in evaluation, where they are unchanged up to that mean's
rounding, as in torch). Autocast: batch_norm's policy (the input's dtype).
"""
import numbers

from ..autograd import no_grad
from . import _functional_cnn as FC

__all__ = ["instance_norm"]


def _repeat(t, n):
    return None if t is None else t.repeat(n)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalisation (torch.nn.functional.instance_norm): each
    (sample, channel) plane normalised with its own mean and biased
    variance when use_input_stats, else with the running stats; then weight
    and bias per channel. Tracked running stats become
    (1 - momentum) * r + momentum * (the batch average of the per-sample
    statistics, unbiased variance)."""
    FC._check_tensor(input, "instance_norm", "input")
    if use_input_stats:
        size = tuple(input.shape)
        prod = 1
        for s in size[2:]:
            prod *= s
        if prod == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {input.shape}")
    if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real):
        raise TypeError(f"instance_norm(): argument 'momentum' (position 7) must be float, not "
                        f"{type(momentum).__name__}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be "
                         "None")
    if input.ndim < 2:
        raise RuntimeError(f"instance_norm: expected an input of at least 2 dims, got "
                           f"{input.ndim}")
    b, c = input.shape[0], input.shape[1]
    shape = (1, b * c) + tuple(input.shape[2:])
    rm, rv = _repeat(running_mean, b), _repeat(running_var, b)
    x = input.contiguous().view(shape)
    out = FC.batch_norm(x, rm, rv, _repeat(weight, b), _repeat(bias, b), bool(use_input_stats),
                        float(momentum), float(eps))
    with no_grad():
        if running_mean is not None:
            running_mean.copy_(rm.view(b, c).mean(0))
        if running_var is not None:
            running_var.copy_(rv.view(b, c).mean(0))
    return out.view(tuple(input.shape))
