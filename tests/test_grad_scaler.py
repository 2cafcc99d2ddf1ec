"""ampy.amp.GradScaler side by side with torch.amp.GradScaler (CPU).

The same call sequences run on both, with a minimal optimizer object (any
object with ``param_groups`` and ``step`` works for both scalers), so these
tests need only ampy's tensors, the AMP kernels and the ``mul``/``add`` ops.
"""
import pickle
import warnings

import numpy as np
import pytest
import torch

import ampy
from ampy.amp import GradScaler

from _helpers import TORCH_DTYPE as TDT

pytestmark = pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")

LIBS = {"torch": torch, "ampy": ampy}


class Opt:
    """Just enough optimizer for GradScaler: counts its steps."""

    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.steps = 0

    def step(self, *args, **kwargs):
        self.steps += 1
        return ("stepped", args, kwargs)


class FusedOpt(Opt):
    """The fused-optimizer protocol: reads grad_scale / found_inf itself."""

    _step_supports_amp_scaling = True

    def step(self):
        self.seen = (self.grad_scale, self.found_inf)
        self.steps += 1
        return "fused"


def scaler(lib, **kw):
    return (ampy.amp.GradScaler if lib == "ampy" else torch.amp.GradScaler)("cpu", **kw)


def tensor(lib, arr, dtype="float32"):
    if lib == "torch":
        return torch.tensor(np.asarray(arr, np.float32)).to(TDT[dtype])
    return ampy.tensor(np.asarray(arr, np.float32)).to(getattr(ampy, dtype))


def param(lib, n, dtype="float32"):
    return tensor(lib, np.zeros(n), dtype).requires_grad_()


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 (the type is compared below)
        return ("raise", e)


def same_error(ra, rt):
    assert ra[0] == rt[0] == "raise", (ra, rt)
    ea, et = ra[1], rt[1]
    assert isinstance(ea, type(et)), (type(ea), type(et))
    assert str(ea).startswith(str(et)), (str(ea), str(et))


# ------------------------------------------------------------- construction
def test_defaults_and_getters():
    for lib in LIBS:
        s = scaler(lib)
        assert s.get_scale() == 65536.0 and s.is_enabled()
        assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == \
            (2.0, 0.5, 2000)
        s.set_growth_factor(3.0), s.set_backoff_factor(0.25), s.set_growth_interval(5)
        assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == \
            (3.0, 0.25, 5)
        assert s._scale is None  # lazy


def test_bad_constructor_args_match_torch():
    for kw in ({"growth_factor": 1.0}, {"backoff_factor": 1.0}, {"growth_factor": 0.5}):
        same_error(outcome(lambda: scaler("ampy", **kw)), outcome(lambda: scaler("torch", **kw)))
    with pytest.raises(ValueError):
        scaler("ampy", growth_factor=1.0)       # also a ValueError (ampy never uses assert)
    for kw in ({"init_scale": float("inf")}, {"init_scale": -1.0}, {"growth_interval": 0},
               {"backoff_factor": 0.0}, {"hysteresis": 0}, {"min_scale": 4.0, "max_scale": 2.0}):
        with pytest.raises(ValueError):
            scaler("ampy", **kw)
    with pytest.raises(TypeError, match="growth_interval"):
        scaler("ampy", growth_interval=2.5)
    with pytest.raises(TypeError, match="device"):
        GradScaler(3)
    scaler("ampy", growth_factor=0.5, enabled=False)  # not validated when disabled (torch)


def test_cuda_without_cuda_warns_and_disables():
    from ampy.amp import autocast_mode
    if autocast_mode._cuda_available():
        pytest.skip("CUDA is available")
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        s = GradScaler()
    assert not s.is_enabled() and s.get_scale() == 1.0


def test_disabled_is_a_pass_through():
    s = scaler("ampy", enabled=False)
    x = ampy.ones(3)
    assert s.scale(x) is x
    p = param("ampy", 2)
    p.grad = ampy.tensor([1.0, float("inf")])
    opt = Opt([p])
    s.unscale_(opt)
    assert s.step(opt, 1, k=2) == ("stepped", (1,), {"k": 2}) and opt.steps == 1
    s.update()
    assert s.get_scale() == 1.0 and s.state_dict() == {}
    s.load_state_dict({})
    assert p.grad.tolist() == [1.0, float("inf")]


# ---------------------------------------------------------------- scale()
def test_scale_tensors_and_nested_iterables():
    outs = {}
    for lib in LIBS:
        s = scaler(lib, init_scale=8.0)
        a, b = tensor(lib, [1.0, 2.0]), tensor(lib, [3.0], "float16")
        r = s.scale([a, (b, [a])])
        g = s.scale(iter([a]))
        assert isinstance(r, list) and isinstance(r[1], tuple) and not isinstance(g, list)
        outs[lib] = [r[0].tolist(), r[1][0].tolist(), r[1][1][0].tolist(), next(g).tolist(),
                     str(r[1][0].dtype)[-7:], str(s.scale(tensor(lib, 1.0, "float16")).dtype)[-7:]]
        for bad in (3, [a, 3], None):
            same_error(outcome(lambda: scaler("ampy").scale(bad if lib == "ampy" else None)),
                       outcome(lambda: scaler("torch").scale(None)))
    assert outs["ampy"] == outs["torch"]


