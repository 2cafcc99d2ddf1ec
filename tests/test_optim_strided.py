"""ampy's optimizers on non-contiguous parameters, side by side with torch 2.13
(CPU): transposed, sliced and stepped views are stepped in place (same
tensor, version bumped, the rest of the base untouched), with state keyed by
the parameter and shaped like it; float16/bfloat16 with and without master
weights; GradScaler with a forced inf step; state_dict round trips; an
expanded (self-overlapping) parameter raises torch's message before anything
changes: strided inputs, for ampy.optim.
"""
import warnings

import numpy as np
import pytest
import torch

import ampy
from ampy import optim
from ampy.amp import GradScaler

pytestmark = [pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")]

OPTS = {
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    "adam": ("Adam", dict(lr=0.01, weight_decay=0.01)),
    "adam_amsgrad": ("Adam", dict(lr=0.01, amsgrad=True)),
    "adamw": ("AdamW", dict(lr=0.01)),
    "adamw_amsgrad": ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
}

# layout name -> (base shape, view of the base)
LAYOUTS = {
    "transposed": ((3, 5), lambda b: b.T),
    "stepped": ((6, 8), lambda b: b[::2, 1::3]),
    "sliced": ((4, 7), lambda b: b[:, 2:5]),
    "3d_permuted": ((2, 3, 4), lambda b: b.permute(2, 0, 1)),
}

STEPS = 5


def make_opt(lib, name, params, **extra):
    cls, kw = OPTS[name]
    return getattr(lib.optim, cls)(params, **kw, **extra)


def base_array(shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def grads_for(shape, n=STEPS, seed=1):
    rs = np.random.RandomState(seed)
    return [rs.randn(*shape).astype(np.float32) for _ in range(n)]


def A(t):
    return np.array(t.detach().float().numpy() if isinstance(t, torch.Tensor)
                    else t.detach().numpy(), dtype=np.float32)


def close(a, b, rtol=1e-6):
    np.testing.assert_allclose(A(a), A(b), rtol=rtol, atol=1e-7)


def strided_pair(layout, dtype_a=ampy.float32, dtype_t=torch.float32):
    """(ampy base, ampy param, torch base, torch param) on the same values."""
    shape, view = LAYOUTS[layout]
    w = base_array(shape)
    ab = ampy.tensor(w).to(dtype_a)
    tb = torch.tensor(w).to(dtype_t)
    ap, tp = ampy.nn.Parameter(view(ab)), torch.nn.Parameter(view(tb))
    assert not ap.is_contiguous() and not tp.is_contiguous()
    return ab, ap, tb, tp


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(OPTS))
def test_float32_strided_matches_torch(name, layout, cpu_path):
    ab, ap, tb, tp = strided_pair(layout)
    before = A(ab)
    opt_a, opt_t = make_opt(ampy, name, [ap]), make_opt(torch, name, [tp])
    for g in grads_for(tuple(tp.shape)):
        ap.grad, tp.grad = ampy.tensor(g), torch.tensor(g)
        v, obj = ap._version, ap
        opt_a.step()
        opt_t.step()
        assert ap is obj and ap._version > v  # stepped in place
    close(ap, tp)
    close(ab, tb)  # the rest of the base is untouched, the view's elements moved
    assert not np.array_equal(A(ab), before)
    st_a, st_t = opt_a.state[ap], opt_t.state[tp]
    assert sorted(st_a) == sorted(st_t)
    for key, t in st_t.items():
        assert tuple(st_a[key].shape) == tuple(t.shape)
        if key != "step":
            assert st_a[key].is_contiguous()
        close(st_a[key], t)


@pytest.mark.parametrize("name", sorted(OPTS))
def test_mixed_contiguous_and_strided_group(name):
    """A group holding a strided and a contiguous param, plus one param twice."""
    shape, view = LAYOUTS["transposed"]
    w0, w1 = base_array(shape, 0), base_array((5, 3), 2)
    ap0, ap1 = ampy.nn.Parameter(view(ampy.tensor(w0))), ampy.nn.Parameter(ampy.tensor(w1))
    tp0, tp1 = torch.nn.Parameter(view(torch.tensor(w0))), torch.nn.Parameter(torch.tensor(w1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt_a = make_opt(ampy, name, [ap0, ap1, ap0])
        opt_t = make_opt(torch, name, [tp0, tp1, tp0])
    for g0, g1 in zip(grads_for((5, 3), seed=3), grads_for((5, 3), seed=4)):
        ap0.grad, ap1.grad = ampy.tensor(g0), ampy.tensor(g1)
        tp0.grad, tp1.grad = torch.tensor(g0), torch.tensor(g1)
        opt_a.step()
        opt_t.step()
    close(ap0, tp0)
    close(ap1, tp1)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(OPTS))
def test_half_master_weights_matches_torch_master(name, dtype, cpu_path):
    """master_weights=True: ampy's float16/bfloat16 strided param is torch's
    float32 master (stepped on a float32 param of the same layout) rounded
    once; the master itself is torch's param."""
    shape, view = LAYOUTS["transposed"]
    w = base_array(shape)
    ap = ampy.nn.Parameter(view(ampy.tensor(w).to(getattr(ampy, dtype))))
    tp = torch.nn.Parameter(view(torch.tensor(w).to(getattr(torch, dtype)).float()))
    opt_a = make_opt(ampy, name, [ap], master_weights=True)
    opt_t = make_opt(torch, name, [tp])
    for g in grads_for(tuple(tp.shape)):
        ap.grad, tp.grad = ampy.tensor(g).to(getattr(ampy, dtype)), torch.tensor(g)
        tp.grad = tp.grad.to(getattr(torch, dtype)).float()
        opt_a.step()
        opt_t.step()
    assert ap.dtype == getattr(ampy, dtype) and not ap.is_contiguous()
    master = opt_a.state[ap]["master_param"]
    assert master.is_contiguous() and tuple(master.shape) == tuple(tp.shape)
    close(master, tp)
    np.testing.assert_array_equal(A(ap), A(tp.detach().to(getattr(torch, dtype))))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["sgd", "sgd_momentum", "adam", "adamw_amsgrad"])
def test_half_without_master_weights(name, dtype):
    """No master: each step runs on a float32 copy of the current half value
    (torch: a float32 param reset to the rounded value before each step,
    float32 state); the param keeps the rounded result."""
    shape, view = LAYOUTS["stepped"]
    w = base_array(shape)
    ap = ampy.nn.Parameter(view(ampy.tensor(w).to(getattr(ampy, dtype))))
    tp = torch.nn.Parameter(view(torch.tensor(w).to(getattr(torch, dtype)).float()))
    opt_a, opt_t = make_opt(ampy, name, [ap]), make_opt(torch, name, [tp])
    for g in grads_for(tuple(tp.shape)):
        g = torch.tensor(g).to(getattr(torch, dtype))
        ap.grad, tp.grad = ampy.tensor(g.float().numpy()).to(getattr(ampy, dtype)), g.float()
        opt_a.step()
        opt_t.step()
        with torch.no_grad():
            tp.copy_(tp.to(getattr(torch, dtype)).float())
        np.testing.assert_array_equal(A(ap), A(tp))


def amp_loop(lib, name, layout, inf_at=2, iters=5):
    """torch's AMP recipe on a strided param; iteration inf_at overflows."""
    shape, view = LAYOUTS[layout]
    p = lib.nn.Parameter(view(lib.tensor(base_array(shape))))
    x = lib.tensor(base_array(tuple(p.shape), 5))
    opt = make_opt(lib, name, [p])
    sc = (torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2) if lib is torch
          else GradScaler("cpu", init_scale=1024.0, growth_interval=2))
    out = []
    for it in range(iters):
        opt.zero_grad()
        loss = (p * x).sum() + (p * p).sum() * 0.5
        sc.scale(loss * float("inf") if it == inf_at else loss).backward()
        before, version = A(p).tobytes(), p._version
        sc.step(opt)
        sc.update()
        if it == inf_at:  # skipped: the param's bytes and version are unchanged
            assert A(p).tobytes() == before and p._version == version
        out.append((A(p), A(p.grad), float(sc.get_scale())))
    return out


