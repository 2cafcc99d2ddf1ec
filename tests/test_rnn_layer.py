"""The whole-layer recurrent op (rnn_layer: csrc/rnn_layer.c through
ampy._C.rnn_layer_fwd / rnn_layer_bwd) that nn.LSTM / GRU / RNN run per layer
and direction on the CPU, against torch 2.13; and torch's dtype errors of the
recurrent modules and cells.

Tolerances (as tests/test_rnn.py): float64 1e-12, float32 2e-5 absolute and
relative. The layer sums the weight gradient over all T*B rows in one GEMM
and the hidden product in the GEMM's blocked order, not torch's per-step
order; the float64 bound is ~T*B*H * 2^-53 of the O(1) terms, the float32 one
the same in 2^-24 with the recurrence's O(T) growth.
"""
import numpy as np
import pytest
import torch

import ampy
from ampy.nn import _ops_rnn as R

F64_TOL = 1e-12
F32_TOL = 2e-5
KINDS = {"LSTM": (ampy.nn.LSTM, torch.nn.LSTM), "GRU": (ampy.nn.GRU, torch.nn.GRU),
         "RNN": (ampy.nn.RNN, torch.nn.RNN)}


def _np(t):
    t = t.detach()
    return (t.float() if str(t.dtype).endswith("bfloat16") else t).numpy()


def _pair(kind, dtype, **kw):
    am_cls, tm_cls = KINDS[kind]
    torch.manual_seed(0)
    tm = tm_cls(**kw).to(dtype)
    am = am_cls(**kw, dtype=getattr(ampy, str(dtype).split(".")[1]))
    am.load_state_dict({k: ampy.tensor(v.detach().float().numpy()).to(am.weight_ih_l0.dtype)
                        for k, v in tm.state_dict().items()})
    return am, tm


def _run(lib, m, x, states, use):
    """Forward, a loss over the chosen outputs, backward: every gradient."""
    X = lib.tensor(x).requires_grad_()
    sts = [lib.tensor(s).requires_grad_() for s in states]
    if not sts:
        y, s = m(X)
    else:
        y, s = m(X, tuple(sts) if len(sts) == 2 else sts[0])
    hn, cn = (s if isinstance(s, tuple) else (s, None))
    parts = {"y": (y * y).sum(), "h": (1.5 * hn).sum(), "c": 0.0 if cn is None else (cn * cn).sum()}
    sum(parts[k] for k in use).backward()
    outs = [y, hn] + ([] if cn is None else [cn])
    grads = [X.grad] + [t.grad for t in sts] + [p.grad for _, p in m.named_parameters()]
    return outs, grads


def _compare(kind, dtype, tol, T=6, B=3, I=4, H=5, states=True, use=("y", "h", "c"), **kw):
    am, tm = _pair(kind, dtype, input_size=I, hidden_size=H, **kw)
    dirs = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    rng = np.random.default_rng(1)
    shape = (B, T, I) if kw.get("batch_first") else (T, B, I)
    x = rng.standard_normal(shape).astype(str(dtype).split(".")[1])
    sts = []
    if states:
        n = 2 if kind == "LSTM" else 1
        sts = [rng.standard_normal((L * dirs, B, H)).astype(x.dtype) for _ in range(n)]
    a_out, a_g = _run(ampy, am, x, sts, use)
    t_out, t_g = _run(torch, tm, x, sts, use)
    for a, t in zip(a_out, t_out):
        np.testing.assert_allclose(_np(a), _np(t), rtol=tol, atol=tol)
    assert len(a_g) == len(t_g)
    for a, t in zip(a_g, t_g):
        assert (a is None) == (t is None)
        if a is not None:
            np.testing.assert_allclose(_np(a), _np(t), rtol=tol, atol=tol)


