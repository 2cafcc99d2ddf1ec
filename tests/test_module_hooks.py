"""nn.Module hooks against torch 2.13: full backward hooks and pre-hooks (the grads they see
and replace), forward (pre-)hooks with kwargs / prepend / always_call, state_dict and
load_state_dict hooks, extra state, get_buffer / set_submodule / to_empty / compile."""
import numpy as np
import pytest

import ampy

torch = pytest.importorskip("torch")


def _np(t):
    return None if t is None else t.detach().numpy()


def _same(a, t, tol=1e-6):
    if a is None or t is None:
        assert a is None and t is None
        return
    np.testing.assert_allclose(_np(a), _np(t), rtol=tol, atol=tol)


def _linear_pair():
    torch.manual_seed(0)
    tm = torch.nn.Linear(4, 3)
    am = ampy.nn.Linear(4, 3)
    am.load_state_dict({k: ampy.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return am, tm


def _x(lib, requires_grad=True):
    x = lib.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    return x.requires_grad_(requires_grad)


@pytest.mark.parametrize("replace", [False, True])
def test_full_backward_hook_sees_and_replaces_grads(replace):
    seen = {}
    res = {}
    for name, lib, m in zip(("ampy", "torch"), (ampy, torch), _linear_pair()):
        def hook(mod, gin, gout, name=name):
            seen[name] = (gin, gout)
            return tuple(g * 3 for g in gin) if replace else None
        m.register_full_backward_hook(hook)
        x = _x(lib)
        (m(x) ** 2).sum().backward()
        res[name] = (x.grad, m.weight.grad)
    (ga, oa), (gt, ot) = seen["ampy"], seen["torch"]
    assert len(ga) == len(gt) == 1 and len(oa) == len(ot) == 1
    _same(ga[0], gt[0]), _same(oa[0], ot[0])
    _same(res["ampy"][0], res["torch"][0])
    _same(res["ampy"][1], res["torch"][1])


def test_backward_pre_hook_replaces_grad_output():
    res = {}
    for name, lib, m in zip(("ampy", "torch"), (ampy, torch), _linear_pair()):
        m.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * -2,))
        x = _x(lib)
        (m(x) ** 2).sum().backward()
        res[name] = (x.grad, m.weight.grad, m.bias.grad)
    for a, t in zip(res["ampy"], res["torch"]):
        _same(a, t, 1e-5)


