"""Autograd: gradients of every op vs torch 2.13 (CPU) side by side and vs
float64 central differences; engine semantics (accumulation, retain_graph,
hooks, grad mode, leaves, casts, version counters) and error messages.

Each case is written once against a library namespace `L` (ampy or torch) so
the same expression runs on both with the same inputs. An op in the table
without a backward rule (and not declared non-differentiable) fails
`test_every_op_has_a_rule`.
"""
import threading

import numpy as np
import pytest

import ampy
from ampy import _dispatch
from ampy.autograd import NON_DIFFERENTIABLE

from _helpers import AMPY_DTYPE, TORCH_DTYPE

torch = pytest.importorskip("torch")
F = torch.nn.functional


class _TorchLib:
    """torch with ampy's flat names (linear, gelu live in torch.nn.functional)."""

    linear = staticmethod(F.linear)
    gelu = staticmethod(F.gelu)

    def __getattr__(self, name):
        return getattr(torch, name)


TL = _TorchLib()
TOL = {"float64": 1e-10, "float32": 2e-5, "float16": 2e-2, "bfloat16": 5e-2}


# ------------------------------------------------------------------- cases
class Case:
    """fn(L, *inputs) -> output; shapes of the inputs; how to draw them."""

    def __init__(self, op, fn, *shapes, data="normal", ops=(), tol=1.0, fd=True):
        self.op, self.fn, self.shapes, self.data = op, fn, shapes, data
        self.ops = set(ops) | {op}
        self.tol = tol
        self.fd = fd and data != "ties"  # finite differences need smooth, tie-free points

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        out = []
        for s in self.shapes:
            a = rng.standard_normal(s)
            if self.data == "positive":
                a = np.abs(a) + 0.5
            elif self.data == "ties":
                a = np.round(a * 1.5)
            elif self.data == "unit":
                a = np.tanh(a) * 0.9
            out.append(a)
        return out


