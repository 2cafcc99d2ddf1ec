"""ampy.autocast vs torch.autocast (CPU, side by side), and ampy's own rules.

- every op of the policy table with a case here: output dtype under autocast
  equals torch's, for float32/float16/bfloat16/float64 inputs and both
  autocast dtypes (a case whose op is not in ampy's table fails);
- the CUDA lists are checked on the table (no GPU here) and through the hook
  by running test ops with the CUDA rules on CPU tensors;
- API, nesting, decorators, recursion, threads, asyncio tasks, the weight-cast
  cache (incl. the no_grad case of torch #158232), custom_fwd/custom_bwd,
  register_autocast.
"""
import asyncio
import threading
import types
import warnings

import numpy as np
import pytest
import torch

import ampy
from ampy import _dispatch
from ampy.amp import _policy as P
from ampy.amp import autocast_mode as AM

from _helpers import AMPY_DTYPE, TORCH_DTYPE



def both(arr, dt):
    a = ampy.tensor(arr).to(AMPY_DTYPE[dt])
    t = torch.tensor(arr).to(TORCH_DTYPE[dt])
    return a, t


# ----------------------------------------------------------------- API
def test_defaults_and_queries_match_torch():
    assert ampy.get_autocast_dtype("cpu") is ampy.bfloat16
    assert ampy.get_autocast_dtype("cuda") is ampy.float16
    assert not ampy.is_autocast_enabled("cpu")
    with ampy.autocast("cpu"), torch.autocast("cpu"):
        assert ampy.is_autocast_enabled("cpu") == torch.is_autocast_enabled("cpu")
        assert ampy.get_autocast_dtype("cpu").name == str(torch.get_autocast_dtype("cpu"))[6:]
        assert not ampy.is_autocast_enabled("cuda")
    assert not ampy.is_autocast_enabled("cpu")
    assert ampy.amp.is_autocast_available("cpu") and ampy.amp.is_autocast_available("cuda")


def test_bad_device_type():
    for bad in (1, None, ampy.float16):
        with pytest.raises(ValueError) as ea:
            ampy.autocast(bad)
        with pytest.raises(ValueError) as et:
            torch.autocast(bad)
        assert str(ea.value) == str(et.value).replace("torch", "ampy")
    with pytest.raises(RuntimeError, match="device string: xyz"):
        ampy.autocast("xyz")
    with pytest.raises(RuntimeError):
        ampy.is_autocast_enabled("xyz")


def test_cuda_without_cuda_warns_and_disables():
    if AM._cuda_available():
        pytest.skip("CUDA is available")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ac = ampy.autocast("cuda")
    with ac:
        assert not ampy.is_autocast_enabled("cuda")


