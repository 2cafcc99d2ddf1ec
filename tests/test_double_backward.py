"""Double backward (create_graph=True) against torch 2.13, for every op.

The sweep takes every op of `ampy._dispatch.ops()` from the case table in
tests/double_backward_cases.py (an op without a case fails
`test_every_op_has_a_case`) and, for each, runs the same function in ampy and
torch: y = f(xs); g = grad(sum(y * v), xs, create_graph=True); then
grad(sum(g * w), xs + [v]). The first-order grads, whether they carry a
graph, and the second-order grads must all match torch's. v requires grad
too, so the backward's dependence on its incoming gradient is checked as
well as its dependence on the inputs.
"""
import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ampy  # noqa: E402
from ampy import _dispatch  # noqa: E402

from double_backward_cases import CASES, Case, NonDiff, Raises, _rng  # noqa: E402

_DT = {"float64": (np.float64, torch.float64, ampy.float64),
       "float32": (np.float32, torch.float32, ampy.float32),
       "float16": (np.float32, torch.float16, ampy.float16),
       "bfloat16": (np.float32, torch.bfloat16, ampy.bfloat16)}


def _to(lib, a, dtype, rg):
    if a.dtype.kind == "f":
        npdt, tdt, adt = _DT[dtype]
        a = a.astype(npdt)
        if lib is torch:
            return torch.tensor(a, dtype=tdt, requires_grad=rg)
        return ampy.tensor(a, dtype=adt, requires_grad=rg)
    return torch.tensor(a) if lib is torch else ampy.tensor(a)


def _np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().double().numpy(force=True)
    return np.asarray(t.detach()).astype(np.float64)


class _Seen:
    """Records the names of the ops ampy dispatches while a case runs."""

    def __init__(self):
        self.names = set()

    def __enter__(self):
        self.prev = _dispatch._hooks.autograd
        prev = self.prev

        def hook(op, args, kwargs):
            self.names.add(op.name)
            return prev(op, args, kwargs)

        _dispatch._hooks.autograd = hook
        return self

    def __exit__(self, *exc):
        _dispatch._hooks.autograd = self.prev


def _outputs(y):
    ys = y if isinstance(y, (tuple, list)) else (y,)
    return [t for t in ys if t.dtype.is_floating_point]


def _second_order(lib, case, name, seen=None):
    """(first-order grads, graph flags, second-order grads) of the case in
    lib; `seen` (a _Seen) watches the forward only."""
    diff = case.diff
    if diff is None:
        diff = tuple(i for i, a in enumerate(case.ins) if a.dtype.kind == "f")
    xs = [_to(lib, a, case.dtype, i in diff) for i, a in enumerate(case.ins)]
    with seen or contextlib.nullcontext():
        ys = _outputs(case.fn(lib, *xs))
    rng = _rng("v", name)
    vs = [_to(lib, rng.uniform(-1, 1, tuple(y.shape)), case.dtype, True) for y in ys]
    loss = sum((y * v).sum() for y, v in zip(ys, vs))
    leaves = [xs[i] for i in diff]
    gs = lib.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
    graph = [g is not None and g.requires_grad for g in gs]
    ws = [_to(lib, rng.uniform(-1, 1, tuple(lv.shape)), case.dtype, False) for lv in leaves]
    terms = [(g * w).sum() for g, w, f in zip(gs, ws, graph) if f]
    if not terms:
        return gs, graph, None
    s = terms[0]
    for t in terms[1:]:
        s = s + t
    return gs, graph, lib.autograd.grad(s, leaves + vs, allow_unused=True)


def _close(a, b, case, what):
    a = np.zeros_like(b) if a is None and b is not None else a
    b = np.zeros_like(a) if b is None and a is not None else b
    if a is None:
        return
    np.testing.assert_allclose(a, b, rtol=case.rtol, atol=case.atol, err_msg=what)


def _names():
    return sorted(_dispatch.ops())


def test_every_op_has_a_case():
    missing = [n for n in _names() if n not in CASES]
    assert not missing, f"ops without a double-backward case: {missing}"
    stale = [n for n in CASES if n not in _dispatch.ops()]
    assert not stale, f"cases for ops that are not in the op table: {stale}"


def _all_cases():
    out = []
    for name in _names():
        cases = CASES.get(name)
        if cases is None:  # (test_every_op_has_a_case names it)
            continue
        cases = cases if isinstance(cases, list) else [cases]
        out.extend(pytest.param(name, c, id=f"{name}-{i}" if i else name)
                   for i, c in enumerate(cases))
    return out


