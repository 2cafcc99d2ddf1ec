"""nn.RNN / nn.LSTM / nn.GRU and their cells against torch 2.13 on the CPU.

The same weights (torch's state_dict loaded into ampy, and back), the same
inputs: outputs, final states and every parameter's gradient. float64 and
float32 tightly: the cells follow torch's order of operations, so what is
left is GEMM summation order and 1-3 ulp of sigmoid/tanh per step. bfloat16
and float16 autocast against a float64 reference run on the values the
autocast region really computes with (weights and inputs rounded to the half
type), with a bound from the half type's rounding of the states: each step
rounds the projections and the states once, which bounds the drift by a few
units of the half type's epsilon per layer.
"""
import numpy as np
import pytest
import torch

import ampy
from ampy import _C

from _helpers import assert_close_ulps, grads_cpu_gpu, requires_cuda, sample

F64_TOL = 1e-12
F32_TOL = 2e-5

MODULES = {"LSTM": (ampy.nn.LSTM, torch.nn.LSTM), "GRU": (ampy.nn.GRU, torch.nn.GRU),
           "RNN": (ampy.nn.RNN, torch.nn.RNN)}


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().double().numpy()
    return t.detach().float().numpy().astype(np.float64) if t.dtype in (
        ampy.float16, ampy.bfloat16) else t.detach().numpy().astype(np.float64)


def _pair(kind, dtype=torch.float32, **kw):
    """(ampy module, torch module) with torch's initial weights."""
    a_cls, t_cls = MODULES[kind]
    torch.manual_seed(0)
    tm = t_cls(**kw).to(dtype)
    am = a_cls(**kw).to(getattr(ampy, str(dtype).split(".")[1]))
    am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return am, tm


def _flat(out):
    if isinstance(out, tuple):
        return [t for o in out for t in _flat(o)]
    return [out]


def _loss(lib, outs, seed=1):
    """A sum with fixed random weights over every output (all get gradients)."""
    rng = np.random.default_rng(seed)
    total = 0
    for o in outs:
        w = rng.standard_normal(tuple(o.shape))
        total = total + (o.float() * lib.tensor(w.astype(np.float32))).sum()
    return total


def _compare(kind, dtype, tol, x_shape, hx=False, **kw):
    am, tm = _pair(kind, dtype, **kw)
    rng = np.random.default_rng(3)
    npdt = np.float64 if dtype is torch.float64 else np.float32
    xn = rng.standard_normal(x_shape).astype(npdt)
    tx, ax = torch.tensor(xn, requires_grad=True), ampy.tensor(xn).requires_grad_()
    targs, aargs = [tx], [ax]
    if hx:
        dirs = 2 if kw.get("bidirectional") else 1
        L = kw.get("num_layers", 1) * dirs
        batched = len(x_shape) == 3
        b = x_shape[0 if kw.get("batch_first") else 1] if batched else None
        shape = (L, b, kw["hidden_size"]) if batched else (L, kw["hidden_size"])
        states = [rng.standard_normal(shape).astype(npdt)
                  for _ in range(2 if kind == "LSTM" else 1)]
        ts = [torch.tensor(s, requires_grad=True) for s in states]
        as_ = [ampy.tensor(s).requires_grad_() for s in states]
        targs.append(tuple(ts) if kind == "LSTM" else ts[0])
        aargs.append(tuple(as_) if kind == "LSTM" else as_[0])
    to, ao = _flat(tm(*targs)), _flat(am(*aargs))
    assert len(to) == len(ao)
    for a, t in zip(ao, to):
        assert tuple(a.shape) == tuple(t.shape)
        assert str(a.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        np.testing.assert_allclose(_np(a), _np(t), rtol=tol, atol=tol)
    _loss(torch, to).backward()
    _loss(ampy, ao).backward()
    np.testing.assert_allclose(_np(ax.grad), _np(tx.grad), rtol=tol, atol=tol)
    if hx:
        for a, t in zip(_flat(aargs[1]), _flat(targs[1])):
            np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=tol, atol=tol)
    tp = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        np.testing.assert_allclose(_np(p.grad), _np(tp[name].grad), rtol=tol, atol=tol,
                                   err_msg=name)


COMBOS = [dict(num_layers=1), dict(num_layers=2), dict(num_layers=2, bidirectional=True),
          dict(num_layers=1, batch_first=True), dict(num_layers=2, bias=False),
          dict(num_layers=2, bidirectional=True, batch_first=True)]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("hx", [False, True])