def _seen_layer(fn):
    """fn() runs under a spy on the rnn_layer op: how often it was dispatched."""
    calls = []
    fwd = R._C.rnn_layer_fwd

    def spy(*a):
        calls.append(a[0])
        return fwd(*a)

    R._C.rnn_layer_fwd = spy
    try:
        fn()
    finally:
        R._C.rnn_layer_fwd = fwd
    return calls


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("kw", [{}, {"bidirectional": True, "num_layers": 2},
                                {"bias": False}, {"batch_first": True}],
                         ids=["plain", "bi2", "nobias", "batch_first"])
def test_layer_float64(kind, kw):
    _compare(kind, torch.float64, F64_TOL, **kw)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("use", [("y",), ("h",), ("c",), ("h", "c")], ids="+".join)
def test_layer_partial_outputs(kind, use):
    """Gradients flowing only from y, only h_n, only c_n: the others are None."""
    if kind != "LSTM" and use == ("c",):
        pytest.skip("only the LSTM has a cell state")
    _compare(kind, torch.float64, F64_TOL, use=use, bidirectional=True)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_float32_hidden_64(kind, threads, cpu_path):
    old = ampy.get_num_threads()
    ampy.set_num_threads(threads)
    try:
        _compare(kind, torch.float32, F32_TOL, T=9, B=8, I=16, H=64, num_layers=2)
    finally:
        ampy.set_num_threads(old)


@pytest.mark.parametrize("kind", list(KINDS))
def test_modules_run_one_layer_op_per_layer_and_direction(kind):
    am, _ = _pair(kind, torch.float32, input_size=4, hidden_size=5, num_layers=2,
                  bidirectional=True)
    x = ampy.randn(3, 2, 4)
    assert len(_seen_layer(lambda: am(x))) == 4


