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


@pytest.fixture(params=["simd", "portable"])
def cpu_path(request):
    """Run a test once with the best SIMD level and once forcing portable C."""
    import ampy

    ampy._C._set_cpu_level("portable" if request.param == "portable" else None)
    yield request.param
    ampy._C._set_cpu_level(None)
