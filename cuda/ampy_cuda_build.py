"""Build of ampy._C_cuda: cuda/*.cu with nvcc, cuda/*.c with the host compiler.

setup.py calls ``cuda_extension(here)``; the Extension it returns carries
``optional_cuda = True`` and a ``build(build_ext_command)`` method that
setup.py's BuildExt calls instead of the usual compile step.

Environment:
  AMPY_CUDA=auto|0|1       auto (default): build when nvcc is found AND an NVIDIA driver
                           exists (/proc/driver/nvidia, or libcuda.so.1 loads), warn on
                           failure; 0: never; 1: required wherever nvcc is, driver or not
                           (a failure fails the build: `make test` and CI set it, so a
                           CUDA compile error fails CI on a machine without a GPU)
  AMPY_CUDA_ARCH_LIST      e.g. "80;90" or "8.0 9.0+PTX" (default: sm_80, sm_90 + compute_90 PTX)
  CUDA_HOME / CUDA_PATH    the toolkit; else nvcc on PATH; else /usr/local/cuda
  AMPY_NVCC_JOBS           parallel nvcc processes (default: CPU count)

Linking: cudart statically (cudart_static), so ``import ampy._C_cuda`` works on a
machine without a driver or GPU (is_available() is then False). cuBLAS and
cuBLASLt are NOT linked: cuda/blas.cu loads libcublas at the first GEMM with
dlopen (the toolkit's lib dir, then the nvidia-cublas wheel that torch installs),
so the module builds where the toolkit lacks cuBLAS and imports where no cuBLAS
exists at all.

--fmad=false: nvcc would otherwise contract a*b+c into FMAs that the CPU
(plain C11, no contraction) does not do, and the GPU's AMP kernels would stop
giving the CPU's bits. Explicit fmaf() calls stay FMAs. No fast-math flag.

The host C (cuda/*.c and csrc/status.c) compiles with ampy._C's flags (host_c_flags).

Objects go under build_temp; a .cu object newer than its source and every
header is reused, so a second build only relinks.
"""
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import time

from setuptools import Extension

_DEFAULT_ARCHS = ["80", "90", "90+PTX"]