IDX = [0, 2, 0, 1]  # repeated index: gradients must accumulate
CASES = [
    # views, casts, copies, indexing (ampy/_tensor.py)
    Case("view", lambda L, a: a.view(3, 4), (2, 6)),
    Case("reshape", lambda L, a: a.transpose(0, 1).reshape(-1), (3, 4), ops={"transpose"}),
    Case("transpose", lambda L, a: a.transpose(0, 2), (2, 3, 4)),
    Case("permute", lambda L, a: a.permute(2, 0, 1), (2, 3, 4)),
    Case("unsqueeze", lambda L, a: a.unsqueeze(1), (3, 4)),
    Case("squeeze", lambda L, a: a.squeeze(1), (3, 1, 4)),
    Case("expand", lambda L, a: a.expand(2, 3, 4), (3, 1)),
    Case("flatten", lambda L, a: a.flatten(1), (2, 3, 4)),
    Case("narrow", lambda L, a: a.narrow(1, 1, 2), (3, 4)),
    Case("as_strided", lambda L, a: a[1:].as_strided((3, 3), (1, 2)), (12,)),  # overlapping
    Case("select", lambda L, a: a.select(1, -1), (3, 4)),
    Case("getitem", lambda L, a: a[1:, None, ::2], (3, 5)),
    Case("getitem", lambda L, a: a[L.tensor(IDX)], (3, 4), ops={"tensor"}),
    Case("getitem", lambda L, a: a[:, [1, 1, 0]][[0, 0]], (3, 4)),
    Case("getitem", lambda L, a: a[L.tensor([0, 2, 2]), :, L.tensor([1, 1, 1])], (3, 2, 4)),
    Case("getitem", lambda L, a: a[a.detach() > 0], (4, 5), ops={"gt"}),
    Case("setitem", lambda L, a, b: _setitem(a, (slice(None), 1), b), (3, 4), (3,)),
    Case("setitem", lambda L, a, b: _setitem(a, L.tensor([2, 0]), b), (3, 4), (1, 4),
         ops={"tensor"}),
    Case("to_dtype", lambda L, a: a.double() if a.dtype != L.float64 else a.float(), (3, 4),
         fd=False),  # an fp32 output is too coarse for float64 differences
    Case("clone", lambda L, a: a.clone(), (3, 4)),
    Case("copy_", lambda L, a, b: a.clone().copy_(b), (3, 4), (4,)),
    # element-wise math (ampy/_math.py)
    Case("add", lambda L, a, b: L.add(a, b, alpha=3), (3, 4), (4,)),
    Case("add", lambda L, a: a + 2.5, (3,)),
    Case("sub", lambda L, a, b: L.sub(a, b, alpha=0.5), (2, 1, 4), (3, 1)),
    Case("mul", lambda L, a, b: L.mul(a, b), (3, 1), (1, 4)),
    Case("div", lambda L, a, b: L.div(a, b), (3, 4), (4,), data="positive"),
    Case("pow", lambda L, a: L.pow(a, 3), (3, 4)),
    Case("pow", lambda L, a, b: L.pow(a, b), (3, 4), (4,), data="positive"),
    Case("pow", lambda L, a: L.pow(2.0, a), (5,)),
    Case("neg", lambda L, a: L.neg(a), (3, 4)),
    Case("abs", lambda L, a: L.abs(a), (3, 4)),
    Case("exp", lambda L, a: L.exp(a), (3, 4)),
    Case("log", lambda L, a: L.log(a), (3, 4), data="positive"),
    Case("log1p", lambda L, a: L.log1p(a), (3, 4), data="positive"),
    Case("sqrt", lambda L, a: L.sqrt(a), (3, 4), data="positive"),
    Case("rsqrt", lambda L, a: L.rsqrt(a), (3, 4), data="positive"),
    Case("sin", lambda L, a: L.sin(a), (3, 4)),
    Case("cos", lambda L, a: L.cos(a), (3, 4)),
    Case("tanh", lambda L, a: L.tanh(a), (3, 4)),
    Case("sigmoid", lambda L, a: L.sigmoid(a), (3, 4)),
    Case("relu", lambda L, a: L.relu(a), (3, 4)),
    Case("gelu", lambda L, a: L.gelu(a), (3, 4)),
    Case("gelu", lambda L, a: L.gelu(a, approximate="tanh"), (3, 4)),
    Case("clamp", lambda L, a: L.clamp(a, min=-0.5, max=0.7), (3, 4)),
    Case("clamp", lambda L, a, lo: L.clamp(a, min=lo), (3, 4), (4,)),
    Case("where", lambda L, a, b: L.where(a.detach() > 0, a, b), (3, 4), (4,), ops={"gt"}),
    Case("maximum", lambda L, a, b: L.maximum(a, b), (3, 4), (4,), data="ties"),
    Case("minimum", lambda L, a, b: L.minimum(a, b), (3, 4), (4,), data="ties"),
    # reductions
    Case("sum", lambda L, a: L.sum(a), (3, 4)),
    Case("sum", lambda L, a: L.sum(a, (0, 2), keepdim=True), (2, 3, 4)),
    Case("sum", lambda L, a: a.sum(-1), (2, 3)),
    Case("mean", lambda L, a: L.mean(a, 1), (2, 3, 4)),
    Case("mean", lambda L, a: L.mean(a), (2, 3)),
    Case("amax", lambda L, a: L.max(a), (3, 4), data="ties"),  # max(x) is amax over all
    Case("max_dim", lambda L, a: L.max(a, 0, keepdim=True)[0], (3, 4)),
    Case("maximum", lambda L, a, b: L.max(a, b), (3, 4), (4,), data="ties"),
    Case("amin", lambda L, a: L.min(a), (3, 4), data="ties"),
    Case("min_dim", lambda L, a: L.min(a, -1)[0], (3, 4)),
    Case("amax", lambda L, a: L.amax(a, 1), (3, 5), data="ties"),
    Case("amax", lambda L, a: L.amax(a, (0, 1), keepdim=True), (3, 5, 2), data="ties"),
    Case("amin", lambda L, a: L.amin(a, 0), (3, 5), data="ties"),
    Case("var", lambda L, a: L.var(a, 1), (3, 5)),
    Case("var", lambda L, a: L.var(a, correction=0), (3, 5)),
    Case("std", lambda L, a: L.std(a, 0, keepdim=True), (3, 5)),
    Case("std", lambda L, a: L.std(a), (3, 5)),
    Case("prod", lambda L, a: L.prod(a), (2, 3), data="positive"),
    Case("prod", lambda L, a: L.prod(a, 1), (3, 4)),
    Case("prod", lambda L, a: L.prod(a * L.tensor([[0., 1., 1.], [0., 0., 1.]]), 1), (2, 3),
         ops={"tensor", "mul"}),
    Case("softmax", lambda L, a: L.softmax(a, 1), (3, 5)),
    Case("log_softmax", lambda L, a: L.log_softmax(a, -1), (3, 5)),
    Case("logsumexp", lambda L, a: L.logsumexp(a, 1), (3, 5)),
    Case("cumsum", lambda L, a: L.cumsum(a, 1), (3, 5)),
    Case("cat", lambda L, a, b: L.cat([a, b], 1), (3, 2), (3, 4)),
    Case("stack", lambda L, a, b: L.stack((a, b), -1), (3, 2), (3, 2)),
    Case("max_dim", lambda L, a: L.max(a, 1)[0], (3, 4)),
    Case("min_dim", lambda L, a: L.min(a, 0, keepdim=True)[0], (3, 4)),
    Case("square", lambda L, a: L.square(a), (3, 4)),
    Case("reciprocal", lambda L, a: L.reciprocal(a), (3, 4), data="positive"),
    Case("erf", lambda L, a: L.erf(a), (3, 4)),
    Case("silu", lambda L, a: L.nn.functional.silu(a) if L is TL else L.silu(a), (3, 4)),
    Case("fmax", lambda L, a, b: L.fmax(a, b), (3, 4), (4,), data="ties"),
    Case("fmin", lambda L, a, b: L.fmin(a, b), (3, 4), (4,), data="ties"),
    Case("floor", lambda L, a: L.floor(a) * a, (3, 4), ops={"mul"}),
    Case("ceil", lambda L, a: L.ceil(a) * a, (3, 4), ops={"mul"}),
    Case("round", lambda L, a: L.round(a) * a, (3, 4), ops={"mul"}),
    Case("trunc", lambda L, a: L.trunc(a) * a, (3, 4), ops={"mul"}),
    Case("sign", lambda L, a: L.sign(a) * a, (3, 4), ops={"mul"}),
    Case("frac", lambda L, a: L.frac(a), (3, 4)),
    Case("tan", lambda L, a: L.tan(a), (3, 4), data="unit"),
    Case("sinh", lambda L, a: L.sinh(a), (3, 4)),
    Case("cosh", lambda L, a: L.cosh(a), (3, 4)),
    Case("asin", lambda L, a: L.asin(a), (3, 4), data="unit"),
    Case("acos", lambda L, a: L.acos(a), (3, 4), data="unit"),
    Case("atan", lambda L, a: L.atan(a), (3, 4)),
    Case("atan2", lambda L, a, b: L.atan2(a, b), (3, 4), (4,)),
    Case("exp2", lambda L, a: L.exp2(a), (3, 4)),
    Case("expm1", lambda L, a: L.expm1(a), (3, 4)),
    Case("log2", lambda L, a: L.log2(a), (3, 4), data="positive"),
    Case("log10", lambda L, a: L.log10(a), (3, 4), data="positive"),
    Case("fmod", lambda L, a, b: L.fmod(a, b), (3, 4), (4,), data="positive"),
    Case("remainder", lambda L, a, b: L.remainder(a, b), (3, 4), (4,), data="positive"),
    Case("leaky_relu", lambda L, a: (F.leaky_relu if L is TL else L.leaky_relu)(a, 0.1),
         (3, 4)),
    Case("elu", lambda L, a: (F.elu if L is TL else L.elu)(a, 0.7), (3, 4)),
    Case("softplus", lambda L, a: (F.softplus if L is TL else L.softplus)(a, 2.0, 1.0), (3, 4)),
    Case("logsigmoid", lambda L, a: (F.logsigmoid if L is TL else L.logsigmoid)(a), (3, 4)),
    Case("mish", lambda L, a: (F.mish if L is TL else L.mish)(a), (3, 4)),
    Case("lerp", lambda L, a, b, w: L.lerp(a, b, w), (3, 4), (4,), (3, 1)),
    Case("lerp", lambda L, a, b: L.lerp(a, b, 0.3), (3, 4), (4,)),
    Case("addcmul", lambda L, a, b, c: L.addcmul(a, b, c, value=0.5), (3, 4), (4,), (3, 1)),
    Case("addcdiv", lambda L, a, b, c: L.addcdiv(a, b, c, value=2), (3, 4), (4,), (3, 1),
         data="positive"),
    Case("clamp", lambda L, a: L.clamp_min(a, 0.2), (3, 4)),  # dispatches to clamp
    Case("clamp", lambda L, a: L.clamp_max(a, L.tensor([0.2, 0.1, 0.0, -0.3])), (3, 4),
         ops={"tensor"}),
    Case("cumprod", lambda L, a: L.cumprod(a, 1), (3, 4), data="positive"),
    Case("norm", lambda L, a: L.norm(a), (3, 4)),
    Case("norm", lambda L, a: L.norm(a, 1, 1), (3, 4)),
    Case("norm", lambda L, a: L.norm(a, 3, 0, keepdim=True), (3, 4)),
    Case("norm", lambda L, a: L.norm(a, float("inf"), 1), (3, 4)),
    # GEMM (ampy/_gemm.py)
    Case("matmul", lambda L, a, b: L.matmul(a, b), (3, 4), (4, 5), tol=4),
    Case("matmul", lambda L, a, b: L.matmul(a, b), (2, 1, 3, 4), (3, 4, 2), tol=4),
    Case("matmul", lambda L, a, b: L.matmul(a, b), (4,), (2, 4, 3), tol=4),
    Case("matmul", lambda L, a, b: L.matmul(a, b), (3, 4), (4,), tol=4),
    Case("matmul", lambda L, a, b: L.matmul(a, b), (4,), (4,), tol=4),
    Case("mm", lambda L, a, b: L.mm(a, b.t()), (3, 4), (5, 4), ops={"transpose"}, tol=4),
    Case("bmm", lambda L, a, b: L.bmm(a, b), (2, 3, 4), (2, 4, 5), tol=4),
    Case("addmm", lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2), (5,), (3, 4), (4, 5),
         tol=4),
    Case("baddbmm", lambda L, c, a, b: L.baddbmm(c, a, b, alpha=0.5), (2, 3, 5), (2, 3, 4),
         (2, 4, 5), tol=4),
    Case("linear", lambda L, x, w, b: L.linear(x, w, b), (2, 3, 4), (5, 4), (5,), tol=4),
    Case("linear", lambda L, x, w: L.linear(x, w), (4,), (5, 4), tol=4),
    # sorting, gather/scatter, masked_fill, triangles (ampy/_sorting.py, _scatter.py, _tril.py)
    Case("sort", lambda L, a: L.sort(a, 1, True)[0], (3, 4)),
    Case("topk", lambda L, a: L.topk(a, 2, 0)[0], (3, 4)),
    Case("gather", lambda L, a: L.gather(a, 1, L.tensor([[0, 2, 0], [1, 1, 3], [3, 0, 2]])),
         (3, 4), ops={"tensor"}),
    Case("scatter", lambda L, a, b: L.scatter(a, 1, L.tensor([[0, 2], [3, 1], [1, 0]]), b),
         (3, 4), (3, 2), ops={"tensor"}),
    Case("scatter_add", lambda L, a, b: L.scatter_add(
        a, 0, L.tensor([[0, 2, 0, 1], [2, 2, 1, 0]]), b), (3, 4), (2, 4), ops={"tensor"}),
    Case("masked_fill", lambda L, a: L.masked_fill(a, a.detach() > 0, 0.5), (3, 4), ops={"gt"}),
    Case("tril", lambda L, a: L.tril(a, -1), (2, 3, 4)),
    Case("triu", lambda L, a: L.triu(a, 1), (3, 4)),
    # scatter_reduce (ampy/_scatter_reduce.py)
    Case("scatter_reduce", lambda L, a, b: L.scatter_reduce(
        a, 0, L.tensor([[0, 2, 0, 1], [2, 2, 1, 0]]), b, "prod"), (3, 4), (2, 4), ops={"tensor"}),
    Case("scatter_reduce", lambda L, a, b: L.scatter_reduce(
        a, 1, L.tensor([[0, 2, 0], [1, 1, 3], [3, 0, 0]]), b, "mean", include_self=False),
         (3, 4), (3, 3), ops={"tensor"}),
    Case("scatter_reduce", lambda L, a, b: L.scatter_reduce(
        a, 0, L.tensor([[0, 2, 0, 1], [2, 2, 1, 0]]), b, "amax"), (3, 4), (2, 4), data="ties",
         ops={"tensor"}),
]


