"""ampy.optim.SGD — torch.optim.SGD through ampy's fused SGD kernel."""
from ..amp import functional as AF
from .optimizer import _HALF, Optimizer, _no_grad

__all__ = ["SGD"]


_INF = float("inf")


class SGD(Optimizer):
    """torch.optim.SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
    nesterov=False, *, maximize=False). One fused C call per parameter group
    (any mix of float32/float16/bfloat16 parameters). master_weights=True keeps
    a float32 copy of each float16/bfloat16 parameter in state["master_param"]
    (apex O2); the kernel updates it and writes the parameter rounded once."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None,
                 master_weights=False):
        if isinstance(lr, bool):  # the fused step takes a float (refused there otherwise)
            raise TypeError("Invalid learning rate: lr must be a float, not bool")
        # finite and >= 0 (NaN / inf too: the fused C step refuses them)
        if not 0.0 <= lr < _INF:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= momentum < _INF:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay < _INF:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("ampy.optim.SGD: differentiable=True is not supported")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused,
                        master_weights=master_weights)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure(closure)
        inv_scale, found_inf = self._amp_scalars()
        with _no_grad():
            for group in self.param_groups:
                params, grads, bufs, masters = [], [], [], []
                use_buf = group["momentum"] != 0
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self._check_param(p)
                    keep = group.get("master_weights", False) and p.dtype in _HALF
                    # like torch, no state entry at all without momentum or master
                    state = self.state[p] if (use_buf or keep) else {}
                    params.append(p)
                    grads.append(self._grad(p))
                    masters.append(self._master(p, state, group.get("master_weights", False)))
                    bufs.append(state.get("momentum_buffer") if use_buf else None)
                if not params:
                    continue
                AF.sgd_step_(params, grads, bufs if use_buf else None, lr=group["lr"],
                             momentum=group["momentum"], dampening=group["dampening"],
                             nesterov=group["nesterov"], weight_decay=group["weight_decay"],
                             maximize=group["maximize"],
                             master_params=masters if any(m is not None for m in masters)
                             else None,
                             inv_scale=inv_scale, found_inf=found_inf)
                if use_buf:  # torch keeps no state without momentum
                    for p, b in zip(params, bufs):
                        self.state[p]["momentum_buffer"] = b
        return loss