@pytest.mark.parametrize("name,case", _all_cases())
def test_double_backward_matches_torch(name, case):
    if isinstance(case, NonDiff):
        return _check_nondiff(name, case)
    if isinstance(case, Raises):
        return _check_raises(name, case)
    seen = _Seen()
    a_gs, a_graph, a_hh = _second_order(ampy, case, name, seen)
    assert name in seen.names, f"the case of {name!r} dispatched only {sorted(seen.names)}"
    t_gs, t_graph, t_hh = _second_order(torch, case, name)
    for i, (ga, gt) in enumerate(zip(a_gs, t_gs)):
        _close(_np(ga), _np(gt), case, f"{name}: first-order grad {i}")
    for i, (fa, ft) in enumerate(zip(a_graph, t_graph)):
        assert fa or not ft, f"{name}: grad {i} lost its graph under create_graph=True"
    if t_hh is None:
        if a_hh is not None:  # ampy recorded a graph torch did not: it must give zeros
            for h in a_hh:
                _close(_np(h), None if h is None else np.zeros(h.shape), case, name)
        return
    assert a_hh is not None, f"{name}: no second-order graph"
    for i, (ha, ht) in enumerate(zip(a_hh, t_hh)):
        ht = _np(ht)
        if case.nan_is_zero and ht is not None:
            ht = np.where(np.isnan(ht), 0.0, ht)
        _close(_np(ha), ht, case, f"{name}: second-order grad {i}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,case", [p for p in _all_cases() if isinstance(p.values[1], Case)])
def test_double_backward_half_matches_torch(name, case, dtype):
    """The same cases with float16 / bfloat16 inputs (rules that upcast run
    in float32 and the engine rounds back), within half-precision tolerance."""
    half = Case(case.fn, *case.ins, diff=case.diff, dtype=dtype, rtol=3e-2, atol=3e-2,
                nan_is_zero=case.nan_is_zero)
    test_double_backward_matches_torch(name, half)


def _check_nondiff(name, case):
    for lib in (ampy, torch):
        xs = [_to(lib, a, "float64", a.dtype.kind == "f") for a in case.ins]
        with _Seen() as seen:
            ys = case.fn(lib, *xs)
        if lib is ampy:
            assert name in seen.names, f"the case of {name!r} dispatched {sorted(seen.names)}"
        ys = ys if isinstance(ys, (tuple, list)) else (ys,)
        for y in ys:
            assert not y.requires_grad and y.grad_fn is None, f"{lib.__name__}.{name}"


def _check_raises(name, case):
    seen = _Seen()
    with pytest.raises(RuntimeError, match=case.match):
        _second_order(ampy, case, name, seen)
    assert name in seen.names, f"the case of {name!r} dispatched {sorted(seen.names)}"
    if case.order == 1:  # torch cannot take the first-order grad either
        with pytest.raises(RuntimeError):
            _second_order(torch, case, name)


# --------------------------------------------- the AMP examples' gradient penalty
PEN_STEPS, VOCAB, D_EMB, D_HID, N_OUT, BATCH = 5, 11, 6, 16, 4, 8


class _PenaltyNet:
    """embedding -> linear -> gelu -> layer_norm -> linear (-> tanh for mse),
    the fused nn ops the penalty has to differentiate through."""

    def __init__(self, lib, loss):
        nn = lib.nn
        self.lib, self.loss = lib, loss
        self.emb = nn.Embedding(VOCAB, D_EMB)
        self.body = nn.Sequential(nn.Linear(D_EMB, D_HID), nn.GELU(), nn.LayerNorm(D_HID),
                                  nn.Linear(D_HID, N_OUT))

    def modules(self):
        return {"emb": self.emb, "body": self.body}

    def parameters(self):
        return list(self.emb.parameters()) + list(self.body.parameters())

    def __call__(self, tokens, target):
        F = self.lib.nn.functional
        h = self.emb(tokens).mean(1)
        out = self.body(h)
        if self.loss == "cross_entropy":
            return F.cross_entropy(out, target, label_smoothing=0.1)
        return F.mse_loss(self.lib.tanh(out), target)


def _penalty_data(loss):
    rng = np.random.default_rng(5)
    out = []
    for _ in range(PEN_STEPS):
        tokens = rng.integers(0, VOCAB, size=(BATCH, 3)).astype(np.int64)
        if loss == "cross_entropy":
            target = rng.integers(0, N_OUT, size=BATCH).astype(np.int64)
        else:
            target = rng.uniform(-0.9, 0.9, size=(BATCH, N_OUT)).astype(np.float32)
        out.append((tokens, target))
    return out