def _setitem(a, key, b):
    y = a.clone()
    y[key] = b
    return y


def _run(lib, case, arrays, dtname, seed=1):
    """Forward, backward with a random grad_output; returns grads as float64."""
    dt = (AMPY_DTYPE if lib is ampy else TORCH_DTYPE)[dtname]
    L = ampy if lib is ampy else TL
    xs = [lib.tensor(a, dtype=dt, requires_grad=True) for a in arrays]
    out = case.fn(L, *xs)
    if isinstance(out, tuple):
        out = out[0]
    gout = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    out.backward(lib.tensor(gout, dtype=out.dtype))
    res = []
    for x in xs:
        assert x.grad is not None, f"no gradient reached an input of {case.op}"
        assert x.grad.dtype == x.dtype and tuple(x.grad.shape) == tuple(x.shape)
        res.append(np.asarray(x.grad.detach().float() if dtname == "bfloat16" else x.grad.detach(),
                              dtype=np.float64))
    return res, np.asarray(out.detach().float(), dtype=np.float64)


def _close(got, want, tol, what):
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    err = np.max(np.abs(got - want)) / scale if want.size else 0.0
    assert err <= tol, f"{what}: max scaled error {err:.3g} > {tol:.3g}\n{got}\n{want}"


@pytest.mark.parametrize("dtname", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.op)
def test_grad_matches_torch(case, dtname):
    arrays = case.arrays()
    want, out_t = _run(torch, case, arrays, dtname)
    got, out_a = _run(ampy, case, arrays, dtname)
    tol = TOL[dtname] * case.tol
    _close(out_a, out_t, tol, f"{case.op} forward")
    for i, (g, w) in enumerate(zip(got, want)):
        _close(g, w, tol, f"{case.op} grad of input {i} ({dtname})")


