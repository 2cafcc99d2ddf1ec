"""ampy.optim.Adagrad — torch.optim.Adagrad through ampy's fused kernel."""
from ..amp import _adaptive as AF
from . import _f64 as F64
from ._adaptive import _AdaptiveOptimizer, _check_common, _nonneg

__all__ = ["Adagrad"]


class Adagrad(_AdaptiveOptimizer):
    """torch.optim.Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0,
    initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
    differentiable=False, fused=None). As torch, every parameter's state is
    created by the constructor: "step" (0-d float32, 0) and "sum" (float32,
    filled with initial_accumulator_value); master_weights=True adds
    state["master_param"] for float16/bfloat16 parameters at the first step.
    Dense gradients only. One fused C call per parameter group."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None,
                 master_weights=False):
        _check_common(lr, eps, weight_decay)
        if not _nonneg(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not _nonneg(lr_decay):
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not _nonneg(weight_decay):
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not _nonneg(initial_accumulator_value):
            raise ValueError(f"Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not _nonneg(eps):
            raise ValueError(f"Invalid epsilon value: {eps}")
        if differentiable:
            raise NotImplementedError("ampy.optim.Adagrad: differentiable=True is not supported")
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused,
                        master_weights=master_weights)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self._fresh_state(p, group)

    _f64_rule = staticmethod(F64.adagrad)

    def _state_keys(self, group):
        return ("sum", None, None)

    def _fill(self, group, key):
        return float(group["initial_accumulator_value"])

    def _kernel(self, params, grads, lists, steps, group, masters, inv_scale, found_inf):
        return AF.adagrad_step_(params, grads, lists[0], steps, lr=group["lr"],
                                lr_decay=group["lr_decay"], weight_decay=group["weight_decay"],
                                eps=group["eps"], maximize=group["maximize"],
                                master_params=masters, inv_scale=inv_scale,
                                found_inf=found_inf)
