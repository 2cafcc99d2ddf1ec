"""One road to CUDA: every device decision is made by ampy._C's bindings,
which check their arguments once and then run libampy or call the CUDA
kernels through the ampy_cuda_api table. These tests run without a GPU: the
Python twins, monkeypatches and device hooks are gone; a CUDA tensor meets
the same argument checks as a CPU tensor, so the errors are the CPU's (the
fake CUDA tensors below wrap host memory and never reach a kernel); and
ampy._C_cuda refuses a _C of another tensor layout."""
import importlib
import importlib.util
import re

import numpy as np
import pytest

import ampy
import ampy.cuda
from ampy import _C
from ampy import _dispatch
from ampy.amp import functional as F


# ---------------------------------------------------------------- what is gone
@pytest.mark.parametrize("mod", ["_kernels", "_advindex", "_amp", "_ops"])
def test_python_twins_are_gone(mod):
    with pytest.raises(ImportError):
        importlib.import_module("ampy.cuda." + mod)


def test_no_device_hook_and_no_monkeypatching():
    from ampy import _indexing
    from ampy.autograd import _rules_views as RV
    assert not hasattr(_dispatch, "forward_for")
    assert not hasattr(_dispatch._hooks, "device")
    assert "cuda" not in _dispatch.OpDef.__slots__
    with pytest.raises(TypeError):
        _dispatch.set_hooks(device=lambda op, a, k: op.forward)
    assert not hasattr(_indexing, "_cuda") and not hasattr(_indexing, "_dev")
    assert not hasattr(RV.index_put_accumulate, "_ampy_cuda")
    assert "item" not in ampy.Tensor.__dict__  # the C method, for every device
    assert not hasattr(F, "_cuda")


# ---------------------------------------------------------------- fake CUDA tensors
_KEEP = []


