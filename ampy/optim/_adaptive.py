"""What ampy.optim's RMSprop, Adagrad and Adadelta share: per-parameter
state created as torch creates it (float32 for every float32/float16/
bfloat16 parameter, float64 for a float64 one), one fused C call per
parameter group (ampy/amp/_adaptive.py) with GradScaler's sync-free
protocol, torch's handling of a loaded "step", and float64 parameters
stepped by torch's single-tensor formulas in float64 (_adaptive_f64.py)."""
from .. import _C
from .. import _dtype as D
from .._creation import full
from .._tensor import Tensor
from ..nn.modules.module import _to_ampy
from . import _adaptive_f64 as F64
from .adam import Adam
from .optimizer import Optimizer

__all__ = []


class _AdaptiveOptimizer(Optimizer):
    """Subclasses give `_state_keys(group)` (the state names of the kernel's
    three state slots, None for an unused slot), `_fill(group, key)` (the
    initial value of a state tensor), `_kernel(...)` (the fused call) and
    `_f64_rule` (the float64 update of _adaptive_f64)."""

    _step_supports_amp_scaling = True  # the kernel reads grad_scale / found_inf
    _f64_rule = None

    _param_dtypes = (D.float32, D.float16, D.bfloat16, D.float64)

    def _load_state_value(self, p, key, value):
        """A float64 param's state tensors load as float64 (torch: the param's dtype)."""
        out = super()._load_state_value(p, key, value)
        if key != "step" and p.dtype is D.float64 and isinstance(out, Tensor):
            return _C.cast(_to_ampy(value).detach(), D.float64)
        return out

    def _state_keys(self, group):
        raise NotImplementedError

    def _fill(self, group, key):
        return 0.0

    def _fresh_state(self, p, group):
        """torch's lazy state initialisation of one parameter (not stored)."""
        new = {"step": full((), 0.0, dtype=D.float32, device=p.device)}
        dt = D.float64 if p.dtype is D.float64 else D.float32
        for key in self._state_keys(group):
            if key is not None:
                new[key] = full(tuple(p.shape), self._fill(group, key), dtype=dt,
                                device=p.device)
        return new

    def _missing_state(self, p, state, group):
        """The state p still needs: all of it when empty; otherwise every key
        the group's options use must be there (KeyError(key) as torch)."""
        if len(state) == 0:
            return self._fresh_state(p, group)
        for key in ("step",) + tuple(k for k in self._state_keys(group) if k is not None):
            if key not in state:
                raise KeyError(key)
        return {}

    def _plan(self, group):
        """Check one group completely (hyper-parameters through the C
        validation, params, grads, state) without writing anything."""
        self._kernel([], [], [[], [], []], [], group, None, None, None)
        plan = self._prepare(group)
        plan["states"] = states = {}
        for p in plan["unique"]:
            st = self.state.get(p)
            new = self._missing_state(p, st or {}, group)
            if new:
                plan["pending"].setdefault(p, {}).update(new)
            elif st is not None:
                states[id(p)] = st
        return plan

    def _run_round(self, plan, params, grads, inv_scale, found_inf):
        wide = [i for i, p in enumerate(params) if p.dtype is D.float64]
        if not wide:
            return self._run_fused(plan, params, grads, inv_scale, found_inf)
        rest = [i for i, p in enumerate(params) if p.dtype is not D.float64]
        answer = None
        if rest:
            answer = self._run_fused(plan, [params[i] for i in rest], [grads[i] for i in rest],
                                     inv_scale, found_inf)
        targets = self._targets(plan, [params[i] for i in wide])
        f64 = F64.step_f64(type(self)._f64_rule, targets, [grads[i] for i in wide],
                           [plan["states"][id(params[i])] for i in wide], plan["group"],
                           inv_scale, found_inf)
        return f64 if answer is None else answer

    def _run_fused(self, plan, params, grads, inv_scale, found_inf):
        group = plan["group"]
        keep = group.get("master_weights", False)
        states = [plan["states"][id(p)] for p in params]
        targets = self._targets(plan, params)
        masters = [self._master(p, st, keep, t) for p, st, t in zip(params, states, targets)]
        lists = [None if key is None else [st[key] for st in states]
                 for key in self._state_keys(group)]
        return self._kernel(targets, grads, lists, [st["step"] for st in states], group,
                            masters if any(m is not None for m in masters) else None,
                            inv_scale, found_inf)

    def step(self, closure=None):
        """One fused step over every parameter group (closure: re-evaluates
        the loss, under enable_grad, as torch)."""
        return self._fused_step(closure)

    _check_loaded_state = Adam._check_loaded_state


def _check_common(lr, eps, weight_decay):
    """The checks the three constructors share beyond torch's (a bool lr;
    NaN / inf values, which the fused C step refuses)."""
    if isinstance(lr, bool):
        raise TypeError("Invalid learning rate: lr must be a float, not bool")
    for v in (lr, eps, weight_decay):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"ampy.optim: hyper-parameters must be floats, not "
                            f"{type(v).__name__}")


def _nonneg(x):
    return 0.0 <= x < float("inf")