def test_module_float64(kind, combo, hx):
    shape = (3, 5, 4) if combo.get("batch_first") else (5, 3, 4)
    _compare(kind, torch.float64, F64_TOL, shape, hx=hx, input_size=4, hidden_size=6, **combo)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("combo", COMBOS[:3],
                         ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_module_float32(kind, combo, cpu_path):
    _compare(kind, torch.float32, F32_TOL, (7, 4, 5), hx=True, input_size=5, hidden_size=8,
             **combo)


def test_rnn_relu_and_unbatched():
    _compare("RNN", torch.float64, F64_TOL, (5, 4), hx=False, input_size=4, hidden_size=3,
             nonlinearity="relu", num_layers=2)
    for kind in MODULES:
        _compare(kind, torch.float64, F64_TOL, (5, 4), hx=True, input_size=4, hidden_size=3,
                 num_layers=2, bidirectional=True)


def test_hidden_512_float32():
    """The benchmark's size: a long-enough sequence that drift would show."""
    _compare("LSTM", torch.float32, 1e-4, (12, 4, 64), hx=False, input_size=64,
             hidden_size=512)


# ------------------------------------------------------------------- cells
CELLS = {"LSTMCell": (ampy.nn.LSTMCell, torch.nn.LSTMCell, 4),
         "GRUCell": (ampy.nn.GRUCell, torch.nn.GRUCell, 3),
         "RNNCell": (ampy.nn.RNNCell, torch.nn.RNNCell, 1)}


@pytest.mark.parametrize("kind", list(CELLS))
@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64_TOL), (torch.float32, F32_TOL)])
@pytest.mark.parametrize("batched", [True, False])
def test_cells(kind, dtype, tol, batched):
    a_cls, t_cls, _ = CELLS[kind]
    torch.manual_seed(0)
    tm = t_cls(4, 5).to(dtype)
    am = a_cls(4, 5).to(getattr(ampy, str(dtype).split(".")[1]))
    am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(0)
    npdt = np.float64 if dtype is torch.float64 else np.float32
    shp = (3, 4) if batched else (4,)
    hshp = (3, 5) if batched else (5,)
    xn, hn, cn = (rng.standard_normal(s).astype(npdt) for s in (shp, hshp, hshp))
    tx, th, tc = (torch.tensor(v, requires_grad=True) for v in (xn, hn, cn))
    ax, ah, ac = (ampy.tensor(v).requires_grad_() for v in (xn, hn, cn))
    if kind == "LSTMCell":
        to, ao = _flat(tm(tx, (th, tc))), _flat(am(ax, (ah, ac)))
    else:
        to, ao = [tm(tx, th)], [am(ax, ah)]
    for a, t in zip(ao, to):
        assert tuple(a.shape) == tuple(t.shape)
        np.testing.assert_allclose(_np(a), _np(t), rtol=tol, atol=tol)
    _loss(torch, to).backward()
    _loss(ampy, ao).backward()
    for a, t in [(ax, tx), (ah, th)] + ([(ac, tc)] if kind == "LSTMCell" else []):
        np.testing.assert_allclose(_np(a.grad), _np(t.grad), rtol=tol, atol=tol)
    tp = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        np.testing.assert_allclose(_np(p.grad), _np(tp[name].grad), rtol=tol, atol=tol)
    assert np.array_equal(ax.detach().numpy(), xn)  # inputs unchanged


def test_cells_without_state():
    for kind, (a_cls, t_cls, _) in CELLS.items():
        torch.manual_seed(0)
        tm, am = t_cls(4, 5, bias=False).double(), a_cls(4, 5, bias=False).double()
        am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        xn = np.random.default_rng(0).standard_normal((2, 4))
        for a, t in zip(_flat(am(ampy.tensor(xn))), _flat(tm(torch.tensor(xn)))):
            np.testing.assert_allclose(_np(a), _np(t), rtol=F64_TOL, atol=F64_TOL)


