"""The hook machinery of ampy.nn.Module, outside the fast path of Module.__call__:
forward pre-hooks and hooks with kwargs / prepend / always_call, and full backward hooks
(`register_full_backward_hook`, `register_full_backward_pre_hook`), as torch's.

Backward hooks wrap the module's tensor inputs and outputs in one identity autograd Function
each (torch's BackwardHookFunction): the outputs' node sees every grad_output at once (the
pre-hooks may replace them), the inputs' node sees every grad_input at once and calls the
hooks with (module, grad_input, grad_output); grad_input has one entry per positional
argument, None where the argument is not a tensor that requires grad.
"""
import warnings

from ..._tensor import Tensor
from ...autograd import is_grad_enabled
from ...autograd.function import Function


class _HookFn(Function):
    """Identity on its tensors; backward hands all the incoming grads to ctx.on_grads."""

    @staticmethod
    def forward(ctx, on_grads, materialize, *ts):
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(materialize)
        outs = tuple(t.view(t.shape) for t in ts)
        ctx.mark_non_differentiable(*(o for o, t in zip(outs, ts) if not t.requires_grad))
        return outs if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(ctx.on_grads(grads))


def _wrap(values, on_grads, materialize):
    """values with its tensors replaced by _HookFn outputs (when some tensor requires grad);
    returns (new values, positions of the tensors) or (values, None). As in torch, the
    hooks see zeros for an input that needs no gradient (materialize) and None for such an
    output."""
    pos = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    if not pos or not any(values[i].requires_grad for i in pos):
        return values, None
    outs = _HookFn.apply(on_grads, materialize, *(values[i] for i in pos))
    outs = outs if isinstance(outs, tuple) else (outs,)
    new = list(values)
    for i, o in zip(pos, outs):
        new[i] = o
    return tuple(new), pos


def _check_count(res, n, what):
    if not isinstance(res, (tuple, list)) or len(res) != n:
        got = len(res) if isinstance(res, (tuple, list)) else type(res).__name__
        raise RuntimeError(f"Backward hook returned an invalid number of {what}, got {got}, but "
                           f"expected {n}")
    return tuple(res)


def _backward_hooked_call(module, args, kwargs, run):
    """run(args, kwargs) with module's full backward (pre-)hooks attached to the graph."""
    state = {"grad_output": None, "inputs_hooked": False}
    n_args = len(args)

    def on_inputs(grads):
        grad_input = [None] * n_args
        for i, g in zip(in_pos, grads):
            grad_input[i] = g
        grad_input = tuple(grad_input)
        for hook in list(module._backward_hooks.values()):
            r = hook(module, grad_input, state["grad_output"])
            if r is not None:
                grad_input = _check_count(r, n_args, "grad_input")
        return tuple(grad_input[i] for i in in_pos)

    def on_outputs(grads):
        for hook in list(module._backward_pre_hooks.values()):
            r = hook(module, grads)
            if r is not None:
                grads = _check_count(r, len(grads), "grad_output")
        state["grad_output"] = grads
        if in_pos is None and module._backward_hooks:   # no input needs a gradient: the
            # hooks run here, grad_input all None (torch warns the same way)
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.")
            for hook in list(module._backward_hooks.values()):
                r = hook(module, (None,) * n_args, grads)
                if r is not None and any(x is not None for x in r):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
        return grads

    in_pos = None
    if is_grad_enabled() and module._backward_hooks:
        args, in_pos = _wrap(tuple(args), on_inputs, True)
    out = run(args, kwargs)
    if not is_grad_enabled():
        return out
    if isinstance(out, Tensor):
        return _wrap((out,), on_outputs, False)[0][0]
    if isinstance(out, tuple):
        return _wrap(out, on_outputs, False)[0] if type(out) is tuple else out
    return out


def hooked_call(module, args, kwargs):
    """Module.__call__ when the module has any hook."""
    with_kw = module._forward_pre_hooks_with_kwargs
    for hid, hook in list(module._forward_pre_hooks.items()):
        if hid in with_kw:
            r = hook(module, args, kwargs)
            if r is not None:
                if not (isinstance(r, tuple) and len(r) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {r}.")
                args, kwargs = r
        else:
            r = hook(module, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)

    def run(a, kw):
        return module.forward(*a, **kw)

    called = set()
    try:
        if module._backward_hooks or module._backward_pre_hooks:
            out = _backward_hooked_call(module, args, kwargs, run)
        else:
            out = run(args, kwargs)
        for hid, hook in list(module._forward_hooks.items()):
            called.add(hid)
            if hid in module._forward_hooks_with_kwargs:
                r = hook(module, args, kwargs, out)
            else:
                r = hook(module, args, out)
            if r is not None:
                out = r
        return out
    except Exception:
        for hid, hook in list(module._forward_hooks.items()):
            if hid in module._forward_hooks_always_called and hid not in called:
                try:
                    if hid in module._forward_hooks_with_kwargs:
                        hook(module, args, kwargs, None)
                    else:
                        hook(module, args, None)
                except Exception:  # noqa: BLE001 (torch: the forward's error wins)
                    pass
        raise
