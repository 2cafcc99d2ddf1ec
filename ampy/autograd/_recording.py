"""Recording: the dispatch hook that attaches graph nodes to op outputs.

`autograd_hook(op, args, kwargs)` is installed into the op table through
`_dispatch.set_hooks(autograd=...)`. It runs for every op, so the common case —
grad mode off, or no argument requiring grad — is a short loop with no
allocation. Otherwise `_record` runs the forward with grad mode off and
attaches a Node (ampy/autograd/_node.py) to the floating-point outputs.

Recording is on the path of every differentiable op, so it is written for
speed: what a node class, the rule's `save` set and its flags are is worked
out once per op and kept in the op's `_ag` slot (`_OpInfo`); the edges, saved
inputs and Metas of the common case (no list of tensors, not in place) come
from one C call (`TensorBase._ag_inputs`, csrc/py/tensor.c; `_inputs` below is
the same in Python, for every case); tensor attributes that are usually absent
(`_output_nr`, `_grad_accumulator`, ...) have class defaults on ampy.Tensor;
grad mode is switched off around the forward without a lock (`_OFF_LIST`);
node classes have no Python `__init__`; single-output ops skip the
multi-output bookkeeping.
"""
import inspect

from .. import _C
from .._dispatch import dispatch_below_autocast, get_op
from ._grad_mode import _OFF_LIST, _state
from ._node import _SEQ, Meta, accumulator, node_class
from ._registry import NAMES
from ._ops import O

__all__ = ["autograd_hook", "edge_of", "op_info"]

_SEQ_TYPES = (list, tuple)
_SIGS = {}
_NO_EDGE = (None, 0)
_new = object.__new__
_next_seq = _SEQ.__next__
_ag_inputs = _C.TensorBase._ag_inputs

_CLONE = get_op("clone")
_LEAF_INPLACE_MSG = ("a leaf Variable that requires grad is being used in an in-place "
                     "operation.")


def _is_tensor(a):
    return getattr(a, "_requires_grad", None) is not None


def _wants_grad(args, kwargs):
    for a in args:
        if a.__class__ in _SEQ_TYPES:
            for b in a:
                if getattr(b, "_requires_grad", False):
                    return True
        elif getattr(a, "_requires_grad", False):
            return True
    if kwargs:
        for a in kwargs.values():
            if getattr(a, "_requires_grad", False):
                return True
    return False


def autograd_hook(op, args, kwargs):
    """The dispatch hook: record `op` when grad mode is on and an argument
    requires grad, else just run its forward."""
    if not _OFF_LIST or _state.enabled:
        # inlined _wants_grad: this runs for every op
        for a in args:
            rg = getattr(a, "_requires_grad", None)
            if rg:
                return _record(op, args, kwargs)
            if rg is None and a.__class__ in _SEQ_TYPES and _wants_grad(a, None):
                return _record(op, args, kwargs)
        if kwargs and _wants_grad((), kwargs):
            return _record(op, args, kwargs)
    if kwargs:
        return op.forward(*args, **kwargs)
    return op.forward(*args)


def _bind_tensor_kwargs(op, args, kwargs):
    """Move tensor keyword arguments to their positions, so that rules see
    one layout whatever the call style."""
    if not any(_is_tensor(v) for v in kwargs.values()):
        return args, kwargs
    sig = _SIGS.get(op.name)
    if sig is None:
        sig = _SIGS[op.name] = inspect.signature(op.forward)
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    pos, kw = [], {}
    for name, p in sig.parameters.items():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos.append(ba.arguments[name])
        elif p.kind == p.VAR_POSITIONAL:
            pos.extend(ba.arguments.get(name, ()))
        elif p.kind == p.KEYWORD_ONLY:
            kw[name] = ba.arguments[name]
        else:
            kw.update(ba.arguments.get(name, {}))
    for k, v in kw.items():
        if getattr(v, "_requires_grad", False):
            raise NotImplementedError(f"{op.name}: ampy's autograd cannot differentiate the "
                                      f"keyword-only tensor argument {k!r}")
    return tuple(pos), kw


