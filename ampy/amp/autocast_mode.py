"""ampy.autocast: regions in which ops run in the dtype their policy picks.

Follows torch.amp.autocast (torch/amp/autocast_mode.py and
aten/src/ATen/autocast_mode.{h,cpp}), with three deliberate
differences, each for a known torch bug:

- The state lives in a ContextVar chain (ampy/amp/_autocast_state.py), not in
  thread-locals plus ``self``, and a region's exit restores exactly what its
  entry saw, wherever that exit runs. Torch leaks here: a generator suspended
  in a region and closed inside another region (or in another thread) makes
  torch's ``__exit__`` write its stale saved values into the thread's state,
  so autocast stays on after every ``with`` has exited. In ampy a region is
  live from its ``__enter__`` to its ``__exit__``; its exit kills it in every
  context that can see it: the context that entered it goes back to the state
  its entry saw, a region entered after it keeps its own state, and tasks,
  ``asyncio.to_thread`` calls and ``copy_context().run`` calls that copied the
  state while it was live stop seeing it (torch: a task sees the thread's
  current state; a to_thread worker sees none — a plain ``threading.Thread``
  or executor worker starts with autocast off in both libraries). A decorated
  function that recurses, or one object entered twice, restores the right
  state (no state on ``self``), and ``@autocast()`` on a generator function
  enters the region around each step of the generator (torch: around the call
  that creates it, so its body runs without autocast).
  Python itself limits one case: code after a ``yield`` inside a ``with``
  block runs in the context of whoever resumes the generator, so while a
  generator is suspended inside a region, that region is open for its
  consumer too (as in torch and ``decimal.localcontext``).
- The weight-cast cache belongs to the outermost live region of one thread
  (nested regions and asyncio tasks of that thread share it; a region entered
  in another thread, even under a copied context, gets its own, and a thread
  without a region of its own caches nothing; torch: one process-wide map).
  It is cleared when that region exits, keyed on (tensor, target dtype, grad
  mode) and checked against the tensor's version counter and a weakref: a cast
  made under ``no_grad`` (no graph) is never handed to a use that needs a
  graph (torch issues #65766, #112583, #158232), an in-place update of the
  weight inside the region is seen, and a dead tensor's id cannot hit.
- ``dtype`` is validated only when the region is enabled (torch PR #96097).

How ops see it: ampy._dispatch calls the autocast hook before every op. The
hook is installed only while some region is open anywhere in the process, so
outside autocast an op pays a single attribute check; inside, the hook reads
the same folded state as ``is_autocast_enabled()`` and ``get_autocast_dtype()``.
"""
import collections.abc
import functools
import sys
import threading
import warnings
import weakref

import numpy as np

from .. import _contextlib, _dispatch
from .. import _dtype as D
from .._tensor import Tensor, device as _device
from . import _autocast_state as S
from . import _policy as P

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
           "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
           "clear_autocast_cache", "is_autocast_available", "custom_fwd", "custom_bwd",
           "register_autocast"]

_DEVICE_TYPES = S.DEVICE_TYPES
_DEFAULT_DTYPE = S.DEFAULT_DTYPE
_SUPPORTED = {"cpu": (D.bfloat16, D.float16), "cuda": (D.float16, D.bfloat16, D.float32)}

# Live regions anywhere in the process; the dispatch hook is installed while > 0.
_open = [0]
_sticky = [False]  # set_autocast_enabled(..., True) keeps the hook
_open_lock = threading.Lock()
# dtypes of enabled regions ever entered (GradScaler's "scaling buys nothing" check)
_seen_dtypes = set()


def _region_opened():
    with _open_lock:
        _open[0] += 1
        _dispatch._hooks.autocast = _hook


def _region_closed():
    with _open_lock:
        _open[0] -= 1
        if _open[0] <= 0 and not _sticky[0]:
            _open[0] = 0
            _dispatch._hooks.autocast = None


def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in _DEVICE_TYPES:
        _device(device_type)  # raises torch's message for a string that is no device at all
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return device_type


def _cuda_available():
    cuda = sys.modules.get("ampy.cuda")
    fn = getattr(cuda, "is_available", None)
    return bool(fn()) if fn is not None else False


