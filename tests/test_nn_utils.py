"""ampy.nn.utils (clip_grad_norm_, clip_grad_value_, parameters_to_vector,
vector_to_parameters) and the containers ModuleDict, ParameterList and
ParameterDict, side by side with torch 2.13.

clip_grad_norm_'s total: ampy accumulates every tensor's norm in float64
(csrc/clip.c), torch accumulates float32 and half grads in float32, so the
two totals differ by float32 roundings; the test bounds ampy's error by
torch's own error against float64 math on the same values (plus one rounding
of the result), and then checks the scaling bit for bit by handing torch
ampy's total.
"""
import collections
import math
import warnings

import numpy as np
import pytest
import torch

import ampy
from ampy.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector,
                           vector_to_parameters)

from _helpers import stable_seed, EPS, TORCH_DTYPE, same_bits_or_both_nan

SHAPES = [(3, 4), (5,), (70001,), (2, 3, 4), (1,), (0,)]
MIXES = {
    "f32": ["float32"] * 6,
    "f16": ["float16"] * 6,
    "bf16": ["bfloat16"] * 6,
    "mixed": ["float32", "float16", "bfloat16", "float32", "float16", "bfloat16"],
    "halves": ["float16", "bfloat16", "float16", "bfloat16", "bfloat16", "float16"],
    "f64": ["float64", "float32", "float16", "float64", "float32", "bfloat16"],
}
ORDERS = (2.0, 1.0, math.inf, 3.0, 0.0, -math.inf, 0.5)


def _params(dtypes, key, none_at=(3,), scale=1.0):
    """torch and ampy parameters with the same grads (grad None at none_at)."""
    rng = np.random.default_rng(key)
    tp, ap = [], []
    for i, (s, d) in enumerate(zip(SHAPES, dtypes)):
        t = torch.zeros(s, dtype=TORCH_DTYPE[d], requires_grad=True)
        a = ampy.zeros(s, dtype=getattr(ampy, d), requires_grad=True)
        if i not in none_at:
            t.grad = torch.tensor(rng.normal(0, scale, s)).to(t.dtype)
            a.grad = ampy.tensor(t.grad.double().numpy()).to(a.dtype)
        tp.append(t)
        ap.append(a)
    return tp, ap


def _reference(tp, p):
    """float64 math on torch's (rounded) grads with torch's dtype roundings."""
    norms, dts = [], []
    for t in tp:
        if t.grad is None:
            continue
        g = np.abs(t.grad.double().numpy().ravel())
        n = (g.max(initial=0) if p == math.inf else g.min(initial=math.inf) if p == -math.inf
             else float(np.count_nonzero(g)) if p == 0 else (g ** p).sum() ** (1 / p))
        norms.append(float(torch.tensor(n, dtype=torch.float64).to(t.grad.dtype)))
        dts.append(t.grad.dtype)
    n = np.abs(np.array(norms))
    tot = (n.max() if p == math.inf else n.min() if p == -math.inf
           else float(np.count_nonzero(n)) if p == 0 else (n ** p).sum() ** (1 / p))
    return tot


@pytest.mark.parametrize("mix", sorted(MIXES))
@pytest.mark.parametrize("p", ORDERS)
@pytest.mark.parametrize("max_norm", (0.1, 1e6))
def test_clip_grad_norm_against_torch(mix, p, max_norm):
    tp, ap = _params(MIXES[mix], stable_seed(mix, p))
    if abs(p) == math.inf:  # torch refuses the empty grad: no identity for max / min
        msgs = []
        for fn, ps in ((torch.nn.utils.clip_grad_norm_, tp), (clip_grad_norm_, ap)):
            with pytest.raises(RuntimeError) as e:
                fn(ps, max_norm, p)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
        tp[-1].grad = ap[-1].grad = None
    ref = _reference(tp, p)
    nt = torch.nn.utils.clip_grad_norm_(tp, max_norm, p)
    na = clip_grad_norm_(ap, max_norm, p)
    assert na.ndim == 0 and na.dtype.name == str(nt.dtype).split(".")[1]
    eps = EPS[na.dtype.name]
    if math.isfinite(nt.item()):
        assert abs(na.item() - ref) <= abs(nt.item() - ref) + eps * abs(ref), (na.item(),
                                                                              nt.item(), ref)
    else:  # overflow of the dtype (a 0.5-norm of halves)
        assert same_bits_or_both_nan(na, nt)
    # the scaling, bit for bit: torch scaling by ampy's total
    tq, _ = _params(MIXES[mix], stable_seed(mix, p))
    if abs(p) == math.inf:
        tq[-1].grad = None
    torch.nn.utils.clip_grads_with_norm_(tq, max_norm, torch.tensor(na.item(),
                                                                     dtype=nt.dtype))
    for t, a in zip(tq, ap):
        assert (t.grad is None) == (a.grad is None)
        if t.grad is not None:
            assert same_bits_or_both_nan(a.grad.float() if a.dtype is ampy.bfloat16 else a.grad,
                                         t.grad.float() if t.dtype == torch.bfloat16 else t.grad)