# ------------------------------------------------------- state_dict, names
@pytest.mark.parametrize("kind", list(MODULES))
def test_state_dict_both_ways(kind):
    kw = dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    a_cls, t_cls = MODULES[kind]
    am, tm = a_cls(**kw), t_cls(**kw)
    asd, tsd = am.state_dict(), tm.state_dict()
    assert list(asd) == list(tsd)
    for k in tsd:
        assert tuple(asd[k].shape) == tuple(tsd[k].shape), k
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in asd.items()})
    for k, v in tm.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), asd[k].numpy())
    bound = 1 / np.sqrt(4)  # U(-1/sqrt(H), 1/sqrt(H)) for every parameter
    allv = np.concatenate([v.numpy().ravel() for v in asd.values()])
    assert np.abs(allv).max() <= bound
    # >= 184 draws: the extremes lie within 10% of the bounds (miss chance < 2e-4)
    assert allv.max() > 0.9 * bound and allv.min() < -0.9 * bound
    assert abs(allv.mean()) < 0.05


def test_repr_like_torch():
    for kw in (dict(num_layers=2, batch_first=True), dict(bias=False, bidirectional=True)):
        assert repr(ampy.nn.LSTM(3, 4, **kw)) == repr(torch.nn.LSTM(3, 4, **kw))


# ------------------------------------------------------------- dropout
def test_dropout_between_layers_only():
    kw = dict(input_size=4, hidden_size=6, num_layers=2, dropout=0.5)
    am, tm = _pair("LSTM", torch.float64, **kw)
    xn = np.random.default_rng(0).standard_normal((5, 3, 4))
    am.eval()
    tm.eval()
    np.testing.assert_allclose(_np(am(ampy.tensor(xn))[0]), _np(tm(torch.tensor(xn))[0]),
                               rtol=F64_TOL, atol=F64_TOL)
    am.train()
    outs = [_np(am(ampy.tensor(xn))[0]) for _ in range(2)]
    assert not np.allclose(outs[0], outs[1])  # dropout draws anew each call
    # one layer: dropout (after all but the last layer) changes nothing
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        one = ampy.nn.LSTM(4, 6, num_layers=1, dropout=0.5)
    one.train()
    x32 = ampy.tensor(xn.astype(np.float32))
    np.testing.assert_array_equal(_np(one(x32)[0]), _np(one(x32)[0]))


def test_dropout_rate_between_layers():
    """Layer 2 sees layer 1's output with about p of it zeroed: with
    W_ih of layer 2 the identity-like probe, count the zeroed inputs."""
    lstm = ampy.nn.LSTM(2, 400, num_layers=2, dropout=0.3)
    seen = []
    orig = ampy.nn.functional.dropout

    def spy(x, p, training=True, inplace=False):
        y = orig(x, p, training, inplace)
        seen.append((x.detach().numpy(), y.detach().numpy(), p))
        return y

    import ampy.nn.modules.rnn as mod
    mod.F.dropout, saved = spy, mod.F.dropout
    try:
        lstm(ampy.tensor(np.ones((3, 50, 2), np.float32)))
    finally:
        mod.F.dropout = saved
    assert len(seen) == 1
    x, y, p = seen[0]
    zeroed = np.mean((y == 0) & (x != 0))
    assert abs(zeroed - 0.3) < 0.01  # 60,000 draws: 5 sigma is 0.0093
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / 0.7, rtol=1e-6)


# -------------------------------------------------------------- autocast
def _half_reference(kind, dtype, **kw):
    """float64 torch on the half-rounded weights and input: what the region
    computes with, without the per-step rounding."""
    am, tm = _pair(kind, torch.float32, **kw)
    xn = np.random.default_rng(3).standard_normal((6, 3, kw["input_size"])).astype(np.float32)
    ref = MODULES[kind][1](**kw).double()
    ref.load_state_dict({k: v.to(dtype).double() for k, v in tm.state_dict().items()})
    return am, tm, xn, _flat(ref(torch.tensor(xn).to(dtype).double()))


@pytest.mark.parametrize("kind", list(MODULES))
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_autocast_dtypes_and_values(kind, half):
    kw = dict(input_size=8, hidden_size=16, num_layers=2)
    tdt, adt = getattr(torch, half), getattr(ampy, half)
    am, tm, xn, ref = _half_reference(kind, tdt, **kw)
    with ampy.autocast("cpu", dtype=adt):
        ao = _flat(am(ampy.tensor(xn)))
    try:
        with torch.autocast("cpu", dtype=tdt):
            tdts = [t.dtype for t in _flat(tm(torch.tensor(xn)))]
    except RuntimeError:  # oneDNN has no float16 LSTM on CPUs without AVX512-FP16
        assert kind == "LSTM" and half == "float16"
        tdts = [tdt] * 3  # the dtypes it gives where it runs (as its bfloat16 LSTM)
    assert [str(a.dtype).split(".")[1] for a in ao] == [str(t).split(".")[1] for t in tdts]
    # bound: half epsilon (bf16 2^-8, fp16 2^-11) per rounding, a few roundings per
    # step and layer, states bounded by 1 (|h| <= 1, |c| <= T)
    eps = 2.0 ** -8 if half == "bfloat16" else 2.0 ** -11
    for a, r in zip(ao, ref):
        err = np.abs(_np(a) - _np(r)).max()
        assert err < 24 * eps, err