def find_cuda_home():
    for var in ("CUDA_HOME", "CUDA_PATH"):
        v = os.environ.get(var)
        if v and os.path.exists(os.path.join(v, "bin", "nvcc")):
            return v
    nvcc = shutil.which("nvcc")
    if nvcc:
        home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        if os.path.exists(os.path.join(home, "include", "cuda_runtime.h")):
            return home
        # a wrapper script (e.g. /usr/local/bin/nvcc): fall through
    if os.path.exists("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda"
    return None


def _arch_flags():
    spec = os.environ.get("AMPY_CUDA_ARCH_LIST")
    archs = spec.replace(",", ";").replace(" ", ";").split(";") if spec else _DEFAULT_ARCHS
    flags = []
    for a in filter(None, (x.strip() for x in archs)):
        ptx = a.endswith("+PTX")
        a = a.replace("+PTX", "").replace(".", "")
        code = f"compute_{a}" if ptx else f"sm_{a}"
        flags.append(f"-gencode=arch=compute_{a},code={code}")
        if ptx and f"-gencode=arch=compute_{a},code=sm_{a}" not in flags:
            flags.append(f"-gencode=arch=compute_{a},code=sm_{a}")
    return flags


class CudaExtension(Extension):
    optional_cuda = True

    def __init__(self, here, cuda_home):
        self.here = here
        self.cuda_home = cuda_home
        cu = sorted(glob.glob(os.path.join(here, "cuda", "*.cu")))
        super().__init__("ampy._C_cuda", sources=[os.path.relpath(p, here) for p in cu])
        # setuptools copies an optional extension in place only when it was built
        self.optional = os.environ.get("AMPY_CUDA", "auto") != "1"

    # ------------------------------------------------------------------ build
    def _lib_dir(self):
        for sub in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            d = os.path.join(self.cuda_home, sub)
            if os.path.exists(os.path.join(d, "libcudart_static.a")):
                return d
        raise RuntimeError(f"libcudart_static.a not found under {self.cuda_home}")

    def _nvcc(self):
        nvcc = os.path.join(self.cuda_home, "bin", "nvcc")
        return nvcc if os.path.exists(nvcc) else shutil.which("nvcc")

    def _headers(self):
        h = glob.glob(os.path.join(self.here, "cuda", "*.cuh"))
        h += glob.glob(os.path.join(self.here, "csrc", "include", "ampy", "*.h"))
        return h

    def _compile_cu(self, src, obj, includes):
        cmd = [self._nvcc(), "-c", src, "-o", obj, "-O3", "-std=c++17", "-Xcompiler", "-fPIC",
               "-Xcompiler", "-fvisibility=hidden", "--expt-relaxed-constexpr", "--fmad=false",
               "-lineinfo", "-DNDEBUG"] + _arch_flags() + [f"-I{i}" for i in includes]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on {os.path.basename(src)}:\n{r.stderr[-6000:]}")
        return obj

    def build(self, cmd):
        t0 = time.time()
        here = self.here
        # objects of different arch lists / flags never mix
        import hashlib
        tag = hashlib.sha1(" ".join(_arch_flags() + [self.cuda_home]).encode()).hexdigest()[:10]
        tmp = os.path.join(cmd.build_temp, "cuda-" + tag)
        os.makedirs(tmp, exist_ok=True)
        includes = [os.path.join(here, "csrc", "include"), os.path.join(here, "cuda"),
                    os.path.join(self.cuda_home, "include")]
        newest_header = max((os.path.getmtime(h) for h in self._headers()), default=0)
        jobs = []
        objects = []
        for src in self.sources:
            src = os.path.join(here, src)
            obj = os.path.join(tmp, os.path.basename(src) + ".o")
            objects.append(obj)
            if (os.path.exists(obj) and os.path.getmtime(obj) > os.path.getmtime(src)
                    and os.path.getmtime(obj) > newest_header
                    and os.path.getmtime(obj) > os.path.getmtime(__file__)):
                continue
            jobs.append((src, obj))
        workers = int(os.environ.get("AMPY_NVCC_JOBS", "0")) or (os.cpu_count() or 1)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
            list(ex.map(lambda j: self._compile_cu(j[0], j[1], includes), jobs))
        t_nvcc = time.time() - t0

        # host C: the binding (cuda/*.c) and libampy's status.c (own error buffer)
        import numpy as np
        c_sources = sorted(glob.glob(os.path.join(here, "cuda", "*.c")))
        c_sources.append(os.path.join(here, "csrc", "status.c"))
        c_objs = cmd.compiler.compile(
            c_sources, output_dir=os.path.join(cmd.build_temp, "cuda_c"),
            include_dirs=includes + [os.path.join(here, "csrc", "py"), np.get_include(),
                                     sysconfig.get_paths()["include"]],
            extra_postargs=host_c_flags(cmd))
        out = cmd.get_ext_fullpath(self.name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        libdir = self._lib_dir()
        cmd.compiler.link_shared_object(
            objects + c_objs, out, library_dirs=[libdir],
            libraries=["cudart_static", "dl", "rt", "pthread", "stdc++", "m"],
            runtime_library_dirs=[libdir])
        sys.stderr.write(f"ampy._C_cuda: built in {time.time() - t0:.1f}s "
                         f"({len(jobs)} .cu compiled in {t_nvcc:.1f}s, {workers} jobs)\n")
        return out


def host_c_flags(cmd):
    """The host C flags: ampy._C's own (setup.py's _flags(), read off the build
    command's ampy._C extension), so both modules' C compiles alike, plus -fPIC.
    Sanitizer flags (AMPY_SANITIZE) are left out: the nvcc objects linked with
    this C are not instrumented, and the ASan run does not load ampy._C_cuda."""
    for ext in cmd.extensions:
        if ext.name == "ampy._C":
            return [f for f in ext.extra_compile_args if not f.startswith("-fsanitize")
                    and f != "-fno-sanitize-recover=undefined"] + ["-fPIC"]
    raise RuntimeError("ampy._C_cuda is built together with ampy._C (setup.py), whose C "
                       "flags its host C uses")


def driver_present():
    """True where an NVIDIA driver is installed (a GPU can run the module):
    /proc/driver/nvidia exists, or the driver library libcuda.so.1 loads."""
    if os.path.exists("/proc/driver/nvidia"):
        return True
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def cuda_extension(here):
    mode = os.environ.get("AMPY_CUDA", "auto")
    if mode == "0":
        return None
    if os.environ.get("AMPY_SANITIZE") and mode != "1":
        return None  # the ASan build tests the C core; CUDA tests skip there anyway
    home = find_cuda_home()
    if home is None:
        if mode == "1":
            raise RuntimeError("AMPY_CUDA=1 but no CUDA toolkit (nvcc) was found")
        return None
    if mode != "1" and not driver_present():
        sys.stderr.write("ampy._C_cuda: not built (nvcc found, but no NVIDIA driver on this "
                         "machine; AMPY_CUDA=1 builds it anyway)\n")
        return None
    return CudaExtension(here, home)