def test_clip_grad_norm_of_a_model_with_mixed_grads():
    """A model whose layers hold float32 and bfloat16 weights, grads from a
    real backward, clipped by both libraries."""
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    am = ampy.nn.Sequential(ampy.nn.Linear(8, 16), ampy.nn.GELU(), ampy.nn.Linear(16, 4))
    am.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).normal(size=(5, 8))
    tm(torch.tensor(x, dtype=torch.float32)).sum().backward()
    tm[2].bfloat16()  # (grads converted with the weights)
    am[2].bfloat16()
    for (_, t), (_, a) in zip(tm.named_parameters(), am.named_parameters()):
        a.grad = ampy.tensor(t.grad.float().numpy()).to(a.dtype)
    nt = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.5)
    na = clip_grad_norm_(am.parameters(), 0.5)
    assert na.dtype is ampy.float32 and nt.dtype == torch.float32
    np.testing.assert_allclose(na.item(), nt.item(), rtol=4 * EPS["float32"])


@pytest.mark.parametrize("bad", (math.inf, -math.inf, math.nan))
@pytest.mark.parametrize("p", (2.0, math.inf))
def test_non_finite_grads(bad, p):
    tp, ap = _params(MIXES["mixed"], 7, none_at=(3, 5))
    tp[0].grad[1, 2] = bad
    ap[0].grad[1, 2] = bad
    msgs = []
    for lib, fn, ps in ((torch, torch.nn.utils.clip_grad_norm_, tp), (ampy, clip_grad_norm_, ap)):
        with pytest.raises(RuntimeError) as e:
            fn(ps, 1.0, p, error_if_nonfinite=True)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    nt = torch.nn.utils.clip_grad_norm_(tp, 1.0, p)
    na = clip_grad_norm_(ap, 1.0, p)
    assert same_bits_or_both_nan(na, nt)
    for t, a in zip(tp, ap):
        if t.grad is not None:
            assert same_bits_or_both_nan(a.grad.float(), t.grad.float())


def test_error_is_raised_before_any_grad_changes():
    _, ap = _params(MIXES["f32"], 3)
    ap[1].grad[0] = math.inf
    before = [None if a.grad is None else a.grad.clone() for a in ap]
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        clip_grad_norm_(ap, 1.0, error_if_nonfinite=True)
    for a, b in zip(ap, before):
        assert (a.grad is None and b is None) or same_bits_or_both_nan(a.grad, b)


@pytest.mark.parametrize("foreach", (None, True, False))
def test_foreach_and_argument_forms(foreach):
    tp, ap = _params(MIXES["f32"], 11)
    nt = torch.nn.utils.clip_grad_norm_(tp[0], 0.3, foreach=foreach)
    na = clip_grad_norm_(ap[0], 0.3, foreach=foreach)  # a single tensor
    np.testing.assert_allclose(na.item(), nt.item(), rtol=4 * EPS["float32"])
    assert clip_grad_norm_((a for a in ap[1:3]), 2, "inf", foreach=foreach).ndim == 0