@pytest.mark.parametrize("case", [c for c in CASES if c.fd], ids=lambda c: c.op)
def test_grad_matches_finite_differences(case):
    """float64 central differences of sum(out * gout), independent of torch."""
    arrays = case.arrays(seed=3)
    got, _ = _run(ampy, case, arrays, "float64", seed=4)
    eps = 1e-6

    def f(arrs):
        xs = [ampy.tensor(a, dtype=ampy.float64) for a in arrs]
        with ampy.autograd.no_grad():
            out = case.fn(ampy, *xs)
        out = out[0] if isinstance(out, tuple) else out
        o = np.asarray(out, dtype=np.float64)
        return float(np.sum(o * np.random.default_rng(4).standard_normal(o.shape)))

    for i, a in enumerate(arrays):
        num = np.zeros_like(a)
        for j in range(a.size):
            p = [x.copy() for x in arrays]
            p[i].flat[j] += eps
            m = [x.copy() for x in arrays]
            m[i].flat[j] -= eps
            num.flat[j] = (f(p) - f(m)) / (2 * eps)
        _close(got[i], num, 1e-6, f"{case.op} input {i} vs finite differences")


def test_every_op_has_a_rule():
    """Every op in the table is differentiable (has a rule and a case above)
    or declared non-differentiable."""
    cased = {c.op for c in CASES}
    no_case_needed = {"to_device"}  # needs a second device: covered where CUDA exists
    for name, op in _dispatch.ops().items():
        base = name[:-1] if name.endswith("_") and name != "copy_" else name
        if base in NON_DIFFERENTIABLE:
            continue
        assert op.backward is not None, f"op {name!r} has no backward rule"
        rule = getattr(op.backward, "base", op.backward)
        mine = rule.__module__.startswith("ampy.autograd.")
        if not mine:  # a rule its module brought (nn's fused losses): tested there
            continue
        assert base in cased or base in no_case_needed, f"op {name!r} has no gradient test"


