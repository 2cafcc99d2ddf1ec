"""The reverse-mode engine (recording lives in ampy/autograd/_recording.py).

`run_backward` walks the graph from the roots in dependency order (a heap on
the creation sequence, newest first, as torch's engine), summing the
gradients that reach each node, validating each rule's output against its
input's shape and dtype (broadcast grads are summed down, other dtypes cast
back — torch's validate_outputs), and either accumulating into leaf `.grad`
(backward) or capturing the gradients of chosen inputs (grad).

The recording names (`autograd_hook`, `edge_of`, `_is_tensor`) are re-exported
from here, where the rest of ampy imports them.
"""
import heapq
import sys

from ._grad_mode import _set, _state
from ._node import AccumulateGrad, Meta, Node, _type_str
from ._ops import O, cast, is_expandable_to, sum_to, zeros
from ._owned import _SCATTER_OPS, _Owned, _fresh_owned, _into_owned, _plain, _settle
from ._recording import _SEQ_TYPES, _is_tensor, autograd_hook, edge_of

__all__ = ["autograd_hook", "run_backward", "edge_of"]

_heappush, _heappop = heapq.heappush, heapq.heappop
_NODE_APPLY = Node.apply




# ---------------------------------------------------------------- the engine
def _edge_grads(node, grads):
    """The rule's per-argument grads as one (grad, input) pair list per edge:
    a list argument gets one entry per tensor in it. None when the rule gave
    the wrong number of gradients."""
    if grads.__class__ is not tuple and not isinstance(grads, (tuple, list)):
        grads = (grads,)
    args = node.args
    if args is None:
        return None, None
    if len(grads) < len(args):
        grads = tuple(grads) + (None,) * (len(args) - len(grads))
    flat = []
    src = []
    for a, g in zip(args, grads):
        if getattr(a, "_requires_grad", None) is not None or a.__class__ is Meta:
            flat.append(g)
            src.append(a)
        elif a.__class__ in _SEQ_TYPES:
            items = [b for b in a if _is_tensor(b) or isinstance(b, Meta)]
            if items:
                flat.extend(g if g is not None else (None,) * len(items))
                src.extend(items)
        elif isinstance(a, Meta):
            flat.append(g)
            src.append(a)
    return flat, src


def _check_grad(node, i, g, shape, dtype, meta=None):
    if g is None:
        return None
    if not _is_tensor(g):
        raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")  # (torch's)
    if meta is not None and g._device_index != meta._device_index:
        if g.ndim:
            raise RuntimeError(f"Function {node.name()} returned an invalid gradient at index "
                               f"{i} - expected device {meta.device} but got {g.device}")
        g = g.to(meta.device)  # (torch moves a 0-dim gradient)
    gs = g.shape
    if gs != shape:
        gs, shape = tuple(gs), tuple(shape)
        if gs != shape:
            if not is_expandable_to(shape, gs):
                raise RuntimeError(f"Function {node.name()} returned an invalid gradient at "
                                   f"index {i} - got {list(gs)} but expected shape compatible "
                                   f"with {list(shape)}")
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
            _check_hook_result(fn, grad, r)
            grad = r
    return grad


def _hook_name(fn):
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else "<unknown>"


def _check_hook_result(fn, old, new):
    """torch's check_single_result: a hook may replace a gradient only by a
    tensor of the same type (dtype and device kind) and size."""
    if not _is_tensor(new):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    if new.dtype is not old.dtype or (new._device_index < 0) != (old._device_index < 0):
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the type of value (was "
                           f"{_type_str(old)} got {_type_str(new)})")
    if tuple(new.shape) != tuple(old.shape):
        raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value")


