"""What ampy.optim's RMSprop, Adagrad and Adadelta share: per-parameter
state created as torch creates it (float32 for every float32/float16/
bfloat16 parameter, float64 for a float64 one), one fused C call per
parameter group (ampy/amp/_adaptive.py) with GradScaler's sync-free
protocol, torch's handling of a loaded "step", and float64 parameters
stepped by torch's single-tensor formulas in float64 (_f64.py)."""
from .. import _dtype as D
from .._creation import full
from .adam import Adam
from .optimizer import Optimizer

__all__ = []


class _AdaptiveOptimizer(Optimizer):
    """Subclasses give `_state_keys(group)` (the state names of the kernel's
    three state slots, None for an unused slot), `_fill(group, key)` (the
    initial value of a state tensor), `_kernel(...)` (the fused call) and
    `_f64_rule` (the float64 update of _f64.py)."""

    _step_supports_amp_scaling = True  # the kernel reads grad_scale / found_inf

    def _state_keys(self, group):
        raise NotImplementedError

    def _fill(self, group, key):
        return 0.0

    def _fresh_state(self, p, group):
        """torch's lazy state initialisation of one parameter (not stored)."""
        new = {"step": full((), 0.0, dtype=D.float32, device=p.device)}
        dt = self._state_dtype(p)
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
