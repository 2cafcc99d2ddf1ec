"""ampy.optim.SGD — torch.optim.SGD through ampy's fused SGD kernel."""
from ..amp import functional as AF
from . import _f64 as F64
from .optimizer import _HALF, Optimizer

__all__ = ["SGD"]


_INF = float("inf")


class SGD(Optimizer):
    """torch.optim.SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
    nesterov=False, *, maximize=False). One fused C call per parameter group
    (any mix of float32/float16/bfloat16 parameters; float64 ones are stepped by
    torch's single-tensor formulas in float64, _f64.py, with float64 momentum
    buffers as torch's). master_weights=True keeps
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

    _step_supports_amp_scaling = True  # the kernel reads grad_scale / found_inf

    @staticmethod
    def _hyper(group):
        return dict(lr=group["lr"], momentum=group["momentum"], dampening=group["dampening"],
                    nesterov=group["nesterov"], weight_decay=group["weight_decay"],
                    maximize=group["maximize"])

    def _plan(self, group):
        """Check one group completely (hyper-parameters through the C
        validation, params, grads) without writing anything."""
        AF.sgd_step_([], [], None, **self._hyper(group))
        plan = self._prepare(group)
        # like torch, the buffers are read once, before any update (a parameter
        # listed twice starts both of its updates from the same state)
        bufs = plan["bufs"] = {}
        for p in plan["unique"]:
            st = self.state.get(p)
            bufs[id(p)] = None if st is None else st.get("momentum_buffer")
        return plan

    def _run_fused(self, plan, params, grads, inv_scale, found_inf):
        group = plan["group"]
        keep = group.get("master_weights", False)
        targets = self._targets(plan, params)
        masters = [self._master(p, self.state[p] if keep and p.dtype in _HALF else {}, keep, t)
                   for p, t in zip(params, targets)]
        bufs = self._buffers(plan, params)
        stepped = AF.sgd_step_(targets, grads, bufs, **self._hyper(group),
                               master_params=masters if any(m is not None for m in masters)
                               else None, inv_scale=inv_scale, found_inf=found_inf)
        self._keep_buffers(params, bufs)
        return stepped

    def _run_f64(self, plan, params, grads, inv_scale, found_inf):
        states = [{"momentum_buffer": b} for b in self._buffers(plan, params) or
                  [None] * len(params)]
        stepped = F64.step_f64(F64.sgd, self._targets(plan, params), grads, states,
                               plan["group"], inv_scale, found_inf)
        self._keep_buffers(params, [st["momentum_buffer"] for st in states])
        return stepped

    @staticmethod
    def _buffers(plan, params):
        """The momentum buffers params start from (None: not made yet), or
        None without momentum."""
        if plan["group"]["momentum"] == 0:
            return None
        return [plan["bufs"][id(p)] for p in params]

    def _keep_buffers(self, params, bufs):
        """torch keeps no state without momentum (bufs None or all None); with
        it, the last update's buffer."""
        for p, b in zip(params, bufs or ()):
            if b is not None:
                self.state[p]["momentum_buffer"] = b

    def step(self, closure=None):
        return self._fused_step(closure)
