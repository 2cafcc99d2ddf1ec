"""ampy.backends.cuda: ``matmul.allow_tf32`` (the CUDA float32 GEMM math
mode, see ampy/backends/__init__.py) and ``is_built()``."""
import importlib.util

from .. import _C

__all__ = ["matmul", "is_built"]


class _CuBLASModule:
    """torch.backends.cuda.matmul: ``allow_tf32`` (bool, default False).
    Setting it switches cuda/blas.cu's float32 GEMMs between
    CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32F_FAST_TF32 (through the
    ampy_cuda_api table); an unknown attribute raises AttributeError."""

    def __init__(self):
        object.__setattr__(self, "_tf32", False)
        object.__setattr__(self, "_precision", "highest")

    def _set_tf32(self, on, precision=None):
        object.__setattr__(self, "_tf32", bool(on))
        object.__setattr__(self, "_precision",
                           precision if precision is not None else ("high" if on else "highest"))
        _C._cuda_set_matmul_tf32(bool(on))

    def _cuda_module_value(self):
        """The flag as the CUDA module holds it (None without ampy._C_cuda)."""
        return _C._cuda_get_matmul_tf32()

    def __getattr__(self, name):
        if name == "allow_tf32":
            return self._tf32
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name != "allow_tf32":
            raise AttributeError(f"Unknown attribute {name}")
        if not isinstance(value, bool):
            raise TypeError(f"allow_tf32 must be a bool, not {type(value).__name__}")
        self._set_tf32(value)


matmul = _CuBLASModule()
matmul._set_tf32(False)  # the CUDA module starts from ampy's default too


def is_built():
    """True when ampy was built with its CUDA module (ampy._C_cuda)."""
    return importlib.util.find_spec("ampy._C_cuda") is not None
