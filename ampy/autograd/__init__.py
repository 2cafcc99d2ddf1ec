"""ampy.autograd: reverse-mode automatic differentiation, as torch.autograd.

Importing this package installs the recording hook into the op table
(ampy/_dispatch.py) and attaches the backward rules of ampy/autograd/_rules_*
to their ops. The autograd methods of ampy.Tensor (backward, register_hook,
retain_grad, retains_grad, register_post_accumulate_grad_hook) are defined
here and set on the class by ampy/_methods.py.

    x = ampy.randn(3, requires_grad=True)
    y = (x.half() * 2).sum()          # casts are differentiable
    y.backward()                      # x.grad is float32, as x
"""
import weakref

from .. import _C
from .. import _dispatch
from .._creation import ones_like, zeros_like
from .._tensor import Tensor
from . import _rules_gemm, _rules_math, _rules_more, _rules_views  # noqa: F401 (rules)
from . import _rules_tensorops  # noqa: F401 (rules)
from ._engine import autograd_hook, edge_of, run_backward
from ._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._node import Node, add_hook
from ._registry import NON_DIFFERENTIABLE, check_names
from .function import Function, FunctionCtx, once_differentiable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled", "inference_mode", "once_differentiable",
           "Node", "NON_DIFFERENTIABLE"]


class inference_mode(set_grad_enabled):
    """ampy has no separate inference tensors: inference_mode(True) is
    no_grad, inference_mode(False) enable_grad (context and decorator)."""

    def __init__(self, mode=True):
        if callable(mode):  # bare @inference_mode
            raise TypeError("use @ampy.inference_mode() with parentheses")
        super().__init__(not mode)


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _make_grads(outputs, grads):
    out = []
    if grads is None:
        grads = (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(grads)} tensors in grad_tensors but {len(outputs)} "
                           f"tensors to differentiate")
    for i, (t, g) in enumerate(zip(outputs, grads)):
        if not isinstance(t, Tensor):
            raise TypeError(f"tensors: element {i} is a {type(t).__name__}, expected a Tensor")
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               f"have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not t.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar "
                                   f"outputs but got {t.dtype}")
            g = _one_like(t) if t._device_index < 0 else ones_like(t)
        elif not isinstance(g, Tensor):
            raise TypeError(f"grad_tensors: element {i} is a {type(g).__name__}, expected a "
                            f"Tensor or None")
        else:
            if tuple(g.shape) != tuple(t.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{g.shape} and output[{i}] has a shape of {t.shape}.")
            if g.dtype is not t.dtype:
                g = g.to(t.dtype)
        out.append(g)
    return out


_ONES = {}


def _one_like(t):
    """A fresh 1 of t's shape and dtype (CPU): ones_like without its checks."""
    one = _ONES.get(t.dtype)
    if one is None:
        one = _ONES[t.dtype] = _C.empty((), t.dtype)
        one._numpy()[()] = 1
    g = _C.empty(tuple(t.shape), t.dtype)
    _C.copy_(g, one)
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) * grad_tensors into the `.grad` of the
    leaves (or of `inputs` only, when given)."""
    outputs = _as_tuple(tensors)
    if not outputs:
        raise RuntimeError("backward() got no tensors to differentiate")
    grads = _make_grads(outputs, _as_tuple(grad_tensors) if not isinstance(
        grad_tensors, Tensor) else (grad_tensors,))
    if retain_graph is None:
        retain_graph = create_graph
    roots = [edge_of(t) for t in outputs]
    if inputs is None:
        run_backward(roots, grads, retain_graph, create_graph)
        return None
    inputs = _as_tuple(inputs)
    captured = _grad_impl(roots, grads, inputs, retain_graph, create_graph, True)
    for t, g in zip(inputs, captured):
        if g is not None:
            t._grad = g if t._grad is None else t._grad + g
    return None


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """d(outputs)/d(inputs) * grad_outputs, returned as a tuple (nothing is
    accumulated into .grad)."""
    if is_grads_batched:
        raise NotImplementedError("grad(is_grads_batched=True) is not supported by ampy")
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if not inputs:
        raise RuntimeError("grad requires at least one input")
    if allow_unused is None:
        allow_unused = materialize_grads
    grads = _make_grads(outputs, _as_tuple(grad_outputs) if not isinstance(
        grad_outputs, Tensor) else (grad_outputs,))
    if retain_graph is None:
        retain_graph = create_graph
    roots = [edge_of(t) for t in outputs]
    res = _grad_impl(roots, grads, inputs, retain_graph, create_graph, allow_unused)
    if materialize_grads:
        res = tuple(zeros_like(t) if g is None else g for t, g in zip(inputs, res))
    return res


def _grad_impl(roots, grads, inputs, retain_graph, create_graph, allow_unused):
    capture = {}
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"inputs: element {i} is a {type(t).__name__}, expected a Tensor")
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        capture.setdefault(edge_of(t), []).append(i)
    got = run_backward(roots, grads, retain_graph, create_graph, capture=capture,
                       accumulate=False)
    out = []
    for i in range(len(inputs)):
        g = got.get(i)
        if g is None and not allow_unused:
            raise RuntimeError("One of the differentiated Tensors appears to not have been "
                               "used in the graph. Set allow_unused=True if this is the "
                               "desired behavior.")
        out.append(g)
    return tuple(out)


# ------------------------------------------------------ Tensor methods
def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Compute the gradient of this tensor w.r.t. the graph leaves."""
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _register_hook(self, hook):
    """hook(grad) -> None or a replacement grad, run when this tensor's
    gradient is computed. Returns a handle with remove()."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not callable(hook):
        raise TypeError(f"register_hook(): argument 'hook' must be callable, not "
                        f"{type(hook).__name__}")
    node = self.grad_fn
    if node is None:
        return add_hook(self, "_backward_hooks", hook)
    nr = getattr(self, "_output_nr", 0)
    if node._tensor_pre_hooks is None:
        node._tensor_pre_hooks = {}
    holder = _HookSlot(node._tensor_pre_hooks.get(nr))
    h = add_hook(holder, "hooks", hook)
    node._tensor_pre_hooks[nr] = holder.hooks
    return h


class _HookSlot:
    __slots__ = ("hooks",)

    def __init__(self, hooks):
        self.hooks = hooks


def _retain_grad(self):
    """Keep this non-leaf tensor's gradient in .grad after backward."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    node = self.grad_fn
    if node is None:
        return
    if node._retains is None:
        node._retains = {}
    node._retains[getattr(self, "_output_nr", 0)] = weakref.ref(self)
    self._retains_grad_flag = True


def _retains_grad(self):
    return self.grad_fn is not None and getattr(self, "_retains_grad_flag", False)


def _register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) after the gradient was accumulated into this leaf's .grad."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                           "tensors")
    return add_hook(self, "_post_accumulate_hooks", hook)


def _output_nr(self):
    return getattr(self, "_output_nr", 0)


check_names()
_dispatch.set_hooks(autograd=autograd_hook)
