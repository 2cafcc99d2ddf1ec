"""The op table: one declaration per op.

`defop` declares an op and its OpDef holds everything about it: the forward
(a function that calls into ampy._C), the backward rule (attached by
`@backward("<op>")` next to the formulas it uses; a name that is not a
declared op raises at import), the autocast policy per device type (torch's
list, ampy/_policy_lists.py, applied at the declaration; an explicit
`policy=` overrides it), the devices its forward runs on, and the Python
names it is exposed under. Public functions call `dispatch(op, *args)`, the
single place where autocast casts the inputs and autograd records the graph
(ampy/autograd, ampy/amp install themselves here through `set_hooks`).
`print_ops()` prints the table.
"""
import inspect
import os
import sys

from ._policy_lists import DEVICES, torch_policy

__all__ = ["OpDef", "defop", "backward", "get_op", "ops", "dispatch", "set_hooks",
           "dispatch_below_autocast", "op_table", "print_ops", "CPU", "CPU_CUDA"]

_TABLE = {}

# what a forward's device field says: its C binding runs CUDA tensors on the
# device (through _C's ampy_cuda_api routing, or a view / cast / copy), or
# the op is CPU-only (a CUDA tensor takes ampy.cuda's CPU fallback)
CPU = ("cpu",)
CPU_CUDA = ("cpu", "cuda")


class OpDef:
    """forward(*args, **kw) -> Tensor(s); backward(ctx, *grads) -> grads per input;
    policy: {"cpu": name, "cuda": name} with names from ampy/_policy_lists.py
    ("lower_precision_fp", "fp32", "fp32_set_opt_dtype", "promote", "banned")
    for the devices the op is autocast on; devices: where the forward runs;
    names: the Python names it is exposed under ("ampy.add", "Tensor.__add__")."""

    __slots__ = ("name", "forward", "backward", "policy", "devices", "names", "doc", "_ag")

    def __init__(self, name, forward, backward=None, policy=None, doc="", devices=CPU,
                 names=()):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.policy = dict(policy or {})
        self.devices = tuple(devices)
        self.names = tuple(names)
        self.doc = doc
        self._ag = None  # autograd's per-rule recording info (ampy/autograd/_recording.py)

    def __repr__(self):
        return f"OpDef({self.name!r}, policy={self.policy})"


def _default_names(name):
    if name.endswith("_"):
        return (f"Tensor.{name}",)
    return (f"ampy.{name}", f"Tensor.{name}")


def defop(name, *, policy=None, devices=CPU, names=None):
    """Decorator declaring `fn` as the forward of op `name`.

    policy: overrides of torch's autocast policy for this op ({device: policy};
    say why in a comment where it is given); devices: CPU or CPU_CUDA; names:
    the Python names the op is exposed under (default "ampy.<name>" and
    "Tensor.<name>", or "Tensor.<name>" for an in-place "<name>_")."""
    if name in _TABLE:
        raise ValueError(f"op {name!r} is declared twice")
    for dev in devices:
        if dev not in DEVICES:
            raise ValueError(f"defop({name!r}): unknown device {dev!r}")

    def wrap(fn):
        pol = torch_policy(name)
        pol.update(policy or {})
        _TABLE[name] = OpDef(name, fn, policy=pol, doc=fn.__doc__ or "", devices=devices,
                             names=_default_names(name) if names is None else names)
        return fn

    return wrap


def _mark_rule(fn, save, save_out, is_view, inplace):
    fn.save = save
    fn.save_out = save_out
    fn.is_view = is_view
    fn.inplace = inplace
    return fn


def _inplace_rule(base):
    """The rule of in-place op `name_`: the rule of `name`, recorded in place."""
    def rule_(ctx, *grads):
        return base(ctx, *grads)

    _mark_rule(rule_, base.save, base.save_out, False, True)
    rule_.base = base
    rule_.__name__ = rule_.__qualname__ = base.__name__ + "_"
    return rule_


def backward(*names, save=None, save_out=False, is_view=False, inplace=False):
    """Decorator attaching `fn` as the backward rule of the declared ops
    `names` (LookupError at import for a name that is not an op).

    save: the positional arguments whose values the rule reads (they are kept
    and version-checked; the others are reduced to their shape and dtype);
    save_out=True keeps the outputs. The in-place variant `name_` of each
    op, when declared without a rule of its own, gets the same rule."""
    def wrap(fn):
        _mark_rule(fn, save, save_out, is_view, inplace)
        for n in names:
            op = _TABLE.get(n)
            if op is None:
                raise LookupError(f"backward rule {fn.__qualname__} for {n!r}: ampy has no op "
                                  f"named {n!r}")
            op.backward = fn
            iop = _TABLE.get(n + "_")
            if iop is not None and not n.endswith("_") and iop.backward is None:
                iop.backward = _inplace_rule(fn)
        return fn

    return wrap


def get_op(name):
    try:
        return _TABLE[name]
    except KeyError:
        raise KeyError(f"ampy has no op named {name!r}") from None


def ops():
    return dict(_TABLE)


def _where(fn):
    """'file:line' of a function's definition (relative to the package's parent)."""
    fn = getattr(fn, "base", fn)
    try:
        path = inspect.getsourcefile(fn)
        line = inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return "-"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"{os.path.relpath(path, root)}:{line}"


def op_table():
    """[{name, forward, backward, policy, devices, names}] for every op, with
    the forward and backward as 'file:line'."""
    rows = []
    for name in sorted(_TABLE):
        op = _TABLE[name]
        rows.append({"name": name, "forward": _where(op.forward),
                     "backward": _where(op.backward) if op.backward is not None else "-",
                     "policy": {d: op.policy.get(d) for d in DEVICES},
                     "devices": op.devices, "names": op.names})
    return rows


def print_ops(file=None):
    """Print the op table: per op its forward and backward (file:line), its
    autocast policy per device, its devices and its Python names."""
    file = sys.stdout if file is None else file
    for r in op_table():
        pol = " ".join(f"{d}={r['policy'][d] or '-'}" for d in DEVICES)
        print(f"{r['name']}\n    forward  {r['forward']}\n    backward {r['backward']}\n"
              f"    policy   {pol}\n    devices  {','.join(r['devices'])}\n"
              f"    names    {', '.join(r['names']) or '-'}", file=file)


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
