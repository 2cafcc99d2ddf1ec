"""Custom autograd functions: `class F(ampy.autograd.Function)` with static
`forward(ctx, ...)` and `backward(ctx, *grads)`, used as `F.apply(...)`.

As torch.autograd.Function: forward runs with grad mode off; `ctx` is the
graph node (`y.grad_fn`), named `<F>Backward`; `ctx.save_for_backward(*ts)`
keeps tensors (version-checked, freed after backward unless retain_graph),
`ctx.saved_tensors` returns them, `ctx.needs_input_grad` has one bool per
forward argument, `ctx.mark_non_differentiable(*outs)`, `ctx.mark_dirty(*ts)`
for inputs modified in place, `ctx.set_materialize_grads(False)`. backward
returns one gradient (or None) per forward argument. The newer form with a
ctx-free `forward(*args)` plus `setup_context(ctx, inputs, output)` works too.
"""
import functools

from ._engine import _is_tensor, edge_of
from ._grad_mode import _set, _state
from ._node import Meta, Node, _FREED_MSG
from ._ops import detached

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx(Node):
    """The ctx of a custom Function (and its grad_fn)."""

    # no __slots__: users keep arbitrary attributes on ctx
    _checks_on_unpack = True  # saved_tensors checks versions when read (torch)

    def __init__(self):
        super().__init__()
        self.to_save = ()
        self.non_differentiable = ()
        self.dirty_tensors = ()
        self.materialize_grads = True
        self.args = ()
        self.next_functions = ()
        self.needs_input_grad = ()
        self._out_meta = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not _is_tensor(t):
                raise TypeError(f"save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        self.check_saved()
        return tuple(self.to_save)

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = tensors

    def mark_dirty(self, *tensors):
        self.dirty_tensors = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)

    def release(self):
        if self.to_save:
            self._freed = True
            self.to_save = ()
            self._saved = ()


def _apply_rule(ctx, *grads):
    cls = type(ctx)._function
    res = cls.backward(ctx, *grads)
    if not isinstance(res, tuple):
        res = (res,)
    n = len(ctx.args)
    if len(res) > n:
        if any(r is not None for r in res[n:]):
            raise RuntimeError(f"function {ctx.name()} returned an incorrect number of "
                               f"gradients (expected {n}, got {len(res)})")
        res = res[:n]
    elif len(res) < n:
        raise RuntimeError(f"function {ctx.name()} returned an incorrect number of gradients "
                           f"(expected {n}, got {len(res)})")
    return res


_CTX_CLASSES = {}


def _ctx_class(cls):
    c = _CTX_CLASSES.get(cls)
    if c is None:
        c = type(cls.__name__ + "Backward", (FunctionCtx,),
                 {"_rule": staticmethod(_apply_rule), "_function": cls, "_op_name": cls.__name__})
        _CTX_CLASSES[cls] = c
    return c


class Function:
    """Base class of custom differentiable operations."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode "
                                  "AD.")

    vjp = backward

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = _ctx_class(cls)()
        record = _state.enabled and any(_is_tensor(a) and a._requires_grad for a in args)
        edges = tuple(edge_of(a) if _is_tensor(a) else (None, 0) for a in args)
        uses_setup = cls.setup_context is not Function.setup_context
        prev = _state.enabled
        _set(False)
        try:
            if uses_setup:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            _set(prev)
        if not record:
            return out
        ctx.next_functions = tuple(e for a, e in zip(args, edges) if _is_tensor(a))
        ctx.needs_input_grad = tuple(_is_tensor(a) and e[0] is not None
                                     for a, e in zip(args, edges))
        ctx.args = tuple(Meta(a) if _is_tensor(a) else None for a in args)
        ctx._saved = tuple((t, t._version) for t in ctx.to_save if t is not None)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        ctx._out_meta = tuple((o.shape, o.dtype) if _is_tensor(o) else None for o in outs)
        nondiff = {id(t) for t in ctx.non_differentiable}
        dirty = {id(t) for t in ctx.dirty_tensors}
        inputs = {id(a) for a in args if _is_tensor(a)}
        result = []
        for i, o in enumerate(outs):
            if _is_tensor(o) and o.dtype.is_floating_point and id(o) not in nondiff:
                if id(o) in inputs and id(o) not in dirty:
                    o = detached(o)  # an input returned as is: a new tensor on its memory
                elif id(o) in dirty and o.grad_fn is None and o._requires_grad:
                    raise RuntimeError("a leaf Variable that requires grad is being used in an "
                                       "in-place operation.")
                o.grad_fn = ctx
                o._requires_grad = True
                if i or id(o) in dirty:
                    o._output_nr = i
            result.append(o)
        return result[0] if single else tuple(result)


_TWICE_MSG = "trying to differentiate twice a function that was marked with @once_differentiable"


class _DelayedError(Function):
    """The grad_fn once_differentiable gives a backward's outputs under
    create_graph=True: differentiating them again raises (torch's
    DelayedError) instead of silently treating them as constants."""

    @staticmethod
    def forward(ctx, *grads):
        return tuple(detached(g) if _is_tensor(g) else g for g in grads)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_TWICE_MSG)


def once_differentiable(fn):
    """torch's decorator for backward methods: the backward runs with grad
    mode off; under create_graph=True its gradients get a grad_fn that
    raises if they are differentiated again."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = _state.enabled
        _set(False)
        try:
            out = fn(ctx, *args)
        finally:
            _set(prev)
        if not prev or not any(_is_tensor(a) and a._requires_grad for a in args):
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        # (the error node needs an input that requires grad to be recorded)
        live = tuple(_fake_requires_grad(o) for o in outs)
        res = _DelayedError.apply(*live)
        res = res if isinstance(res, tuple) else (res,)
        res = tuple(r if _is_tensor(o) else o for r, o in zip(res, outs))
        return res[0] if single else res

    return wrapper


def _fake_requires_grad(t):
    if not _is_tensor(t) or not t.dtype.is_floating_point:
        return t
    t = detached(t)
    t._requires_grad = True
    return t