def edge_of(t):
    """The (node, output_nr) a gradient for tensor t flows into."""
    g = t.grad_fn
    if g is not None:
        return (g, t._output_nr)
    if t._requires_grad:
        return (accumulator(t), 0)
    return _NO_EDGE


def _missing_rule(op):
    def rule(ctx, *grads):
        raise NotImplementedError(f"the derivative for '{op.name}' is not implemented")
    rule.backward_name = None
    return rule


class _OpInfo:
    """What recording needs to know about an op, worked out once per rule."""

    __slots__ = ("rule", "save", "inplace", "save_out", "is_view", "cls")

    def __init__(self, op, rule, cache_key):
        self.rule = cache_key  # op.backward this was made for (None: no rule yet)
        save = getattr(rule, "save", None)
        self.save = None if save is None else frozenset(save)
        self.inplace = bool(getattr(rule, "inplace", False) or op.name.endswith("_"))
        self.save_out = bool(getattr(rule, "save_out", False))
        self.is_view = bool(getattr(rule, "is_view", False))
        self.cls = node_class(op.name, rule, NAMES.get(op.name))


def op_info(op):
    """The _OpInfo of op for its current rule (cached in op._ag)."""
    rule = op.backward
    info = op._ag
    if info is not None and info.rule is rule and rule is not None:
        return info
    if rule is None:  # not cached: a rule may be attached later
        return _OpInfo(op, _missing_rule(op), None)
    info = op._ag = _OpInfo(op, rule, rule)
    return info


def _meta(a):
    m = _new(Meta)
    m.shape = a.shape
    m.dtype = a.dtype
    m._device_index = a._device_index
    return m


def _save_seq(a, keep, saved, clone_first, edges, listed=True):
    """A list/tuple argument: one edge per tensor in it, and the items as
    the node holds them (see _save)."""
    items = []
    need = False
    for b in a:
        if getattr(b, "_requires_grad", None) is not None:
            e = edge_of(b)
            edges.append(e)
            need = need or e[0] is not None
            items.append(_save(b, keep, saved, clone_first, listed))
        else:
            items.append(b)
    return (type(a)(items) if a.__class__ is list else tuple(items)), need


def _save(t, keep, saved, clone_first, listed=True):
    """The argument as the node holds it: the tensor itself (version-checked
    at backward), a clone (for in-place ops, whose first input is about to
    change), or only its metadata. A non-floating tensor (indices, targets,
    masks) is kept as itself, version-checked when the rule lists it."""
    if not t.dtype.is_floating_point:
        if keep and listed:
            saved.append((t, t._version))
        return t
    if not keep:
        return _meta(t)
    if clone_first:
        t = _original(t)
    saved.append((t, t._version))
    return t


def _original(t):
    """The value an in-place op's first input had, for its rule: a clone
    that is itself recorded when t has history (torch's original_self), so
    that create_graph=True backward differentiates through it to t's past."""
    if t._requires_grad:
        return dispatch_below_autocast(_CLONE, (t,), {})
    return O.clone(t)


def _check_inplace(op, target):
    if target.grad_fn is None and target._requires_grad:
        raise RuntimeError(_LEAF_INPLACE_MSG)
    if target._is_view_of_grad:
        raise NotImplementedError(
            f"{op.name}: in-place modification of a view of a tensor that requires grad "
            f"is not supported by ampy's autograd; clone() the view first")


def _inputs(args, save, inplace):
    """The Python version of TensorBase._ag_inputs, for every case."""
    edges = []
    sargs = []
    saved = []
    needs = []
    i = 0
    for a in args:
        rg = getattr(a, "_requires_grad", None)
        if rg is not None:  # a tensor (the common case, inlined edge_of/_save)
            g = a.grad_fn
            if g is not None:
                edges.append((g, a._output_nr))
                needs.append(True)
            elif rg:
                ref = a._grad_accumulator
                acc = ref() if ref is not None else None
                edges.append((acc if acc is not None else accumulator(a), 0))
                needs.append(True)
            else:
                edges.append(_NO_EDGE)
                needs.append(False)
            if not a.dtype.is_floating_point:
                if save is not None and i in save:  # (indices, targets: checked as torch)
                    saved.append((a, a._version))
                sargs.append(a)
            elif save is None or i in save:
                if inplace and i == 0:
                    a = _original(a)
                saved.append((a, a._version))
                sargs.append(a)
            else:
                m = _new(Meta)
                m.shape = a.shape
                m.dtype = a.dtype
                m._device_index = a._device_index
                sargs.append(m)
        elif a.__class__ in _SEQ_TYPES and any(_is_tensor(b) for b in a):
            item, need = _save_seq(a, save is None or i in save, saved, inplace and i == 0,
                                   edges, save is not None)
            sargs.append(item)
            needs.append(need)
        else:
            sargs.append(a)
            needs.append(False)
        i += 1
    return tuple(sargs), tuple(edges), tuple(needs), tuple(saved)


