"""Build script for ampy's C extensions (metadata lives in pyproject.toml).

ampy._C       libampy (csrc/*.c, plain C11) + the CPython binding (csrc/py/*.c).
ampy._C_cuda  the CUDA module (cuda/*.cu), built by cuda/ampy_cuda_build.py when nvcc is
              found and an NVIDIA driver exists (AMPY_CUDA=1: always, and a failure
              fails the build); see that file. Otherwise a failed CUDA build never
              fails the install.

The C files of ampy._C compile in parallel: AMPY_BUILD_JOBS processes, else
`build_ext -j N`, else one per CPU.

Environment:
  AMPY_SANITIZE=1   build with -fsanitize=address,undefined (used by `make asan`)
  AMPY_DEBUG=1      -O0 -g
  AMPY_BUILD_JOBS   parallel C compiler processes for ampy._C
  AMPY_SKIP_EXT=1   no extension at all: the package only (`make demo` installs it
                    editable this way, then builds the extension in place, once)
"""
import concurrent.futures
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


def build_jobs(parallel=None):
    """Compiler processes for ampy._C: AMPY_BUILD_JOBS, else build_ext's -j,
    else the CPU count."""
    env = os.environ.get("AMPY_BUILD_JOBS", "")
    if env.strip().isdigit() and int(env) > 0:
        return int(env)
    if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel > 0:
        return parallel
    return os.cpu_count() or 1


def parallel_compile(compiler, jobs):
    """A ``compiler.compile`` that runs the per-file compile steps of one
    call on ``jobs`` threads (each step is a separate compiler process)."""

    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0,
                extra_preargs=None, extra_postargs=None, depends=None):
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)

        def one(obj):
            src, ext = build[obj]
            compiler._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            list(ex.map(one, [o for o in objects if o in build]))
        return objects

    return compile


class BuildExt(build_ext):
    """Compiles ampy._C's C files in parallel; drops the CUDA extension (with
    a warning) when it cannot be compiled, unless AMPY_CUDA=1."""

    def build_extensions(self):
        # one extension at a time (the files inside ampy._C are what runs in
        # parallel), so -j never shares the patched compiler between threads
        self.check_extensions_list(self.extensions)
        for ext in self.extensions:
            with self._filter_build_errors(ext):
                self.build_extension(ext)

    def build_extension(self, ext):
        if getattr(ext, "optional_cuda", False):
            try:
                return ext.build(self)
            except Exception as exc:  # a failed nvcc step must not fail the install
                sys.stderr.write(f"warning: ampy._C_cuda not built: {exc}\n")
                if os.environ.get("AMPY_CUDA") == "1":
                    raise
                return None
        jobs = build_jobs(self.parallel)
        if jobs <= 1 or not hasattr(self.compiler, "_setup_compile"):
            return super().build_extension(ext)
        serial = self.compiler.compile
        self.compiler.compile = parallel_compile(self.compiler, jobs)
        try:
            return super().build_extension(ext)
        finally:
            self.compiler.compile = serial


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
if os.environ.get("AMPY_SKIP_EXT") == "1":
    ext_modules = []
elif _cuda_build is not None:
    _ext = _cuda_build.cuda_extension(HERE)
    if _ext is not None:
        ext_modules.append(_ext)

setup(ext_modules=ext_modules, cmdclass={"build_ext": BuildExt})