# ------------------------------------------------------------ misuse sequences
def _run(lib, seq, grad_dtype="float32"):
    s = scaler(lib)
    p = param(lib, 3, grad_dtype)
    opt = Opt([p])
    result = None
    for call in seq:
        if call == "scale":
            s.scale(tensor(lib, 1.0))
            p.grad = tensor(lib, [1.0, 2.0, 3.0], grad_dtype)
        elif call == "nograd":
            p.grad = None
        elif call == "closure":
            result = outcome(lambda: s.step(opt, closure=lambda: 0))
        elif call == "pickle":
            result = outcome(lambda: pickle.dumps(s))
        elif call == "empty_sd":
            result = outcome(lambda: s.load_state_dict({}))
        else:
            result = outcome(lambda: getattr(s, call)(opt) if call != "update"
                             else s.update())
        if result is not None and result[0] == "raise":
            return result
    return result


@pytest.mark.parametrize("seq", [
    ["unscale_"], ["step"], ["update"], ["scale", "unscale_", "unscale_"],
    ["scale", "step", "unscale_"], ["scale", "step", "step"], ["scale", "update"],
    ["scale", "closure"], ["scale", "nograd", "step"], ["scale", "unscale_", "pickle"],
    ["scale", "step", "update", "step", "update", "update"], ["empty_sd"],
])
def test_misuse_raises_like_torch(seq):
    same_error(_run("ampy", seq), _run("torch", seq))


def test_fp16_gradients_error_names_the_parameter():
    rt = _run("torch", ["scale", "step"], "float16")
    ra = _run("ampy", ["scale", "step"], "float16")
    same_error(ra, rt)
    assert "param_groups[0]['params'][0]" in str(ra[1]) and "master_weights=True" in str(ra[1])
    s = scaler("ampy")
    p = param("ampy", 2, "float16")
    s.set_param_names([("encoder.weight", p)])
    s.scale(ampy.ones(()))
    p.grad = ampy.ones(2, dtype=ampy.float16)
    with pytest.raises(ValueError, match="'encoder.weight'"):
        s.unscale_(Opt([p]))


# ------------------------------------------------- trajectories vs torch
def _trajectory(lib, flags, n_opts=1, fused=False, **kw):
    rng = np.random.default_rng(1)
    s = scaler(lib, init_scale=2.0**12, growth_interval=3, **kw)
    params = [[param(lib, 5), param(lib, 3, "bfloat16")] for _ in range(n_opts)]
    opts = [(FusedOpt if fused else Opt)(ps) for ps in params]
    out = []
    for it, flag in enumerate(flags):
        losses = [s.scale(tensor(lib, 1.0)) for _ in range(n_opts)]
        scale = float(losses[0].item())
        for ps in params:
            for p in ps:
                g = rng.standard_normal(p.shape[0]).astype(np.float32) * scale
                if flag and rng.random() < 0.7:
                    g[rng.integers(len(g))] = [np.inf, -np.inf, np.nan][it % 3]
                half = p.dtype in (torch.bfloat16, ampy.bfloat16)
                p.grad = tensor(lib, g, "bfloat16" if half else "float32")
        if it % 4 == 1 and not fused:
            s.unscale_(opts[0])  # as before clipping
        rets = [s.step(o) for o in opts]
        s.update()
        out.append((s.get_scale(), s._get_growth_tracker(), [o.steps for o in opts],
                    [r is None for r in rets] if not fused else None,
                    repr([p.grad.float().tolist() for ps in params for p in ps]) if not fused
                    else None))
    return out


@pytest.mark.parametrize("n_opts,fused", [(1, False), (2, False), (1, True)])
def test_scale_and_tracker_trajectory_identical_to_torch(n_opts, fused):
    flags = [bool(f) for f in np.random.default_rng(7).random(40) < 0.3]
    ta = _trajectory("ampy", flags, n_opts, fused)
    tt = _trajectory("torch", flags, n_opts, fused)
    assert ta == tt
    scales = [r[0] for r in ta]
    assert max(scales) > 2.0**12 and min(scales) < 2.0**12  # growth and backoff both happened


def test_fused_protocol_attributes():
    for lib in LIBS:
        s = scaler(lib, init_scale=4.0)
        p = param(lib, 2)
        opt = FusedOpt([p])
        s.scale(tensor(lib, 1.0))
        p.grad = tensor(lib, [1.0, float("inf")])
        assert s.step(opt) == "fused" and opt.steps == 1       # called despite the inf
        assert float(opt.seen[0].item()) == 4.0 and float(opt.seen[1].item()) == 1.0
        assert not hasattr(opt, "grad_scale") and not hasattr(opt, "found_inf")
        assert p.grad.tolist() == [1.0, float("inf")]           # the kernel unscales, not us


