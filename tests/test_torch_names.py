"""The names torch users type, side by side with torch 2.13 on this machine:
the old torch.cuda.amp / torch.cpu.amp spellings (their FutureWarnings, and
the CUDA ones disabling themselves without a GPU), top-level names
(GradScaler, inf, nan, pi, e), format() of tensors, is_floating_point,
ampy.backends (the TF32 flag reaching the CUDA module's GEMM setting through
the ampy_cuda_api table) and ampy.accelerator.
"""
import math
import os
import warnings

import pytest
import torch

import ampy
from ampy import _C

from _helpers import requires_cuda

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [(x.category, str(x.message)) for x in w]


def _ampy_text(msg):
    """torch's message in ampy's words (the library's own name in it)."""
    return msg.replace("torch.", "ampy.")


# --------------------------------------------------------- old amp spellings
@pytest.mark.parametrize("kw", [{}, {"dtype": "bfloat16"}, {"enabled": False}])
def test_cuda_amp_autocast_warns_and_disables_like_torch(kw):
    kt = {k: (getattr(torch, v) if k == "dtype" else v) for k, v in kw.items()}
    ka = {k: (getattr(ampy, v) if k == "dtype" else v) for k, v in kw.items()}
    t, wt = _record(lambda: torch.cuda.amp.autocast(**kt))
    a, wa = _record(lambda: ampy.cuda.amp.autocast(**ka))
    assert [c for c, _ in wa] == [c for c, _ in wt]
    assert wa[0] == (FutureWarning, _ampy_text(wt[0][1]))
    assert a._enabled == t._enabled == (ampy.cuda.is_available() and kw.get("enabled", True))
    assert a.fast_dtype.name == str(t.fast_dtype).split(".")[1]
    with a:
        assert not ampy.is_autocast_enabled("cuda") or ampy.cuda.is_available()


def test_cuda_amp_autocast_as_decorator():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")

        @ampy.cuda.amp.autocast()
        def f(x):
            return ampy.is_autocast_enabled("cuda")

        assert f(1) is ampy.cuda.is_available()


@pytest.mark.parametrize("enabled", (True, False))
def test_cuda_amp_grad_scaler_warns_and_disables_like_torch(enabled):
    t, wt = _record(lambda: torch.cuda.amp.GradScaler(enabled=enabled))
    a, wa = _record(lambda: ampy.cuda.amp.GradScaler(enabled=enabled))
    assert [c for c, _ in wa] == [c for c, _ in wt]
    assert wa[0] == (FutureWarning, _ampy_text(wt[0][1]))
    if len(wt) > 1:
        assert "GradScaler is enabled, but CUDA is not available.  Disabling." in wa[1][1]
    assert a.is_enabled() == t.is_enabled()
    assert isinstance(a, ampy.amp.GradScaler)
    # a disabled scaler passes the loss and the step through
    if not a.is_enabled():
        loss = ampy.tensor(3.0)
        assert a.scale(loss) is loss


def test_cpu_amp_autocast_and_grad_scaler_like_torch():
    t, wt = _record(lambda: torch.cpu.amp.autocast())
    a, wa = _record(lambda: ampy.cpu.amp.autocast())
    assert wa == [(FutureWarning, _ampy_text(wt[0][1]))]
    assert a._enabled and t._enabled and a.fast_dtype is ampy.bfloat16
    x = ampy.ones(2, 3)
    with a:
        assert ampy.is_autocast_enabled("cpu")
        assert (x @ x.T).dtype is ampy.bfloat16
    st, wt = _record(lambda: torch.cpu.amp.GradScaler(init_scale=8.0))
    sa, wa = _record(lambda: ampy.cpu.amp.GradScaler(init_scale=8.0))
    assert wa == [(FutureWarning, _ampy_text(wt[0][1]))]
    assert sa.is_enabled() and sa.get_scale() == st.get_scale() == 8.0


def test_custom_fwd_bwd_and_helpers():
    _, wt = _record(lambda: torch.cuda.amp.custom_fwd(lambda x: x))
    f, wa = _record(lambda: ampy.cuda.amp.custom_fwd(lambda x: x))
    assert wa == [(FutureWarning, _ampy_text(wt[0][1]))] and callable(f)
    _, wt = _record(lambda: torch.cuda.amp.custom_bwd(lambda c, g: g))
    _, wa = _record(lambda: ampy.cuda.amp.custom_bwd(lambda c, g: g))
    assert wa == [(FutureWarning, _ampy_text(wt[0][1]))]
    assert ampy.cuda.amp.amp_definitely_not_available() is (not ampy.cuda.is_available())
    from ampy.cuda.amp import GradScaler, autocast  # noqa: F401  (the tutorial import)
    from ampy.cpu.amp import autocast as cpu_autocast  # noqa: F401


# ----------------------------------------------------------- top-level names
def test_top_level_names():
    assert ampy.GradScaler is ampy.amp.GradScaler
    assert torch.GradScaler is torch.amp.GradScaler
    assert ampy.autocast is ampy.amp.autocast
    for n in ("inf", "nan", "pi", "e"):
        a, t = getattr(ampy, n), getattr(torch, n)
        assert (math.isnan(a) and math.isnan(t)) or a == t, n
    assert ampy.newaxis is torch.newaxis is None