# ------------------------------------------------------------ engine semantics
def _t(vals, rg=True, dtype=None):
    return ampy.tensor(vals, dtype=dtype, requires_grad=rg)


def _np(t):
    return np.asarray(t.detach(), dtype=np.float64)


def _torch_error(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    return str(e.value)


def test_accumulates_into_leaf_grad_in_place():
    x = _t([1.0, 2.0, 3.0])
    (x * x).sum().backward()  # one tensor used twice: the two grads add
    np.testing.assert_allclose(_np(x.grad), [2, 4, 6])
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g  # later accumulations add into the same tensor, as torch
    np.testing.assert_allclose(_np(x.grad), [5, 7, 9])


def test_first_accumulation_does_not_alias_the_incoming_grad():
    x = _t([1.0, 2.0])
    gout = ampy.tensor([3.0, 4.0])
    x.view(2).backward(gout)
    gout[0] = 100.0
    np.testing.assert_allclose(_np(x.grad), [3, 4])


def test_retain_graph_and_freed_buffers():
    x = _t([0.5, -1.0])
    s = ampy.exp(x).sum()
    s.backward(retain_graph=True)
    s.backward()
    np.testing.assert_allclose(_np(x.grad), 2 * np.exp([0.5, -1.0]), rtol=1e-6)
    xt = torch.tensor([0.5, -1.0], requires_grad=True)
    st = xt.exp().sum()
    st.backward()
    msg = _torch_error(st.backward)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        s.backward()
    assert msg.startswith("Trying to backward through the graph a second time")


def test_second_backward_without_saved_tensors_is_allowed_as_in_torch():
    x = _t([1.0, 2.0])
    s = (x + 1).sum()  # add and sum save no tensors
    s.backward()
    s.backward()
    np.testing.assert_allclose(_np(x.grad), [2, 2])


def test_implicit_grad_only_for_scalars_and_requires_grad_errors():
    x = _t([1.0, 2.0])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and "
                                           "does not have a grad_fn"):
        ampy.tensor([1.0]).sum().backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(ampy.ones(3))
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype"):
        ampy.tensor([1, 2]).requires_grad_()
    assert x.grad is None  # nothing ran