# ------------------------------------------------------------------ queries
def is_autocast_available(device_type):
    """True for the device types ampy's autocast knows ("cpu", "cuda")."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type in _DEVICE_TYPES:
        return True
    _device(device_type)
    return False


def is_autocast_enabled(device_type="cuda"):
    """Whether autocast is on for ``device_type`` in this thread / task."""
    return S.current().enabled[_check_device_type(device_type)]


def get_autocast_dtype(device_type):
    """The dtype lower-precision ops use on ``device_type`` (bfloat16 on cpu,
    float16 on cuda unless a region or set_autocast_dtype chose another)."""
    return S.current().dtype[_check_device_type(device_type)]


def set_autocast_enabled(device_type, enabled):
    _check_device_type(device_type)
    S.push_setting(enabled={device_type: bool(enabled)})
    if enabled:
        with _open_lock:
            _sticky[0] = True
            _dispatch._hooks.autocast = _hook


def set_autocast_dtype(device_type, dtype):
    _check_device_type(device_type)
    S.push_setting(dtype={device_type: D.to_dtype(dtype)})


def is_autocast_cache_enabled():
    return S.current().cache_enabled


def set_autocast_cache_enabled(enabled):
    S.push_setting(cache_enabled=bool(enabled))


def clear_autocast_cache():
    """Drop the cached weight casts of this thread's / task's open region."""
    cache = S.current().cache
    if cache is not None:
        cache.clear()


# --------------------------------------------------------------- autocast
class autocast:
    """``with ampy.autocast("cpu", dtype=ampy.float16): ...`` or ``@ampy.autocast("cpu")``.

    Inside the region, ops listed in the policy table (``ampy.amp.print_policy()``)
    run in the autocast dtype (matmul, linear, ...) or in float32 (losses,
    exp/log, ...); see ampy/amp/_policy.py. ``enabled=False`` opens a region
    where autocast is off (nested inside an enabled one, for example).
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _check_device_type(device_type)
        if not isinstance(enabled, (bool, np.bool_)):
            raise TypeError(f"autocast(): argument 'enabled' must be a bool, not "
                            f"{type(enabled).__name__}")
        enabled = bool(enabled)
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        if enabled:
            self.fast_dtype = self._check_dtype(self.fast_dtype)
            if enabled and self.device == "cuda" and not _cuda_available():
                warnings.warn("CUDA is not available. Disabling autocast.", UserWarning,
                              stacklevel=2)
                enabled = False
            elif enabled and self.fast_dtype not in _SUPPORTED[self.device]:
                dev = self.device.upper()
                names = ", ".join(f"ampy.{d.name}" for d in _SUPPORTED[self.device])
                warnings.warn(f"In {dev} autocast, but the target dtype is not supported. "
                              f"Disabling autocast.\n{dev} Autocast only supports dtypes of "
                              f"{names} currently.", UserWarning, stacklevel=2)
                enabled = False
        self._enabled = enabled
        self._cache_enabled = cache_enabled
        self._live = []  # regions of this object not exited yet (entered recursively...)

    @staticmethod
    def _check_dtype(dtype):
        if isinstance(dtype, (D.dtype, str)):
            try:
                return D.to_dtype(dtype)
            except (TypeError, ValueError, KeyError):
                pass
        raise TypeError(f"autocast(): argument 'dtype' must be an ampy.dtype such as "
                        f"ampy.float16 or ampy.bfloat16, not {dtype!r}")

    def __enter__(self):
        dtype = self.fast_dtype
        if not (isinstance(dtype, D.dtype) and dtype.is_floating_point):
            dtype = None  # (a disabled region with a non-float dtype keeps the current one)
        cache_enabled = None if self._cache_enabled is None else bool(self._cache_enabled)
        node = S.push_region(self, self.device, self._enabled, dtype, cache_enabled)
        self._live.append(node)
        if self._enabled:
            _seen_dtypes.add(self.fast_dtype)
        _region_opened()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        node = S.find_region(self, self._live)
        if node is None:
            raise RuntimeError("autocast.__exit__() called without a matching __enter__()")
        self._live.remove(node)
        S.close_region(node)
        _region_closed()
        return False

    def __call__(self, func):
        return _contextlib.decorate(self, func)

    def __repr__(self):
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype!r}, "
                f"enabled={self._enabled}, cache_enabled={self._cache_enabled})")


class _suspended:
    """Autocast off inside (torch's ExcludeDispatchKeyGuard around an op)."""

    __slots__ = ("_token",)

    def __enter__(self):
        self._token = S.push_setting(enabled={d: False for d in _DEVICE_TYPES})

    def __exit__(self, *exc):
        S.TOP.reset(self._token)
        return False


