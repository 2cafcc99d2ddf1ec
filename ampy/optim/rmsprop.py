"""ampy.optim.RMSprop — torch.optim.RMSprop through ampy's fused kernel."""
from ..amp import _adaptive as AF
from . import _f64 as F64
from ._adaptive import _AdaptiveOptimizer, _check_common, _nonneg

__all__ = ["RMSprop"]


class RMSprop(_AdaptiveOptimizer):
    """torch.optim.RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0,
    momentum=0, centered=False, capturable=False, foreach=None, maximize=False,
    differentiable=False). State per parameter as torch: "step" (0-d float32),
    "square_avg", "momentum_buffer" (momentum > 0), "grad_avg" (centered), all
    float32; master_weights=True adds state["master_param"] for
    float16/bfloat16 parameters. One fused C call per parameter group."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False, *, master_weights=False):
        _check_common(lr, eps, weight_decay)
        if not _nonneg(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not _nonneg(eps):
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not _nonneg(momentum):
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not _nonneg(weight_decay):
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not _nonneg(alpha):
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:
            raise NotImplementedError("ampy.optim.RMSprop: differentiable=True is not supported")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        master_weights=master_weights)
        super().__init__(params, defaults)

    _f64_rule = staticmethod(F64.rmsprop)

    def _state_keys(self, group):
        return ("square_avg", "momentum_buffer" if group["momentum"] > 0 else None,
                "grad_avg" if group["centered"] else None)

    def _kernel(self, params, grads, lists, steps, group, masters, inv_scale, found_inf):
        return AF.rmsprop_step_(params, grads, lists[0], lists[1], lists[2], steps,
                                lr=group["lr"], alpha=group["alpha"], eps=group["eps"],
                                weight_decay=group["weight_decay"], momentum=group["momentum"],
                                centered=group["centered"], maximize=group["maximize"],
                                master_params=masters, inv_scale=inv_scale,
                                found_inf=found_inf)
