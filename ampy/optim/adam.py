"""ampy.optim.Adam and AdamW — torch.optim's, through ampy's fused Adam kernel."""
from .. import _dtype as D
from .._creation import zeros
from ..amp import functional as AF
from .optimizer import Optimizer, _no_grad

__all__ = ["Adam", "AdamW"]


_INF = float("inf")


class Adam(Optimizer):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, amsgrad=False, *, maximize=False). State per parameter as
    torch ("step" a 0-d float32 tensor, "exp_avg", "exp_avg_sq",
    "max_exp_avg_sq"), kept in float32 for every parameter dtype; with
    master_weights=True float16/bfloat16 parameters also get
    state["master_param"]. One fused C call per parameter group."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False,
                 master_weights=False):
        if isinstance(lr, bool):  # the fused step takes a float (refused there otherwise)
            raise TypeError("Invalid learning rate: lr must be a float, not bool")
        # finite and >= 0 (NaN / inf too: the fused C step refuses them)
        if not 0.0 <= lr < _INF:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps < _INF:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay < _INF:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("ampy.optim.Adam: differentiable=True is not supported")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay,
                        master_weights=master_weights)
        super().__init__(params, defaults)

    def _init_state(self, p, state, amsgrad):
        if len(state) == 0 or "step" not in state:
            state["step"] = zeros((), dtype=D.float32, device=p.device)
            state["exp_avg"] = zeros(tuple(p.shape), dtype=D.float32, device=p.device)
            state["exp_avg_sq"] = zeros(tuple(p.shape), dtype=D.float32, device=p.device)
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = zeros(tuple(p.shape), dtype=D.float32, device=p.device)

    def step(self, closure=None):
        loss = self._closure(closure)
        inv_scale, found_inf = self._amp_scalars()
        with _no_grad():
            for group in self.param_groups:
                params, grads, m1, m2, vmax, steps, masters = [], [], [], [], [], [], []
                amsgrad = group["amsgrad"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    self._check_param(p)
                    state = self.state[p]
                    self._init_state(p, state, amsgrad)
                    params.append(p)
                    grads.append(self._grad(p))
                    m1.append(state["exp_avg"])
                    m2.append(state["exp_avg_sq"])
                    steps.append(state["step"])
                    if amsgrad:
                        vmax.append(state["max_exp_avg_sq"])
                    masters.append(self._master(p, state, group.get("master_weights", False)))
                if not params:
                    continue
                beta1, beta2 = group["betas"]
                AF.adam_step_(params, grads, m1, m2, vmax if amsgrad else None, steps,
                              lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                              weight_decay=group["weight_decay"], amsgrad=amsgrad,
                              maximize=group["maximize"],
                              decoupled_weight_decay=group.get("decoupled_weight_decay", False),
                              master_params=masters if any(m is not None for m in masters)
                              else None,
                              inv_scale=inv_scale, found_inf=found_inf)
        return loss


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (default 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, master_weights=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, master_weights=master_weights)