def test_autocast_lstm_close_to_torch_bfloat16():
    kw = dict(input_size=8, hidden_size=16, num_layers=2)
    am, tm = _pair("LSTM", torch.float32, **kw)
    xn = np.random.default_rng(3).standard_normal((6, 3, 8)).astype(np.float32)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        ao = _flat(am(ampy.tensor(xn)))
        _loss(ampy, ao).backward()
    tx = torch.tensor(xn)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        to = _flat(tm(tx))
        _loss(torch, to).backward()
    for a, t in zip(ao, to):
        assert np.abs(_np(a) - _np(t)).max() < 24 * 2.0 ** -8
    tp = dict(tm.named_parameters())
    for name, p in am.named_parameters():
        assert p.grad.dtype is ampy.float32
        g, tg = _np(p.grad), _np(tp[name].grad)
        assert np.abs(g - tg).max() < 0.05 * np.abs(tg).max() + 1e-3, name


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_autocast_cells_dtypes(half):
    tdt, adt = getattr(torch, half), getattr(ampy, half)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for kind, (a_cls, t_cls, _) in CELLS.items():
        torch.manual_seed(0)
        tm, am = t_cls(4, 5), a_cls(4, 5)
        am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
        with torch.autocast("cpu", dtype=tdt):
            to = _flat(tm(torch.tensor(x)))
        with ampy.autocast("cpu", dtype=adt):
            ao = _flat(am(ampy.tensor(x)))
        assert [str(a.dtype).split(".")[1] for a in ao] == \
            [str(t.dtype).split(".")[1] for t in to], kind
        for a, t in zip(ao, to):
            assert np.abs(_np(a) - _np(t)).max() < 4 * 2.0 ** -8


# ---------------------------------------------------------- bad inputs
@pytest.mark.parametrize("kind", list(MODULES))
def test_bad_inputs_raise_like_torch(kind):
    a_cls, t_cls = MODULES[kind]
    am, tm = a_cls(4, 5, num_layers=2), t_cls(4, 5, num_layers=2)
    xn = np.zeros((3, 2, 4), np.float32)
    cases = [
        (np.zeros((3, 2, 7), np.float32), None, RuntimeError, "input_size. Expected 4, got 7"),
        (np.zeros((3, 2, 2, 4), np.float32), None, ValueError, "Expected input to be 2D or 3D"),
        (xn, np.zeros((1, 2, 5), np.float32), RuntimeError,
         r"Expected hidden(\[0\])? size \(2, 2, 5\)"),
        (xn, np.zeros((2, 3, 5), np.float32), RuntimeError,
         r"Expected hidden(\[0\])? size \(2, 2, 5\)"),
        (xn, np.zeros((2, 5), np.float32), RuntimeError, "should also be 3-D"),
    ]
    for x, h, exc, match in cases:
        targs, aargs = [torch.tensor(x)], [ampy.tensor(x)]
        if h is not None:
            if kind == "LSTM":
                targs.append((torch.tensor(h), torch.tensor(h)))
                aargs.append((ampy.tensor(h), ampy.tensor(h)))
            else:
                targs.append(torch.tensor(h))
                aargs.append(ampy.tensor(h))
        with pytest.raises(exc, match=match):
            tm(*targs)
        with pytest.raises(exc, match=match):
            am(*aargs)
        assert np.array_equal(aargs[0].numpy(), x)


def test_bad_constructor_arguments():
    for kw, exc, match in [(dict(dropout=1.5), ValueError, "dropout should be a number"),
                           (dict(bias=1), TypeError, "bias should be of type bool"),
                           (dict(num_layers=0), ValueError, "num_layers must be greater")]:
        with pytest.raises(exc, match=match):
            torch.nn.LSTM(3, 4, **kw)
        with pytest.raises(exc, match=match):
            ampy.nn.LSTM(3, 4, **kw)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        ampy.nn.RNN(3, 4, nonlinearity="gelu")


