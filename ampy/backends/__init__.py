"""ampy.backends — the backend flags training scripts set, with torch's names.

- ``ampy.backends.cuda.matmul.allow_tf32`` (default False, as torch) and
  ``ampy.set_float32_matmul_precision("highest" | "high" | "medium")``
  choose the compute type of float32 GEMMs on CUDA: with TF32 allowed,
  cuda/blas.cu calls cuBLAS with CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores,
  inputs rounded to TF32), otherwise CUBLAS_COMPUTE_32F. The flag reaches the
  CUDA module through the ampy_cuda_api table and is read at every GEMM; CPU
  GEMMs are always full float32.
- ``ampy.backends.cudnn``: ampy calls no cuDNN (``is_available()`` is False);
  its flags (``allow_tf32``, ``benchmark``, ``deterministic``, ``enabled``)
  are kept with torch's defaults so scripts that set them run, and change no
  math: ampy's float32 CUDA convolutions and matmuls follow
  ``cuda.matmul.allow_tf32``.
- ``ampy.backends.cpu.get_cpu_capability()`` names the SIMD level ampy's CPU
  kernels use; ``ampy.backends.mkldnn`` reports oneDNN as unavailable.
"""
import warnings

from . import cpu, cuda, cudnn, mkldnn

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "set_float32_matmul_precision",
           "get_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision):
    """"highest": float32 GEMMs in full float32; "high" or "medium": TF32
    allowed on CUDA (ampy has no bfloat16-split float32 GEMM, so "medium"
    is "high"). Anything else warns and changes nothing, as torch."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      f"setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    cuda.matmul._set_tf32(precision != "highest", precision)


def get_float32_matmul_precision():
    return cuda.matmul._precision
