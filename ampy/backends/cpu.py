"""ampy.backends.cpu.get_cpu_capability(): the SIMD level of ampy's CPU kernels."""
from .. import _C

__all__ = ["get_cpu_capability"]

_NAMES = {"portable": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512", "avx512bf16": "AVX512",
          "amx": "AVX512"}


def get_cpu_capability():
    """torch's names: "DEFAULT", "AVX2" or "AVX512" for the level ampy runs at
    (its AVX512-BF16 and AMX levels are AVX-512 machines)."""
    level = _C.cpu_info()["level"]
    return _NAMES.get(level, level.upper())
