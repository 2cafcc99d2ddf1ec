"""ampy.optim.Optimizer — torch.optim.Optimizer's param_groups, state and
state_dict format, plus what ampy's fused steps share: gathering one
parameter group into the lists of one fused-kernel call, fp32 master weights
for float16/bfloat16 parameters, and the GradScaler protocol.

`_step_supports_amp_scaling` (GradScaler then sets `self.grad_scale` /
`self.found_inf` and calls `step` unconditionally; the kernel unscales and
skips with no host sync) is False here, as in torch: only ampy's built-in
fused optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta) claim it. A subclass that overrides `step` loses the claim (its
step would not read grad_scale, so it would get scaled gradients) unless it
sets `_step_supports_amp_scaling = True` itself.

A fused step first checks every group (hyper-parameters, params, grads,
state) and only then writes: a step that raises changes nothing.
"""
from collections import defaultdict
import copy
import warnings

from .. import _C
from .. import _dtype as D
from .._creation import full
from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..nn.modules.module import _to_ampy
from . import _f64 as F64

__all__ = ["Optimizer", "required"]

_HALF = (D.float16, D.bfloat16)


def _self_overlapping(shape, stride):
    """True when two elements of the layout share a memory location (exact:
    a layout whose strides interleave has its offsets counted)."""
    dims = sorted((abs(st), n) for n, st in zip(shape, stride) if n > 1)
    reach, separated = 0, True
    for st, n in dims:
        if st == 0:
            return True
        if st <= reach:
            separated = False
        reach += (n - 1) * st
    if separated:
        return False
    import numpy as np
    offsets = np.zeros((), np.int64)
    for st, n in dims:
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * st)
    return np.unique(offsets).size != offsets.size


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(o):
    return "ampy." + type(o).__name__ if isinstance(o, Tensor) else type(o).__name__


