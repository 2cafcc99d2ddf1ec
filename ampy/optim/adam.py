"""ampy.optim.Adam and AdamW — torch.optim's, through ampy's fused Adam kernel
(float64 parameters: torch's single-tensor formulas, _f64.py)."""
from .. import _dtype as D
from .._creation import full, zeros
from .._tensor import Tensor
from ..amp import functional as AF
from . import _f64 as F64
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


_INF = float("inf")


class Adam(Optimizer):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0, amsgrad=False, *, maximize=False). State per parameter as
    torch ("step" a 0-d float32 tensor, "exp_avg", "exp_avg_sq",
    "max_exp_avg_sq"), kept in float32 for float32/float16/bfloat16
    parameters; with master_weights=True float16/bfloat16 parameters also get
    state["master_param"]. One fused C call per parameter group; float64
    parameters (float64 state, as torch's) are stepped by torch's
    single-tensor formulas in float64 (_f64.py)."""

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

    _step_supports_amp_scaling = True  # the kernel reads grad_scale / found_inf
    _f64_rule = staticmethod(F64.adam)

    @staticmethod
    def _hyper(group):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=group["weight_decay"], amsgrad=group["amsgrad"],
                    maximize=group["maximize"],
                    decoupled_weight_decay=group.get("decoupled_weight_decay", False))

    def _new_state(self, p, state, amsgrad):
        """The state entries p still needs (created, not stored). A non-empty
        state without "step" raises KeyError('step'), as torch."""
        new, dt = {}, self._state_dtype(p)
        if len(state) == 0:
            new["step"] = zeros((), dtype=D.float32, device=p.device)
            new["exp_avg"] = zeros(tuple(p.shape), dtype=dt, device=p.device)
            new["exp_avg_sq"] = zeros(tuple(p.shape), dtype=dt, device=p.device)
        else:
            for key in ("step", "exp_avg", "exp_avg_sq"):
                if key not in state:
                    raise KeyError(key)
        if amsgrad and "max_exp_avg_sq" not in state:
            new["max_exp_avg_sq"] = zeros(tuple(p.shape), dtype=dt, device=p.device)
        return new

    def _plan(self, group):
        """Check one group completely (hyper-parameters through the C
        validation, params, grads, state) without writing anything."""
        hyper = self._hyper(group)
        AF.adam_step_([], [], [], [], [] if hyper["amsgrad"] else None, [], **hyper)
        plan = self._prepare(group)
        plan["states"] = states = {}
        for p in plan["unique"]:
            st = self.state.get(p)
            new = self._new_state(p, st or {}, group["amsgrad"])
            if new:
                plan["pending"].setdefault(p, {}).update(new)
            elif st is not None:
                states[id(p)] = st  # the pending ones are added by _commit
        return plan

    def _run_fused(self, plan, params, grads, inv_scale, found_inf):
        group = plan["group"]
        keep = group.get("master_weights", False)
        states = [plan["states"][id(p)] for p in params]
        targets = self._targets(plan, params)
        masters = [self._master(p, st, keep, t) for p, st, t in zip(params, states, targets)]
        amsgrad = group["amsgrad"]
        return AF.adam_step_(targets, grads, [st["exp_avg"] for st in states],
                             [st["exp_avg_sq"] for st in states],
                             [st["max_exp_avg_sq"] for st in states] if amsgrad else None,
                             [st["step"] for st in states], **self._hyper(group),
                             master_params=masters if any(m is not None for m in masters)
                             else None, inv_scale=inv_scale, found_inf=found_inf)

    def step(self, closure=None):
        return self._fused_step(closure)

    def _check_loaded_state(self, p, group, entry):
        """torch's Adam.__setstate__: a non-empty entry must hold "step"
        (KeyError('step') otherwise); a number (older torch's format) becomes
        a 0-d float32 tensor."""
        if len(entry) == 0:
            return entry
        if "step" not in entry:
            raise KeyError("step")
        step = entry["step"]
        if isinstance(step, bool) or not isinstance(step, (int, float, Tensor)):
            raise TypeError(f"loaded state 'step' must be a number or a tensor, not "
                            f"{type(step).__name__}")
        if not isinstance(step, Tensor):
            entry = dict(entry, step=full((), float(step), dtype=D.float32, device=p.device))
        elif step.numel() != 1:
            raise ValueError(f"loaded state 'step' must hold one value, got {step.numel()}")
        return entry


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (default 1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, master_weights=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, master_weights=master_weights)