def fake_cuda(a):
    """A tensor that claims to be on cuda:0 over host memory (a NumPy array):
    enough for every argument check, never given to a kernel here."""
    a = np.ascontiguousarray(a)
    _KEEP.append(a)
    dt = {np.float32: ampy.float32, np.float64: ampy.float64, np.int64: ampy.int64,
          np.int32: ampy.int32, np.float16: ampy.float16}[a.dtype.type]
    strides = tuple(s // a.itemsize for s in a.strides)
    return _C._device_tensor(a.ctypes.data, a.nbytes, 0, dt, a.shape, strides, a)


def on(device, a):
    return fake_cuda(a) if device == "cuda" else ampy.from_numpy(np.ascontiguousarray(a))


def _raises_same(call):
    """call(device) raises the same exception type and message on both."""
    got = {}
    for device in ("cpu", "cuda"):
        with pytest.raises(Exception) as e:
            call(device)
        got[device] = (type(e.value), str(e.value))
    assert got["cpu"] == got["cuda"], got
    return got["cpu"]


def test_fake_cuda_tensor_is_on_cuda():
    t = fake_cuda(np.zeros(3, np.float32))
    assert t._device_index == 0 and t.is_cuda


def _adam(device, lr=1e-3, dtype=np.float32, grad_device=None, betas=(0.9, 0.999)):
    p = on(device, np.zeros(4, dtype))
    g = on(grad_device or device, np.zeros(4, dtype))
    m, v = on(device, np.zeros(4, np.float32)), on(device, np.zeros(4, np.float32))
    st = on(device, np.zeros(1, np.float32))
    return F.adam_step_([p], [g], [m], [v], None, [st], lr=lr, beta1=betas[0], beta2=betas[1],
                        eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False)


@pytest.mark.parametrize("case", [
    dict(lr=-1.0), dict(betas=(1.5, 0.999)), dict(dtype=np.float64),
])
def test_adam_checks_are_shared(case):
    kind, msg = _raises_same(lambda device: _adam(device, **case))
    assert kind in (ValueError, TypeError)


def test_adam_mixed_devices_name_the_tensor():
    with pytest.raises(ValueError, match=r"grads\[0\] is on cpu but the tensors before it are "
                                         r"on cuda:0"):
        _adam("cuda", grad_device="cpu")


def _sgd(device, **kw):
    p = on(device, np.zeros(4, np.float32))
    g = on(device, np.zeros(4, np.float16))
    args = dict(lr=0.1, momentum=0.9)
    args.update(kw)
    return F.sgd_step_([p], [g], None, **args)


@pytest.mark.parametrize("case", [dict(lr=-0.5), dict(momentum=-1.0),
                                  dict(nesterov=True, dampening=0.5)])
def test_sgd_checks_are_shared(case):
    _raises_same(lambda device: _sgd(device, **case))


def test_update_scale_checks_are_shared():
    def call(device):
        s = on(device, np.ones(1, np.float32))
        t = on(device, np.zeros(1, np.int32))
        f = on(device, np.zeros(1, np.float32))
        F.update_scale_(s, t, f, 2.0, 0.5, 100, hysteresis=2)
    kind, msg = _raises_same(call)
    assert kind is ValueError and "hysteresis" in msg


def test_unscale_checks_are_shared():
    def call(device):
        found = on(device, np.zeros(1, np.float32))
        inv = on(device, np.ones(1, np.float32))
        F.non_finite_check_and_unscale_([on(device, np.zeros(3, np.int64))], found, inv)
    kind, _ = _raises_same(call)
    assert kind is TypeError


def test_gemm_checks_are_shared():
    a = np.zeros((2, 3, 4), np.float32)
    kind, msg = _raises_same(lambda d: _C.gemm_batched(on(d, a), on(d, np.zeros((2, 5, 2),
                                                                                  np.float32))))
    assert kind is ValueError and "last dim" in msg
    kind, msg = _raises_same(lambda d: _C.gemm(on(d, a[0]), on(d, np.zeros((4, 2), np.float64))))
    assert kind is TypeError and "same dtype" in msg
    with pytest.raises(RuntimeError, match="same device"):
        _C.gemm(fake_cuda(a[0]), ampy.zeros((4, 2)))
    with pytest.raises(RuntimeError, match="same device"):
        ampy.matmul(ampy.zeros((3, 4)), fake_cuda(np.zeros((4, 2), np.float32)))


def test_index_checks_are_shared():
    def bad_values(device):
        z = on(device, np.zeros((5, 2), np.float32))
        idx = on(device, np.array([0, 1], np.int64))
        _C.index_scatter(z, 1, [idx], on(device, np.zeros((3, 2), np.float32)), True)
    kind, msg = _raises_same(bad_values)
    assert kind is ValueError and "values must be" in msg

    def int_accumulate(device):
        z = on(device, np.zeros(5, np.int64))
        idx = on(device, np.array([0, 0], np.int64))
        _C.index_scatter(z, 1, [idx], on(device, np.ones(2, np.int64)), True)
    kind, msg = _raises_same(int_accumulate)
    assert kind is TypeError and "accumulate=True" in msg
    with pytest.raises(RuntimeError, match=r"indices should be either on cpu or on the same "
                                           r"device as the indexed tensor \(cpu\)"):
        _C.index_gather(ampy.zeros(4), 1, [fake_cuda(np.array([0], np.int64))])
    with pytest.raises(RuntimeError, match="values are on cuda:0 but the indexed tensor is on "
                                           "the cpu"):
        _C.index_scatter(ampy.zeros(4), 1, [ampy.tensor([0])], fake_cuda(np.ones(1, np.float32)))


def test_cat_checks_devices():
    with pytest.raises(RuntimeError, match="same device"):
        ampy.cat([ampy.zeros(2), fake_cuda(np.zeros(2, np.float32))])


# ---------------------------------------------------------------- the CPU fallback
class _StandIn:
    def __init__(self, name, devices=None):
        self.name = name
        self.forward = lambda x: x + 1
        if devices is not None:
            self.devices = devices


def test_cpu_fallback_wraps_only_cpu_only_ops():
    from ampy.cuda import _fallback
    table = {"a": _StandIn("a", ("cpu",)), "b": _StandIn("b", ("cpu", "cuda")),
             "c": _StandIn("c")}
    before = {k: op.forward for k, op in table.items()}
    _fallback.install(table)
    assert table["a"].forward is not before["a"] and table["a"].forward.ampy_cpu_fallback
    assert table["b"].forward is before["b"] and table["c"].forward is before["c"]
    wrapped = table["a"].forward
    _fallback.install(table)  # once
    assert table["a"].forward is wrapped
    x = ampy.ones(3)
    np.testing.assert_array_equal(wrapped(x).numpy(), np.full(3, 2.0, np.float32))


# ops declared host-only, and why (CUDA tensors of the scatter_reduce ops take the CPU fallback)
CPU_ONLY = {
    # nn.LSTM/GRU/RNN send CUDA tensors to the per-step cells (cuda/rnn.cu), never here
    "rnn_layer": "the whole-layer time loop is host C; CUDA layers run the fused cells",
    "scatter_reduce": "no device kernel combines products / maxima / minima in index order yet",
    "scatter_reduce_": "no device kernel combines products / maxima / minima in index order yet",
    # csrc/cnn_pool3d.c (the volume kernel) has no CUDA twin yet; AdaptiveMaxPool2d runs it
    # with depth 1
    "max_pool3d": "the volume pool kernel is host C only",
    "max_pool3d_with_indices": "the volume pool kernel is host C only",
    "avg_pool3d": "the volume pool kernel is host C only",
    "adaptive_avg_pool3d": "the volume pool kernel is host C only",
    "adaptive_max_pool2d": "runs the volume pool kernel (host C only) with depth 1",
    "adaptive_max_pool3d": "runs the volume pool kernel (host C only)",
}

# ops whose CUDA kernels are reached through the _C bindings of csrc/py/
# (cuda/cnn_*.cu, cuda/sort.cu): their _C functions accept CUDA tensors
DEVICE_ROUTED = {
    "batch_norm": ("cnn_py.c", ["cnn_batch_norm_fwd", "cnn_batch_norm_bwd"]),
    "group_norm": ("cnn_py.c", ["cnn_group_norm_fwd", "cnn_group_norm_bwd"]),
    "max_pool2d": ("cnn_pool_py.c", ["cnn_max_pool2d_fwd", "cnn_max_pool2d_bwd"]),
    "avg_pool2d": ("cnn_pool_py.c", ["cnn_avg_pool2d_fwd", "cnn_avg_pool2d_bwd"]),
    "adaptive_avg_pool2d": ("cnn_pool_py.c", ["cnn_adaptive_avg_pool2d_fwd",
                                              "cnn_adaptive_avg_pool2d_bwd"]),
    "pad": ("cnn_pool_py.c", ["cnn_pad_fwd", "cnn_pad_bwd"]),
    "interpolate": ("cnn_pool_py.c", ["cnn_interp2d_fwd", "cnn_interp2d_bwd"]),
    "sort": ("tensorops_py.c", ["sort", "topk", "multinomial"]),
}


@pytest.mark.parametrize("op", sorted(DEVICE_ROUTED))
def test_cnn_and_sort_bindings_call_the_device_kernels(op):
    import os
    f, entries = DEVICE_ROUTED[op]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = open(os.path.join(here, "csrc", "py", f)).read()
    for e in entries:
        assert any(c in src for c in (f"CN_CALL({e},", f"PL_CALL({e},", f"SORT_CALL(x, {e},",
                                      f"SORT_CALL(p, {e},")), (f, e)


def test_cnn_checks_are_shared():
    """A CUDA tensor meets the CPU's argument checks in the cnn bindings."""
    def bad_pad(device):
        _C.cnn_pad_fwd(on(device, np.zeros((2, 3), np.float32)), (1,), 1, 0.0)
    kind, msg = _raises_same(bad_pad)
    assert kind is ValueError and "pads" in msg

    def bad_indices(device):
        dy = on(device, np.zeros((1, 2, 2), np.float32))
        _C.cnn_max_pool2d_bwd(dy, on(device, np.zeros((1, 2, 2), np.int32)), 4, 4)
    kind, msg = _raises_same(bad_indices)
    assert kind is ValueError and "indices" in msg

    def bad_groups(device):
        x = on(device, np.zeros((2, 4, 3), np.float32))
        _C.cnn_group_norm_bwd(x, x, 0, None, None, on(device, np.zeros(2)),
                              on(device, np.zeros(2)), True, False, False)
    kind, msg = _raises_same(bad_groups)
    assert kind is ValueError and "mismatched" in msg


@pytest.mark.parametrize("rows, message", [
    ([[1.0, 2.0], [0.0, 0.0]], "sum of probabilities <= 0"),
    ([[0.0, 0.0], [1.0, -1.0]], "sum of probabilities <= 0"),
    ([[1.0, float("nan")], [0.0, 0.0]], "`inf`, `nan` or element < 0"),
    ([[1.0, 2.0], [float("inf"), 1.0]], "`inf`, `nan` or element < 0"),
    ([[1.0, -0.5], [1.0, 1.0]], "`inf`, `nan` or element < 0"),
])
def test_multinomial_device_weight_checks_are_the_kernels(rows, message):
    """The checks ampy/_sorting.py makes for CUDA weights (device reductions,
    one read of per-row flags) raise what the CPU kernel raises, first bad
    row first; run here on CPU tensors, which those reductions accept too."""
    from ampy import _sorting
    w = ampy.tensor(rows, dtype=ampy.float64)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _sorting._check_device_weights(w)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _C.multinomial(w, 1, True, ampy.zeros(2, dtype=ampy.float64))
    _sorting._check_device_weights(ampy.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=ampy.float64))


