"""Recording (the dispatch hook) and the reverse-mode engine.

`autograd_hook(op, args, kwargs)` is installed into the op table through
`_dispatch.set_hooks(autograd=...)`. It runs for every op, so the common case —
grad mode off, or no argument requiring grad — is a short loop with no
allocation. Otherwise it runs the forward with grad mode off and attaches a
Node (ampy/autograd/_node.py) to the floating-point outputs.

`run_backward` walks the graph from the roots in dependency order (a heap on
the creation sequence, newest first, as torch's engine), summing the
gradients that reach each node, validating each rule's output against its
input's shape and dtype (broadcast grads are summed down, other dtypes cast
back — torch's validate_outputs), and either accumulating into leaf `.grad`
(backward) or capturing the gradients of chosen inputs (grad).
"""
import heapq
import inspect
import sys

from .._dispatch import _hooks, forward_for
from ._grad_mode import _OFF, _set, _state
from ._node import Meta, accumulator, node_class, AccumulateGrad
from ._registry import NAMES, install_one
from ._ops import O, cast, detached, is_expandable_to, sum_to, wrap_dim

__all__ = ["autograd_hook", "run_backward", "edge_of"]

_SEQ_TYPES = (list, tuple)
_SIGS = {}

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
    if _OFF[0] == 0 or _state.enabled:
        # inlined _wants_grad: this runs for every op
        for a in args:
            rg = getattr(a, "_requires_grad", None)
            if rg:
                return _record(op, args, kwargs)
            if rg is None and a.__class__ in _SEQ_TYPES and _wants_grad(a, None):
                return _record(op, args, kwargs)
        if kwargs and _wants_grad((), kwargs):
            return _record(op, args, kwargs)
    dev = _hooks.device
    if dev is not None:
        return dev(op, args, kwargs)(*args, **kwargs)
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
        return (g, getattr(t, "_output_nr", 0))
    if t._requires_grad:
        return (accumulator(t), 0)
    return (None, 0)


def _missing_rule(op):
    def rule(ctx, *grads):
        raise NotImplementedError(f"the derivative for '{op.name}' is not implemented")
    rule.backward_name = None
    return rule


# op -> (rule, save, inplace, save_out, is_view, Node class), rebuilt when
# op.backward changes; recording reads it instead of the rule's attributes.
_INFO = {}
_NO_EDGE = (None, 0)


def _op_info(op):
    rule = op.backward
    info = _INFO.get(op)
    if info is not None and info[0] is rule:
        return info
    if rule is None:
        rule = install_one(op)
        if rule is None:  # not cached: a rule may be registered later
            rule = _missing_rule(op)
            return (rule, getattr(rule, "save", None), op.name.endswith("_"), False, False,
                    node_class(op.name, rule, NAMES.get(op.name)))
    info = (rule, getattr(rule, "save", None),
            bool(getattr(rule, "inplace", False) or op.name.endswith("_")),
            bool(getattr(rule, "save_out", False)), bool(getattr(rule, "is_view", False)),
            node_class(op.name, rule, NAMES.get(op.name)))
    _INFO[op] = info
    return info