def test_unsupported_dtype_warns_like_torch_and_validates_only_when_enabled():
    with pytest.warns(UserWarning) as wa:
        ac = ampy.autocast("cpu", dtype=ampy.float32)
    with pytest.warns(UserWarning) as wt:
        torch.autocast("cpu", dtype=torch.float32)
    assert str(wa[0].message) == str(wt[0].message).replace("torch", "ampy")
    with ac:
        assert not ampy.is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match="dtype"):
        ampy.autocast("cpu", dtype=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ampy.autocast("cpu", dtype=3, enabled=False)       # pain point #13: no check
        ampy.autocast("cpu", dtype=ampy.int32, enabled=False)
    with pytest.raises(TypeError, match="enabled"):
        ampy.autocast("cpu", enabled="yes")


def test_nesting_and_disabled_subregions():
    seen = []
    with ampy.autocast("cpu", dtype=ampy.float16):
        seen.append((ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu")))
        with ampy.autocast("cpu", enabled=False):
            seen.append((ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu")))
            with ampy.autocast("cpu", dtype=ampy.bfloat16):
                seen.append((ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu")))
            seen.append((ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu")))
        seen.append((ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu")))
    seen.append((ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu")))
    assert seen == [(True, ampy.float16), (False, ampy.float16), (True, ampy.bfloat16),
                    (False, ampy.float16), (True, ampy.float16), (False, ampy.bfloat16)]
    assert _dispatch._hooks.autocast is None  # no region open: ops pay one attribute check


def test_state_restored_after_exception():
    with pytest.raises(KeyError):
        with ampy.autocast("cpu"):
            raise KeyError("x")
    assert not ampy.is_autocast_enabled("cpu")


def test_decorator_recursion_and_reentered_instance():
    ac = ampy.autocast("cpu", dtype=ampy.float16)
    trace = []

    @ac
    def rec(n):
        trace.append(ampy.is_autocast_enabled("cpu"))
        if n:
            with ampy.autocast("cpu", enabled=False):
                trace.append(ampy.is_autocast_enabled("cpu"))
                rec(n - 1)
                trace.append(ampy.is_autocast_enabled("cpu"))
        trace.append(ampy.is_autocast_enabled("cpu"))

    rec(3)
    assert trace == [True, False, True, False, True, False, True, True, False, True, False,
                     True, False, True]
    assert not ampy.is_autocast_enabled("cpu")
    with ac:
        with ac:  # one object entered twice: no state on self
            assert ampy.is_autocast_enabled("cpu")
        assert ampy.is_autocast_enabled("cpu")
    assert not ampy.is_autocast_enabled("cpu")
    assert rec.__name__ == "rec"


def test_threads_have_their_own_state():
    out = {}
    barrier = threading.Barrier(2)

    def worker():
        out["inherited"] = ampy.is_autocast_enabled("cpu")
        with ampy.autocast("cpu", dtype=ampy.float16):
            barrier.wait()
            barrier.wait()
            out["inside"] = ampy.get_autocast_dtype("cpu")

    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        th = threading.Thread(target=worker)
        th.start()
        barrier.wait()
        out["main"] = ampy.get_autocast_dtype("cpu")
        barrier.wait()
        th.join()
    assert out == {"inherited": False, "inside": ampy.float16, "main": ampy.bfloat16}


def test_asyncio_tasks_have_their_own_state():
    async def task(dt, log):
        with ampy.autocast("cpu", dtype=dt):
            for _ in range(3):
                await asyncio.sleep(0)
                log.append(ampy.get_autocast_dtype("cpu") is dt and
                           ampy.is_autocast_enabled("cpu"))

    @ampy.autocast("cpu", dtype=ampy.float16)
    async def decorated():
        await asyncio.sleep(0)
        return ampy.is_autocast_enabled("cpu")

    async def main():
        log = []
        await asyncio.gather(task(ampy.float16, log), task(ampy.bfloat16, log))
        return log, ampy.is_autocast_enabled("cpu"), await decorated()

    log, after, dec = asyncio.run(main())
    assert log == [True] * 6 and after is False and dec is True


# ------------------------------------------------------ hook rules (test ops)
@pytest.fixture
def test_ops():
    """Ops whose forward returns its arguments, so the casts can be seen."""
    made = []

    def make(name, cpu, cuda=None):
        full = f"_test_{name}"

        def fwd(*args, **kwargs):
            return args, kwargs

        _dispatch.defop(full, policy={"cpu": cpu, "cuda": cuda})(fwd)
        made.append(full)
        op = _dispatch.get_op(full)
        return lambda *a, **k: _dispatch.dispatch(op, *a, **k)

    yield make
    for n in made:
        _dispatch._TABLE.pop(n, None)


def dts(seq):
    return [a.dtype if isinstance(a, ampy.Tensor) else
            [b.dtype for b in a] if isinstance(a, (list, tuple)) else a for a in seq]


def test_lower_fp32_promote_rules(test_ops):
    low, f32 = test_ops("low", P.LOWER), test_ops("f32", P.FP32)
    prom, setd = test_ops("prom", P.PROMOTE), test_ops("setd", P.FP32_SET_OPT_DTYPE)
    x32, x16 = ampy.ones(2), ampy.ones(2, dtype=ampy.float16)
    xb, x64, xi = ampy.ones(2, dtype=ampy.bfloat16), ampy.ones(2, dtype=ampy.float64), \
        ampy.ones(2, dtype=ampy.int64)
    # outside a region nothing changes
    assert dts(low(x32)[0]) == [ampy.float32]
    with ampy.autocast("cpu", dtype=ampy.float16):
        assert dts(low(x32, xb, x64, xi, 3, [x32, xb])[0]) == [
            ampy.float16, ampy.float16, ampy.float64, ampy.int64, 3, [ampy.float16] * 2]
        args, kw = low(x32, w=x32, bias=[x32], n=3)
        assert dts(kw.values()) == [ampy.float16, [ampy.float16], 3]
        assert dts(f32(x16, xb, x64, xi)[0]) == [ampy.float32, ampy.float32, ampy.float64,
                                                 ampy.int64]
        assert dts(prom([x16, x16, x64])[0]) == [[ampy.float16, ampy.float16, ampy.float64]]
        assert dts(prom([x16, x32])[0]) == [[ampy.float32, ampy.float32]]
        with pytest.raises(RuntimeError, match="Unexpected floating ScalarType"):
            prom([x16, xb])
        assert setd(x16)[1] == {"dtype": ampy.float32}
        assert setd(x16, dtype=ampy.float16)[1] == {"dtype": ampy.float16}
        assert setd(xi)[1] == {} and setd(x64)[1] == {}
        assert dts(low(x32, out=x16)[0]) == [ampy.float32]   # out= variants: not autocast
        with ampy.autocast("cpu", enabled=False):
            assert dts(low(x32)[0]) == [ampy.float32]
    with ampy.autocast("cpu"):
        assert dts(low(x32)[0]) == [ampy.bfloat16]


def test_cuda_rules_through_the_hook(test_ops):
    """The CUDA list's rules, run on CPU tensors: the 'cpu' slot is given each
    op's CUDA policy (there is no GPU to run the 'cuda' slot)."""
    cuda = P.TORCH_POLICY["cuda"]
    x16 = ampy.ones(3, dtype=ampy.float16)
    for name in ("softmax", "sum", "exp", "mm", "addcmul", "binary_cross_entropy"):
        f = test_ops("cuda_" + name, cuda[name])
        with ampy.autocast("cpu", dtype=ampy.float16):
            if cuda[name] == P.BANNED:
                with pytest.raises(RuntimeError, match="unsafe to autocast"):
                    f(x16, x16)
                continue
            args, kw = f(x16, ampy.ones(3))
        got = kw.get("dtype") or args[0].dtype
        want = {"softmax": ampy.float32, "sum": ampy.float32, "exp": ampy.float32,
                "mm": ampy.float16, "addcmul": ampy.float32}[name]
        assert got is want, name


def test_cuda_and_cpu_tables_follow_torch_lists():
    cpu, cuda = P.TORCH_POLICY["cpu"], P.TORCH_POLICY["cuda"]
    for n in ("matmul", "mm", "bmm", "addmm", "baddbmm", "linear"):
        assert cpu[n] == cuda[n] == P.LOWER
    for n in ("softmax", "log_softmax", "sum", "prod", "cumsum"):
        assert cuda[n] == P.FP32_SET_OPT_DTYPE
    for n in ("exp", "log", "log1p", "pow", "logsumexp", "layer_norm", "mse_loss", "nll_loss",
              "cross_entropy"):
        assert cuda[n] == P.FP32
    for n in ("addcmul", "addcdiv"):
        assert cuda[n] == P.PROMOTE and n not in cpu
    assert cpu["cat"] == cpu["stack"] == P.PROMOTE and "cat" not in cuda
    assert cpu["prod"] == P.FP32 and "layer_norm" not in cpu and "softmax" not in cpu
    # the table written into the op table; in-place ops never get a policy
    for name, op in _dispatch.ops().items():
        for dev in P.DEVICES:
            if name.endswith("_"):
                assert not op.policy.get(dev)
    txt = P.format_policy(["matmul", "softmax"])
    assert "matmul" in txt and "fp32_set_opt_dtype" in txt and "lower_precision_fp" in txt


# ------------------------------------------------- side by side with torch
def _cases():
    i = np.array([0, 2, 1, 3])
    return {
        "exp": lambda m, f, x: m.exp(x), "log": lambda m, f, x: m.log(x),
        "log1p": lambda m, f, x: m.log1p(x), "pow": lambda m, f, x: m.pow(x, 2),
        "softmax": lambda m, f, x: m.softmax(x, -1),
        "log_softmax": lambda m, f, x: m.log_softmax(x, -1),
        "logsumexp": lambda m, f, x: m.logsumexp(x, -1), "sum": lambda m, f, x: m.sum(x),
        "prod": lambda m, f, x: m.prod(x), "cumsum": lambda m, f, x: m.cumsum(x, 0),
        "cat": lambda m, f, x: m.cat([x, x.float()]), "stack": lambda m, f, x: m.stack([x, x]),
        "matmul": lambda m, f, x: m.matmul(x, x), "mm": lambda m, f, x: m.mm(x, x),
        "bmm": lambda m, f, x: m.bmm(x[None], x[None]),
        "addmm": lambda m, f, x: m.addmm(x, x, x),
        "baddbmm": lambda m, f, x: m.baddbmm(x[None], x[None], x[None]),
        "linear": lambda m, f, x: f.linear(x, x, x[0]),
        "mse_loss": lambda m, f, x: f.mse_loss(x, x),
        "cross_entropy": lambda m, f, x: f.cross_entropy(x, m.tensor(i)),
        "nll_loss": lambda m, f, x: f.nll_loss(x, m.tensor(i)),
        "layer_norm": lambda m, f, x: f.layer_norm(x, (4,)),
        "gelu": lambda m, f, x: f.gelu(x), "relu": lambda m, f, x: f.relu(x),
        "add": lambda m, f, x: m.add(x, x), "mul": lambda m, f, x: m.mul(x, x),
        "addcmul": lambda m, f, x: m.addcmul(x, x, x),
        "addcdiv": lambda m, f, x: m.addcdiv(x, x, x),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_output_dtypes_match_torch(name):
    case = _cases()[name]
    assert name in _dispatch.ops(), f"{name!r} is not in ampy's op table"
    fa = ampy.nn.functional
    arr = np.abs(np.random.default_rng(0).standard_normal((4, 4))).astype(np.float32) + 0.1
    for ac in ("float16", "bfloat16"):
        for dt in ("float32", "float16", "bfloat16", "float64"):
            a, t = both(arr, dt)
            try:
                with torch.autocast("cpu", dtype=TORCH_DTYPE[ac]):
                    want = case(torch, torch.nn.functional, t).dtype
            except RuntimeError:
                with ampy.autocast("cpu", dtype=AMPY_DTYPE[ac]), pytest.raises(RuntimeError):
                    case(ampy, fa, a)
                continue
            with ampy.autocast("cpu", dtype=AMPY_DTYPE[ac]):
                got = case(ampy, fa, a).dtype
            assert got.name == str(want)[6:], (name, ac, dt)


# ---------------------------------------------------------- weight-cast cache
def test_cache_rules(test_ops, monkeypatch):
    low, f32 = test_ops("clow", P.LOWER), test_ops("cf32", P.FP32)
    w = ampy.ones(3).requires_grad_()
    plain = ampy.ones(3)
    with ampy.autocast("cpu", dtype=ampy.float16):
        c1, c2 = low(w)[0][0], low(w)[0][0]
        assert c1 is c2 and c1.dtype is ampy.float16        # cached fp32 leaf weight
        assert low(plain)[0][0] is not low(plain)[0][0]     # no grad: not cached
        assert f32(w.half())[0][0] is not f32(w.half())[0][0]
        with ampy.autocast("cpu", dtype=ampy.float16):
            assert low(w)[0][0] is c1                       # nested region shares the cache
        with ampy.autocast("cpu", dtype=ampy.bfloat16):
            cb = low(w)[0][0]
            assert cb.dtype is ampy.bfloat16                 # keyed on dtype too
        assert low(w)[0][0] is c1
        w.detach().fill_(2.0)                                # in-place write: version bump
        c3 = low(w)[0][0]
        assert c3 is not c1 and c3.tolist() == [2.0, 2.0, 2.0]
        # grad mode is part of the key: a no_grad cast is never reused with grad
        grad_on = [False]
        monkeypatch.setattr(AM, "_grad_mode", [lambda: grad_on[0]])
        c_ng = low(w)[0][0]
        grad_on[0] = True
        c_g = low(w)[0][0]
        assert c_g is not c_ng and low(w)[0][0] is c_g
    with ampy.autocast("cpu", dtype=ampy.float16):
        assert low(w)[0][0] is not c_g                       # cleared at outermost exit
    with ampy.autocast("cpu", dtype=ampy.float16, cache_enabled=False):
        assert low(w)[0][0] is not low(w)[0][0]


def test_cache_weakref_no_false_hit(test_ops):
    low = test_ops("wlow", P.LOWER)
    with ampy.autocast("cpu", dtype=ampy.float16):
        for k in range(20):  # dead tensors' ids get reused: values must still be right
            w = ampy.full((2,), float(k)).requires_grad_()
            assert low(w)[0][0].tolist() == [float(k)] * 2
            del w


def test_cache_under_no_grad_keeps_graph():
    ag = ampy.autograd
    F = ampy.nn.functional
    w = ampy.ones(2, 3).requires_grad_()
    x = ampy.ones(4, 3)
    with ampy.autocast("cpu", dtype=ampy.float16):
        with ag.no_grad():
            F.linear(x, w)               # torch < #165068 cached a graph-less cast here
        y = F.linear(x, w)
    assert y.grad_fn is not None
    y.float().sum().backward()
    assert w.grad is not None and w.grad.dtype is ampy.float32
    assert w.grad.tolist() == [[4.0] * 3] * 2


# ----------------------------------------------------- custom_fwd / custom_bwd
def test_custom_fwd_bwd_with_a_context_object():
    seen = {}

    @ampy.amp.custom_fwd(device_type="cpu")
    def fwd(ctx, x):
        seen["fwd"] = (ampy.is_autocast_enabled("cpu"), x.dtype)
        return x

    @ampy.amp.custom_fwd(device_type="cpu", cast_inputs=ampy.float32)
    def fwd32(ctx, x, more):
        seen["fwd32"] = (ampy.is_autocast_enabled("cpu"), x.dtype, more["y"][0].dtype, more["s"])
        return x

    @ampy.amp.custom_bwd(device_type="cpu")
    def bwd(ctx, g):
        seen["bwd"] = (ampy.is_autocast_enabled("cpu"), ampy.get_autocast_dtype("cpu"))
        return g

    x16 = ampy.ones(2, dtype=ampy.float16)
    ctx, ctx32 = types.SimpleNamespace(), types.SimpleNamespace()
    with ampy.autocast("cpu", dtype=ampy.float16):
        fwd(ctx, x16)
        fwd32(ctx32, x16, {"y": [x16], "s": "str"})
    assert seen["fwd"] == (True, ampy.float16)
    assert seen["fwd32"] == (False, ampy.float32, ampy.float32, "str")
    assert ctx._fwd_used_autocast is True and ctx._dtype is ampy.float16
    assert ctx32._fwd_used_autocast is False
    bwd(ctx, x16)
    assert seen["bwd"] == (True, ampy.float16)
    bwd(ctx32, x16)
    assert seen["bwd"][0] is False
    fwd32(types.SimpleNamespace(), x16, {"y": [x16], "s": 1})   # outside autocast: no cast
    assert seen["fwd32"][1] is ampy.float16
    with pytest.raises(ValueError, match="device_type"):
        ampy.amp.custom_fwd(device_type=3)
    with pytest.raises(TypeError):
        ampy.amp.custom_fwd(fwd, cast_inputs=ampy.float32)  # device_type is required


def test_custom_fwd_with_autograd_function():
    ag = ampy.autograd
    seen = {}

    class Double(ag.Function):
        @staticmethod
        @ampy.amp.custom_fwd(device_type="cpu", cast_inputs=ampy.float32)
        def forward(ctx, x):
            seen["fwd"] = x.dtype
            return x * 2

        @staticmethod
        @ampy.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = ampy.is_autocast_enabled("cpu")
            return g * 2

    x = ampy.ones(3, dtype=ampy.float16).requires_grad_()
    with ampy.autocast("cpu", dtype=ampy.float16):
        y = Double.apply(x)
    y.backward(ampy.ones(3))
    assert x.grad is not None and x.grad.tolist() == [2.0, 2.0, 2.0]
    assert seen == {"fwd": ampy.float32, "bwd": False} and y.dtype is ampy.float32


# ------------------------------------------------------------ register_autocast
def test_register_autocast_function_and_op(test_ops):
    seen = []

    def my_op(x, y):
        seen.append((x.dtype, y.dtype, ampy.is_autocast_enabled("cpu")))
        return x

    wrapped = ampy.amp.register_autocast(my_op, "cpu", ampy.float16)
    name = wrapped.__ampy_op__
    assert _dispatch.get_op(name).policy["cpu"] is ampy.float16
    assert name in P.policy_table()
    x, y64 = ampy.ones(2), ampy.ones(2, dtype=ampy.float64)
    wrapped(x, y64)
    with ampy.autocast("cpu"):
        wrapped(x, y64)
    assert seen == [(ampy.float32, ampy.float64, False), (ampy.float16, ampy.float64, False)]
    ampy.amp.register_autocast(wrapped, "cpu", "fp32")   # re-register the same op
    assert _dispatch.get_op(name).policy["cpu"] == "fp32"
    _dispatch._TABLE.pop(name)

    low = test_ops("reg", None)
    ampy.amp.register_autocast("_test_reg", "cpu", "lower_precision_fp")
    with ampy.autocast("cpu", dtype=ampy.float16):
        assert low(x)[0][0].dtype is ampy.float16
    with pytest.raises(KeyError, match="no op named"):
        ampy.amp.register_autocast("no_such_op", "cpu", ampy.float16)
    with pytest.raises(ValueError, match="floating"):
        ampy.amp.register_autocast("_test_reg", "cpu", ampy.int32)
    with pytest.raises(TypeError):
        ampy.amp.register_autocast(3, "cpu", ampy.float16)
    with pytest.raises(RuntimeError):
        ampy.amp.register_autocast("_test_reg", "tpu", ampy.float16)