def test_inplace_modification_of_saved_tensor_is_detected():
    x = _t([1.0, 2.0, 3.0])
    y = ampy.exp(x)  # exp saves its output
    s = y.sum()
    y[0] = 0.0
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient "
                                           "computation has been modified by an inplace "
                                           "operation"):
        s.backward()
    a = x * 2
    b = a * a  # mul saves its inputs
    a[1] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


def test_setitem_records_history_and_leaf_inplace_is_an_error():
    x = _t([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                                           "in an in-place operation."):
        x[0] = 5.0
    np.testing.assert_allclose(_np(x), [1, 2, 3])  # unchanged
    with ampy.autograd.no_grad():
        x[0] = 5.0  # allowed without recording, as in an optimizer step
    assert x.grad_fn is None and x.is_leaf
    y = x * 1
    y[1] = 0.0
    assert y.grad_fn.name() == "IndexPutBackward0"
    (y * ampy.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [1, 0, 3])


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_cast_is_differentiable_fp32_param_gets_fp32_grad(half):
    w = np.array([[0.5, -1.25], [2.0, 0.75]])
    xs = np.array([1.5, -0.5])
    res = []
    for lib, L in ((ampy, ampy), (torch, TL)):
        dt32, dth = (ampy.float32, getattr(ampy, half)) if lib is ampy else \
            (torch.float32, getattr(torch, half))
        p = lib.tensor(w, dtype=dt32, requires_grad=True)
        x = lib.tensor(xs, dtype=dth)
        y = L.tanh(p.to(dth) * x)  # runs in half
        assert y.dtype == dth
        y.float().sum().backward()
        assert p.grad.dtype == dt32
        res.append(np.asarray(p.grad.detach(), dtype=np.float64))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-2, atol=1e-3)


