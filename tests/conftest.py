"""Shared test settings: hypothesis profiles, the CPU-path and GEMM-implementation
fixtures, and the skip of GPU tests where there is no GPU (see _helpers.py)."""
import os

import pytest

from ampy import _C

from _helpers import CPU_LEVELS, HAS_CUDA, IMPLS, cpu_level_missing

try:
    from hypothesis import HealthCheck, settings

    # function_scoped_fixture: cpu_path sets the CPU level once for all examples
    QUIET = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
    settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=QUIET)
    settings.register_profile("short", max_examples=15, deadline=None,
                              suppress_health_check=QUIET)
    settings.load_profile("short" if os.environ.get("AMPY_TEST_SHORT") else "ci")
except ImportError:  # pragma: no cover
    pass


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (ampy.cuda.is_available() is False)")
    for item in items:
        if item.get_closest_marker("cuda"):
            item.add_marker(skip)


@pytest.fixture(params=CPU_LEVELS)
def cpu_path(request):
    """Run a test once per CPU level ampy can force (portable C, AVX2, AVX-512,
    AVX512-BF16, AMX), skipping the levels this CPU lacks; the level is restored
    to the best one afterwards."""
    missing = cpu_level_missing(request.param)
    if missing:
        pytest.skip(f"the CPU has no {', '.join(missing)}")
    _C._set_cpu_level(request.param)
    yield request.param
    _C._set_cpu_level(None)


@pytest.fixture(params=IMPLS)
def impl(request):
    """Run a GEMM test once per GEMM implementation this CPU can run."""
    _C.gemm_set_impl(request.param)
    yield request.param
    _C.gemm_set_impl("auto")