def _record(op, args, kwargs):
    if kwargs:
        args, kwargs = _bind_tensor_kwargs(op, args, kwargs)
    rule, save, inplace, save_out, is_view, cls = _op_info(op)
    if inplace:
        target = args[0]
        if target.grad_fn is None and target._requires_grad:
            raise RuntimeError(_LEAF_INPLACE_MSG)
        if getattr(target, "_is_view_of_grad", False):
            raise NotImplementedError(
                f"{op.name}: in-place modification of a view of a tensor that requires grad "
                f"is not supported by ampy's autograd; clone() the view first")

    # edges and input metadata, from the state before the forward
    edges = []
    saved_args = []
    saved = []
    needs = []
    for i, a in enumerate(args):
        rg = getattr(a, "_requires_grad", None)
        if rg is not None:  # a tensor (the common case, inlined edge_of/_save)
            g = a.grad_fn
            if g is not None:
                e = (g, getattr(a, "_output_nr", 0))
            elif rg:
                e = (accumulator(a), 0)
            else:
                e = _NO_EDGE
            edges.append(e)
            if not a.dtype.is_floating_point:
                saved_args.append(a)
            elif save is None or i in save:
                if inplace and i == 0:
                    a = O.clone(a)
                saved.append((a, a._version))
                saved_args.append(a)
            else:
                saved_args.append(Meta(a))
            needs.append(e[0] is not None)
        elif a.__class__ in _SEQ_TYPES and any(_is_tensor(b) for b in a):
            keep = save is None or i in save
            items = []
            n0 = len(edges)
            for b in a:
                if _is_tensor(b):
                    edges.append(edge_of(b))
                    items.append(_save(b, keep, saved, inplace and i == 0))
                else:
                    items.append(b)
            saved_args.append(type(a)(items) if a.__class__ is list else tuple(items))
            needs.append(any(e[0] is not None for e in edges[n0:]))
        else:
            saved_args.append(a)
            needs.append(False)

    st = _state
    prev = st.enabled
    if prev:
        _set(False)
    try:
        dev = _hooks.device
        fwd = op.forward if dev is None else dev(op, args, kwargs)
        out = fwd(*args, **kwargs) if kwargs else fwd(*args)
    finally:
        if prev:
            _set(True)

    if out.__class__ in _SEQ_TYPES or isinstance(out, tuple):
        outs = out
        if not any(_is_tensor(o) and o.dtype.is_floating_point for o in outs):
            return out
    else:
        if getattr(out, "_requires_grad", None) is None or not out.dtype.is_floating_point:
            return out
        outs = (out,)
    node = cls()
    node.args = tuple(saved_args)
    if kwargs:
        node.kwargs = kwargs
    node.next_functions = tuple(edges)
    node.needs_input_grad = tuple(needs)
    if saved:
        node._saved = tuple(saved)
    if len(outs) > 1:
        node._out_meta = tuple((o.shape, o.dtype) if _is_tensor(o) else None for o in outs)
    if save_out:
        node.out = tuple(detached(o) if _is_tensor(o) else o for o in outs)
        node._saved = node._saved + tuple((o, o._version) for o in node.out
                                          if _is_tensor(o))
    view = is_view and _is_tensor(args[0])
    for i, o in enumerate(outs):
        if _is_tensor(o) and o.dtype.is_floating_point:
            o.grad_fn = node
            o._requires_grad = True
            if i or inplace:
                o._output_nr = i
            if view and o._storage is args[0]._storage:
                o._is_view_of_grad = True
    return out


def _save(t, keep, saved, clone_first):
    """The argument as the node holds it: the tensor itself (version-checked
    at backward), a clone (for in-place ops, whose first input is about to
    change), or only its metadata."""
    if not keep or not t.dtype.is_floating_point:
        return t if not t.dtype.is_floating_point else Meta(t)
    if clone_first:
        t = O.clone(t)
    saved.append((t, t._version))
    return t


# ---------------------------------------------------------------- the engine
def _input_meta(node):
    """(shape, dtype) per tensor input of node, in edge order."""
    out = []
    for a in node.args:
        if a.__class__ in _SEQ_TYPES:
            out.extend((b.shape, b.dtype) for b in a if _is_tensor(b) or isinstance(b, Meta))
        elif _is_tensor(a) or isinstance(a, Meta):
            out.append((a.shape, a.dtype))
    return out


def _flatten_grads(node, grads):
    """The rule's per-argument grads flattened to one per edge."""
    flat = []
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    args = node.args
    if len(grads) < len(args):
        grads = tuple(grads) + (None,) * (len(args) - len(grads))
    for a, g in zip(args, grads):
        if a.__class__ in _SEQ_TYPES:
            n = sum(1 for b in a if _is_tensor(b) or isinstance(b, Meta))
            if n:
                flat.extend(g if g is not None else (None,) * n)
        elif _is_tensor(a) or isinstance(a, Meta):
            flat.append(g)
    return flat


