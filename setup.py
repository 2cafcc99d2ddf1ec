"""Build script for ampy's C extensions (metadata lives in pyproject.toml).

ampy._C       libampy (csrc/*.c, plain C11) + the CPython binding (csrc/py/*.c).
ampy._C_cuda  the CUDA module (cuda/*.cu), built by cuda/ampy_cuda_build.py when nvcc is
              found; see that file. A failed CUDA build never fails the install.

Environment:
  AMPY_SANITIZE=1   build with -fsanitize=address,undefined (used by `make asan`)
  AMPY_DEBUG=1      -O0 -g
"""
import glob
import os
import sys

import numpy as np
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _sources():
    srcs = sorted(glob.glob("csrc/*.c")) + sorted(glob.glob("csrc/py/*.c"))
    return srcs


def _flags():
    cflags = ["-std=c11", "-fno-math-errno", "-fno-strict-aliasing", "-Wall", "-Wextra",
              "-Wno-unused-parameter", "-Wno-missing-field-initializers", "-fvisibility=hidden"]
    ldflags = ["-lpthread", "-lm"]
    if os.environ.get("AMPY_DEBUG"):
        cflags += ["-O0", "-g"]
    else:
        cflags += ["-O3"]
    if os.environ.get("AMPY_SANITIZE"):
        cflags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                   "-fno-omit-frame-pointer", "-g"]
        ldflags += ["-fsanitize=address,undefined"]
    return cflags, ldflags


class BuildExt(build_ext):
    """Drops the CUDA extension (with a warning) when it cannot be compiled."""

    def build_extension(self, ext):
        if getattr(ext, "optional_cuda", False):
            try:
                return ext.build(self)
            except Exception as exc:  # a failed nvcc step must not fail the install
                sys.stderr.write(f"warning: ampy._C_cuda not built: {exc}\n")
                if os.environ.get("AMPY_CUDA") == "1":
                    raise
                return None
        return super().build_extension(ext)


cflags, ldflags = _flags()
ext_modules = [
    Extension(
        "ampy._C",
        sources=_sources(),
        depends=sorted(glob.glob("csrc/include/ampy/*.h") + glob.glob("csrc/py/*.h") +
                       glob.glob("csrc/*.h") + glob.glob("csrc/*.inc")),
        include_dirs=["csrc/include", "csrc/py", np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
]

sys.path.insert(0, os.path.join(HERE, "cuda"))
try:
    import ampy_cuda_build as _cuda_build  # cuda/ampy_cuda_build.py
except ImportError:
    _cuda_build = None
if _cuda_build is not None and hasattr(_cuda_build, "cuda_extension"):
    _ext = _cuda_build.cuda_extension(HERE)
    if _ext is not None:
        ext_modules.append(_ext)

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt})