def _penalty_run(lib, loss_name, amp, init, data):
    net = _PenaltyNet(lib, loss_name)
    for name, mod in net.modules().items():
        mod.load_state_dict({k: lib.tensor(v) for k, v in init[name].items()})
    params = net.parameters()
    opt = lib.optim.SGD(params, lr=0.1, momentum=0.9)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0**8, enabled=amp)
    half = lib.float16
    rec = []
    for tokens, target in data:
        tokens, target = lib.tensor(tokens), lib.tensor(target)
        opt.zero_grad()
        with lib.autocast("cpu", dtype=half, enabled=amp):
            loss = net(tokens, target)
        scaled = lib.autograd.grad(scaler.scale(loss), params, create_graph=True)
        inv_scale = 1.0 / scaler.get_scale()
        grads = [g * inv_scale for g in scaled]
        with lib.autocast("cpu", dtype=half, enabled=amp):
            norm = 0
            for g in grads:
                norm = norm + g.pow(2).sum()
            total = loss + norm.sqrt()
        scaler.scale(total).backward()
        scaler.step(opt)
        scaler.update()
        rec.append((float(loss.item()), float(total.item()), scaler.get_scale(),
                    [np.array(p.detach().float().tolist(), np.float32) for p in params]))
    return rec


@pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")
@pytest.mark.filterwarnings("ignore:.*GradScaler is enabled, but CUDA is not available")
@pytest.mark.parametrize("amp", [False, True], ids=["float32", "fp16-autocast"])
@pytest.mark.parametrize("loss_name", ["cross_entropy", "mse_loss"])
def test_gradient_penalty_loop_matches_torch(loss_name, amp):
    """torch's AMP examples: grads = autograd.grad(scaler.scale(loss), params,
    create_graph=True), unscaled by 1/scale, penalty = their norm, (loss +
    penalty) backward through the scaler; same weights, losses and params."""
    torch.manual_seed(0)
    ref = _PenaltyNet(torch, loss_name)
    init = {n: {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
            for n, m in ref.modules().items()}
    data = _penalty_data(loss_name)
    ra = _penalty_run(ampy, loss_name, amp, init, data)
    rt = _penalty_run(torch, loss_name, amp, init, data)
    tol = 1e-2 if amp else 2e-5
    for step, (a, t) in enumerate(zip(ra, rt)):
        where = f"step {step} ({loss_name}, amp={amp})"
        assert a[2] == t[2], where
        np.testing.assert_allclose(a[:2], t[:2], rtol=tol, atol=tol, err_msg=where)
        for i, (pa, pt) in enumerate(zip(a[3], t[3])):
            np.testing.assert_allclose(pa, pt, rtol=tol, atol=tol, err_msg=f"{where} param {i}")


# ------------------------------------------------------------- as_strided
def test_as_strided_is_differentiable_like_torch():
    """Tensor.as_strided records AsStridedBackward0 (it returned a tensor
    with requires_grad=False); the storage offset defaults to the input's."""
    a = np.arange(12.0)
    xa = ampy.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    ya, yt = xa.as_strided((3, 2), (2, 1)), xt.as_strided((3, 2), (2, 1))
    assert ya.requires_grad and type(ya.grad_fn).__name__ == type(yt.grad_fn).__name__
    za, zt = (xa * 1)[3:].as_strided((2, 2), (1, 2)), (xt * 1)[3:].as_strided((2, 2), (1, 2))
    np.testing.assert_array_equal(_np(za), _np(zt))
    assert za.storage_offset() == zt.storage_offset() == 3
    (za * za).sum().backward()
    (zt * zt).sum().backward()
    np.testing.assert_array_equal(_np(xa.grad), _np(xt.grad))


@pytest.mark.parametrize("args", [((2,), (-1,)), ((2, 2), (1,)), ((2,), (1,), -1),
                                  ((20,), (1,))])
def test_as_strided_bad_arguments_raise_like_torch(args):
    a = np.arange(6.0)
    xa, xt = ampy.tensor(a), torch.tensor(a)
    with pytest.raises(RuntimeError) as et:
        xt.as_strided(*args)
    with pytest.raises(RuntimeError) as ea:
        xa.as_strided(*args)
    if "out of bounds" not in str(et.value):  # (ampy words the bounds error its own way)
        assert str(ea.value) == str(et.value)
    np.testing.assert_array_equal(_np(xa), a)


# ---------------------------------------------------------------- dropout
def test_dropout_double_backward_follows_its_mask():
    """A random mask (the libraries draw different ones): read the mask back
    from the output and check the first- and second-order grads of
    dropout(x * x) against float64 math with that mask."""
    a = np.random.default_rng(3).uniform(0.5, 1.5, (6, 7))
    x = ampy.tensor(a, requires_grad=True)
    y = ampy.nn.functional.dropout(x * x, 0.5)
    keep = (_np(y) != 0).astype(np.float64)
    assert 0 < keep.sum() < keep.size
    v = ampy.tensor(np.full(a.shape, 0.25), requires_grad=True)
    g, = ampy.autograd.grad((y * v).sum(), x, create_graph=True)
    np.testing.assert_allclose(_np(g), 2 * a * keep * 2.0 * 0.25, rtol=1e-6)
    assert g.requires_grad
    hx, hv = ampy.autograd.grad(g.sum(), [x, v])
    np.testing.assert_allclose(_np(hx), 2 * keep * 2.0 * 0.25, rtol=1e-6)
    np.testing.assert_allclose(_np(hv), 2 * a * keep * 2.0, rtol=1e-6)


# ------------------------------------------------- products with zeros, too large
@pytest.mark.parametrize("op", ["prod", "cumprod"])
def test_products_with_zeros_too_large_raise_clearly(op):
    """The exact zero-aware gradients of prod (create_graph=True) and cumprod
    take an n x n matrix per slice; past 2**26 elements they raise a clear
    RuntimeError (NotImplementedError) instead of a wrong answer."""
    a = np.ones(1 << 14)
    a[3] = 0
    x = ampy.tensor(a, requires_grad=True)
    y = ampy.prod(x) if op == "prod" else ampy.cumprod(x, 0).sum()
    with pytest.raises(RuntimeError, match=f"{op}.*containing zeros|{op}.*contain zeros"):
        ampy.autograd.grad(y, x, create_graph=True)


# ------------------------------------------------ third order, finite differences
_THIRD = {
    "layer_norm": lambda x: (ampy.nn.functional.layer_norm(x, (4,)) ** 3).sum(),
    "cross_entropy": lambda x: ampy.nn.functional.cross_entropy(
        x, ampy.tensor(np.array([0, 2, 3])), label_smoothing=0.2),
    "mse_loss": lambda x: ampy.nn.functional.mse_loss(x * x * x, ampy.zeros(3, 4,
                                                                            dtype=x.dtype)),
    "embedding": lambda x: (ampy.nn.functional.embedding(ampy.tensor(np.array([0, 0, 2])),
                                                         x) ** 4).sum(),
    "as_strided": lambda x: ((x * 1).as_strided((3, 3), (1, 2)) ** 4).sum(),
}


@pytest.mark.parametrize("name", sorted(_THIRD))
def test_third_order_matches_finite_differences(name):
    """grad of sum(h * h), h the second-order grad of the op's loss, against
    central differences of that value in float64 (independent of torch:
    torch's own layer_norm third derivative disagrees with its finite
    differences)."""
    f = _THIRD[name]
    a = np.random.default_rng(7).uniform(-1, 1, (3, 4))

    def value(arr, third=False):
        x = ampy.tensor(arr, dtype=ampy.float64, requires_grad=True)
        g, = ampy.autograd.grad(f(x), x, create_graph=True)
        h, = ampy.autograd.grad((g * g).sum(), x, create_graph=True)
        s = (h * h).sum()
        return _np(ampy.autograd.grad(s, x)[0]) if third else float(s.item())

    got = value(a, third=True)
    num = np.zeros_like(a)
    eps = 1e-6
    for j in range(a.size):
        p, q = a.copy(), a.copy()
        p.flat[j] += eps
        q.flat[j] -= eps
        num.flat[j] = (value(p) - value(q)) / (2 * eps)
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(num).max()))


# ------------------------------------------------------- once_differentiable
@pytest.mark.parametrize("lib", [ampy, torch], ids=["ampy", "torch"])
def test_once_differentiable_raises_when_differentiated_twice(lib):
    """A backward marked @once_differentiable runs without recording (it may
    use NumPy); under create_graph=True its grads get a grad_fn that raises
    torch's error when reached, never a silent constant."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            assert not lib.is_grad_enabled()
            return lib.tensor(3 * _np(x) ** 2 * _np(g), dtype=x.dtype)

    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    g, = lib.autograd.grad((Cube.apply(x) ** 2).sum(), x, create_graph=True)
    np.testing.assert_allclose(_np(g), 6 * np.array([1.0, 2.0]) ** 5)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="differentiate twice a function that was marked "
                                           "with @once_differentiable"):
        (g * g).sum().backward()
    x2 = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    Cube.apply(x2).sum().backward()  # first order: unchanged
    np.testing.assert_allclose(_np(x2.grad), [3.0, 12.0])
