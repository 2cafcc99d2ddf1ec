"""ampy/nn/_functional_loss_more.py side by side with torch.nn.functional:
forward values and input grads (float32, float64), every reduction, the
modules, output dtypes under CPU bfloat16 autocast, bad shapes raising."""
import numpy as np
import pytest

import ampy
import ampy.nn.functional as AF

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(0)
N, C = 4, 5


def _sign(shape):
    return np.where(RNG.random(shape) > 0.5, 1.0, -1.0)


def _cases():
    x1, x2, x3 = (RNG.standard_normal((N, C)) for _ in range(3))
    y = _sign((N,))
    yc = _sign((N, C))
    pos = RNG.random((N, C)) * 3
    mlt = np.array([[3, 0, -1, 1, 2], [1, 2, 4, -1, 0], [0, 1, 2, 3, 4], [-1, 0, 0, 0, 0]])
    w = RNG.random(C) + 0.5
    cls = RNG.integers(0, C, N)
    return [
        ("margin_ranking_loss", [x1[:, 0], x2[:, 0]], [y], dict(margin=0.3)),
        ("hinge_embedding_loss", [x1], [yc], dict(margin=0.5)),
        ("cosine_embedding_loss", [x1, x2], [y], dict(margin=0.2)),
        ("triplet_margin_loss", [x1, x2, x3], [], dict(margin=0.7)),
        ("triplet_margin_loss", [x1, x2, x3], [], dict(p=1, eps=1e-3, swap=True)),
        ("triplet_margin_with_distance_loss", [x1, x2, x3], [], dict(swap=True)),
        ("soft_margin_loss", [x1], [yc], dict()),
        ("multilabel_soft_margin_loss", [x1], [(yc > 0).astype(float)], dict()),
        ("multilabel_soft_margin_loss", [x1], [(yc > 0).astype(float)], dict(weight=w)),
        ("multi_margin_loss", [x1], [cls], dict()),
        ("multi_margin_loss", [x1], [cls], dict(p=2, margin=0.6, weight=w)),
        ("multilabel_margin_loss", [x1], [mlt], dict()),
        ("poisson_nll_loss", [x1], [pos], dict()),
        ("poisson_nll_loss", [pos + 0.1], [pos], dict(log_input=False, full=True)),
        ("gaussian_nll_loss", [x1, x2, pos + 0.01], [], dict()),
        ("gaussian_nll_loss", [x1, x2, pos[:, 0]], [], dict(full=True, eps=0.5)),
    ]


CASES = _cases()
INT_TARGETS = ("multi_margin_loss", "multilabel_margin_loss")


def _call(lib, F, name, diff, fixed, kw, dtype, reduction):
    def conv(a, grad):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            return lib.tensor(a.astype(dtype), requires_grad=grad)
        return lib.tensor(a)
    xs = [conv(a, True) for a in diff]
    ts = [lib.tensor(a) if name in INT_TARGETS else conv(a, False) for a in fixed]
    kw = {k: (conv(v, False) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    if name == "gaussian_nll_loss":
        args = [xs[0], lib.tensor(diff[1].astype(dtype)), xs[2]]
        xs = [xs[0], xs[2]]
    else:
        args = xs + ts
    out = getattr(F, name)(*args, reduction=reduction, **kw)
    out.sum().backward()
    return out, [x.grad for x in xs]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,diff,fixed,kw", CASES)
def test_forward_backward(name, diff, fixed, kw, dtype, reduction):
    to, tg = _call(torch, TF, name, diff, fixed, kw, dtype, reduction)
    ao, ag = _call(ampy, AF, name, diff, fixed, kw, dtype, reduction)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    assert tuple(ao.shape) == tuple(to.shape)
    assert str(ao.dtype).split(".")[-1] == str(to.dtype).split(".")[-1]
    np.testing.assert_allclose(ao.detach().numpy(), to.detach().numpy(), **tol)
    for a, t in zip(ag, tg):
        np.testing.assert_allclose(a.numpy(), t.numpy(), **tol)


MODULES = {
    "margin_ranking_loss": "MarginRankingLoss", "hinge_embedding_loss": "HingeEmbeddingLoss",
    "cosine_embedding_loss": "CosineEmbeddingLoss", "triplet_margin_loss": "TripletMarginLoss",
    "triplet_margin_with_distance_loss": "TripletMarginWithDistanceLoss",
    "soft_margin_loss": "SoftMarginLoss",
    "multilabel_soft_margin_loss": "MultiLabelSoftMarginLoss",
    "multi_margin_loss": "MultiMarginLoss", "multilabel_margin_loss": "MultiLabelMarginLoss",
    "poisson_nll_loss": "PoissonNLLLoss", "gaussian_nll_loss": "GaussianNLLLoss"}


@pytest.mark.parametrize("name,diff,fixed,kw", CASES)
def test_module(name, diff, fixed, kw):
    def run(lib):
        def conv(a):
            if isinstance(a, np.ndarray) and a.dtype.kind == "f":
                return lib.tensor(a.astype(np.float64))
            return lib.tensor(a)
        k = {n: conv(v) if isinstance(v, np.ndarray) else v for n, v in kw.items()}
        m = getattr(lib.nn, MODULES[name])(**k, reduction="sum")
        return m(*[conv(a) for a in diff + fixed])
    np.testing.assert_allclose(run(ampy).numpy(), run(torch).numpy(), rtol=1e-10)


@pytest.mark.parametrize("name,diff,fixed,kw", CASES)
def test_autocast_bf16_dtype(name, diff, fixed, kw):
    def run(lib):
        def conv(a):
            if isinstance(a, np.ndarray) and a.dtype.kind == "f":
                return lib.tensor(a.astype(np.float32)).to(lib.bfloat16)
            return lib.tensor(a)
        k = {n: conv(v) if isinstance(v, np.ndarray) else v for n, v in kw.items()}
        with lib.autocast("cpu", dtype=lib.bfloat16):
            return getattr(lib.nn.functional, name)(*[conv(a) for a in diff + fixed], **k)
    a, t = run(ampy), run(torch)
    assert str(a.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(a.float().numpy(), t.float().numpy(), rtol=3e-2, atol=3e-2)


def test_bad_args():
    x = ampy.ones(3, 4)
    with pytest.raises(RuntimeError, match="input1"):
        AF.margin_ranking_loss(x, ampy.ones(3), ampy.ones(3))
    with pytest.raises(RuntimeError, match="anchor"):
        AF.triplet_margin_loss(x, x, ampy.ones(4))
    with pytest.raises(ValueError, match="margin"):
        AF.triplet_margin_with_distance_loss(x, x, x, margin=0)
    with pytest.raises(ValueError, match="var"):
        AF.gaussian_nll_loss(x, x, ampy.ones(2))
    with pytest.raises(ValueError, match="var"):
        AF.gaussian_nll_loss(x, x, -ampy.ones(3, 4))
    with pytest.raises(ValueError, match="p == 1"):
        AF.multi_margin_loss(x, ampy.tensor([0, 1, 2]), p=3)
    with pytest.raises(ValueError, match="target"):
        AF.multi_margin_loss(x, ampy.tensor([0, 1]))
    with pytest.raises(ValueError, match="target"):
        AF.multilabel_margin_loss(x, ampy.tensor([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        AF.soft_margin_loss(x, x, reduction="bogus")
    with pytest.raises(TypeError, match="target"):
        AF.hinge_embedding_loss(x, 3)