def test_packed_sequence_is_a_clear_type_error():
    packed = torch.nn.utils.rnn.pack_sequence([torch.zeros(3, 4), torch.zeros(2, 4)])
    with pytest.raises(TypeError, match="PackedSequence"):
        ampy.nn.LSTM(4, 5)(packed)


def test_cell_bad_inputs():
    cell = ampy.nn.LSTMCell(4, 5)
    with pytest.raises(RuntimeError, match="input_size"):
        cell(ampy.zeros(2, 3))
    with pytest.raises(ValueError, match="1D or 2D"):
        cell(ampy.zeros(2, 3, 4))
    with pytest.raises(RuntimeError, match="hidden_size"):
        ampy.nn.GRUCell(4, 5)(ampy.zeros(2, 4), ampy.zeros(2, 6))


def test_kernel_rejects_bad_arguments():
    g = ampy.zeros(2, 8)
    with pytest.raises(ValueError, match="unknown mode"):
        _C.rnn_cell_fwd(9, g, g, None, None, False)
    with pytest.raises(ValueError, match="shape"):
        _C.rnn_cell_fwd(0, g, ampy.zeros(2, 4), None, ampy.zeros(2, 2), False)
    with pytest.raises(TypeError, match="dtype"):
        _C.rnn_cell_fwd(0, g, g, None, ampy.zeros(2, 2, dtype=ampy.float64), False)
    with pytest.raises(ValueError, match="required"):
        _C.rnn_cell_fwd(0, g, g, None, None, False)
    with pytest.raises(TypeError):
        _C.rnn_cell_fwd(0, ampy.zeros(2, 8, dtype=ampy.int64), ampy.zeros(2, 8, dtype=ampy.int64),
                        None, ampy.zeros(2, 2, dtype=ampy.int64), False)


def test_create_graph_composite_matches_torch():
    """The second derivative through the cells (the composite rules)."""
    for kind in MODULES:
        am, tm = _pair(kind, torch.float64, input_size=3, hidden_size=4)
        xn = np.random.default_rng(0).standard_normal((3, 2, 3))
        tx, ax = torch.tensor(xn, requires_grad=True), ampy.tensor(xn).requires_grad_()
        (tg,) = torch.autograd.grad(_flat(tm(tx))[0].pow(2).sum(), tx, create_graph=True)
        (ag,) = ampy.autograd.grad(_flat(am(ax))[0].pow(2).sum(), ax, create_graph=True)
        np.testing.assert_allclose(_np(ag), _np(tg), rtol=1e-10, atol=1e-12)
        (tg2,) = torch.autograd.grad(tg.sum(), tx)
        (ag2,) = ampy.autograd.grad(ag.sum(), ax)
        np.testing.assert_allclose(_np(ag2), _np(tg2), rtol=1e-9, atol=1e-11)


def test_shared_cell_math_in_c(tmp_path):
    """tests/c/test_rnn_math.c: rnn_math.h (what cuda/rnn.cu runs too) against
    long double definitions and finite differences."""
    import os
    import shutil
    import subprocess
    import sysconfig
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cc = shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]) or shutil.which("gcc")
    assert cc, "no C compiler (the extension needs one too)"
    exe = str(tmp_path / "test_rnn_math")
    r = subprocess.run([cc, "-std=c11", "-O2", "-fno-math-errno", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Werror",
                        "-I" + os.path.join(root, "csrc", "include"),
                        os.path.join(root, "tests", "c", "test_rnn_math.c"),
                        os.path.join(root, "csrc", "status.c"), "-o", exe, "-lm", "-lpthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:]


@requires_cuda
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float64, ampy.bfloat16])
@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_cuda_cells_match_the_cpu(dt, cell):
    """cuda/rnn.cu against csrc/rnn.c: the same formulas (rnn_math.h); the
    CPU's float forward takes vmath's sigmoid/tanh (1-3 ulp), the device
    libm's, so a few ulp apart."""
    G = {"lstm": 4, "gru": 3}.get(cell, 1)
    x, h, c = (sample(s, dt, k, specials=False) for k, s in enumerate([(5, 3), (5, 4), (5, 4)]))
    wi, wh = sample((G * 4, 3), dt, 7, specials=False), sample((G * 4, 4), dt, 8, specials=False)
    fn = getattr(ampy, cell + "_cell")
    if cell == "lstm":
        def run(x, h, c, wi, wh):
            hy, cy = fn(x, (h, c), wi, wh)
            return hy + cy
        ins = (x, h, c, wi, wh)
    else:
        def run(x, h, wi, wh):
            return fn(x, h, wi, wh)
        ins = (x, h, wi, wh)
    (oc, gc), (og, gg) = grads_cpu_gpu(run, *ins)
    assert_close_ulps(og, oc, dt, ulps=16)
    for a, b in zip(gg, gc):
        assert_close_ulps(a, b, dt, ulps=64)