def test_backward_hook_without_input_grad_and_with_extra_args():
    class Two:
        @staticmethod
        def make(lib):
            class M(lib.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = lib.nn.Parameter(lib.ones(4) * 2)

                def forward(self, a, k, b):
                    return a * self.w * k + b, a.sum()
            return M()

    seen = {}
    for name, lib in (("ampy", ampy), ("torch", torch)):
        m = Two.make(lib)
        m.register_full_backward_hook(lambda mod, gin, gout, name=name: seen.setdefault(
            name, []).append((gin, gout)))
        a = _x(lib, requires_grad=False)
        b = _x(lib, requires_grad=True)
        y, s = m(a, 3.0, b)
        (y.sum() + s * 0).backward()
        no_grad_in = _x(lib, requires_grad=False)
        y2, _ = m(no_grad_in, 1.0, no_grad_in)
        y2.sum().backward()
    assert len(seen["ampy"]) == len(seen["torch"]) == 2
    for (gia, goa), (git, got) in zip(seen["ampy"], seen["torch"]):
        assert len(gia) == len(git) == 3
        for a, t in zip(gia, git):
            _same(a, t)
        assert len(goa) == len(got)
        for a, t in zip(goa, got):
            _same(a, t)


def test_backward_hook_wrong_count_raises():
    m = ampy.nn.Linear(4, 3)
    m.register_full_backward_hook(lambda mod, gin, gout: (gin[0], gin[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        m(_x(ampy)).sum().backward()


def test_forward_hooks_kwargs_prepend_always_call_and_removal():
    for lib in (ampy, torch):
        class M(lib.nn.Module):
            def forward(self, x, scale=1.0):
                if scale < 0:
                    raise ValueError("negative scale")
                return x * scale
        m, log = M(), []
        h1 = m.register_forward_pre_hook(lambda mod, args, kw: (args, {"scale": kw.get(
            "scale", 1.0) * 2}), with_kwargs=True)
        m.register_forward_pre_hook(lambda mod, args: log.append("pre-first"), prepend=True)
        m.register_forward_hook(lambda mod, args, kw, out: out + kw["scale"], with_kwargs=True)
        m.register_forward_hook(lambda mod, args, out: log.append(("always", out is None)),
                                always_call=True)
        x = lib.ones(2)
        out = m(x, scale=3.0)
        assert _np(out).tolist() == [12.0, 12.0] and log == ["pre-first", ("always", False)]
        with pytest.raises(ValueError, match="negative scale"):
            m(x, scale=-1.0)
        assert log[-1] == ("always", True)
        h1.remove()
        assert _np(m(x, scale=3.0)).tolist() == [6.0, 6.0]
        with m.register_forward_hook(lambda mod, args, out: out * 0):
            assert _np(m(x, scale=3.0)).tolist() == [0.0, 0.0]
        assert _np(m(x, scale=3.0)).tolist() == [6.0, 6.0]


def test_state_dict_and_load_hooks_and_extra_state():
    keys = {}
    for name, lib in (("ampy", ampy), ("torch", torch)):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lib.nn.Linear(2, 2)
                self.counter = 0

            def get_extra_state(self):
                return {"counter": self.counter}

            def set_extra_state(self, state):
                self.counter = state["counter"]

        m = M()
        m.counter = 7
        calls = []
        m.register_state_dict_pre_hook(lambda mod, prefix, keep: calls.append(("pre", prefix)))

        def post(mod, sd, prefix, meta):
            sd[prefix + "note"] = lib.zeros(1)
        m.lin.register_state_dict_post_hook(post)
        sd = m.state_dict()
        keys[name] = list(sd)
        assert calls == [("pre", "")]
        m2 = M()

        def drop_note(mod, state_dict, prefix, meta, strict, missing, unexpected, errors):
            state_dict.pop(prefix + "note", None)
        m2.lin.register_load_state_dict_pre_hook(drop_note)
        seen = []
        m2.register_load_state_dict_post_hook(lambda mod, k: seen.append(list(k.missing_keys)))
        m2.load_state_dict(dict(sd))
        assert m2.counter == 7 and seen == [[]]
    assert keys["ampy"] == keys["torch"]


def test_get_buffer_set_submodule_to_empty_compile():
    for lib in (ampy, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3))
        assert m.get_buffer("1.running_mean") is m[1].running_mean
        with pytest.raises(AttributeError, match="has no attribute `nope`"):
            m.get_buffer("1.nope")
        m.set_submodule("0", lib.nn.Linear(2, 3, bias=False))
        assert m[0].bias is None
        with pytest.raises(AttributeError):
            m.set_submodule("0.nope", lib.nn.ReLU(), strict=True)
        w = m[0].weight
        m.to_empty(device="cpu")
        assert m[0].weight is w and tuple(w.shape) == (3, 2)
    assert ampy.nn.Linear(2, 2).compile() is None


def test_replacing_a_submodule_or_parameter_keeps_its_place():
    """model.classifier[i] = new layer (fine-tuning) and module.weight = Parameter(...)
    keep the order of forward, parameters() and state_dict(), as torch."""
    orders = {}
    for lib in (ampy, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))
        m[0] = lib.nn.Linear(2, 3, bias=False)
        m.add_module("1", lib.nn.Tanh())
        m[2].weight = lib.nn.Parameter(lib.ones(1, 3))
        orders[lib.__name__] = ([type(c).__name__ for c in m.children()], list(m.state_dict()),
                                [tuple(p.shape) for p in m.parameters()])
    assert orders["ampy"] == orders["torch"]
