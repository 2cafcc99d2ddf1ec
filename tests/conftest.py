"""Shared test settings: hypothesis profiles and the CPU-path fixture."""
import os

import pytest

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=60, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("short", max_examples=15, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("short" if os.environ.get("AMPY_TEST_SHORT") else "ci")
except ImportError:  # pragma: no cover
    pass

SHORT = bool(os.environ.get("AMPY_TEST_SHORT"))


@pytest.fixture(params=["simd", "avx512bf16", "portable"])
def cpu_path(request):
    """Run a test with the best SIMD level, with the AVX512-BF16 level (vdpbf16ps
    bfloat16 GEMM; forced below AMX on an AMX CPU; skipped where the CPU lacks
    AVX512-BF16) and forcing portable C."""
    import ampy

    if request.param == "avx512bf16" and not ampy._C.cpu_info()["avx512_bf16"]:
        pytest.skip("the CPU has no AVX512-BF16")
    ampy._C._set_cpu_level(None if request.param == "simd" else request.param)
    yield request.param
    ampy._C._set_cpu_level(None)