def test_torch_module_attributes():
    """What training scripts touch: flatten_parameters() (a no-op on the CPU),
    _flat_weights and all_weights in torch's order and shapes."""
    kw = dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True, bias=False)
    a, t = ampy.nn.GRU(**kw), torch.nn.GRU(**kw)
    a.flatten_parameters()
    assert a._flat_weights_names == t._flat_weights_names
    assert [tuple(p.shape) for p in a._flat_weights] == [tuple(p.shape) for p in t._flat_weights]
    assert [[tuple(p.shape) for p in ws] for ws in a.all_weights] == \
        [[tuple(p.shape) for p in ws] for ws in t.all_weights]


@pytest.mark.parametrize("kind", list(MODULES))
@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_half_modules(kind, half, cpu_path):
    """A module converted to a half type (no autocast): outputs in that type,
    grads of the half parameters, against float64 on the same half values.
    Bound: each step rounds its projections and states once to the half type
    (eps 2^-8 / 2^-11); |h| <= 1, so a few eps per step and layer, summed
    over 6 steps stay under 32 eps; gradients relative to their largest."""
    kw = dict(input_size=5, hidden_size=8, num_layers=2)
    tdt, adt = getattr(torch, half), getattr(ampy, half)
    torch.manual_seed(0)
    tm = MODULES[kind][1](**kw).to(tdt)
    am = MODULES[kind][0](**kw).to(adt)
    am.load_state_dict({k: ampy.tensor(v.float().numpy()).to(adt)
                        for k, v in tm.state_dict().items()})
    ref = MODULES[kind][1](**kw).double()
    ref.load_state_dict({k: v.double() for k, v in tm.state_dict().items()})
    xn = np.random.default_rng(2).standard_normal((6, 3, 5)).astype(np.float32)
    ax = ampy.tensor(xn).to(adt).requires_grad_()
    rx = torch.tensor(xn).to(tdt).double().requires_grad_()
    ao, ro = _flat(am(ax)), _flat(ref(rx))
    eps = 2.0 ** -8 if half == "bfloat16" else 2.0 ** -11
    for a, r in zip(ao, ro):
        assert a.dtype is adt
        assert np.abs(_np(a) - _np(r)).max() < 32 * eps
    _loss(ampy, ao).backward()
    _loss(torch, ro).backward()
    rp = dict(ref.named_parameters())
    for name, p in am.named_parameters():
        assert p.grad.dtype is adt
        g, want = _np(p.grad), _np(rp[name].grad)
        assert np.abs(g - want).max() < 64 * eps * (np.abs(want).max() + 1e-3), name
    assert np.abs(_np(ax.grad) - _np(rx.grad)).max() < 64 * eps * np.abs(_np(rx.grad)).max()


@pytest.mark.parametrize("kind", list(MODULES))
def test_strided_inputs_and_states(kind):
    """Non-contiguous input (a step slice of a transposed array) and initial
    states (a transposed view): the same numbers as torch, inputs unchanged."""
    am, tm = _pair(kind, torch.float64, input_size=4, hidden_size=5, num_layers=2)
    rng = np.random.default_rng(5)
    big = rng.standard_normal((3, 12, 4))  # (B, 2T, I): time-major view with step 2
    hb = rng.standard_normal((3, 2, 5))     # (B, L, H): states as a transposed view
    ax, tx = ampy.tensor(big).transpose(0, 1)[::2], torch.tensor(big).transpose(0, 1)[::2]
    ah, th = ampy.tensor(hb).transpose(0, 1), torch.tensor(hb).transpose(0, 1)
    assert not ax.is_contiguous() and not ah.is_contiguous()
    a_state = (ah, ah) if kind == "LSTM" else ah
    t_state = (th, th) if kind == "LSTM" else th
    for a, t in zip(_flat(am(ax, a_state)), _flat(tm(tx, t_state))):
        np.testing.assert_allclose(_np(a), _np(t), rtol=F64_TOL, atol=F64_TOL)
    assert np.array_equal(ax.numpy(), big.transpose(1, 0, 2)[::2])