def test_format_of_tensors_like_torch():
    for M in (torch, ampy):
        assert format(M.tensor(3.14159), ".2f") == "3.14"
        assert f"{M.tensor(2):d}" == "2"
        assert f"{M.tensor(1.5)}" == "1.5"
        assert f"{M.tensor(7, dtype=M.float16):.1f}" == "7.0"
    for spec in ("", ".2f"):
        outs = []
        for M in (torch, ampy):
            x = M.tensor([1.0, 2.0])
            try:
                outs.append(format(x, spec).replace("ampy", "torch"))
            except TypeError as e:
                outs.append(("TypeError", str(e)))
        assert outs[0] == outs[1], outs
    with pytest.raises(TypeError, match="unsupported format string passed to Parameter"):
        format(ampy.nn.Parameter(ampy.tensor(1.0)), ".2f")


def test_is_floating_point_like_torch():
    for M in (torch, ampy):
        assert M.tensor(1.0).is_floating_point() and not M.tensor(1).is_floating_point()
        assert M.is_floating_point(M.ones(2, dtype=M.bfloat16))
    msgs = []
    for M in (torch, ampy):
        with pytest.raises(TypeError) as e:
            M.is_floating_point(1.0)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


# -------------------------------------------------------------------- backends
def test_backend_flag_defaults_are_torchs():
    tb, ab = torch.backends, ampy.backends
    assert ab.cuda.matmul.allow_tf32 == tb.cuda.matmul.allow_tf32 is False
    for name in ("allow_tf32", "benchmark", "deterministic", "enabled"):
        assert getattr(ab.cudnn, name) == getattr(tb.cudnn, name), name
    assert ampy.get_float32_matmul_precision() == "highest"
    assert ab.cudnn.is_available() is False and ab.mkldnn.is_available() is False
    assert ab.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        ab.cuda.matmul.foo = 1
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        ab.cuda.matmul.foo


def test_matmul_precision_and_allow_tf32_move_together():
    m = ampy.backends.cuda.matmul
    try:
        ampy.set_float32_matmul_precision("high")
        assert m.allow_tf32 and ampy.get_float32_matmul_precision() == "high"
        ampy.set_float32_matmul_precision("medium")
        assert m.allow_tf32 and ampy.get_float32_matmul_precision() == "medium"
        m.allow_tf32 = False
        assert ampy.get_float32_matmul_precision() == "highest"
        m.allow_tf32 = True
        assert ampy.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="bad is not one of 'highest', 'high', or 'medium'"):
            ampy.set_float32_matmul_precision("bad")
        assert m.allow_tf32
        with pytest.raises(TypeError):
            m.allow_tf32 = 1
    finally:
        ampy.set_float32_matmul_precision("highest")
    assert not m.allow_tf32


def test_tf32_flag_reaches_the_cuda_module_through_the_api_table():
    """Where ampy._C_cuda is built, the flag is the value cuda/blas.cu reads at
    each GEMM (ampy_cuda_get_matmul_tf32, through the table); without it,
    there is no CUDA GEMM and the binding says so (None)."""
    m = ampy.backends.cuda.matmul
    built = ampy.cuda._K is not None
    try:
        for on in (True, False, True):
            m.allow_tf32 = on
            assert m._cuda_module_value() is (on if built else None)
            assert _C._cuda_get_matmul_tf32() is (on if built else None)
        ampy.set_float32_matmul_precision("highest")
        assert m._cuda_module_value() is (False if built else None)
    finally:
        m.allow_tf32 = False
    if built:
        assert ampy.cuda._K._api_entries()["set_matmul_tf32"]
        assert ampy.cuda._K._api_entries()["get_matmul_tf32"]


def test_blas_picks_the_tf32_compute_type_from_the_flag():
    """The compute type of cuda/blas.cu's float32 GEMM is chosen from the flag
    (the kernel itself needs a GPU; this pins the source)."""
    src = open(os.path.join(HERE, "cuda", "blas.cu")).read()
    assert "CUBLAS_COMPUTE_32F_FAST_TF32 = 77" in src
    assert "g->in_dtype == AMPY_FLOAT32 && ampy_cuda_get_matmul_tf32()" in src


@requires_cuda
def test_tf32_changes_float32_matmul_on_the_gpu():
    """With TF32 allowed, a float32 GEMM rounds its inputs to 10-bit
    mantissas: the result moves away from the exact float32 product."""
    a = ampy.tensor([[1.0 + 2.0**-20]], device="cuda")
    b = ampy.tensor([[1.0]], device="cuda")
    m = ampy.backends.cuda.matmul
    try:
        m.allow_tf32 = False
        exact = (a @ b).item()
        m.allow_tf32 = True
        tf32 = (a @ b).item()
    finally:
        m.allow_tf32 = False
    assert exact == 1.0 + 2.0**-20 and tf32 == 1.0


# ----------------------------------------------------------------- accelerator
def test_accelerator_maps_to_ampy_cuda():
    acc = ampy.accelerator
    assert acc.is_available() == ampy.cuda.is_available() == torch.accelerator.is_available()
    assert acc.device_count() == ampy.cuda.device_count()
    cur = acc.current_accelerator()
    assert cur == (ampy.device("cuda") if ampy.cuda._K is not None else None)
    checked = acc.current_accelerator(check_available=True)
    assert (checked is None) == (torch.accelerator.current_accelerator(True) is None)
    if not acc.is_available():
        for fn in (acc.current_device_index, acc.synchronize, acc.memory_allocated,
                   acc.empty_cache):
            msgs = []
            for f in (fn, getattr(torch.accelerator, fn.__name__)):
                with pytest.raises(RuntimeError) as e:
                    f()
                msgs.append(str(e.value))
            assert msgs[0] == msgs[1]


def test_cpu_device_module():
    for f in ("is_available", "device_count", "current_device"):
        assert getattr(ampy.cpu, f)() == getattr(torch.cpu, f)()
    ampy.cpu.synchronize()
