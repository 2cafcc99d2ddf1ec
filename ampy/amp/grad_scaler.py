"""ampy.amp.GradScaler: dynamic loss scaling, torch.amp.GradScaler's behaviour.

Follows torch/amp/grad_scaler.py: lazy scale creation, the
per-optimizer READY -> UNSCALED -> STEPPED state machine with torch's error
messages, state_dict keys, pickling rules, the fused-optimizer protocol
(``_step_supports_amp_scaling``: ``optimizer.grad_scale`` / ``found_inf`` are
set and ``step`` is called unconditionally, the skip happens in the kernel).
The numerics are ampy.amp.functional's C kernels: one call checks and unscales
every gradient of a device (float32/float16/bfloat16 mixed), one call updates
the scale exactly as ``torch._amp_update_scale_``.

Beyond torch (all off by default, or not changing any result):

- ``min_scale`` / ``max_scale`` / ``hysteresis`` (DeepSpeed semantics, in the
  update kernel), each stored in ``state_dict`` only when set;
- ``last_step_skipped``: did the optimizers of the last iteration skip? Read
  lazily from the device flag, so asking is the only sync;
- ``history``: a bounded deque of ``(iteration, scale, skipped)`` for plots;
- ``report_nonfinite=True``: on a skipped step, ``nonfinite_params`` names the
  parameters whose gradients held inf/NaN (``set_param_names`` gives names);
- the fp16-gradient error names the parameter and points to master weights;
- a one-time warning when scaling buys nothing (see ``_warn_if_useless``).

Torch raises AssertionError for some misuse; ampy raises errors that are both
AssertionError (torch-compatible ``except``) and ValueError/RuntimeError, with
torch's messages, and never relies on ``assert`` (which ``-O`` removes).
"""
import collections
import inspect
import math
import numbers
import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

from .. import _creation as C
from .. import _dtype as D
from .._tensor import Tensor
from . import autocast_mode as _ac
from . import functional as F

__all__ = ["GradScaler", "OptState"]


class _ValueAssertionError(ValueError, AssertionError):
    """Bad GradScaler argument (torch raises AssertionError here)."""


class _StateAssertionError(RuntimeError, AssertionError):
    """GradScaler used out of order (torch raises AssertionError here)."""


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _no_grad():
    ag = __import__("sys").modules.get("ampy.autograd")
    ng = getattr(ag, "no_grad", None)
    return ng() if ng is not None else _Null()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _check_number(value, name, integer=False):
    kinds = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"GradScaler: '{name}' must be {'an int' if integer else 'a float'}, "
                        f"not {type(value).__name__}")
    if integer:
        return int(value)
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"GradScaler: '{name}' is too large for a float, got {value}") from None


# The checks every configuration value passes, in the constructor, the setters
# and load_state_dict alike: a value update() cannot use is refused at the door,
# never after the optimizer has stepped.
_INT32_MAX = 2 ** 31 - 1
_INT64_MAX = 2 ** 63 - 1


def _checked_growth_factor(v):
    v = _check_number(v, "growth_factor")
    if not v > 1.0:  # NaN too
        raise _ValueAssertionError("The growth factor must be > 1.0.")
    return v


def _checked_backoff_factor(v):
    v = _check_number(v, "backoff_factor")
    if not v < 1.0:
        raise _ValueAssertionError("The backoff factor must be < 1.0.")
    if not v > 0.0:
        raise ValueError(f"GradScaler: 'backoff_factor' must be > 0, got {v}")
    return v


def _checked_scale(v, name="init_scale"):
    v = _check_number(v, name)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"GradScaler: '{name}' must be finite and > 0, got {v}")
    return v


def _checked_int(v, name, lo, hi):
    v = _check_number(v, name, integer=True)
    if v < lo:
        raise ValueError(f"GradScaler: '{name}' must be >= {lo}, got {v}")
    if v > hi:
        raise ValueError(f"GradScaler: '{name}' must be <= {hi}, got {v}")
    return v


