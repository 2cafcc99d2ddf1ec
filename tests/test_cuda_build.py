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
    return (os.environ.get("AMPY_CUDA", "auto") != "0" and not os.environ.get("AMPY_SANITIZE")
            and _build_script().find_cuda_home() is not None
            and os.path.exists(os.path.join(os.path.dirname(ampy.__file__), "..", "cuda")))


def test_cuda_module_built_where_nvcc_exists():
    if not _cuda_expected():
        pytest.skip("no CUDA toolkit here (or AMPY_CUDA=0): the CPU package is all there is")
    mod = importlib.import_module("ampy._C_cuda")
    assert hasattr(mod, "_api") and hasattr(mod, "_gemm")
    assert ampy._C._cuda_registered()


def test_import_without_gpu_is_clean():
    if ampy.cuda.is_available():
        pytest.skip("a GPU is present: see test_cuda.py")
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
    if b.find_cuda_home() is None:
        assert ext is None
    else:
        assert ext.optional_cuda and ext.name == "ampy._C_cuda"
        assert all(s.endswith(".cu") for s in ext.sources)


def test_kernel_sources_include_elem_h():
    """The GPU runs the CPU's per-element math: kernels go through common.cuh,
    which includes elem.h."""
    cu = [f for f in os.listdir(os.path.join(HERE, "cuda")) if f.endswith(".cu")]
    assert cu
    common = open(os.path.join(HERE, "cuda", "common.cuh")).read()
    assert '#include "ampy/elem.h"' in common
    for f in cu:
        text = open(os.path.join(HERE, "cuda", f)).read()
        assert '"common.cuh"' in text or '"mta.cuh"' in text, f
