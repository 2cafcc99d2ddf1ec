"""Hook results and custom-Function gradients are validated as torch does
and the saved-tensor version check raises exactly where
torch's does (item 9): torch saves an argument only for the inputs whose
gradient formula reads it, and checks what it saved when it unpacks it.
Every case runs the same code on ampy and torch 2.13 and compares."""
import itertools

import numpy as np
import pytest
import torch

import ampy

from _helpers import requires_cuda

LIBS = (ampy, torch)


def _outcome(fn, M):
    """('ok', value) or (exception type name, message with torch's names
    written as ampy's)."""
    try:
        return "ok", fn(M)
    except (RuntimeError, TypeError, ValueError) as e:
        return type(e).__name__, str(e).replace("torch.", "ampy.")


def _same(fn):
    a, t = _outcome(fn, ampy), _outcome(fn, torch)
    assert a[0] == t[0], (a, t)
    if a[0] == "ok":
        assert len(a[1]) == len(t[1])
        for x, y in zip(a[1], t[1]):
            if x is None or isinstance(x, str):
                assert x == y
            else:
                np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)
    else:
        assert a[1] == t[1]
    return a


def _grad(t):
    return None if t.grad is None else t.grad.detach().double().numpy().tolist()


# ------------------------------------------------------------ item 8: hooks
RESULTS = {
    "bigger": lambda M, g: M.ones(4),
    "smaller": lambda M, g: M.ones(1),
    "extra-dim": lambda M, g: M.ones(3, 1),
    "scalar": lambda M, g: M.ones(()),
    "float64": lambda M, g: M.ones(3, dtype=M.float64),
    "float16": lambda M, g: M.ones(3, dtype=M.float16),
    "int64": lambda M, g: M.ones(3, dtype=M.int64),
    "int": lambda M, g: 5,
    "same": lambda M, g: g * 10,
}


