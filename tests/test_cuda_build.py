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
    assert hasattr(mod, "_api") and hasattr(mod, "_blas_add_path")
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
    assert not hasattr(_dispatch._hooks, "device")
    assert not any(getattr(op.forward, "ampy_cpu_fallback", False)
                   for op in _dispatch.ops().values())


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
    "ampy_finite_check_unscale_cuda", "ampy_scaler_update_cuda", "ampy_optim_adam_step_cuda",
    "ampy_optim_sgd_step_cuda",
    "ampy_optim_adaptive_step_cuda",
    "ampy_conv2d_forward_cuda", "ampy_conv2d_backward_input_cuda",
    "ampy_conv2d_backward_weight_cuda", "ampy_conv_backward_bias_cuda",
    "ampy_attention_fwd_cuda", "ampy_attention_bwd_cuda",
]
KERNEL_ENTRY_POINTS += ["ampy_rnn_cell_fwd_cuda", "ampy_rnn_cell_bwd_cuda"]  # cuda/rnn.cu
KERNELS = ["ewise_kernel", "reduce_kernel", "softmax_kernel", "ln_fwd_kernel", "ln_bwd_dx_kernel",
           "ln_bwd_dw_kernel", "ce_fwd_kernel", "ce_bwd_kernel", "nll_rows_kernel",
           "nll_bwd_kernel", "emb_fwd_kernel", "emb_bwd_kernel", "mask_scale_kernel",
           "fill_random_kernel", "targets_kernel", "loss_reduce_kernel", "mse_elem_kernel",
           "mse_bwd_kernel", "reduce_partial_blocks", "reduce_partial_columns", "reduce_final",
           "ln_bwd_dw_final", "scan_kernel", "index_gather_kernel", "index_scatter_kernel",
           "index_keys_kernel", "nz_flags_kernel", "nz_fill_kernel", "emb_keys_kernel",
           "check_range_kernel",
           "im2col_kernel", "col2im_kernel", "fill_bias_kernel", "round_kernel", "bias_kernel"]
KERNELS += ["rnn_fwd_kernel", "rnn_bwd_kernel"]
KERNELS += ["attn_fwd_kernel", "attn_bwd_kernel", "attn_store_kernel"]
# clip_grad_norm_'s multi-tensor norm and scale, and the float32 GEMM math mode
KERNEL_ENTRY_POINTS += ["ampy_clip_total_norm_cuda", "ampy_clip_scale_cuda",
                        "ampy_cuda_set_matmul_tf32", "ampy_cuda_get_matmul_tf32"]
KERNELS += ["clip_partial_kernel", "clip_finish_kernel", "clip_scale_kernel"]


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
               if n in ("cast", "ewise", "reduce", "softmax", "scan", "fill_random", "fill",
                        "gemm", "index_gather", "index_scatter", "nonzero_count",
                        "nonzero_fill", "finite_check_unscale", "scaler_update", "adam_step",
                        "sgd_step", "conv2d_forward", "conv2d_backward_input",
                        "conv2d_backward_weight", "conv_backward_bias")
               or n.startswith("nn_")]
    assert len(kernels) == 31
    for name in kernels:
        if name.startswith("nn_"):
            assert f"NN_CALL({name[3:]}," in src, name
        else:
            assert f"->{name}(" in src, name


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


def test_sync_checks_switch():
    mod = _cuda_module()
    assert ampy.cuda.get_sync_checks() is False or os.environ.get("AMPY_CUDA_SYNC_CHECKS")
    prev = mod.get_sync_checks()
    try:
        mod.set_sync_checks(True)
        assert mod.get_sync_checks() is True and ampy.cuda.get_sync_checks() is True
        mod.set_sync_checks(False)
        assert mod.get_sync_checks() is False
    finally:
        mod.set_sync_checks(prev)


# the CNN norms, pools, padding, interpolation and the row sorts
# (cuda/cnn_norm.cu, cnn_pool.cu, cnn_resample.cu, sort.cu)
CNN_SORT_ENTRIES = ["cnn_batch_norm_fwd", "cnn_batch_norm_bwd", "cnn_group_norm_fwd",
                    "cnn_group_norm_bwd", "cnn_max_pool2d_fwd", "cnn_max_pool2d_bwd",
                    "cnn_avg_pool2d_fwd", "cnn_avg_pool2d_bwd", "cnn_adaptive_avg_pool2d_fwd",
                    "cnn_adaptive_avg_pool2d_bwd", "cnn_pad_fwd", "cnn_pad_bwd",
                    "cnn_interp2d_fwd", "cnn_interp2d_bwd"]
KERNEL_ENTRY_POINTS += [f"ampy_{e}_cuda" for e in CNN_SORT_ENTRIES]
KERNEL_ENTRY_POINTS += ["ampy_sort_cuda", "ampy_topk_cuda", "ampy_multinomial_cuda"]
KERNELS += ["cnn_bn_fwd_kernel", "cnn_bn_bwd_kernel", "cnn_gn_fwd_kernel", "cnn_gn_sums_kernel",
            "cnn_gn_dx_kernel", "cnn_gn_param_kernel", "cnn_max_pool_fwd_kernel",
            "cnn_max_pool_bwd_kernel", "cnn_avg_pool_fwd_kernel", "cnn_avg_pool_bwd_kernel",
            "cnn_adaptive_fwd_kernel", "cnn_adaptive_bwd_kernel", "cnn_acc_round_kernel",
            "cnn_pad_fwd_kernel", "cnn_pad_bwd_kernel", "cnn_interp_fwd_kernel",
            "cnn_interp_bwd_kernel", "sort_shared_kernel", "sort_init_kernel",
            "sort_stage_kernel", "sort_out_kernel", "mn_replacement_kernel", "mn_key_kernel"]


def test_cnn_and_sort_entries_are_in_the_table_and_called():
    mod = _cuda_module()
    entries = mod._api_entries()
    src = ""
    for f in ("cnn_py.c", "cnn_pool_py.c", "tensorops_py.c"):
        src += open(os.path.join(HERE, "csrc", "py", f)).read()
    for name in CNN_SORT_ENTRIES + ["sort", "topk", "multinomial"]:
        assert entries.get(name) is True, name
        assert any(c in src for c in (f"CN_CALL({name},", f"PL_CALL({name},",
                                      f"SORT_CALL(x, {name},", f"SORT_CALL(p, {name},")), name
