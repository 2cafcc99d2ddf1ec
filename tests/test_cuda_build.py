"""The CUDA backend on a machine WITHOUT a GPU (CI, the project's machines):
where nvcc exists, ampy._C_cuda must have been built and must import; CUDA
reports itself unavailable without raising, and every CUDA request fails with
a clear RuntimeError instead of crashing."""
import importlib.util
import os
import sys

import pytest

import ampy
import ampy.cuda

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build_script():
    spec = importlib.util.spec_from_file_location("ampy_cuda_build",
                                                  os.path.join(HERE, "cuda", "ampy_cuda_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cuda_expected():
    """ampy._C_cuda must exist: the build rule makes it here (nvcc, and a
    driver or AMPY_CUDA=1), or a built module is present anyway."""
    from importlib.machinery import EXTENSION_SUFFIXES
    here = os.path.dirname(ampy.__file__)
    if any(os.path.exists(os.path.join(here, "_C_cuda" + s)) for s in EXTENSION_SUFFIXES):
        return True
    b = _build_script()
    mode = os.environ.get("AMPY_CUDA", "auto")
    return (mode != "0" and not os.environ.get("AMPY_SANITIZE") and b.find_cuda_home() is not None
            and (mode == "1" or b.driver_present())
            and os.path.exists(os.path.join(here, "..", "cuda")))


def test_cuda_module_built_where_nvcc_exists():
    if not _cuda_expected():
        pytest.skip("no CUDA toolkit here (or AMPY_CUDA=0): the CPU package is all there is")
    mod = importlib.import_module("ampy._C_cuda")
    assert hasattr(mod, "_api") and hasattr(mod, "_gemm")
    assert ampy._C._cuda_registered()


def test_import_without_gpu_is_clean():
    if ampy.cuda.is_available():
        pytest.skip("a GPU is present: see test_cuda_runtime.py")
    assert ampy.cuda.is_available() is False
    assert ampy.cuda.device_count() == 0
    ampy.cuda.empty_cache()  # a no-op, never raises
    assert isinstance(ampy.cuda._reason, str) and ampy.cuda._reason


@pytest.mark.parametrize("call", [
    lambda: ampy.zeros(2, device="cuda"),
    lambda: ampy.ones(3).cuda(),
    lambda: ampy.ones(3).to("cuda:0"),
    lambda: ampy.cuda.current_device(),
    lambda: ampy.cuda.synchronize(),
    lambda: ampy.cuda.get_device_name(0),
    lambda: ampy.cuda.memory_allocated(),
    lambda: ampy._C._empty_device((2,), ampy.float32, 0),
])
def test_cuda_requests_raise_runtime_error(call):
    if ampy.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        call()


def test_cpu_path_has_no_device_hook():
    if ampy.cuda.is_available():
        pytest.skip("a GPU is present")
    from ampy import _dispatch
    assert _dispatch._hooks.device is None


def test_build_flags(monkeypatch):
    monkeypatch.delenv("AMPY_CUDA_ARCH_LIST", raising=False)
    b = _build_script()
    flags = b._arch_flags()
    assert "-gencode=arch=compute_80,code=sm_80" in flags
    assert "-gencode=arch=compute_90,code=sm_90" in flags
    assert "-gencode=arch=compute_90,code=compute_90" in flags
    monkeypatch.setenv("AMPY_CUDA_ARCH_LIST", "8.6;9.0a")
    assert b._arch_flags() == ["-gencode=arch=compute_86,code=sm_86",
                               "-gencode=arch=compute_90a,code=sm_90a"]
    src = open(os.path.join(HERE, "cuda", "ampy_cuda_build.py")).read()
    assert "--fmad=false" in src and '"--use_fast_math"' not in src


def test_cuda_extension_modes(monkeypatch):
    b = _build_script()
    monkeypatch.setenv("AMPY_CUDA", "0")
    assert b.cuda_extension(HERE) is None
    monkeypatch.setenv("AMPY_CUDA", "auto")
    monkeypatch.setenv("CUDA_HOME", "/nonexistent")
    ext = b.cuda_extension(HERE)
    if b.find_cuda_home() is None or not b.driver_present():
        assert ext is None  # auto: nvcc AND a driver
    else:
        assert ext.optional_cuda and ext.name == "ampy._C_cuda"
        assert all(s.endswith(".cu") for s in ext.sources)
    if b.find_cuda_home() is not None:
        monkeypatch.setenv("AMPY_CUDA", "1")  # CI: built wherever nvcc is, driver or not
        ext = b.cuda_extension(HERE)
        assert ext.optional_cuda and not ext.optional


def test_auto_mode_needs_a_driver(monkeypatch):
    """AMPY_CUDA=auto builds only where nvcc AND an NVIDIA driver exist, so a
    first run on a machine without a GPU does not compile CUDA code."""
    b = _build_script()
    monkeypatch.setattr(b, "find_cuda_home", lambda: "/opt/fake-cuda")
    monkeypatch.setenv("AMPY_CUDA", "auto")
    monkeypatch.delenv("AMPY_SANITIZE", raising=False)
    monkeypatch.setattr(b, "driver_present", lambda: False)
    assert b.cuda_extension(HERE) is None
    monkeypatch.setattr(b, "driver_present", lambda: True)
    assert b.cuda_extension(HERE).cuda_home == "/opt/fake-cuda"
    monkeypatch.setattr(b, "driver_present", lambda: False)
    monkeypatch.setenv("AMPY_CUDA", "1")
    assert b.cuda_extension(HERE).cuda_home == "/opt/fake-cuda"


def test_driver_probe_matches_the_machine():
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        loads = True
    except OSError:
        loads = False
    assert _build_script().driver_present() == (loads or os.path.exists("/proc/driver/nvidia"))


# ---------------------------------------------------------------- the device kernels
# (ewise.cu, reduce.cu, softmax.cu, nn*.cu, index.cu): they must compile, link into ampy._C_cuda and be
# reachable from ampy._C's bindings. Without a GPU nothing can run them; these
# checks make a missing symbol, an unfilled table entry or a forgotten route fail CI.
KERNEL_ENTRY_POINTS = [
    "ampy_ewise_cuda", "ampy_reduce_cuda", "ampy_softmax_cuda",
    "ampy_nn_layer_norm_fwd_cuda", "ampy_nn_layer_norm_bwd_cuda",
    "ampy_nn_cross_entropy_fwd_cuda", "ampy_nn_cross_entropy_bwd_cuda",
    "ampy_nn_nll_loss_fwd_cuda", "ampy_nn_nll_loss_bwd_cuda", "ampy_nn_embedding_fwd_cuda",
    "ampy_nn_embedding_bwd_cuda", "ampy_nn_mask_scale_cuda", "ampy_fill_random_cuda",
    "ampy_nn_mse_fwd_cuda", "ampy_nn_mse_bwd_cuda", "ampy_scan_cuda",
    "ampy_cast_cuda", "ampy_fill_cuda", "ampy_gemm_cuda",
    "ampy_index_gather_cuda", "ampy_index_scatter_cuda", "ampy_nonzero_cuda",
    "ampy_nonzero_fill_cuda", "ampy_cuda_set_sync_checks",
]
KERNELS = ["ewise_kernel", "reduce_kernel", "softmax_kernel", "ln_fwd_kernel", "ln_bwd_dx_kernel",
           "ln_bwd_dw_kernel", "ce_fwd_kernel", "ce_bwd_kernel", "nll_rows_kernel",
           "nll_bwd_kernel", "emb_fwd_kernel", "emb_bwd_kernel", "mask_scale_kernel",
           "fill_random_kernel", "targets_kernel", "loss_reduce_kernel", "mse_elem_kernel",
           "mse_bwd_kernel", "reduce_partial_blocks", "reduce_partial_columns", "reduce_final",
           "ln_bwd_dw_final", "scan_kernel", "index_gather_kernel", "index_scatter_kernel",
           "index_keys_kernel", "nz_flags_kernel", "nz_fill_kernel", "emb_keys_kernel",
           "check_range_kernel"]


def _cuda_module():
    if not _cuda_expected():
        pytest.skip("no CUDA toolkit here: ampy._C_cuda is not built")
    return importlib.import_module("ampy._C_cuda")


def _symbols(path):
    import shutil
    import subprocess
    if not shutil.which("nm"):
        pytest.skip("nm not available")
    out = subprocess.run(["nm", "-C", path], capture_output=True, text=True).stdout
    return {line.split(None, 2)[-1]: line.split()[-2] for line in out.splitlines()
            if len(line.split()) >= 2}


def test_every_kernel_entry_point_is_linked():
    mod = _cuda_module()
    syms = _symbols(mod.__file__)
    names = set(syms)
    for ep in KERNEL_ENTRY_POINTS:
        assert ep in names and syms[ep] in "Tt", f"{ep} missing from {mod.__file__}"
    text = " ".join(names)
    for k in KERNELS:  # the __global__ functions (host stubs of the launches)
        assert k in text, f"kernel {k} not compiled in"


def test_api_table_is_complete_and_registered():
    mod = _cuda_module()
    entries = mod._api_entries()
    assert entries and all(entries.values()), [k for k, v in entries.items() if not v]
    for k in ("ewise", "reduce", "softmax", "nn_layer_norm_fwd", "nn_cross_entropy_bwd",
              "nn_embedding_bwd", "nn_mask_scale", "fill_random"):
        assert k in entries
    assert ampy._C._cuda_registered()


def test_every_table_entry_is_called_by_a_binding():
    """Each kernel entry of the table is reached from ampy._C's bindings
    (csrc/py/*.c), so an op routed to the device really gets there."""
    mod = _cuda_module()
    src = ""
    for f in os.listdir(os.path.join(HERE, "csrc", "py")):
        if f.endswith(".c"):
            src += open(os.path.join(HERE, "csrc", "py", f)).read()
    kernels = [n for n in mod._api_entries()
               if n in ("cast", "ewise", "reduce", "softmax", "scan", "fill_random")
               or n.startswith("nn_")]
    assert len(kernels) == 17
    for name in kernels:
        if name.startswith("nn_"):
            assert f"NN_CALL({name[3:]}," in src, name
        else:
            assert f"->{name}(" in src, name


def test_routed_ops_exist_in_the_op_table():
    """Ops the device hook runs with their own forward on CUDA tensors (their
    _C calls route to the kernels) and ops with a CUDA forward are all real
    ops: a rename would otherwise silently fall back to the CPU."""
    from ampy import _dispatch
    from ampy.cuda import _ops
    names = _ops.routed_ops()
    table = _dispatch.ops()
    missing = sorted(n for n in _ops._ROUTED_IN_C if n not in table)
    assert not missing, missing
    assert names <= set(table)
    for n in ("add", "mul", "gelu", "sum", "amax", "softmax", "log_softmax", "where", "var"):
        assert n in names
    if _ops._CUDA_FORWARDS:  # filled at install (GPU only)
        assert all(n in table for n in _ops._CUDA_FORWARDS)


def test_elementwise_formulas_are_shared_with_the_cpu():
    """ampy/ewise_expr.h holds the per-element formulas: csrc/ewise_ops.c and
    cuda/ewise.cu both include it and every AMPY_EX_ formula is used by both."""
    import re
    hdr = open(os.path.join(HERE, "csrc", "include", "ampy", "ewise_expr.h")).read()
    cpu = open(os.path.join(HERE, "csrc", "ewise_ops.c")).read()
    gpu = open(os.path.join(HERE, "cuda", "ewise.cu")).read()
    assert '#include "ampy/ewise_expr.h"' in cpu and '#include "ampy/ewise_expr.h"' in gpu
    macros = set(re.findall(r"#define (AMPY_EX_[A-Z_0-9]+)\(", hdr)) - {"AMPY_EX_FLOORDIV_BODY"}
    funcs = set(re.findall(r"AMPY_ELEM \w+ (ampy_ex_\w+)\(", hdr))
    assert len(macros) >= 20 and len(funcs) >= 5
    # the device's float ops are the header's AMPY_EX_FLOAT_SWITCH (a table the
    # CPU's per-op kernels do not need): its body counts as CUDA code
    assert "AMPY_EX_FLOAT_SWITCH(" in gpu
    macros.discard("AMPY_EX_FLOAT_SWITCH")
    gpu += hdr[hdr.index("#define AMPY_EX_FLOAT_SWITCH"):]
    for m in sorted(macros | funcs):
        assert m in cpu, f"{m} unused by the CPU kernels"
        assert m in gpu, f"{m} unused by the CUDA kernels"
    # the nn and random kernels use the CPU's elem-level helpers too
    nn = "".join(open(os.path.join(HERE, "cuda", f)).read() for f in ("nn.cu", "nn_embed.cu"))
    assert "ampy_nn_expf" in nn and "ampy_philox4x32" in nn


def test_cuda_cat_stack_forwards_agree_with_cpu():
    """The CUDA forwards of cat/stack (ampy/cuda/_kernels.py) are plain Python
    over _C._empty_device + copy_: run them here with device -1 (the CPU)."""
    import numpy as np
    from ampy.cuda import _kernels as K
    a = ampy.arange(12.0).reshape(3, 4)
    b = ampy.arange(8, dtype=ampy.float16).reshape(2, 4)
    np.testing.assert_array_equal(K.cat([a, b], 0).numpy(), ampy.cat([a, b], 0).numpy())
    assert K.cat([a, b], 0).dtype is ampy.cat([a, b], 0).dtype
    np.testing.assert_array_equal(K.cat([a, a.t().t()], -1).numpy(), ampy.cat([a, a], -1).numpy())
    np.testing.assert_array_equal(K.stack([a, a * 2], 1).numpy(), ampy.stack([a, a * 2], 1).numpy())
    with pytest.raises(RuntimeError, match="Sizes"):
        K.cat([a, ampy.ones(2, 3)], 0)
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        K.cat([ampy.tensor(1.0)], 0)


def test_device_hook_treats_basic_indexing_as_views():
    from ampy.cuda._ops import _basic_key
    assert _basic_key((slice(None), slice(0, 8))) and _basic_key(3)
    assert _basic_key((Ellipsis, None, -1))
    assert not _basic_key(True) and not _basic_key([0, 1])
    assert not _basic_key((slice(None), ampy.tensor([0, 1])))


def test_cuda_table_covers_the_routed_ops_and_their_forwards_route():
    """cuda_table() (what install() puts in OpDef.cuda) has an entry for every
    routed op; and the forward of each routed op calls only _C functions that
    send CUDA tensors to the device kernels (no host allocation, no CPU-only
    kernel), so registering it as the CUDA forward is honest."""
    import inspect
    from ampy import _dispatch
    from ampy.cuda import _ops
    table = _ops.cuda_table()
    for n in _ops.routed_ops() | {"matmul", "mm", "bmm", "linear", "addmm", "cat", "stack"}:
        assert n in table, n
        assert n in _dispatch.ops()
    cpu_only = ("_C.empty(", "_C.index_", "_C.nonzero", ".numpy(", "_C.gemm")
    for n in sorted(_ops._ROUTED_IN_C):
        fwd = _dispatch.get_op(n).forward
        try:
            src = inspect.getsource(fwd)
        except (OSError, TypeError):
            continue
        for bad in cpu_only:
            assert bad not in src, f"{n}: its forward calls {bad} (CPU only)"


# ---------------------------------------------------------------- advanced indexing adapters
class _FakeIndexKernels:
    """The documented semantics of cuda/index.cu's entry points, built from the
    CPU's kernels, so ampy/cuda/_advindex.py's plumbing (key normalisation,
    layout of values, the accumulate order) runs here on CPU tensors (device
    -1). Accumulate: each repeat added one at a time, rounded to the dtype,
    in `order` of positions."""

    def _index_gather(self, src, idx, out):
        _C = ampy._C
        _C.copy_(out, _C.index_gather(src, len(idx), idx))

    def _index_scatter(self, dst, idx, values, accumulate, order):
        from ampy.autograd._ops import O
        _C = ampy._C
        if not accumulate:
            _C.index_scatter(dst, len(idx), idx, values)
            return
        P = idx[0].shape[0]
        for p in (range(P) if order > 0 else range(P - 1, -1, -1)):
            one = [ix[p:p + 1].contiguous() for ix in idx]
            cur = _C.index_gather(dst, len(one), one)
            _C.index_scatter(dst, len(one), one, O.add(cur, values[p:p + 1]))


@pytest.mark.parametrize("dt", [ampy.float16, ampy.bfloat16, ampy.float32])
def test_advindex_accumulate_order_reproduces_the_cpu_rule(dt, monkeypatch):
    """index_put_accumulate through _advindex (with the kernels' semantics)
    gives the CPU autograd rule's bits: ACCUMULATE_ORDER is the CPU's order
    (halves with many repeats make the order visible in the bits)."""
    import numpy as np
    from ampy.autograd import _rules_views as RV
    from ampy.cuda import _advindex
    monkeypatch.setattr(ampy.cuda, "_K", _FakeIndexKernels())
    rng = np.random.default_rng(0)
    idx = ampy.from_numpy(rng.integers(-20, 20, 300))
    for key, gshape in ((idx, (300, 7)), ((slice(None), idx % 7), (20, 300)),
                        ((idx, idx % 7), (300,))):
        g = ampy.from_numpy(rng.standard_normal(gshape) * 100).to(dt)
        want = RV.index_put_accumulate(ampy.zeros((20, 7), dtype=dt), key, g)
        got = _advindex.index_put_accumulate(ampy.zeros((20, 7), dtype=dt), key, g)
        np.testing.assert_array_equal(got.numpy().view(np.uint16 if dt.itemsize == 2 else
                                                       np.uint32),
                                      want.numpy().view(np.uint16 if dt.itemsize == 2 else
                                                        np.uint32))
        assert ampy.cuda._K is not None
    # the opposite order differs somewhere: the test can fail
    monkeypatch.setattr(_advindex, "ACCUMULATE_ORDER", 1)
    g = ampy.from_numpy(rng.standard_normal((300, 7)) * 100).to(dt)
    want = RV.index_put_accumulate(ampy.zeros((20, 7), dtype=dt), idx, g)
    got = _advindex.index_put_accumulate(ampy.zeros((20, 7), dtype=dt), idx, g)
    assert dt is ampy.float32 or not np.array_equal(got.numpy(), want.numpy())


def test_advindex_gather_scatter_adapters_match_cpu(monkeypatch):
    import numpy as np
    from ampy import _indexing
    from ampy.cuda import _advindex
    monkeypatch.setattr(ampy.cuda, "_K", _FakeIndexKernels())
    x = ampy.arange(60.0).reshape(3, 4, 5)
    ref = x.clone()
    ref[ampy.tensor([2, 0, 2]), :, [1, -1, 0]] = 0.0
    key = _indexing._normalize_key(x, (ampy.tensor([2, 0, 2]), slice(None), [1, -1, 0]))
    view, adv = _indexing._basic(x, key)
    perm, idx, bshape, place = _indexing._prepare_advanced(view, adv)
    got = _advindex.gather(perm, idx)
    np.testing.assert_array_equal(got.numpy(), ampy._C.index_gather(perm, len(idx), idx).numpy())
    _advindex.scatter(perm, idx, ampy.zeros(tuple(got.shape)))
    np.testing.assert_array_equal(x.numpy(), ref.numpy())
    assert x.numpy().sum() > 0


def test_advindex_install_routes_only_cuda_tensors(monkeypatch):
    from ampy import _indexing
    from ampy.autograd import _rules_views as RV
    from ampy.cuda import _advindex
    monkeypatch.setattr(_indexing, "_cuda", None)
    monkeypatch.setattr(RV, "index_put_accumulate", RV.index_put_accumulate)
    cpu = RV.index_put_accumulate
    _advindex.install()
    assert _indexing._cuda is _advindex
    assert RV.index_put_accumulate is not cpu and RV.index_put_accumulate._ampy_cuda
    _advindex.install()  # idempotent
    z = RV.index_put_accumulate(ampy.zeros(4), ampy.tensor([1, 1, 3]), ampy.ones(3))
    assert z.tolist() == [0.0, 2.0, 0.0, 1.0]  # CPU tensors keep the CPU rule
    assert _indexing._dev(ampy.zeros(2)) is None
    monkeypatch.setattr(_indexing, "_cuda", None)


def test_cuda_sources_stay_under_the_file_limit():
    d = os.path.join(HERE, "cuda")
    for f in sorted(os.listdir(d)):
        if f.endswith((".cu", ".cuh", ".c", ".h")):
            n = sum(1 for _ in open(os.path.join(d, f)))
            assert n < 600, f"cuda/{f} has {n} lines (limit ~600): split it by concern"


def test_host_waits_are_only_the_documented_ones():
    """Kernels never read device data back to decide something, except
    nonzero's count (boolean-mask indexing: the output shape depends on it);
    argument checks go through the deferred record of check.cu. The waits of
    runtime.cu (copies to the host, synchronize, the allocator's OOM retry)
    and check.cu's opt-in sync-checks mode are the rest."""
    import re
    d = os.path.join(HERE, "cuda")
    found = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".cu") or f == "runtime.cu":
            continue
        text = open(os.path.join(d, f)).read()
        n = len(re.findall(r"ampy_cuda_memcpy\([^;]*?,\s*-1\s*,", text))
        n += len(re.findall(r"cuda(Stream|Device)Synchronize\(", text))
        if n:
            found[f] = n
    assert found == {"index.cu": 1, "check.cu": 1}, found
    assert "read_flag" not in open(os.path.join(d, "nn_common.cuh")).read()


def test_index_bindings_and_routes():
    mod = _cuda_module()
    for n in ("_index_gather", "_index_scatter", "_nonzero_count", "_nonzero_fill",
              "set_sync_checks", "get_sync_checks"):
        assert hasattr(mod, n), n
    assert mod.get_sync_checks() in (False, True)
    from ampy.cuda import _ops
    table = _ops.cuda_table()
    for n in ("getitem", "setitem", "baddbmm"):
        assert n in table, n  # no CPU fallback for these any more
    assert ampy.cuda.get_sync_checks() is False or os.environ.get("AMPY_CUDA_SYNC_CHECKS")


class _FakeGemm:
    """cuBLAS's contract for ampy_gemm_cuda in NumPy (float64 accumulation):
    c = alpha * a @ b + beta * c over a strided batch, element strides; beta
    == 0 ignores c. Lets the CUDA forward of baddbmm run here on CPU tensors."""

    def _gemm(self, a, b, c, batch, m, n, k, sa_b, sa_m, sa_k, sb_b, sb_k, sb_n, sc_b, ldc,
              alpha, beta):
        import numpy as np
        from numpy.lib.stride_tricks import as_strided
        isz = c.numpy().itemsize
        A = as_strided(a.numpy(), (batch, m, k), (sa_b * isz, sa_m * isz, sa_k * isz))
        B = as_strided(b.numpy(), (batch, k, n), (sb_b * isz, sb_k * isz, sb_n * isz))
        C = as_strided(c.numpy(), (batch, m, n), (sc_b * isz, ldc * isz, isz))
        r = alpha * (A.astype(np.float64) @ B.astype(np.float64))
        if beta != 0:
            r = r + beta * C.astype(np.float64)
        C[...] = r.astype(C.dtype)


def test_cuda_baddbmm_forward_plumbing_agrees_with_cpu(monkeypatch):
    """ampy/cuda/_kernels.baddbmm (input broadcast, beta == 0 skipping input,
    strides of transposed operands, alpha/beta) run with device -1 and a
    NumPy GEMM of cuBLAS's contract, against the CPU op."""
    import numpy as np
    from ampy.cuda import _kernels as K
    monkeypatch.setattr(K, "_K", _FakeGemm())
    rng = np.random.default_rng(3)
    a = ampy.from_numpy(rng.standard_normal((3, 5, 4)).astype(np.float32))
    b = ampy.from_numpy(rng.standard_normal((3, 6, 4)).astype(np.float32)).transpose(1, 2)
    for inp, beta, alpha in ((ampy.ones(6) * 2, 0.5, -1.5),
                             (ampy.from_numpy(rng.standard_normal((5, 6)).astype(np.float32)), 1, 1),
                             (ampy.full((3, 5, 6), float("nan")), 0, 2.0)):
        got = K.baddbmm(inp, a, b, beta=beta, alpha=alpha)
        want = ampy.baddbmm(inp, a, b, beta=beta, alpha=alpha)
        assert tuple(got.shape) == (3, 5, 6) and got.dtype is ampy.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="baddbmm"):
        K.baddbmm(ampy.ones(1), a, a, beta=1, alpha=1)
    with pytest.raises(TypeError, match="dtype"):
        K.baddbmm(ampy.ones(1), a, b.double(), beta=1, alpha=1)


def test_index_bindings_reject_bad_arguments_without_touching_a_device():
    mod = _cuda_module()
    x = ampy.arange(6.0)
    i = ampy.tensor([0, 1])
    with pytest.raises(ValueError, match="on the CPU"):
        mod._index_gather(x, [i], ampy.empty(2))
    with pytest.raises(ValueError, match="on the CPU"):
        mod._index_scatter(x, [i], ampy.ones(2), False, -1)
    with pytest.raises(TypeError, match="must be a Tensor"):
        mod._index_gather([1], [i], x)
    with pytest.raises(ValueError, match="on the CPU"):
        mod._nonzero_count(ampy.ones(3, dtype=ampy.bool), ampy.empty(7, dtype=ampy.int64))
    prev = mod.get_sync_checks()
    try:
        mod.set_sync_checks(True)
        assert mod.get_sync_checks() is True and ampy.cuda.get_sync_checks() is True
        mod.set_sync_checks(False)
        assert mod.get_sync_checks() is False
    finally:
        mod.set_sync_checks(prev)