def test_cnn_mixed_devices_name_the_tensor():
    x = fake_cuda(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(RuntimeError, match="argument 'weight' is on the CPU"):
        _C.cnn_batch_norm_fwd(x, ampy.ones(3), None, None, None, True, 0.1, 1e-5)
    with pytest.raises(RuntimeError, match="argument 'indices' is on the CPU"):
        _C.cnn_max_pool2d_bwd(fake_cuda(np.zeros((1, 2, 2), np.float32)),
                              ampy.zeros((1, 2, 2), dtype=ampy.int64), 4, 4)


def test_every_op_declares_a_device_path():
    """No op of the table falls back to the CPU but the listed ones."""
    from ampy.cuda import _fallback
    assert sorted(n for n, op in _dispatch.ops().items()
                  if "cuda" not in _fallback.devices(op)) == sorted(CPU_ONLY)


# ---------------------------------------------------------------- _C_cuda's layout check
def _cuda_module():
    if importlib.util.find_spec("ampy._C_cuda") is None:
        pytest.skip("ampy._C_cuda is not built here")
    return importlib.import_module("ampy._C_cuda")


def test_tensor_layout_constant():
    version, tensor_size, storage_size = _C._TENSOR_LAYOUT
    assert version >= 1 and tensor_size == _C.TensorBase.__basicsize__ and storage_size > 0


def test_init_accepts_the_matching_layout():
    _cuda_module()._init(_C.TensorBase, _C._TENSOR_LAYOUT)


def test_init_rejects_another_tensor_type():
    mod = _cuda_module()
    fake = type("FakeTensor", (), {"__slots__": ("a",)})
    assert fake.__basicsize__ != _C.TensorBase.__basicsize__
    with pytest.raises(ImportError, match="rebuild ampy"):
        mod._init(fake, _C._TENSOR_LAYOUT)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_init_rejects_another_layout(k):
    mod = _cuda_module()
    layout = list(_C._TENSOR_LAYOUT)
    layout[k] += 8
    with pytest.raises(ImportError, match="tensor layout"):
        mod._init(_C.TensorBase, tuple(layout))