def _checked_bounds(min_scale, max_scale):
    out = []
    for name, v in (("min_scale", min_scale), ("max_scale", max_scale)):
        if v is not None:
            v = _check_number(v, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"GradScaler: '{name}' must be finite and > 0, got {v}")
        out.append(v)
    if out[0] is not None and out[1] is not None and out[0] > out[1]:
        raise ValueError(f"GradScaler: min_scale ({out[0]}) > max_scale ({out[1]})")
    return out


class GradScaler:
    """``GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)`` as torch's, plus
    keyword-only ``min_scale=None, max_scale=None, hysteresis=1,
    history_size=1000, report_nonfinite=False``."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, *, min_scale=None, max_scale=None,
                 hysteresis=1, history_size=1000, report_nonfinite=False):
        if not isinstance(device, str):
            raise TypeError(f"GradScaler: 'device' must be a device type string such as 'cpu' "
                            f"or 'cuda', not {type(device).__name__}")
        _ac._check_device_type(device)
        self._device = device
        self._enabled = bool(enabled)
        if self._device == "cuda" and self._enabled and not _ac._cuda_available():
            warnings.warn("ampy.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", UserWarning, stacklevel=2)
            self._enabled = False
        self._history = collections.deque(maxlen=_check_number(history_size, "history_size",
                                                               integer=True))
        self._report_nonfinite = bool(report_nonfinite)
        self.nonfinite_params = []
        self._param_names = {}
        self._iteration = 0
        self._iter_found_infs = []   # found_inf of each step() of this iteration
        self._last_found_infs = []   # ... of the previous iteration
        self._warned_useless = False
        if self._enabled:
            growth_factor = _checked_growth_factor(growth_factor)
            backoff_factor = _checked_backoff_factor(backoff_factor)
            init_scale = _checked_scale(init_scale)
            growth_interval = _checked_int(growth_interval, "growth_interval", 1, _INT64_MAX)
            min_scale, max_scale = _checked_bounds(min_scale, max_scale)
            hysteresis = _checked_int(hysteresis, "hysteresis", 1, _INT32_MAX)
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = float(growth_factor)
            self._backoff_factor = float(backoff_factor)
            self._growth_interval = int(growth_interval)
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._min_scale = None if min_scale is None else float(min_scale)
            self._max_scale = None if max_scale is None else float(max_scale)
            self._hysteresis = int(hysteresis)
            self._init_hysteresis_tracker = int(hysteresis)
            self._hysteresis_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # ------------------------------------------------------------ internals
    def _check_scale_growth_tracker(self, funcname):
        fix = ("This may indicate your script did not use scaler.scale(loss or outputs) "
               "earlier in the iteration.")
        if self._scale is None:
            raise _StateAssertionError(f"Attempted {funcname} but _scale is None.  {fix}")
        if self._growth_tracker is None:
            raise _StateAssertionError(f"Attempted {funcname} but _growth_tracker is None.  {fix}")
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev):
        self._scale = C.full((), self._init_scale, dtype=D.float32, device=dev)
        self._growth_tracker = C.full((), self._init_growth_tracker, dtype=D.int32, device=dev)
        self._hysteresis_tracker = C.full((), self._init_hysteresis_tracker, dtype=D.int32,
                                          device=dev)

    def _inv_scale(self):
        # torch: _scale.double().reciprocal().float() -- reciprocal in float64,
        # rounded once to float32 (exact for powers of two).
        if self._scale.is_cpu:
            inv = np.float32(1.0 / np.float64(self._scale.item()))
            return C.full((), float(inv), dtype=D.float32)
        return self._scale.double().reciprocal().float()

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        per_device = defaultdict(list)
        with _no_grad():
            for gi, group in enumerate(optimizer.param_groups):
                for pi, param in enumerate(group["params"]):
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype is D.float16:
                        raise ValueError(
                            "Attempting to unscale FP16 gradients. The gradient of "
                            f"{self._param_label(param, gi, pi)} is float16: its parameter is "
                            "stored in float16. Keep float32 weights (use autocast for the "
                            "float16 math), or let ampy keep float32 master weights: "
                            "ampy.optim.SGD/Adam/AdamW(..., master_weights=True) and call "
                            "scaler.step(optimizer) without scaler.unscale_(optimizer).")
                    per_device[grad.device].append(grad)  # strided ones too: in place
            found = {}
            for dev, grads in per_device.items():
                f = found_inf if dev == found_inf.device else found_inf.to(dev)
                inv = inv_scale if dev == inv_scale.device else inv_scale.to(dev)
                F.non_finite_check_and_unscale_(grads, f, inv)
                found[dev] = f
        return found

    def _param_label(self, param, gi, pi):
        name = self._param_names.get(id(param))
        shape = list(param.shape)
        where = f"param_groups[{gi}]['params'][{pi}]"
        return (f"parameter '{name}' ({where}, shape {shape})" if name
                else f"parameter {where} (shape {shape})")

    def _check_inf_per_device(self, optimizer):
        _scale, _ = self._check_scale_growth_tracker("_check_inf_per_device")
        dummy_inv_scale = C.full((), 1.0, dtype=D.float32, device=_scale.device)
        found_inf = C.full((), 0.0, dtype=D.float32, device=_scale.device)
        state = self._per_optimizer_states[id(optimizer)]
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, dummy_inv_scale,
                                                             found_inf, True)
        return state["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer):
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    def _get_scale_async(self):
        return self._scale

    def _get_growth_tracker(self):
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

    # ------------------------------------------------------------- public
    def scale(self, outputs):
        """Multiply ``outputs`` (a tensor, or lists/tuples of tensors, nested)
        by the scale factor; out of place, recorded by autograd."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(outputs.device)

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(val.device)
            if isinstance(val, collections.abc.Iterable) and not isinstance(val, (str, bytes)):
                it = map(apply_scale, val)
                return type(val)(it) if isinstance(val, (list, tuple)) else it
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place (for
        clipping before ``step``); records whether any is inf/NaN."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._inv_scale()
        found_inf = C.full((), 0.0, dtype=D.float32, device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf,
                                                             False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless ``unscale_`` ran), then ``optimizer.step()`` unless a
        gradient is inf/NaN. Returns what ``optimizer.step`` returned (None
        when skipped). Fused ampy optimizers skip inside their kernel."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")

        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._fused_step(optimizer, state, args, kwargs)

        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise _StateAssertionError("No inf checks were recorded for this optimizer.")
        self._warn_if_useless(optimizer)
        found = list(state["found_inf_per_device"].values())
        retval = None
        if not sum(v.item() for v in found):
            retval = optimizer.step(*args, **kwargs)  # a raise leaves the stage UNSCALED (torch)
        elif self._report_nonfinite:
            self._record_nonfinite(optimizer)
        self._iter_found_infs.extend(found)
        state["stage"] = OptState.STEPPED
        return retval

    def _fused_step(self, optimizer, state, args, kwargs):
        if "grad_scaler" in inspect.signature(optimizer.step).parameters:
            warnings.warn(
                "GradScaler is going to stop passing itself as a keyword argument to the passed "
                "optimizer. In the near future GradScaler registers `grad_scale: Tensor` and "
                "`found_inf: Tensor` to the passed optimizer and let the optimizer use them "
                "directly.", FutureWarning, stacklevel=3)
            retval = optimizer.step(*args, **{**kwargs, "grad_scaler": self})
            state["stage"] = OptState.STEPPED
            return retval
        before = state["found_inf_per_device"]
        if state["stage"] is OptState.READY:
            self._check_inf_per_device(optimizer)
        self._warn_if_useless(optimizer)
        scale = self._get_scale_async()
        found = [t.to(scale.device) for t in state["found_inf_per_device"].values()]
        if not found:  # no gradient at all: what torch's default (non-fused) optimizers raise
            state["found_inf_per_device"] = before
            raise _StateAssertionError("No inf checks were recorded for this optimizer.")
        found_inf = found[0] if len(found) == 1 else sum(found[1:], found[0])
        if state["stage"] is OptState.UNSCALED:
            optimizer.grad_scale = getattr(optimizer, "grad_scale", None)
        else:
            prev = getattr(optimizer, "grad_scale", None)
            optimizer.grad_scale = scale if prev is None else scale * prev
        optimizer.found_inf = found_inf
        try:
            retval = optimizer.step(*args, **kwargs)
        except BaseException:
            # a fused step that raises wrote nothing: the scaler forgets this try
            state["found_inf_per_device"] = before
            raise
        finally:
            del optimizer.grad_scale
            del optimizer.found_inf
        self._iter_found_infs.append(found_inf)
        state["stage"] = OptState.STEPPED
        if self._report_nonfinite and found_inf.item():
            self._record_nonfinite(optimizer)
        return retval

    def update(self, new_scale=None):
        """Grow or back off the scale (or set it to ``new_scale``) and start a
        new iteration: every optimizer is READY again."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        found_infs = [f.to(_scale.device) for st in self._per_optimizer_states.values()
                      for f in st["found_inf_per_device"].values()]
        used_scale = _scale.clone()
        if new_scale is not None:
            self._set_scale(new_scale)
            combined = None
        else:
            if len(found_infs) == 0:
                raise _StateAssertionError("No inf checks were recorded prior to update.")
            combined = found_infs[0] if len(found_infs) == 1 else sum(found_infs[1:],
                                                                      found_infs[0])
            F.update_scale_(_scale, _growth_tracker, combined, self._growth_factor,
                            self._backoff_factor, self._growth_interval,
                            min_scale=self._min_scale, max_scale=self._max_scale,
                            hysteresis=self._hysteresis,
                            hysteresis_tracker=(self._hysteresis_tracker
                                                if self._hysteresis > 1 else None))
        self._history.append((self._iteration, used_scale, combined))
        self._iteration += 1
        self._last_found_infs = self._iter_found_infs or found_infs
        self._iter_found_infs = []
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _set_scale(self, new_scale):
        reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                  "torch.FloatTensor with requires_grad=False.")
        if isinstance(new_scale, numbers.Real) and not isinstance(new_scale, bool):
            self._scale.fill_(_checked_scale(new_scale, "new_scale"))
            return
        if not isinstance(new_scale, Tensor):
            raise TypeError(reason)
        if (new_scale.device.type != self._device or new_scale.numel() != 1
                or new_scale.requires_grad):
            raise _ValueAssertionError(reason)
        self._scale.copy_(new_scale.reshape(()))

    # -------------------------------------------------- getters / setters
    def get_scale(self):
        """The scale as a Python float (``init_scale`` before the first
        ``scale()``, 1.0 when disabled). Reading it is a device sync."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = _checked_growth_factor(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = _checked_backoff_factor(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = _checked_int(new_interval, "growth_interval", 1, _INT64_MAX)

    def is_enabled(self):
        return self._enabled

    # ----------------------------------------------------- ampy extras
    @property
    def last_step_skipped(self):
        """True when an optimizer step of the most recent iteration was
        skipped for inf/NaN gradients (False before any step, or disabled).
        Reads the device flag only when asked."""
        return any(bool(f.item()) for f in (self._iter_found_infs or self._last_found_infs))

    @property
    def history(self):
        """[(iteration, scale used, skipped)] of the last ``history_size``
        updates; ``skipped`` is None when ``update(new_scale)`` set the scale."""
        return [(i, float(s.item()), None if f is None else bool(f.item()))
                for i, s, f in self._history]

    def set_param_names(self, named_parameters):
        """Give parameters names for error messages and ``nonfinite_params``
        (pass ``model.named_parameters()``)."""
        self._param_names = {id(p): n for n, p in named_parameters}

    def _record_nonfinite(self, optimizer):
        names = []
        one = C.full((), 1.0, dtype=D.float32)
        for gi, group in enumerate(optimizer.param_groups):
            for pi, p in enumerate(group["params"]):
                if p.grad is None:
                    continue
                f = C.full((), 0.0, dtype=D.float32, device=p.grad.device)
                F.non_finite_check_and_unscale_([p.grad], f, one.to(p.grad.device))
                if f.item():
                    names.append(self._param_names.get(id(p)) or
                                 f"param_groups[{gi}]['params'][{pi}]")
        self.nonfinite_params = names

    def _warn_if_useless(self, optimizer):
        """Pain point #16: scaling protects float16 gradients from underflow;
        with bfloat16 (float32's exponent range) or plain float32 it only costs
        time. Warn once when no gradient is float16 AND no enabled float16
        autocast region was ever entered in this process (fp32 weights under
        fp16 autocast get fp32 .grad, yet their backward ran in fp16 and needs
        the scale -- that case must not warn)."""
        if self._warned_useless:
            return
        self._warned_useless = True
        if D.float16 in _ac._seen_dtypes:
            return
        dtypes = {p.grad.dtype for g in optimizer.param_groups for p in g["params"]
                  if p.grad is not None}
        if D.float16 in dtypes or not dtypes:
            return
        warnings.warn(
            "GradScaler: no float16 is involved (gradients are "
            f"{', '.join(sorted('ampy.' + d.name for d in dtypes))} and no float16 autocast "
            "region was entered), so loss scaling cannot prevent any underflow and only costs "
            "time. With bfloat16 or float32 use GradScaler(enabled=False) or no scaler.",
            UserWarning, stacklevel=3)

    # -------------------------------------------------------- state dict
    def state_dict(self):
        """torch's keys (scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker); plus min_scale/max_scale/hysteresis when set. {} when
        disabled. Call it after update()."""
        if not self._enabled:
            return {}
        sd = {"scale": self.get_scale(), "growth_factor": self._growth_factor,
              "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
              "_growth_tracker": self._get_growth_tracker()}
        if self._min_scale is not None:
            sd["min_scale"] = self._min_scale
        if self._max_scale is not None:
            sd["max_scale"] = self._max_scale
        if self._hysteresis != 1:
            sd["hysteresis"] = self._hysteresis
            sd["_hysteresis_tracker"] = (self._init_hysteresis_tracker
                                         if self._hysteresis_tracker is None
                                         else int(self._hysteresis_tracker.item()))
        return sd

    _KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"GradScaler.load_state_dict: expected a dict, "
                            f"got {type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        missing = [k for k in self._KEYS if k not in state_dict]
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing key(s) {missing}; expected "
                           f"{list(self._KEYS)}")
        # every value checked (as the constructor checks it) before any is stored
        scale = _checked_scale(state_dict["scale"], "scale")
        gf = _checked_growth_factor(state_dict["growth_factor"])
        bf = _checked_backoff_factor(state_dict["backoff_factor"])
        gi = _checked_int(state_dict["growth_interval"], "growth_interval", 1, _INT64_MAX)
        gt = _checked_int(state_dict["_growth_tracker"], "_growth_tracker", 0, _INT32_MAX)
        min_scale, max_scale = _checked_bounds(state_dict.get("min_scale"),
                                               state_dict.get("max_scale"))
        hyst = _checked_int(state_dict.get("hysteresis", 1), "hysteresis", 1, _INT32_MAX)
        ht = _checked_int(state_dict.get("_hysteresis_tracker", hyst), "_hysteresis_tracker", 0,
                          hyst)
        self._init_scale = scale
        if self._scale is not None:
            self._scale.fill_(scale)
        self._growth_factor, self._backoff_factor, self._growth_interval = gf, bf, gi
        self._init_growth_tracker = gt
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(gt)
        self._min_scale, self._max_scale = min_scale, max_scale
        self._hysteresis, self._init_hysteresis_tracker = hyst, ht
        if self._hysteresis_tracker is not None:
            self._hysteresis_tracker.fill_(ht)

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise _StateAssertionError(
                    "A GradScaler instance may only be pickled at the beginning of an "
                    "iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            if self._hysteresis_tracker is not None:
                state["_init_hysteresis_tracker"] = int(self._hysteresis_tracker.item())
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_hysteresis_tracker"] = None
        state["_history"] = collections.deque(
            [(i, C.full((), float(s.item()), dtype=D.float32),
              None if f is None else C.full((), float(f.item()), dtype=D.float32))
             for i, s, f in self._history], maxlen=self._history.maxlen)
        state["_last_found_infs"] = [C.full((), float(self.last_step_skipped), dtype=D.float32)]
        state["_iter_found_infs"] = []
        state["_param_names"] = {}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