def test_grad_mode_context_decorator_and_threads():
    ag = ampy.autograd
    assert ag.is_grad_enabled()
    with ag.no_grad():
        assert not ag.is_grad_enabled()
        with ag.enable_grad():
            assert ag.is_grad_enabled()
        assert not ag.is_grad_enabled()
    assert ag.is_grad_enabled()

    @ag.no_grad()
    def f(n):
        assert not ag.is_grad_enabled()
        return f(n - 1) if n else ag.is_grad_enabled()

    assert f(3) is False and ag.is_grad_enabled()  # recursion restores each level

    @ag.no_grad  # bare form, as torch allows
    def g():
        return ag.is_grad_enabled()

    assert g() is False and ag.is_grad_enabled()
    ag.set_grad_enabled(False)
    assert not ag.is_grad_enabled()
    ag.set_grad_enabled(True)
    with ag.set_grad_enabled(False):
        assert not ag.is_grad_enabled()
    assert ag.is_grad_enabled()
    with pytest.raises(TypeError, match="mode"):
        ag.set_grad_enabled("yes")

    seen = {}
    started, release = threading.Event(), threading.Event()

    def worker():
        seen["start"] = ag.is_grad_enabled()
        with ag.no_grad():
            started.set()
            release.wait(5)
            seen["inside"] = ag.is_grad_enabled()

    with ag.no_grad():
        th = threading.Thread(target=worker)
        th.start()
        started.wait(5)
        with ag.enable_grad():
            release.set()
            th.join()
            assert ag.is_grad_enabled()
    assert seen == {"start": True, "inside": False}  # per thread, as torch


def test_no_grad_records_nothing_and_int_outputs_do_not_require_grad():
    x = _t([1.0, -2.0])
    with ampy.autograd.no_grad():
        y = x * 2
    assert y.grad_fn is None and not y.requires_grad
    z = x * 2
    assert z.requires_grad and not z.is_leaf
    assert not ampy.gt(z, 0).requires_grad
    d = z.detach()
    assert d.grad_fn is None and not d.requires_grad
    with pytest.raises(RuntimeError, match="leaf variables"):
        z.requires_grad_(False)


def test_hooks_retain_grad_and_handles():
    x = _t([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    calls = []
    h = y.register_hook(lambda g: calls.append("y") or g * 2)
    x.register_hook(lambda g: calls.append("x"))
    (y * y).sum().backward()
    assert calls == ["y", "x"]
    np.testing.assert_allclose(_np(y.grad), 2 * 2 * np.array([3.0, 6.0]))  # after the hook
    np.testing.assert_allclose(_np(x.grad), 3 * 4 * np.array([3.0, 6.0]))
    assert y.retains_grad and not x.retains_grad
    h.remove()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3, 3])
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ampy.ones(2).register_hook(lambda g: g)