def test_update_new_scale():
    for lib in LIBS:
        s = scaler(lib)
        s.scale(tensor(lib, 1.0))
        s.update(new_scale=8.0)
        assert s.get_scale() == 8.0 and s._get_growth_tracker() == 0
        s.update(tensor(lib, 2.0))  # torch rejects a shape-[1] tensor here (copy_ into [])
        assert s.get_scale() == 2.0
    for bad in (ampy.ones(2), ampy.ones(1).requires_grad_()):
        s = scaler("ampy")
        s.scale(ampy.ones(()))
        with pytest.raises(AssertionError, match="new_scale should be a float"):
            s.update(bad)


# --------------------------------------------------- state_dict / pickling
def test_state_dict_round_trip_non_default_values():
    sds = {}
    for lib in LIBS:
        s = scaler(lib, init_scale=1024.0, growth_factor=3.0, backoff_factor=0.25,
                   growth_interval=7)
        p = param(lib, 2)
        for g in ([1.0, 2.0], [1.0, 2.0], [float("inf"), 0.0], [1.0, 1.0], [3.0, 1.0]):
            s.scale(tensor(lib, 1.0))
            p.grad = tensor(lib, g)
            s.step(Opt([p]))
            s.update()
        sds[lib] = s.state_dict()
    assert sds["ampy"] == sds["torch"] and list(sds["ampy"]) == list(sds["torch"])
    assert sds["ampy"]["_growth_tracker"] == 2 and sds["ampy"]["scale"] == 256.0
    for lazy in (True, False):
        s2 = scaler("ampy")
        if not lazy:
            s2.scale(ampy.ones(()))
        s2.load_state_dict(sds["ampy"])
        assert s2.state_dict() == sds["ampy"]
    ext = scaler("ampy", min_scale=1.0, max_scale=2.0**20, hysteresis=3)
    sd = ext.state_dict()
    assert sd["min_scale"] == 1.0 and sd["max_scale"] == 2.0**20 and sd["hysteresis"] == 3
    s3 = scaler("ampy")
    s3.load_state_dict(sd)
    assert s3.state_dict() == sd
    with pytest.raises(KeyError, match="scale"):
        scaler("ampy").load_state_dict({"growth_factor": 2.0})
    with pytest.raises(TypeError, match="growth_interval"):
        scaler("ampy").load_state_dict({**sd, "growth_interval": "7"})


def test_pickling_rules():
    s = scaler("ampy", init_scale=32.0, growth_interval=1)
    p = param("ampy", 2)
    s.scale(ampy.ones(()))
    p.grad = ampy.ones(2)
    s.step(Opt([p]))
    s.update()
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.state_dict() == s.state_dict() and s2._scale is None and s2.get_scale() == 64.0
    assert s2.history == s.history


# ------------------------------------------------------------- ampy extras
def _iterate(s, p, grads, opt=None):
    opt = opt or Opt([p])
    for g in grads:
        s.scale(ampy.ones(()))
        p.grad = ampy.tensor(g).to(p.dtype)
        s.step(opt)
        s.update()
    return opt


def test_last_step_skipped_history_and_report():
    s = GradScaler("cpu", init_scale=4.0, history_size=3, report_nonfinite=True)
    p = param("ampy", 2)
    s.set_param_names([("w", p)])
    assert s.last_step_skipped is False
    _iterate(s, p, [[1.0, 1.0]])
    assert s.last_step_skipped is False
    _iterate(s, p, [[1.0, float("nan")]])
    assert s.last_step_skipped is True and s.nonfinite_params == ["w"]
    _iterate(s, p, [[1.0, 1.0]] * 3)
    assert [h[0] for h in s.history] == [2, 3, 4] and s.history[0] == (2, 2.0, False)


def test_min_max_scale_and_hysteresis():
    s = GradScaler("cpu", init_scale=4.0, min_scale=2.0, growth_interval=1, max_scale=16.0)
    p = param("ampy", 1)
    _iterate(s, p, [[float("inf")]] * 3)
    assert s.get_scale() == 2.0
    _iterate(s, p, [[1.0]] * 5)
    assert s.get_scale() == 16.0
    h = GradScaler("cpu", init_scale=8.0, hysteresis=2)
    _iterate(h, p, [[float("inf")]])
    assert h.get_scale() == 8.0            # first overflow tolerated
    _iterate(h, p, [[float("inf")]])
    assert h.get_scale() == 4.0


def test_warns_once_when_scaling_buys_nothing():
    from ampy.amp import autocast_mode
    if ampy.float16 in autocast_mode._seen_dtypes:
        autocast_mode._seen_dtypes.discard(ampy.float16)
    s = GradScaler("cpu")
    p = param("ampy", 2, "bfloat16")
    with pytest.warns(UserWarning, match="loss scaling cannot prevent any underflow"):
        _iterate(s, p, [[1.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _iterate(s, p, [[1.0, 1.0]])                    # once
        with ampy.autocast("cpu", dtype=ampy.float16):  # fp32 grads + fp16 autocast: no warning
            pass
        _iterate(GradScaler("cpu"), param("ampy", 2), [[1.0, 1.0]])