def _run_node_pre_hooks(node, grads):
    """Node.register_prehook hooks: each may return new grad_outputs (checked
    entry by entry as torch does)."""
    for fn in list(node._pre_hooks.values()):
        r = fn(tuple(grads))
        if r is None:
            continue
        if not isinstance(r, (tuple, list)):
            raise TypeError(f"hook '{_hook_name(fn)}' returned {type(r).__name__}, expected "
                            f"a tuple of gradients or None")
        if len(r) != len(grads):
            raise RuntimeError(f"hook '{_hook_name(fn)}' has returned an incorrect number of "
                               f"values (got {len(r)}, but expected {len(grads)})")
        for old, new in zip(grads, r):
            if new is None or new is old:
                continue
            if old is None:
                raise TypeError("can't replace a None gradient with a non-None value")
            _check_hook_result(fn, old, new)
        grads = list(r)
    return grads


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
    old = leaf._grad
    if old is None:
        if create_graph or not _stealable(g):
            g = g if create_graph else O.clone(g)
        leaf._grad = g
    elif create_graph:
        leaf._grad = _add(old, g)
    elif old.__class__ is g.__class__:
        O.add_(old, g)  # (old.add_(g) without the dispatch hooks: grad mode is off)
    else:
        add_ = getattr(old, "add_", None)
        if add_ is not None:
            add_(g)
        else:
            leaf._grad = _add(old, g)
    post = leaf._post_accumulate_hooks
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
    for n in ({roots[0][0]} if len(roots) == 1 else {n for n, _ in roots}):
        if n is not None and n in active and n not in deps:
            _heappush(heap, (-n._seq, id(n), n))
    captured = {}
    owned = _Owned()  # id -> buffered grad that only the engine references (see _into_owned)
    st = _state
    prev_enabled, prev_cg = st.enabled, st.create_graph
    if prev_enabled != create_graph:
        _set(create_graph)
    if prev_cg != create_graph:
        st.create_graph = create_graph
    # every collected node is active unless only some inputs' grads are wanted
    act = active if capture is not None else None
    try:
        while heap:
            node = _heappop(heap)[2]
            grads_in = buffers.pop(node, None)
            if grads_in is not None and owned:
                for g in grads_in:
                    if g is not None:
                        if owned.lazy:
                            _settle(owned, g)
                        owned.pop(id(g), None)
            _execute(node, grads_in, create_graph, capture, captured, accumulate, act,
                     buffers, deps, heap, owned)
            if not retain_graph:
                node.release()
    finally:
        if st.enabled != prev_enabled:
            _set(prev_enabled)
        if st.create_graph != prev_cg:
            st.create_graph = prev_cg
    return captured


def _execute(node, grads, create_graph, capture, captured, accumulate, active, buffers, deps,
             heap, owned):
    """Run one node: hooks, capture, the rule (or the leaf's accumulation),
    then hand each input's gradient to the buffer of the node it came from.
    active: the nodes that lead to a captured input, or None for all."""
    nf = node.next_functions
    out_flat = None
    plain = node._op_name in _SCATTER_OPS and _plain(node, capture, create_graph)
    if grads is not None:
        for g in grads:
            if g is not None:
                break
        else:
            grads = None
        g = None  # (holds no gradient: _stealable counts the references to it)
    if grads is not None:
        if node._tensor_pre_hooks or node._retains:
            grads = _tensor_pre_hooks(node, grads)
        if node.__class__ is AccumulateGrad and node.variable._backward_hooks and \
                grads[0] is not None:  # a leaf's hooks: before capture too (torch)
            grads = [_run_hooks(node.variable._backward_hooks, grads[0])]
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
        if nf and (active is None or any(nxt in active for nxt, _ in nf)):
            if plain and (active is None or nf[0][0] in active) and \
                    (_into_owned(node, grads, buffers, owned) or
                     _fresh_owned(node, grads, buffers, owned, deps)):
                out_flat = None
            else:
                out_flat = _apply(node, grads, create_graph)
    i = -1
    for nxt, nr in nf:
        i += 1
        if nxt is None or (active is not None and nxt not in active):
            continue
        g = out_flat[i] if out_flat is not None else None
        if g is not None:
            buf = buffers.get(nxt)
            if buf is None:
                m = nxt._out_meta
                buf = buffers[nxt] = [None] if m is None else [None] * len(m)
            old = buf[nr]
            if old is None:
                buf[nr] = g
                if plain:  # the rule's fresh zeros-with-g: nobody else holds it
                    owned[id(g)] = g
            else:
                if owned.lazy:
                    _settle(owned, old)
                new = buf[nr] = _add(old, g)
                if not create_graph:  # the sum is the engine's own
                    owned.pop(id(old), None)
                    owned[id(new)] = new
        d = deps[nxt] - 1
        deps[nxt] = d
        if d == 0:
            _heappush(heap, (-nxt._seq, id(nxt), nxt))


def _apply(node, grads, create_graph):
    if node._pre_hooks:
        grads = _run_node_pre_hooks(node, grads)
    if node._freed:
        node.check_saved()  # raises
    if not node._checks_on_unpack:
        for t, version in node._saved:
            if t._version != version:
                node.check_saved()  # raises if the rule reads t
    if node._out_meta is not None and getattr(node, "materialize_grads", True):
        grads = _materialize(node, grads)
    if create_graph and node.out is not None:
        res = _apply_with_graph_outputs(node, grads)
    elif node.__class__.apply is _NODE_APPLY:
        res = node._rule(node, *grads)
    else:
        res = node.apply(grads)
    nf = node.next_functions
    flat, src = _edge_grads(node, res)
    if flat is None or len(flat) != len(nf):
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {len(nf)}, got {len(flat) if flat is not None else 0})")
    out = []
    i = 0
    for g, a, (nxt, _) in zip(flat, src, nf):
        if nxt is None or g is None:
            out.append(None)
        elif (getattr(g, "_requires_grad", None) is not None and g.dtype is a.dtype
              and g.shape == a.shape and g._device_index == a._device_index):
            out.append(g)  # (the common case of _check_grad)
        else:
            out.append(_check_grad(node, i, g, a.shape, a.dtype, a))
        i += 1
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
            v = t._alias()
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