def _check_grad(node, i, g, shape, dtype):
    if g is None:
        return None
    if not _is_tensor(g):
        raise RuntimeError(f"function {node.name()} returned a gradient of type "
                           f"{type(g).__name__} at index {i}, expected a Tensor or None")
    gs = tuple(g.shape)
    if gs != tuple(shape):
        if not is_expandable_to(shape, gs):
            raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index "
                               f"{i} - got {list(gs)} but expected shape compatible with "
                               f"{list(shape)}")
        g = sum_to(g, shape)
    if g.dtype is not dtype:
        g = cast(g, dtype)
    return g


def _add(a, b):
    return O.add(a, b)


def _run_hooks(hooks, grad):
    for fn in list(hooks.values()):
        r = fn(grad)
        if r is not None:
            grad = r
    return grad


def _tensor_pre_hooks(node, grads):
    th = node._tensor_pre_hooks
    if th:
        grads = list(grads)
        for nr, hooks in th.items():
            if grads[nr] is not None and hooks:
                grads[nr] = _run_hooks(hooks, grads[nr])
    rt = node._retains
    if rt:
        for nr, ref in rt.items():
            t = ref()
            g = grads[nr]
            if t is not None and g is not None:
                t._grad = O.clone(g) if t._grad is None else _add(t._grad, g)
    return grads


def _accumulate_leaf(node, g, create_graph):
    leaf = node.variable
    hooks = getattr(leaf, "_backward_hooks", None)
    if hooks:
        g = _run_hooks(hooks, g)
    old = leaf._grad
    if old is None:
        if create_graph or not _stealable(g):
            g = g if create_graph else O.clone(g)
        leaf._grad = g
    elif create_graph:
        leaf._grad = _add(old, g)
    else:
        add_ = getattr(old, "add_", None)
        if add_ is not None:
            add_(g)
        else:
            leaf._grad = _add(old, g)
    post = getattr(leaf, "_post_accumulate_hooks", None)
    if post:
        for fn in list(post.values()):
            fn(leaf)


def _stealable(g):
    """True when nothing else can see g's memory (torch steals the incoming
    gradient for .grad in that case instead of copying it): a contiguous
    tensor, the only one on its storage, referenced only by the engine (the
    grads list of _execute, the frames of _accumulate_leaf and this function,
    and getrefcount's own argument: 4). Anything a user holds adds to that."""
    return (g.grad_fn is None and g.is_contiguous() and g.storage_offset() == 0 and
            sys.getrefcount(g._storage) <= 2 and sys.getrefcount(g) <= 4)


def _n_out(node):
    m = node._out_meta
    return 1 if m is None else len(m)


def _materialize(node, grads):
    """Zeros for the missing grads of a node that has several outputs."""
    from ._ops import zeros
    out = []
    for g, meta in zip(grads, node._out_meta):
        if g is None and meta is not None and meta[1].is_floating_point:
            g = zeros(meta[0], meta[1])
        out.append(g)
    return out


def _collect(roots):
    """Every node reachable from roots, with its in-degree."""
    deps = {}
    seen = set()
    stack = [n for n, _ in roots if n is not None]
    for n in stack:
        seen.add(n)
    while stack:
        n = stack.pop()
        for nxt, _ in n.next_functions:
            if nxt is None:
                continue
            deps[nxt] = deps.get(nxt, 0) + 1
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen, deps


