"""nn.LSTM(proj_size=P) against torch 2.13: torch's weight_hr_l{k}[_reverse]
(P, hidden) parameters, the projected hidden state h_t = W_hr (o * tanh(c_t))
of size P (the next layer's input is P * directions wide, weight_hh is
(4 * hidden, P)), state_dicts both ways, and torch's constructor errors.
Tolerance as tests/test_rnn.py: float64 1e-12 (the same per-step products)."""
import numpy as np
import pytest
import torch

import ampy

F64_TOL = 1e-12


def _pair(**kw):
    torch.manual_seed(0)
    tm = torch.nn.LSTM(**kw).double()
    am = ampy.nn.LSTM(**kw, dtype=ampy.float64)
    am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return am, tm


def test_parameter_names_and_shapes_are_torchs():
    tm = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3)
    am = ampy.nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3)
    assert [(k, tuple(v.shape)) for k, v in am.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in tm.state_dict().items()]
    assert repr(am) == repr(tm)
    assert [len(w) for w in am.all_weights] == [len(w) for w in tm.all_weights]
    back = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3)
    back.load_state_dict({k: torch.tensor(v.numpy()) for k, v in am.state_dict().items()})


@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True},
                                {"bias": False, "batch_first": True}],
                         ids=["plain", "bi2", "nobias-batch_first"])
@pytest.mark.parametrize("hx", [False, True])
def test_forward_backward_float64(kw, hx):
    am, tm = _pair(input_size=4, hidden_size=6, proj_size=3, **kw)
    dirs, L = (2 if kw.get("bidirectional") else 1), kw.get("num_layers", 1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 4) if kw.get("batch_first") else (5, 3, 4))
    h0, c0 = rng.standard_normal((L * dirs, 3, 3)), rng.standard_normal((L * dirs, 3, 6))
    res = []
    for lib, m in ((ampy, am), (torch, tm)):
        X = lib.tensor(x).requires_grad_()
        H0, C0 = lib.tensor(h0).requires_grad_(), lib.tensor(c0).requires_grad_()
        y, (h, c) = m(X, (H0, C0)) if hx else m(X)
        ((y * y).sum() + 2 * h.sum() + (c * c).sum()).backward()
        grads = [X.grad] + ([H0.grad, C0.grad] if hx else []) + [p.grad for _, p in
                                                                  m.named_parameters()]
        res.append([t.detach().numpy() for t in [y, h, c] + grads])
    for a, t in zip(*res):
        assert a.shape == t.shape
        np.testing.assert_allclose(a, t, rtol=F64_TOL, atol=F64_TOL)


def test_wrong_state_sizes_raise_like_torch():
    am, tm = _pair(input_size=4, hidden_size=6, proj_size=3)
    for h, c in (((1, 2, 6), (1, 2, 6)), ((1, 2, 3), (1, 2, 3))):
        msgs = []
        for lib, m in ((torch, tm), (ampy, am)):
            with pytest.raises(RuntimeError) as e:
                m(lib.zeros((5, 2, 4), dtype=lib.float64),
                  (lib.zeros(h, dtype=lib.float64), lib.zeros(c, dtype=lib.float64)))
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


@pytest.mark.parametrize("proj", [-1, 6, 7])
def test_bad_proj_size_raises_like_torch(proj):
    with pytest.raises(ValueError) as te:
        torch.nn.LSTM(4, 6, proj_size=proj)
    with pytest.raises(ValueError) as ae:
        ampy.nn.LSTM(4, 6, proj_size=proj)
    assert str(ae.value) == str(te.value)


def test_gru_rejects_proj_size_like_torch():
    with pytest.raises(ValueError) as te:
        torch.nn.GRU(4, 6, proj_size=2)
    with pytest.raises(ValueError) as ae:
        ampy.nn.GRU(4, 6, proj_size=2)
    assert str(ae.value) == str(te.value)
