"""The op table: every differentiable ampy op is one OpDef.

An OpDef holds the op's name, its forward (a function that calls into
ampy._C), its backward rule and its autocast policy per device type. Public
functions call `dispatch(op, *args)`, the single place where autocast casts the
inputs and autograd records the graph (ampy/autograd, ampy/amp install
themselves here through `set_hooks`). Read the table with `ops()` / `print_ops()`.
"""

__all__ = ["OpDef", "defop", "get_op", "ops", "dispatch", "set_hooks",
           "dispatch_below_autocast"]

_TABLE = {}


class OpDef:
    """forward(*args, **kw) -> Tensor(s); backward(ctx, *grads) -> grads per input;
    policy: {"cpu": name, "cuda": name} with names from ampy.amp's policies
    ("lower_precision_fp", "fp32", "fp32_set_opt_dtype", "promote") or None."""

    __slots__ = ("name", "forward", "backward", "policy", "doc", "_ag")

    def __init__(self, name, forward, backward=None, policy=None, doc=""):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.policy = dict(policy or {})
        self.doc = doc
        self._ag = None  # autograd's per-rule recording info (ampy/autograd/_recording.py)

    def __repr__(self):
        return f"OpDef({self.name!r}, policy={self.policy})"


def defop(name, policy=None):
    """Decorator registering `fn` as the forward of op `name`."""

    def wrap(fn):
        op = _TABLE.get(name)
        if op is None:
            _TABLE[name] = OpDef(name, fn, policy=policy, doc=fn.__doc__ or "")
        else:
            op.forward = fn
            if policy:
                op.policy.update(policy)
        return fn

    return wrap


def get_op(name):
    try:
        return _TABLE[name]
    except KeyError:
        raise KeyError(f"ampy has no op named {name!r}") from None


def ops():
    return dict(_TABLE)


# Hooks installed by ampy.amp (autocast) and ampy.autograd. Until they are
# installed, dispatch simply runs the forward.
class _Hooks:
    autocast = None  # fn(op, args, kwargs) -> (args, kwargs), or None when inactive
    autograd = None  # fn(op, args, kwargs) -> result


_hooks = _Hooks()


def set_hooks(autocast=None, autograd=None):
    if autocast is not None:
        _hooks.autocast = autocast
    if autograd is not None:
        _hooks.autograd = autograd


def dispatch(op, *args, **kwargs):
    ac = _hooks.autocast
    if ac is not None:
        args, kwargs = ac(op, args, kwargs)
    ag = _hooks.autograd
    if ag is not None:
        return ag(op, args, kwargs)
    return op.forward(*args, **kwargs)


def dispatch_below_autocast(op, args, kwargs):
    """dispatch without the autocast step: for the casts autocast itself makes
    (torch runs them with autocast excluded too)."""
    ag = _hooks.autograd
    if ag is not None:
        return ag(op, args, kwargs)
    return op.forward(*args, **kwargs)