def test_no_grads_and_empty_generator():
    with warnings.catch_warnings(record=True) as wt:
        warnings.simplefilter("always")
        nt = torch.nn.utils.clip_grad_norm_((p for p in []), 1.0)
    with warnings.catch_warnings(record=True) as wa:
        warnings.simplefilter("always")
        na = clip_grad_norm_((p for p in []), 1.0)
    assert [str(w.message) for w in wa] == [str(w.message) for w in wt]
    assert na.dtype is ampy.float32 and na.item() == nt.item() == 0.0
    p = ampy.zeros(3, requires_grad=True)
    assert clip_grad_norm_([p], 1.0).item() == 0.0 and p.grad is None


def test_same_total_for_any_thread_count():
    _, ap = _params(MIXES["mixed"], 5, none_at=())
    n0 = ampy.get_num_threads()
    totals = []
    try:
        for n in (1, 2, 3):
            ampy.set_num_threads(n)
            totals.append(ampy.nn.utils.get_total_norm([a.grad for a in ap]).item())
    finally:
        ampy.set_num_threads(n0)
    assert totals[0] == totals[1] == totals[2]


@pytest.mark.parametrize("mix", ("f32", "bf16", "f16", "f64"))
def test_every_cpu_level_gives_the_portable_bits(mix, cpu_path):
    """The norm and scale loops are compiled per ISA (csrc/clip_kernels.inc)
    with the same operation order: every level's total and scaled grads are
    the portable level's bits."""
    results = []
    for level in ("portable", cpu_path):
        ampy._C._set_cpu_level(level)
        _, ap = _params(MIXES[mix], 11, none_at=())
        totals = [clip_grad_norm_(ap, 0.3, norm_type=q).item() for q in (2.0, 1.0, 3.0)]
        results.append((totals, [a.grad.float().numpy() for a in ap]))
    ampy._C._set_cpu_level(cpu_path)
    assert results[0][0] == results[1][0]
    for x, y in zip(results[0][1], results[1][1]):
        assert same_bits_or_both_nan(x, y)


def test_non_contiguous_grads():
    tp, ap = _params(MIXES["f32"], 13)
    tp[0].grad = tp[0].grad.T.contiguous().T
    ap[0].grad = ampy.tensor(tp[0].grad.numpy().T.copy()).T
    assert not ap[0].grad.is_contiguous()
    nt = torch.nn.utils.clip_grad_norm_(tp, 0.1)
    na = clip_grad_norm_(ap, 0.1)
    np.testing.assert_allclose(na.item(), nt.item(), rtol=16 * EPS["float32"])
    np.testing.assert_allclose(ap[0].grad.numpy(), tp[0].grad.numpy(), rtol=32 * EPS["float32"])


def test_clip_grad_norm_deprecated_spelling():
    _, ap = _params(MIXES["f32"], 1)
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated"):
        ampy.nn.utils.clip_grad_norm(ap, 1.0)


@pytest.mark.parametrize("mix", ("f32", "mixed"))
def test_clip_grad_value(mix):
    tp, ap = _params(MIXES[mix], 17)
    torch.nn.utils.clip_grad_value_(tp, 0.7)
    clip_grad_value_(ap, 0.7)
    for t, a in zip(tp, ap):
        if t.grad is not None:
            assert same_bits_or_both_nan(a.grad.float(), t.grad.float())


def test_module_paths():
    from ampy.nn import utils
    from ampy.nn.utils.clip_grad import clip_grad_norm_ as deep
    assert utils.clip_grad_norm_ is deep is ampy.nn.utils.clip_grad_norm_


# ----------------------------------------------- parameters <-> one vector
def test_parameters_to_vector_and_back():
    torch.manual_seed(1)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    am = ampy.nn.Sequential(ampy.nn.Linear(3, 4), ampy.nn.Linear(4, 2))
    am.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    vt = torch.nn.utils.parameters_to_vector(tm.parameters())
    va = parameters_to_vector(am.parameters())
    np.testing.assert_array_equal(va.detach().numpy(), vt.detach().numpy())
    new = np.arange(va.numel(), dtype=np.float32)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tm.parameters())
    vector_to_parameters(ampy.tensor(new), am.parameters())
    for (kt, t), (ka, a) in zip(tm.named_parameters(), am.named_parameters()):
        assert kt == ka and tuple(a.shape) == tuple(t.shape)
        np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        vector_to_parameters([1.0], am.parameters())