class Optimizer:
    """Base class: holds param_groups (dicts with "params" and hyper-parameters)
    and per-parameter state; subclasses implement step().

    Writing an optimizer (torch's contract, docs/OPTIMIZERS.md): pass the
    defaults to ``super().__init__(params, defaults)`` and write ``step(closure=None)``
    over ``self.param_groups``, ``p.grad`` and ``self.state[p]``, under
    ``ampy.no_grad()``. With a GradScaler such a step needs no AMP code:
    ``scaler.step(opt)`` unscales every ``p.grad`` first (unless
    ``scaler.unscale_(opt)`` ran) and calls ``step()`` only when all of them
    are finite. Only a step that itself reads ``self.grad_scale`` /
    ``self.found_inf`` (as ampy's fused ones do) may set
    ``_step_supports_amp_scaling = True``."""

    _step_supports_amp_scaling = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__ and "_step_supports_amp_scaling" not in cls.__dict__:
            cls._step_supports_amp_scaling = False

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + _typename(params))
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    s += f"\n    {key}: {group[key]}"
        return s + "\n)"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(p))
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen.intersection(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad if p.grad.grad_fn is None else p.grad.detach()
                    p.grad = g
                    g.zero_()

    # ------------------------------------------------------------- state_dict
    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]},
        indices numbering the parameters in group order, as torch."""
        mapping, start = {}, 0
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state_dict of this optimizer's structure (ampy's or torch's:
        tensor-likes are converted). State tensors are copied, never shared."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or \
                "param_groups" not in state_dict:
            raise KeyError("state_dict must hold 'state' and 'param_groups'")
        groups = self.param_groups
        saved_groups = copy.deepcopy([{k: v for k, v in g.items()} for g in
                                      state_dict["param_groups"]])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved_groups):
            for old, p in zip(s["params"], g["params"]):
                id_map[old] = p
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            new_groups.append(s)
        group_of = {id(p): s for s in new_groups for p in s["params"]}
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                if not isinstance(v, dict):
                    raise TypeError(f"loaded state of parameter {k} must be a dict, not "
                                    f"{type(v).__name__}")
                entry = {key: self._load_state_value(p, key, val) for key, val in v.items()}
                state[p] = self._check_loaded_state(p, group_of[id(p)], entry)
            else:
                state[k] = v
        self.state = state
        self.param_groups = new_groups

    def _check_loaded_state(self, p, group, entry):
        """Per-optimizer check of one loaded state entry (raise before anything
        is replaced); returns the entry to store."""
        return entry

    def _load_state_value(self, p, key, value):
        if value is None or isinstance(value, (int, float, bool)):
            return value
        if key == "step" and isinstance(value, (list, tuple, str, bytes)):
            raise TypeError(f"loaded state 'step' must be a number or a tensor, not "
                            f"{type(value).__name__}")
        t = _to_ampy(value)
        if key == "step" and t.numel() != 1:
            raise ValueError(f"loaded state 'step' must hold one value, got {t.numel()}")
        if key != "step" and tuple(t.shape) != tuple(p.shape):
            raise ValueError(f"loaded state {key!r} has shape {list(t.shape)}, but its "
                             f"parameter has shape {list(p.shape)}")
        if key == "step":
            out = _C.cast(t.detach(), D.float32)
            return out if out.ndim == 0 else out.reshape(())
        # moments and masters live in fp32; a float64 param's in float64 (torch: p's dtype)
        return _C.cast(t.detach(), self._state_dtype(p))

    @staticmethod
    def _state_dtype(p):
        """The dtype of p's state tensors: float64 for a float64 param (torch's
        zeros_like), float32 for the others (ampy's fused kernels)."""
        return D.float64 if p.dtype is D.float64 else D.float32

    # ------------------------------------------------------- fused-step helpers
    def _amp_scalars(self):
        """(inv_scale, found_inf) from GradScaler's protocol, or (None, None)."""
        gs = getattr(self, "grad_scale", None)
        fi = getattr(self, "found_inf", None)
        inv = None
        if gs is not None:
            if hasattr(gs, "reciprocal"):  # device-side, no sync: fp64 reciprocal, as torch
                inv = gs.double().reciprocal().float()
            else:
                inv = full((), 1.0 / float(gs.item()), dtype=D.float32)
            inv = inv.reshape(()).contiguous()
        if fi is not None and (fi.dtype is not D.float32 or not fi.is_contiguous()):
            fi = _C.cast(fi, D.float32)
        return inv, fi

    def _master(self, p, state, keep, value=None):
        """The float32 weight the kernel updates for a float16/bfloat16 param:
        state["master_param"] (created once) with master weights, else a
        transient copy of the current value (value: p's contiguous stand-in,
        when it has one). None for float32 params."""
        if p.dtype not in _HALF:
            return None
        if keep:
            m = state.get("master_param")
            if m is None:
                m = state["master_param"] = _C.cast(p.detach(), D.float32)
            return m
        return _C.cast((p if value is None else value).detach(), D.float32)

    @staticmethod
    def _grad(p, g=None):
        g = p.grad if g is None else g
        if g._device_index != p._device_index:
            raise RuntimeError(f"ampy.optim: the gradient is on {g.device}, its parameter on "
                               f"{p.device}")
        return g if g.is_contiguous() else g.contiguous()

    @staticmethod
    def _rounds(params):
        """A group's params that have a grad, split into rounds (one fused call
        each; a call's entries run in parallel, so none may repeat a tensor).
        A parameter listed twice is stepped twice, one update after the other,
        as torch's single-tensor loop does: occurrence k goes to a round after
        occurrence k - 1. Two parameters sharing one grad tensor go to
        different rounds too (the grad is unscaled once, by round 0). Returns
        (rounds, {id(p): p.grad})."""
        pairs = [(p, g) for p, g in ((p, p.grad) for p in params) if g is not None]
        raw = {id(p): g for p, g in pairs}
        if len(raw) == len({id(g) for _, g in pairs}) == len(pairs):
            return ([[p for p, _ in pairs]] if pairs else []), raw  # the usual case: one call
        last, rounds, grads_in = {}, [], []
        for p, g in pairs:
            r = last.get(id(p), -1) + 1
            while r < len(rounds) and id(g) in grads_in[r]:
                r += 1
            if r == len(rounds):
                rounds.append([])
                grads_in.append(set())
            rounds[r].append(p)
            grads_in[r].add(id(g))
            last[id(p)] = r
        return rounds, raw

    def _prepare(self, group):
        """Checks a group's params and grads (no writes). Returns the plan of
        the group: "rounds", "unique" (its params, once each), "grads" (id(p) ->
        the contiguous gradient the
        kernel reads and unscales in place: p.grad itself, or a copy written
        back by _write_back_grads), "standins" (id(p) -> the contiguous copy
        the kernel steps in place of a strided p, copied back by
        _copy_back; empty when every param is contiguous) and "pending"
        (state entries to create, committed by _commit): float16/bfloat16
        master weights here."""
        pending = {}
        rounds, raw = self._rounds(group["params"])
        unique = (rounds[0] if len(rounds) == 1 else
                  list({id(p): p for r in rounds for p in r}.values()))
        grads, copies, standins = {}, {}, {}
        keep = group.get("master_weights", False)
        for p in unique:
            if not self._check_param(p):
                standins[id(p)] = p.detach().contiguous()
            g0 = raw[id(p)]
            if p.dtype is D.float64 and g0.dtype is not D.float64:
                raise RuntimeError(f"ampy.optim: the gradient of a float64 parameter must be "
                                   f"float64, not {g0.dtype}")
            g = self._grad(p, g0)  # one contiguous copy per strided grad, shared by its params
            grads[id(p)] = g if g is g0 else copies.setdefault(id(g0), g)
            if keep and p.dtype in _HALF and "master_param" not in self.state.get(p, {}):
                pending.setdefault(p, {})["master_param"] = _C.cast(p.detach(), D.float32)
        return {"group": group, "rounds": rounds, "unique": unique, "grads": grads,
                "standins": standins, "pending": pending}

    @staticmethod
    def _targets(plan, params):
        """The tensors the kernel updates for params: each param itself, or
        its contiguous stand-in when it is strided."""
        standins = plan["standins"]
        return [standins.get(id(p), p) for p in params] if standins else params

    @staticmethod
    def _copy_back(plan):
        """Write each stand-in's stepped value into its strided param, in place."""
        standins = plan["standins"]
        for p in plan["unique"]:
            s = standins.get(id(p))
            if s is not None:
                p.copy_(s)

    def _commit(self, pending):
        """Store the pending state entries; returns {id(p): p's state dict}."""
        out = {}
        for p, entries in pending.items():
            st = self.state[p]
            st.update(entries)
            out[id(p)] = st
        return out

    @staticmethod
    def _write_back_grads(params, grads, inv_scale):
        """Copy the kernel's unscaled gradient into a strided p.grad, in place."""
        if inv_scale is None:
            return
        for p in params:
            g = grads[id(p)]
            if g is not p.grad:
                p.grad.copy_(g)

    _param_dtypes = (D.float32, D.float16, D.bfloat16, D.float64)  # what the steps take

    @classmethod
    def _check_param(cls, p):
        """Raise for a param the step cannot write; returns p.is_contiguous()
        (a strided param is stepped through a contiguous stand-in)."""
        if p.dtype not in cls._param_dtypes:
            names = [str(d).replace("ampy.", "") for d in cls._param_dtypes]
            raise TypeError(f"ampy.optim: parameters must be {', '.join(names[:-1])} or "
                            f"{names[-1]}, not {p.dtype}")
        if p.is_contiguous():
            return True
        if p._readonly:
            raise RuntimeError("ampy.optim: a parameter is read-only: its memory belongs to a "
                               "read-only buffer or to foreign memory ampy copied, which ampy "
                               "never writes. Use clone() for a writable copy.")
        if _self_overlapping(tuple(p.shape), p.stride()):
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               "tensor refers to a single memory location. Please clone() the "
                               "tensor before performing the operation.")
        return False

    def _run_round(self, plan, params, grads, inv_scale, found_inf):
        """One round of a group: the float64 params by _run_f64 (torch's
        single-tensor formulas in float64, _f64.py), the others by one fused
        call, _run_fused (same signatures). Returns the fused call's answer
        when there is one, else the float64 step's."""
        wide = [i for i, p in enumerate(params) if p.dtype is D.float64]
        if not wide:
            return self._run_fused(plan, params, grads, inv_scale, found_inf)
        rest = [i for i, p in enumerate(params) if p.dtype is not D.float64]
        answer = None
        if rest:
            answer = self._run_fused(plan, [params[i] for i in rest], [grads[i] for i in rest],
                                     inv_scale, found_inf)
        f64 = self._run_f64(plan, [params[i] for i in wide], [grads[i] for i in wide],
                            inv_scale, found_inf)
        return f64 if answer is None else answer

    _f64_rule = None  # the float64 update of _f64.py (sgd, adam, rmsprop, ...)

    def _run_f64(self, plan, params, grads, inv_scale, found_inf):
        """float64 params stepped with their states plan["states"][id(p)]."""
        return F64.step_f64(type(self)._f64_rule, self._targets(plan, params), grads,
                            [plan["states"][id(p)] for p in params], plan["group"],
                            inv_scale, found_inf)

    def _run_groups(self, plans):
        """Second phase of a fused step, after every group was checked by the
        subclass's _plan: per group, state committed, then each round stepped
        by _run_round(plan, params, grads, inv_scale, found_inf), which returns
        the kernel's answer (True stepped, False skipped, None unknown). Round 0
        unscales the grads (and stores them back); later rounds read them
        unscaled."""
        inv_scale, found_inf = self._amp_scalars()
        for plan in plans:
            plan.setdefault("states", {}).update(self._commit(plan["pending"]))
            rounds, grads = plan["rounds"], plan["grads"]
            stepped = False
            for k, params in enumerate(rounds):
                stepped = self._run_round(plan, params, [grads[id(p)] for p in params],
                                          inv_scale if k == 0 else None, found_inf)
            if plan["standins"] and stepped is not False:  # None (CUDA): not known, no sync
                self._copy_back(plan)
            self._write_back_grads(plan["unique"], grads, inv_scale)

    def _fused_step(self, closure):
        loss = self._closure(closure)
        with no_grad():
            self._run_groups([self._plan(group) for group in self.param_groups])
        return loss

    def _closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def step(self, closure=None):
        raise NotImplementedError