def _hooked(kind, where, how, named):
    def run(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        if where == "leaf-with-grad":
            x.grad = M.full((3,), 7.0)
        res = RESULTS[kind]

        def hook(g):
            return res(M, g)
        fn = hook if named else (lambda g: res(M, g))
        y = x * 2
        (x if where.startswith("leaf") else y).register_hook(fn)
        if how == "grad":
            got = M.autograd.grad((y * y).sum(), x)
            return [g.detach().double().numpy().tolist() for g in got]
        try:
            (y * y).sum().backward()
        finally:
            state = _grad(x)
        return [state]
    return run


@pytest.mark.parametrize("named", [True, False], ids=["def", "lambda"])
@pytest.mark.parametrize("how", ["backward", "grad"])
@pytest.mark.parametrize("where", ["leaf", "leaf-with-grad", "non-leaf"])
@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_tensor_hook_result_checked_like_torch(kind, where, how, named):
    _same(_hooked(kind, where, how, named))


@pytest.mark.parametrize("where", ["leaf-with-grad"])
@pytest.mark.parametrize("kind", ["bigger", "float64", "int"])
def test_grad_unchanged_after_a_rejected_hook(kind, where):
    run = _hooked(kind, where, "backward", True)
    for M in LIBS:
        x_grads = []

        def spy(M=M):
            x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
            x.grad = M.full((3,), 7.0)
            x.register_hook(lambda g: RESULTS[kind](M, g))
            with pytest.raises((RuntimeError, TypeError)):
                (x * 2).sum().backward()
            x_grads.append(_grad(x))
        spy()
        assert x_grads == [[7.0, 7.0, 7.0]]
    _same(run)


@pytest.mark.parametrize("kind", ["bigger", "float64", "same"])
def test_node_prehook_result_checked_like_torch(kind):
    def run(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.exp()

        def hook(grad_outputs):
            return (RESULTS[kind](M, grad_outputs[0]),)
        y.grad_fn.register_prehook(hook)
        y.sum().backward()
        return [_grad(x)]
    _same(run)


def test_node_prehook_wrong_count_raises():
    for M in LIBS:
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.exp()
        y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
        with pytest.raises(RuntimeError, match="has returned an incorrect number of values"):
            y.sum().backward()


BACKWARDS = {
    "bigger": lambda M, x, g: M.ones(4),
    "smaller": lambda M, x, g: M.ones(1),
    "2d": lambda M, x, g: M.ones(2, 3),
    "broadcast": lambda M, x, g: M.ones(2, 3) * g,
    "float64": lambda M, x, g: g.double(),
    "two": lambda M, x, g: (g, g),
    "int": lambda M, x, g: 3,
}


@pytest.mark.parametrize("kind", sorted(BACKWARDS))
def test_function_backward_output_checked_like_torch(kind):
    def run(M):
        class Twice(M.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return BACKWARDS[kind](M, None, g)
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        Twice.apply(x).sum().backward()
        return [_grad(x), str(x.grad.dtype).split(".")[-1]]
    _same(run)


# ------------------------------------- item 9: saved-tensor version checks
def _F(M):
    return M.nn.functional


# op: (input shapes, fn(M, *tensors)); modifying each input in place under no_grad
VERSION_OPS = {
    "linear": ([(2, 4), (3, 4)], lambda M, x, w: _F(M).linear(x, w)),
    "linear-bias": ([(2, 4), (3, 4), (3,)], lambda M, x, w, b: _F(M).linear(x, w, b)),
    "linear-3d": ([(2, 2, 4), (3, 4)], lambda M, x, w: _F(M).linear(x, w)),
    "mul": ([(3,), (3,)], lambda M, a, b: a * b),
    "div": ([(3,), (3,)], lambda M, a, b: a / b),
    "mm": ([(2, 3), (3, 4)], lambda M, a, b: M.mm(a, b)),
    "matmul": ([(2, 3), (3, 4)], lambda M, a, b: a @ b),
    "bmm": ([(2, 2, 3), (2, 3, 4)], lambda M, a, b: M.bmm(a, b)),
    "addmm": ([(2, 4), (2, 3), (3, 4)], lambda M, c, a, b: M.addmm(c, a, b)),
    "baddbmm": ([(2, 2, 4), (2, 2, 3), (2, 3, 4)], lambda M, c, a, b: M.baddbmm(c, a, b)),
    "addcmul": ([(3,), (3,), (3,)], lambda M, s, a, b: M.addcmul(s, a, b, value=0.5)),
    "addcdiv": ([(3,), (3,), (3,)], lambda M, s, a, b: M.addcdiv(s, a, b, value=0.5)),
    "lerp": ([(3,), (3,), (3,)], lambda M, a, b, w: M.lerp(a, b, w)),
    "fmod": ([(3,), (3,)], lambda M, a, b: M.fmod(a, b)),
    "remainder": ([(3,), (3,)], lambda M, a, b: M.remainder(a, b)),
    "atan2": ([(3,), (3,)], lambda M, a, b: M.atan2(a, b)),
    "pow": ([(3,), (3,)], lambda M, a, b: M.pow(a, b)),
    "maximum": ([(3,), (3,)], lambda M, a, b: M.maximum(a, b)),
    "mse_loss": ([(3,), (3,)], lambda M, a, b: _F(M).mse_loss(a, b)),
    "layer_norm": ([(2, 4), (4,), (4,)], lambda M, x, w, b: _F(M).layer_norm(x, (4,), w, b)),
    "sin": ([(3,)], lambda M, a: M.sin(a)),
    "add": ([(3,), (3,)], lambda M, a, b: a + b),
}


def _version_cases():
    for name, (shapes, _) in VERSION_OPS.items():
        n = len(shapes)
        for req in itertools.product((False, True), repeat=n):
            if any(req):
                for mod in range(n):
                    yield name, req, mod


def _version_run(name, req, mod, only=None):
    shapes, fn = VERSION_OPS[name]

    def run(M):
        gen = np.random.default_rng(5)
        ts = [M.tensor(gen.uniform(0.5, 2.0, s).astype(np.float32)).requires_grad_(r)
              for s, r in zip(shapes, req)]
        y = fn(M, *ts)
        with M.no_grad():
            ts[mod].add_(1)
        want = [t for t in ts if t.requires_grad]
        if only is not None:
            want = want[only:only + 1]
        got = M.autograd.grad(y.sum(), want)
        return [g.detach().double().numpy().tolist() for g in got]
    return run


def _first_sentence(out):
    return out if out[0] == "ok" else (out[0], out[1].split(" is at version")[0].split(" [")[0])


@pytest.mark.parametrize("name,req,mod", list(_version_cases()))
def test_version_check_raises_where_torch_does(name, req, mod):
    run = _version_run(name, req, mod)
    a, t = _outcome(run, ampy), _outcome(run, torch)
    assert _first_sentence(a)[0] == _first_sentence(t)[0], (a, t)
    if a[0] == "ok":
        np.testing.assert_allclose(np.concatenate([np.ravel(g) for g in a[1]]),
                                   np.concatenate([np.ravel(g) for g in t[1]]), rtol=1e-5)
    else:
        assert _first_sentence(a) == _first_sentence(t)


def test_version_check_ignores_which_grad_is_asked():
    """torch checks every tensor it saved, whichever input's gradient is asked."""
    for only in (0, 1):
        run = _version_run("linear", (True, True), 1 - only, only=only)
        a, t = _outcome(run, ampy), _outcome(run, torch)
        assert a[0] == t[0] == "RuntimeError"


def test_linear_weight_modified_input_without_grad():
    """x needs no grad, w changed in place -> torch computes dw."""
    for M in LIBS:
        x, w = M.ones(2, 4), M.ones(3, 4, requires_grad=True)
        y = _F(M).linear(x, w)
        with M.no_grad():
            w.add_(1)
        y.sum().backward()
        assert w.grad.sum().item() == 24.0


def test_version_message_names_the_tensor_like_torch():
    for M in LIBS:
        x = M.ones(3, requires_grad=True)
        y = x.exp()
        y.add_(1)
        with pytest.raises(RuntimeError, match=r"\[(ampy|torch)\.FloatTensor \[3\]\], which is "
                                               r"output 0 of Exp, is at version 1; expected "
                                               r"version 0 instead"):
            y.sum().backward()


@pytest.mark.parametrize("reads", [True, False])
def test_function_saved_tensors_checked_when_read(reads):
    def run(M):
        class Scale(M.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.save_for_backward(w)
                return x * w

            @staticmethod
            def backward(ctx, g):
                if reads:
                    (w,) = ctx.saved_tensors
                    return g * w, None
                return g * 3, None
        x, w = M.ones(3, requires_grad=True), M.full((3,), 3.0)
        y = Scale.apply(x, w)
        w.add_(1)
        y.sum().backward()
        return [_grad(x)]
    out = _outcome(run, ampy)
    assert out[0] == _outcome(run, torch)[0] == ("RuntimeError" if reads else "ok")


@requires_cuda
def test_device_of_hook_and_function_results_checked():
    """torch's wording (its CPU-only build here cannot run the CUDA case)."""
    x = ampy.ones(3, requires_grad=True)
    x.register_hook(lambda g: g.to("cuda"))
    with pytest.raises(RuntimeError, match=r"hook '<lambda>' has changed the type of value "
                                           r"\(was ampy.FloatTensor got ampy.cuda.FloatTensor\)"):
        (x * 2).sum().backward()

    class ToCuda(ampy.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g.to("cuda")
    y = ampy.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Function ToCudaBackward returned an invalid gradient "
                                           "at index 0 - expected device cpu but got cuda:0"):
        ToCuda.apply(y).sum().backward()
    z = ampy.ones((), requires_grad=True)
    ToCuda.apply(z).backward()  # a 0-dim gradient is moved, as torch does
    assert z.grad.device == ampy.device("cpu")