# ------------------------------------------------------------------- the hook
_TO_DTYPE = _dispatch.get_op("to_dtype")
_grad_mode = [None]


def _grad_enabled():
    fn = _grad_mode[0]
    if fn is None:
        mod = sys.modules.get("ampy.autograd")
        fn = getattr(mod, "is_grad_enabled", None)
        if fn is None:
            return True
        _grad_mode[0] = fn
    return fn()


def _device_of(args):
    for a in args:
        if isinstance(a, Tensor):
            return "cpu" if a._device_index < 0 else "cuda"
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor):
                    return "cpu" if b._device_index < 0 else "cuda"
    return None


def _eligible(t, dev):
    dt = t.dtype
    return (dt.is_floating_point and dt is not D.float64
            and (t._device_index < 0) == (dev == "cpu"))


_below = _dispatch.dispatch_below_autocast
_TOP, _epoch = S.TOP, S._epoch
_get_ident = threading.get_ident  # (a region's cache serves the thread that entered it)
_EMPTY = {}


def _cast(t, dt, st, lower):
    if t.dtype is dt:
        return t
    if (dt is lower and st.cache_enabled and t.dtype is D.float32 and t._requires_grad
            and t.grad_fn is None and st.cache_thread == _get_ident()):
        key = (id(t), dt, _grad_enabled())
        hit = st.cache.get(key)
        version = t._version
        if hit is not None and hit[0]() is t and hit[1] == version:
            return hit[2]
        out = _below(_TO_DTYPE, (t, dt), _EMPTY)
        st.cache[key] = (weakref.ref(t), version, out)
        return out
    return _below(_TO_DTYPE, (t, dt), _EMPTY)


def _cast_one(a, dt, dev, st, lower):
    if isinstance(a, Tensor):
        return _cast(a, dt, st, lower) if _eligible(a, dev) else a
    if isinstance(a, (list, tuple)) and a and any(isinstance(b, Tensor) for b in a):
        return type(a)(_cast(b, dt, st, lower) if isinstance(b, Tensor) and _eligible(b, dev)
                       else b for b in a)
    return a


def _cast_all(args, kwargs, dt, dev, st, lower):
    """(args, kwargs) with every eligible tensor (also in lists/tuples and
    keyword arguments) cast to dt."""
    cpu = dev == "cpu"
    out = []
    for a in args:
        if isinstance(a, Tensor):  # (inlined _cast_one / _eligible: the common case)
            t = a.dtype
            if (t is not dt and t.is_floating_point and t is not D.float64
                    and (a._device_index < 0) == cpu):
                a = _cast(a, dt, st, lower)
            out.append(a)
        else:
            out.append(_cast_one(a, dt, dev, st, lower))
    if kwargs:
        kwargs = {k: _cast_one(v, dt, dev, st, lower) for k, v in kwargs.items()}
    return tuple(out), kwargs


def _promote_type(args, kwargs, dev, lower):
    cur = lower
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        for t in items:
            if isinstance(t, Tensor) and _eligible(t, dev):
                nxt = t.dtype
                if cur is D.float32 or nxt is D.float32:
                    cur = D.float32
                elif not (cur is lower and nxt is lower):
                    raise RuntimeError("Unexpected floating ScalarType in ampy autocast "
                                       f"promote: {nxt!r} mixed with autocast dtype {lower!r}")
    return cur


def _hook(op, args, kwargs):
    node = _TOP.get()
    if node is None:
        return args, kwargs
    st = node.state if node.epoch == _epoch[0] else S.effective(node)
    if not st.active:
        return args, kwargs
    pol = op.policy
    if not pol or (kwargs and "out" in kwargs):
        return args, kwargs
    a = args[0] if args else None
    if isinstance(a, Tensor):  # (inlined _device_of: the common case)
        dev = "cpu" if a._device_index < 0 else "cuda"
    else:
        dev = _device_of(args) or (_device_of(tuple(kwargs.values())) if kwargs else None)
        if dev is None:
            return args, kwargs
    rule = pol.get(dev)
    if rule is None or not st.enabled[dev]:
        return args, kwargs
    lower = st.dtype[dev]
    if rule == P.LOWER:
        return _cast_all(args, kwargs, lower, dev, st, lower)
    if rule == P.FP32:
        return _cast_all(args, kwargs, D.float32, dev, st, lower)
    if rule == P.FP32_SET_OPT_DTYPE:
        first = args[0] if args else None
        if (kwargs.get("dtype") is None and isinstance(first, Tensor) and _eligible(first, dev)):
            kwargs = dict(kwargs)
            kwargs["dtype"] = D.float32
        return args, kwargs
    if rule == P.PROMOTE:
        return _cast_all(args, kwargs, _promote_type(args, kwargs, dev, lower), dev, st, lower)
    if rule == P.BANNED:
        raise RuntimeError(P.BANNED_MESSAGE)
    if isinstance(rule, D.dtype):  # register_autocast(op, dev, cast_inputs=dtype)
        return _cast_all(args, kwargs, rule, dev, st, lower)
    raise RuntimeError(f"ampy autocast: op {op.name!r} has an unknown policy {rule!r} for "
                       f"{dev!r}")