def test_bfloat16_autocast_lstm_layer_is_bfloat16():
    """Under CPU autocast the LSTM layer runs in bfloat16 (states too, as torch's
    mkldnn LSTM); the weights' gradients come back in float32."""
    am, tm = _pair("LSTM", torch.float32, input_size=8, hidden_size=16)
    x = np.random.default_rng(2).standard_normal((5, 3, 8)).astype(np.float32)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        y, (h, c) = am(ampy.tensor(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty, (th, tc) = tm(torch.tensor(x))
    assert (y.dtype, h.dtype, c.dtype) == (ampy.bfloat16,) * 3
    assert (ty.dtype, th.dtype, tc.dtype) == (torch.bfloat16,) * 3
    np.testing.assert_allclose(_np(y), _np(ty), atol=3e-2)  # a few bfloat16 ulps of O(1)
    y.float().sum().backward()
    assert am.weight_hh_l0.grad.dtype is ampy.float32


def test_zero_length_sequence():
    am, tm = _pair("LSTM", torch.float64, input_size=3, hidden_size=4)
    y, (h, c) = am(ampy.zeros((0, 2, 3), dtype=ampy.float64))
    assert tuple(y.shape) == (0, 2, 4) and tuple(h.shape) == (1, 2, 4)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dt", ["float64", "bfloat16"])
def test_input_dtype_mismatch_is_torchs_value_error(kind, dt):
    am, tm = _pair(kind, torch.float32, input_size=4, hidden_size=3)
    x = np.random.default_rng(0).standard_normal((5, 2, 4))
    with pytest.raises(ValueError) as te:
        tm(torch.tensor(x).to(getattr(torch, dt)))
    ax = ampy.tensor(x).to(getattr(ampy, dt))
    before = ax.float().numpy().copy()
    with pytest.raises(ValueError) as ae:
        am(ax)
    assert str(ae.value) == str(te.value).replace("torch.", "ampy.")
    np.testing.assert_array_equal(ax.float().numpy(), before)


@pytest.mark.parametrize("cell", ["LSTMCell", "GRUCell", "RNNCell"])
@pytest.mark.parametrize("where", ["input", "hx"])
def test_cell_dtype_mismatch_is_torchs_runtime_error(cell, where):
    tm, am = getattr(torch.nn, cell)(4, 3), getattr(ampy.nn, cell)(4, 3)

    def args(lib):
        x = lib.ones((2, 4), dtype=lib.float64 if where == "input" else lib.float32)
        h = lib.zeros((2, 3), dtype=lib.float64 if where == "hx" else lib.float32)
        return x, ((h, lib.zeros((2, 3))) if cell == "LSTMCell" else h)

    with pytest.raises(RuntimeError) as te:
        tm(*args(torch))
    with pytest.raises(RuntimeError) as ae:
        am(*args(ampy))
    assert str(ae.value) == str(te.value)


@pytest.mark.parametrize("kind", list(KINDS))
def test_autocast_skips_the_dtype_check(kind):
    """A float32 input into bfloat16 weights runs under autocast, as in torch."""
    am, tm = _pair(kind, torch.bfloat16, input_size=4, hidden_size=3)
    x = np.random.default_rng(0).standard_normal((5, 2, 4)).astype(np.float32)
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        y, _ = am(ampy.tensor(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty, _ = tm(torch.tensor(x))
    assert str(y.dtype).split(".")[1] == str(ty.dtype).split(".")[1]


def test_kernel_rejects_bad_arguments():
    gx = ampy.zeros((3, 2, 8))
    w, h = ampy.zeros((8, 2)), ampy.zeros((2, 2))
    with pytest.raises(ValueError, match="gx must be"):
        R._C.rnn_layer_fwd(R.LSTM, False, ampy.zeros((3, 2, 7)), w, None, h, h, False)
    with pytest.raises(ValueError, match="'w_hh'"):
        R._C.rnn_layer_fwd(R.LSTM, False, gx, ampy.zeros((8, 3)), None, h, h, False)
    with pytest.raises(TypeError, match="'h0'"):
        R._C.rnn_layer_fwd(R.LSTM, False, gx, w, None, ampy.zeros((2, 2), dtype=ampy.float64),
                           h, False)
    with pytest.raises(TypeError, match="'c0'"):
        R._C.rnn_layer_fwd(R.LSTM, False, gx, w, None, h, None, False)
    with pytest.raises(ValueError, match="unknown mode"):
        R._C.rnn_layer_fwd(7, False, gx, w, None, h, h, False)
    y, cs, ws = R._C.rnn_layer_fwd(R.LSTM, False, gx, w, None, h, h, True)
    with pytest.raises(ValueError, match="'ws'"):
        R._C.rnn_layer_bwd(R.LSTM, False, ampy.zeros((3, 2, 9)), y, cs, h, h, w, None, None,
                           None, True, True, True, True)


@pytest.mark.parametrize("has_biases,bidirectional,batch_first",
                         [(True, False, False), (False, True, True)])
def test_functional_lstm_like_torch(has_biases, bidirectional, batch_first):
    """ampy.lstm: torch.lstm's signature and results (float64)."""
    torch.manual_seed(0)
    tm = torch.nn.LSTM(3, 4, num_layers=2, bias=has_biases, bidirectional=bidirectional,
                       batch_first=batch_first).double()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3) if batch_first else (5, 2, 3))  # T = 5, B = 2
    L = 4 if bidirectional else 2
    h0, c0 = rng.standard_normal((L, 2, 4)), rng.standard_normal((L, 2, 4))
    args = (has_biases, 2, 0.0, False, bidirectional, batch_first)
    t = torch.lstm(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)),
                   list(tm.parameters()), *args)
    a = ampy.lstm(ampy.tensor(x), (ampy.tensor(h0), ampy.tensor(c0)),
                  [ampy.tensor(p.detach().numpy()) for p in tm.parameters()], *args)
    for u, v in zip(a, t):
        np.testing.assert_allclose(u.numpy(), v.detach().numpy(), rtol=F64_TOL, atol=F64_TOL)