def test_autograd_grad_matches_torch_and_leaves_grad_untouched():
    def run(lib, L):
        x = lib.tensor([0.5, 1.5, -1.0], dtype=lib.float64, requires_grad=True)
        y = L.sin(x) * x
        (gx,) = ampy.autograd.grad(y.sum(), x) if lib is ampy else torch.autograd.grad(
            y.sum(), x)
        assert x.grad is None
        return np.asarray(gx.detach(), dtype=np.float64)

    np.testing.assert_allclose(run(ampy, ampy), run(torch, TL), rtol=1e-12)
    x, u = _t([1.0]), _t([2.0])
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        ampy.autograd.grad((x * 2).sum(), [x, u])
    gx, gu = ampy.autograd.grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gu is None and _np(gx).tolist() == [2.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        ampy.autograd.grad((x * 2).sum(), [ampy.ones(1)])
    h = x * 5  # a non-leaf input
    (gh,) = ampy.autograd.grad((h * h).sum(), h)
    np.testing.assert_allclose(_np(gh), [10.0])  # 2 * h, h = 5


def test_create_graph_gives_second_derivatives():
    x = _t([0.5, 2.0], dtype=ampy.float64)
    (g,) = ampy.autograd.grad((x * x * x).sum(), x, create_graph=True)
    assert g.requires_grad
    g.sum().backward()
    np.testing.assert_allclose(_np(x.grad), 6 * np.array([0.5, 2.0]))


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "sin"])
def test_second_derivative_through_saved_outputs_matches_torch(name):
    res = []
    for lib, L in ((ampy, ampy), (torch, TL)):
        x = lib.tensor([0.3, -1.2, 2.0], dtype=lib.float64, requires_grad=True)
        y = getattr(L, name)(x).sum()
        gr = ampy.autograd.grad if lib is ampy else torch.autograd.grad
        (g,) = gr(y, x, create_graph=True)
        (g2,) = gr((g * g).sum(), x)
        res.append(np.asarray(g2.detach(), dtype=np.float64))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10)


def test_backward_inputs_and_inplace_variants():
    x, w = _t([1.0, 2.0]), _t([3.0, 4.0])
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None and _np(w.grad).tolist() == [1.0, 2.0]
    y = x * 1
    v = y[0:1]
    with pytest.raises(NotImplementedError, match="view"):
        v.copy_(ampy.tensor([5.0]))
    z = x * 1
    z.mul_(w)  # rebases z's history; mul_ needs z's old value for w's gradient
    z.sum().backward()
    assert _np(x.grad).tolist() == [3.0, 4.0]
    assert _np(w.grad).tolist() == [2.0, 4.0]


def test_custom_function():
    class Cube(ampy.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x * x * x * k

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return g * 3 * x * x * ctx.k, None

    x = _t([1.0, 2.0])
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward" and not y.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [6.0, 24.0])
    with pytest.raises(RuntimeError, match="second time"):
        y.grad_fn.saved_tensors

    class Bad(ampy.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, x).sum().backward()
    with ampy.autograd.no_grad():
        assert Cube.apply(x, 1.0).grad_fn is None


def test_grad_fn_names_next_functions_and_repr_match_torch():
    def names(lib, L):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0])
        y = L.mul(a, b)
        z = (y + a).sum()
        fn = z.grad_fn
        add = fn.next_functions[0][0]
        def nm(n):  # torch's C++ nodes carry a namespace in name()
            return n.name().replace("torch::autograd::", "") if n is not None else None

        out = [fn.name(), add.name(), [nm(n) for n, _ in add.next_functions]]
        mul = add.next_functions[0][0]
        out.append([nm(n) for n, _ in mul.next_functions])
        out.append(type(a.half().grad_fn).__name__)
        return out

    assert names(ampy, ampy) == names(torch, TL)
    x = _t([1.0])
    assert repr(x + 1).endswith("grad_fn=<AddBackward0>)")
    assert repr(x).endswith("requires_grad=True)")


def test_top_level_names_reexported():
    for n in ("no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"):
        assert getattr(ampy, n) is getattr(ampy.autograd, n)