@pytest.mark.parametrize("layout", ["transposed", "stepped"])
@pytest.mark.parametrize("name", sorted(OPTS))
def test_grad_scaler_with_inf_step(name, layout):
    got, want = amp_loop(ampy, name, layout), amp_loop(torch, name, layout)
    for (pa, ga, sa), (pt, gt, st) in zip(got, want):
        np.testing.assert_allclose(pa, pt, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(ga, gt, rtol=1e-6, atol=1e-7)  # unscaled, inf step too
        assert sa == st


def test_grad_scaler_strided_grad_written_back_in_place():
    """A strided param with a strided grad: the unscaled grad lands in p.grad."""
    p = ampy.nn.Parameter(ampy.tensor(base_array((3, 5))).T)
    g = ampy.tensor(base_array((3, 5), 7) * 1024.0).T
    p.grad = g
    opt = optim.SGD([p], lr=0.1)
    opt.grad_scale, opt.found_inf = ampy.full((), 1024.0), ampy.zeros(())
    opt.step()
    assert p.grad is g
    np.testing.assert_allclose(A(g), base_array((3, 5), 7).T, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(OPTS))
def test_state_dict_round_trip(name):
    """ampy -> ampy and torch -> ampy: the loaded optimizer goes on as the saved one."""
    ab, ap, tb, tp = strided_pair("transposed")
    opt_a, opt_t = make_opt(ampy, name, [ap]), make_opt(torch, name, [tp])
    grads = grads_for(tuple(tp.shape), n=4)
    for g in grads[:2]:
        ap.grad, tp.grad = ampy.tensor(g), torch.tensor(g)
        opt_a.step()
        opt_t.step()
    copies = []
    for sd in (opt_a.state_dict(), opt_t.state_dict()):
        q = ampy.nn.Parameter(ampy.tensor(A(ap).T.copy()).T)
        o = make_opt(ampy, name, [q])
        o.load_state_dict(sd)
        for key, t in o.state[q].items():
            if key != "step":
                assert t.is_contiguous() and tuple(t.shape) == tuple(q.shape)
        copies.append((q, o))
    for g in grads[2:]:
        ap.grad, tp.grad = ampy.tensor(g), torch.tensor(g)
        opt_a.step()
        opt_t.step()
        for q, o in copies:
            q.grad = ampy.tensor(g)
            o.step()
    for q, _ in copies:
        np.testing.assert_array_equal(A(q), A(ap))
        close(q, tp)


@pytest.mark.parametrize("name", sorted(OPTS))
def test_expanded_param_raises_before_any_change(name):
    """torch raises its overlap message on an expanded param; ampy raises it
    before writing anything (torch's Adam has counted the step by then)."""
    tp = torch.nn.Parameter(torch.ones(1, 3).expand(4, 3))
    tp.grad = torch.ones(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        make_opt(torch, name, [tp]).step()
    base = ampy.tensor(base_array((1, 3)))
    ap, q = ampy.nn.Parameter(base.expand(4, 3)), ampy.nn.Parameter(ampy.ones(2))
    ap.grad, q.grad = ampy.ones(4, 3), ampy.ones(2)
    opt = make_opt(ampy, name, [q, ap])
    before = (A(base).tobytes(), A(q).tobytes(), base._version, q._version)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        opt.step()
    assert (A(base).tobytes(), A(q).tobytes(), base._version, q._version) == before
    assert len(opt.state) == 0


def test_interleaved_as_strided_param_raises():
    """A self-overlapping as_strided layout (strides interleave) is refused too."""
    ap = ampy.nn.Parameter(ampy.ones(6).as_strided((3, 3), (1, 1)))
    ap.grad = ampy.ones(3, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        optim.SGD([ap], lr=0.1).step()


def test_read_only_strided_param_raises_before_any_change():
    a = base_array((3, 4))
    a.flags.writeable = False
    ap = ampy.nn.Parameter(ampy.from_numpy(a).T)
    ap.grad = ampy.ones(4, 3)
    opt = optim.Adam([ap])
    with pytest.raises(RuntimeError, match="read-only"):
        opt.step()
    assert len(opt.state) == 0
    np.testing.assert_array_equal(a, base_array((3, 4)))