def _needed(nodes, targets):
    """The nodes from which some target node is reachable."""
    memo = {}
    for root in nodes:
        if root in memo:
            continue
        stack = [(root, iter(root.next_functions))]
        memo[root] = root in targets
        while stack:
            n, it = stack[-1]
            advanced = False
            for nxt, _ in it:
                if nxt is None:
                    continue
                if nxt not in memo:
                    memo[nxt] = nxt in targets
                    stack.append((nxt, iter(nxt.next_functions)))
                    advanced = True
                    break
                if memo[nxt]:
                    memo[n] = True
            if not advanced:
                stack.pop()
                if stack and memo[n]:
                    memo[stack[-1][0]] = True
    return {n for n, v in memo.items() if v}


def run_backward(roots, grads, retain_graph, create_graph, capture=None, accumulate=True):
    """roots: list of (node, output_nr); grads: one tensor per root.
    capture: {(node, output_nr): [slot, ...]} -> returns {slot: grad}."""
    nodes, deps = _collect(roots)
    if capture is not None:
        targets = {n for n, _ in capture}
        active = _needed(nodes, targets)
        deps = {}
        for n in active:
            for nxt, _ in n.next_functions:
                if nxt is not None and nxt in active:
                    deps[nxt] = deps.get(nxt, 0) + 1
    else:
        active = nodes  # every collected node: _collect's in-degrees are the ones needed
    buffers = {}
    for (n, nr), g in zip(roots, grads):
        if n is None or n not in active:
            continue
        buf = buffers.get(n)
        if buf is None:
            buf = buffers[n] = [None] * _n_out(n)
        buf[nr] = g if buf[nr] is None else _add(buf[nr], g)
    heap = []
    for n in {n for n, _ in roots if n is not None and n in active}:
        if deps.get(n, 0) == 0:
            heapq.heappush(heap, (-n._seq, id(n), n))
    captured = {}
    owned = {}  # id -> buffered grad that only the engine references (see _into_owned)
    prev_enabled, prev_cg = _state.enabled, _state.create_graph
    _set(create_graph)
    _state.create_graph = create_graph
    try:
        while heap:
            _, _, node = heapq.heappop(heap)
            grads_in = buffers.pop(node, None)
            if grads_in is not None and owned:
                for g in grads_in:
                    if g is not None:
                        owned.pop(id(g), None)
            _execute(node, grads_in, create_graph, capture, captured, accumulate, active,
                     buffers, deps, heap, owned)
            if not retain_graph:
                node.release()
    finally:
        _set(prev_enabled)
        _state.create_graph = prev_cg
    return captured


_SCATTER_OPS = ("select", "narrow", "getitem")


def _basic_key(key):
    """An index of ints and slices only (a view, each element at most once)."""
    if key.__class__ is tuple:
        return all(k.__class__ in (int, slice) for k in key)
    return key.__class__ in (int, slice)


def _plain(node, capture, create_graph):
    """A select/narrow/basic-getitem node whose gradient is only summed into
    the engine's buffer: no hooks see it, nothing captures it, no graph is
    recorded."""
    return (node._op_name in _SCATTER_OPS and not create_graph and capture is None and
            not node._pre_hooks and not node._post_hooks and node._out_meta is None and
            (node._op_name != "getitem" or _basic_key(node.args[1])))


def _into_owned(node, grads, buffers, owned):
    """select/narrow/getitem backward straight into an engine-owned buffer: buf[key] += g
    instead of building zeros with g at key and adding the whole tensor (the
    q, k, v = qkv[0], qkv[1], qkv[2] pattern). True when done."""
    g = grads[0] if grads else None
    nxt, nr = node.next_functions[0]
    buf = buffers.get(nxt) if nxt is not None else None
    old = buf[nr] if buf is not None else None
    if g is None or old is None or owned.get(id(old)) is not old:
        return False
    x = node.args[0]
    if g.dtype is not old.dtype or x.dtype is not old.dtype or \
            tuple(x.shape) != tuple(old.shape):
        return False
    from .. import _views as V
    if node._op_name == "getitem":
        part = O.getitem(old, node.args[1])
    elif node._op_name == "select":
        _, dim, index = node.args[:3]
        part = V.select(old, wrap_dim(dim, old.ndim), index)
    else:
        _, dim, start, length = node.args[:4]
        d = wrap_dim(dim, old.ndim)
        start = start.item() if hasattr(start, "item") else start
        part = V.narrow(old, d, start + old.shape[d] if start < 0 else start, length)
    if tuple(part.shape) != tuple(g.shape):
        return False
    O.add_(part, g)
    return True