def _record(op, args, kwargs):
    if kwargs:
        if kwargs.get("out") is not None:  # torch: out= ops are not differentiable
            raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support "
                               f"automatic differentiation, but one of the arguments requires "
                               f"grad.")
        args, kwargs = _bind_tensor_kwargs(op, args, kwargs)
    info = op._ag
    if info is None or info.rule is not op.backward:
        info = op_info(op)
    inplace = info.inplace
    if inplace:
        _check_inplace(op, args[0])
    save = info.save

    # edges and input metadata, from the state before the forward (in C for
    # the common case: no list argument holding tensors, not in place)
    r = None if inplace else _ag_inputs(args, save, Meta, accumulator)
    if r is not None:
        sargs, edges, needs, saved = r
    else:
        sargs, edges, needs, saved = _inputs(args, save, inplace)

    # the forward, with grad mode off (ops it calls itself are not recorded);
    # grad mode is on here (the hook only records then), so no _set() needed
    st = _state
    _OFF_LIST.append(None)
    st.enabled = False
    try:
        fwd = op.forward
        out = fwd(*args, **kwargs) if kwargs else fwd(*args)
    finally:
        if not st.enabled:  # (unless the forward itself switched grad mode back on)
            st.enabled = True
            _OFF_LIST.pop()

    rg = getattr(out, "_requires_grad", None)
    if rg is not None:  # one tensor out (the common case)
        if not out.dtype.is_floating_point:
            return out
        node = info.cls()  # (inlined _node)
        node._seq = _next_seq()
        node.args = sargs
        if kwargs:
            node.kwargs = kwargs
        node.next_functions = edges
        node.needs_input_grad = needs
        if saved:
            node._saved = saved
        if info.save_out:
            keep = out._alias()
            node.out = (keep,)
            node._saved = node._saved + ((keep, keep._version),)
        out.grad_fn = node
        out._requires_grad = True
        if inplace:
            out._output_nr = 0
        if info.is_view:
            x = args[0]
            if getattr(x, "_requires_grad", None) is not None and out._storage is x._storage:
                out._is_view_of_grad = True
        return out
    if out.__class__ in _SEQ_TYPES or isinstance(out, tuple):
        if any(_is_tensor(o) and o.dtype.is_floating_point for o in out):
            _attach_many(_node(info, sargs, kwargs, edges, needs, saved), info, args, out)
    return out


def _node(info, sargs, kwargs, edges, needs, saved):
    node = info.cls()
    node._seq = _next_seq()
    node.args = sargs
    if kwargs:
        node.kwargs = kwargs
    node.next_functions = edges
    node.needs_input_grad = needs
    if saved:
        node._saved = saved
    return node


def _attach_many(node, info, args, outs):
    """Attach node to the floating tensors among several outputs."""
    if len(outs) > 1:
        node._out_meta = tuple((o.shape, o.dtype) if _is_tensor(o) else None for o in outs)
    if info.save_out:
        node.out = tuple(o._alias() if _is_tensor(o) else o for o in outs)
        node._saved = node._saved + tuple((o, o._version) for o in node.out
                                          if _is_tensor(o))
    view = info.is_view and _is_tensor(args[0])
    inplace = info.inplace
    for i, o in enumerate(outs):
        if _is_tensor(o) and o.dtype.is_floating_point:
            o.grad_fn = node
            o._requires_grad = True
            if i or inplace:
                o._output_nr = i
            if view and o._storage is args[0]._storage:
                o._is_view_of_grad = True

