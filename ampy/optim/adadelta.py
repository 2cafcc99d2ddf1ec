"""ampy.optim.Adadelta — torch.optim.Adadelta through ampy's fused kernel."""
from ..amp import _adaptive as AF
from . import _f64 as F64
from ._adaptive import _AdaptiveOptimizer, _check_common, _nonneg

__all__ = ["Adadelta"]


class Adadelta(_AdaptiveOptimizer):
    """torch.optim.Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0,
    foreach=None, *, capturable=False, maximize=False, differentiable=False).
    State per parameter as torch: "step" (0-d float32), "square_avg",
    "acc_delta", all float32; master_weights=True adds state["master_param"]
    for float16/bfloat16 parameters. One fused C call per parameter group."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False, master_weights=False):
        _check_common(lr, eps, weight_decay)
        if not _nonneg(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not _nonneg(eps):
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not _nonneg(weight_decay):
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("ampy.optim.Adadelta: differentiable=True is not supported")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable,
                        master_weights=master_weights)
        super().__init__(params, defaults)

    _f64_rule = staticmethod(F64.adadelta)

    def _state_keys(self, group):
        return ("square_avg", "acc_delta", None)

    def _kernel(self, params, grads, lists, steps, group, masters, inv_scale, found_inf):
        return AF.adadelta_step_(params, grads, lists[0], lists[1], steps, lr=group["lr"],
                                 rho=group["rho"], eps=group["eps"],
                                 weight_decay=group["weight_decay"], maximize=group["maximize"],
                                 master_params=masters, inv_scale=inv_scale,
                                 found_inf=found_inf)