def _execute(node, grads, create_graph, capture, captured, accumulate, active, buffers, deps,
             heap, owned=None):
    out_flat = None
    plain = owned is not None and _plain(node, capture, create_graph)
    if grads is not None and any(g is not None for g in grads):
        grads = _tensor_pre_hooks(node, grads)
        if capture is not None:
            for nr, g in enumerate(grads):
                slots = capture.get((node, nr))
                if slots is not None and g is not None:
                    for slot in slots:
                        captured[slot] = g
        if isinstance(node, AccumulateGrad):
            if accumulate and grads[0] is not None:
                _accumulate_leaf(node, grads[0], create_graph)
            return
        if node.next_functions and (capture is None or any(
                nxt in active for nxt, _ in node.next_functions)):
            if plain and node.next_functions[0][0] in active and \
                    _into_owned(node, grads, buffers, owned):
                out_flat = [None] * len(node.next_functions)
            else:
                out_flat = _apply(node, grads)
    for i, (nxt, nr) in enumerate(node.next_functions):
        if nxt is None or nxt not in active:
            continue
        g = out_flat[i] if out_flat is not None else None
        if g is not None:
            buf = buffers.get(nxt)
            if buf is None:
                buf = buffers[nxt] = [None] * _n_out(nxt)
            if buf[nr] is None:
                buf[nr] = g
                if plain:  # the rule's fresh zeros-with-g: nobody else holds it
                    owned[id(g)] = g
            else:
                old = buf[nr]
                buf[nr] = _add(old, g)
                if owned is not None and not create_graph:
                    owned.pop(id(old), None)
                    owned[id(buf[nr])] = buf[nr]
        d = deps[nxt] - 1
        deps[nxt] = d
        if d == 0:
            heapq.heappush(heap, (-nxt._seq, id(nxt), nxt))


def _apply(node, grads):
    if node._pre_hooks:
        for fn in list(node._pre_hooks.values()):
            r = fn(tuple(grads))
            if r is not None:
                grads = list(r)
    node.check_saved()
    if node._out_meta is not None and getattr(node, "materialize_grads", True):
        grads = _materialize(node, grads)
    if _state.create_graph and node.out is not None:
        res = _apply_with_graph_outputs(node, grads)
    else:
        res = node.apply(grads)
    flat = _flatten_grads(node, res)
    metas = _input_meta(node) if node.args is not None else None
    if metas is None or len(flat) != len(node.next_functions):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {len(node.next_functions)}, got {len(flat)})")
    out = []
    for i, (g, (shape, dtype), (nxt, _)) in enumerate(zip(flat, metas, node.next_functions)):
        out.append(_check_grad(node, i, g, shape, dtype) if nxt is not None else None)
    if node._post_hooks:
        for fn in list(node._post_hooks.values()):
            r = fn(tuple(out), tuple(grads))
            if r is not None:
                out = list(r)
    return out


def _apply_with_graph_outputs(node, grads):
    """create_graph: a rule that reads the node's own outputs must see them
    as outputs of this node (torch's SavedVariable does the same), or the
    second derivative would miss their dependence on the inputs."""
    saved = node.out
    live = []
    for i, t in enumerate(saved):
        if _is_tensor(t) and t.dtype.is_floating_point:
            v = detached(t)
            v.grad_fn = node
            v._requires_grad = True
            if i:
                v._output_nr = i
            t = v
        live.append(t)
    node.out = tuple(live)
    try:
        return node.apply(grads)
    finally:
        node.out = saved