# ----------------------------------------------------- custom_fwd / custom_bwd
def _cast_value(value, device_type, dtype):
    if isinstance(value, Tensor):
        return value.to(dtype) if _eligible(value, device_type) else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast_value(k, device_type, dtype): _cast_value(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        it = (_cast_value(v, device_type, dtype) for v in value)
        return type(value)(it) if isinstance(value, (list, tuple)) else it
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for the ``forward`` of an ``ampy.autograd.Function`` (torch's).

    ``cast_inputs=None``: forward runs under the surrounding autocast state.
    ``cast_inputs=dtype``: inside an enabled region, floating tensors of
    ``device_type`` (also inside lists/tuples/dicts) are cast to ``dtype`` and
    forward runs with autocast disabled; outside autocast it changes nothing.
    """
    _check_device_type(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    if cast_inputs is not None:
        cast_inputs = autocast._check_dtype(cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if is_autocast_enabled(device_type):
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast_value(args, device_type, cast_inputs),
                           **_cast_value(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for ``backward``: runs it under the autocast state (enabled,
    dtype) that the matching ``custom_fwd`` forward saw."""
    _check_device_type(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast,
                      dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd


# ---------------------------------------------------------- register_autocast
def register_autocast(op, device_type, cast_inputs):
    """Give an op an autocast rule on ``device_type``.

    ``op``: the name of an op in ampy's table (``"linear"``), an OpDef, or a
    plain function. ``cast_inputs``: a floating dtype (inputs of that device
    are cast to it, as torch.library.register_autocast) or one of the policy
    names of ampy/amp/_policy.py ("lower_precision_fp", "fp32", ...).

    For a function, it joins the op table under its qualified name and a
    wrapper is returned: call the wrapper. Inside it autocast is off, so the
    ops the function uses run in the dtypes the rule chose (torch excludes
    autocast inside a registered op the same way).
    """
    _check_device_type(device_type)
    if isinstance(cast_inputs, str) and cast_inputs in P.POLICIES:
        rule = cast_inputs
    else:
        rule = autocast._check_dtype(cast_inputs)
        if not rule.is_floating_point:
            raise ValueError(f"register_autocast(): 'cast_inputs' must be a floating dtype, "
                             f"got {rule!r}")
    if isinstance(op, str):
        opdef = _dispatch.get_op(op)
    elif isinstance(op, _dispatch.OpDef):
        opdef = op
    elif callable(op):
        return _register_function(op, device_type, rule)
    else:
        raise TypeError(f"register_autocast(): 'op' must be an op name, an OpDef or a "
                        f"function, not {type(op).__name__}")
    opdef.policy[device_type] = rule
    return opdef


def _register_function(fn, device_type, rule):
    name = getattr(fn, "__ampy_op__", None)
    opdef = _dispatch._TABLE.get(name) if name else None
    if opdef is None:
        name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
        opdef = _dispatch._TABLE.get(name)
        if opdef is None:
            opdef = _dispatch.OpDef(name, fn, doc=fn.__doc__ or "")
            _dispatch._TABLE[name] = opdef
    opdef.policy[device_type] = rule

    @functools.wraps(fn)
    def op_with_autocast(*args, **kwargs):
        if _dispatch._hooks.autocast is not None:
            args, kwargs = _hook(opdef, args, kwargs)
            with _suspended():
                return opdef.forward(*args, **kwargs)
        return opdef.forward(*args, **kwargs)

    op_with_autocast.__ampy_op__ = name
    return op_with_autocast