# ----------------------------------------------------------------- containers
def _gpt(M):
    nn = M.nn
    blocks = nn.ModuleList([nn.ModuleDict({"attn": nn.Linear(4, 4), "mlp": nn.Linear(4, 4)})
                            for _ in range(2)])
    model = nn.Module()
    model.transformer = nn.ModuleDict(dict(wte=nn.Embedding(10, 4), h=blocks,
                                           ln_f=nn.LayerNorm(4)))
    return model


def test_module_dict_names_match_torch():
    tm, am = _gpt(torch), _gpt(ampy)
    assert list(am.state_dict()) == list(tm.state_dict())
    assert "transformer.h.0.attn.weight" in am.state_dict()
    assert [n for n, _ in am.named_parameters()] == [n for n, _ in tm.named_parameters()]
    am.load_state_dict({k: ampy.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    np.testing.assert_array_equal(am.transformer.h[1]["mlp"].weight.detach().numpy(),
                                  tm.transformer.h[1]["mlp"].weight.detach().numpy())


def test_module_dict_api():
    d = ampy.nn.ModuleDict({"b": ampy.nn.ReLU(), "a": ampy.nn.Tanh()})
    assert list(d) == list(d.keys()) == ["b", "a"] and len(d) == 2 and "a" in d
    d.update([("c", ampy.nn.GELU())])
    d["d"] = ampy.nn.SiLU()
    assert list(d.keys()) == ["b", "a", "c", "d"]
    assert [type(m).__name__ for m in d.values()] == ["ReLU", "Tanh", "GELU", "SiLU"]
    assert type(d.pop("a")).__name__ == "Tanh" and "a" not in d
    del d["b"]
    assert [k for k, _ in d.items()] == ["c", "d"]
    d.clear()
    assert len(d) == 0
    for bad, err in ((5, TypeError), ([1], TypeError), ([("a", 1, 2)], ValueError)):
        msgs = []
        for M in (torch, ampy):
            with pytest.raises(err) as e:
                M.nn.ModuleDict().update(bad)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


def _plist(M):
    m = M.nn.Module()
    m.params = M.nn.ParameterList([M.nn.Parameter(M.ones(2, 3)), M.zeros(4)])
    m.params.append(M.nn.Parameter(M.ones(1)))
    m.params.extend([M.ones(2)])
    m.pd = M.nn.ParameterDict({"z": M.nn.Parameter(M.ones(2)), "a": M.zeros(3)})
    m.pd.update(collections.OrderedDict([("y", M.ones(1)), ("b", M.ones(1))]))
    m.pd["c"] = M.nn.Parameter(M.ones(5))
    return m


def test_parameter_containers_match_torch():
    tm, am = _plist(torch), _plist(ampy)
    assert list(am.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in am.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert len(am.params) == len(tm.params) == 4
    assert all(isinstance(p, ampy.nn.Parameter) for p in am.params)
    assert tuple(am.params[-1].shape) == (2,) and tuple(am.params[0].shape) == (2, 3)
    assert len(am.params[1:3]) == 2
    assert list(am.pd.keys()) == list(tm.pd.keys())
    assert isinstance(am.pd["a"], ampy.nn.Parameter) and am.pd.get("zz") is None
    assert am.pd.pop("y").shape == (1,) and "y" not in am.pd
    assert list(am.pd.copy().keys()) == list(am.pd.keys())
    am.params[0] = ampy.ones(7)
    assert am.params[0].shape == (7,) and isinstance(am.params[0], ampy.nn.Parameter)
    with pytest.raises(IndexError):
        am.params[4]
    msgs = []
    for M, m in ((torch, tm), (ampy, am)):
        with pytest.raises(TypeError) as e:
            m.params.extend(M.ones(2))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        am.params(1)


def test_parameter_list_trains():
    """Parameters of a ParameterList get grads and optimizer steps."""
    pl = ampy.nn.ParameterList([ampy.ones(3), ampy.ones(2)])
    opt = ampy.optim.SGD(pl.parameters(), lr=0.5)
    (pl[0].sum() * 2 + pl[1].sum()).backward()
    opt.step()
    np.testing.assert_array_equal(pl[0].detach().numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(pl[1].detach().numpy(), [0.5, 0.5])
