"""The build: ampy._C's C files compile in parallel (setup.py), `make demo`
installs only the demo extra, `make test` forces the CUDA compile."""
import os
import re
import runpy
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def setup_py():
    """setup.py's namespace, with setuptools.setup() not run."""
    import setuptools
    real = setuptools.setup
    setuptools.setup = lambda **kw: None
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        return runpy.run_path(os.path.join(ROOT, "setup.py"))
    finally:
        setuptools.setup = real
        os.chdir(cwd)


def test_build_jobs(setup_py, monkeypatch):
    jobs = setup_py["build_jobs"]
    monkeypatch.delenv("AMPY_BUILD_JOBS", raising=False)
    assert jobs() == (os.cpu_count() or 1)
    assert jobs(3) == 3 and jobs(True) == (os.cpu_count() or 1)
    monkeypatch.setenv("AMPY_BUILD_JOBS", "5")
    assert jobs(3) == 5


class _FakeCompiler:
    """distutils' compile protocol; each _compile sleeps and records how many
    run at once."""

    def __init__(self):
        self.lock, self.now, self.most, self.done = threading.Lock(), 0, 0, []

    def _setup_compile(self, outdir, macros, incdirs, sources, depends, extra):
        objs = [s.replace(".c", ".o") for s in sources]
        return macros, objs, extra, [], {o: (s, ".c") for o, s in zip(objs, sources)}

    def _get_cc_args(self, pp_opts, debug, before):
        return ["-c"]

    def _compile(self, obj, src, ext, cc_args, extra_postargs, pp_opts):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
            self.done.append(obj)


def test_parallel_compile_overlaps_the_files(setup_py):
    cc = _FakeCompiler()
    srcs = [f"f{i}.c" for i in range(8)]
    objs = setup_py["parallel_compile"](cc, 4)(srcs)
    assert objs == [s.replace(".c", ".o") for s in srcs]  # the order the linker gets
    assert sorted(cc.done) == sorted(objs) and cc.most == 4


def test_parallel_compile_with_the_real_compiler(setup_py, tmp_path):
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.errors import CompileError
    from setuptools._distutils.sysconfig import customize_compiler
    cc = new_compiler()
    customize_compiler(cc)
    srcs = []
    for i in range(4):
        p = tmp_path / f"m{i}.c"
        p.write_text(f"int f{i}(int x) {{ return x + {i}; }}\n")
        srcs.append(str(p))
    objs = setup_py["parallel_compile"](cc, 3)(srcs, output_dir=str(tmp_path / "o"))
    assert len(objs) == 4 and all(os.path.getsize(o) > 0 for o in objs)
    bad = tmp_path / "bad.c"
    bad.write_text("int broken( {\n")
    with pytest.raises(CompileError):
        setup_py["parallel_compile"](cc, 3)(srcs + [str(bad)], output_dir=str(tmp_path / "o"))


def _recipe(makefile, target):
    m = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert m, target
    return m.group(0)


def test_make_demo_installs_only_the_demo_extra():
    mk = open(os.path.join(ROOT, "Makefile")).read()
    demo = _recipe(mk, "demo")
    assert "build-demo" in demo.splitlines()[0]
    stamp = _recipe(mk, "$(VENV)/.deps-demo")
    assert '".[demo]"' in stamp and "test" not in stamp and "torch" not in stamp
    assert "AMPY_SKIP_EXT=1" in stamp  # pip builds nothing; build-demo builds once
    py = open(os.path.join(ROOT, "pyproject.toml")).read()
    extra = re.search(r"^demo = \[(.*)\]", py, re.M).group(1)
    assert "torch" not in extra and "hypothesis" not in extra and "matplotlib" in extra
    assert re.search(r"^notebook = \[.*notebook", py, re.M)
    assert "jupyter" in _recipe(mk, "notebook") and ".deps-notebook" in _recipe(mk, "notebook")
    assert '".[demo,notebook]"' in _recipe(mk, "$(VENV)/.deps-notebook")


def test_make_test_installs_everything_and_forces_cuda():
    mk = open(os.path.join(ROOT, "Makefile")).read()
    assert '".[test,demo]"' in _recipe(mk, "$(VENV)/.deps")
    py = open(os.path.join(ROOT, "pyproject.toml")).read()
    test_extra = re.search(r"^test = \[(.*)\]", py, re.M).group(1)
    for pkg in ("torch", "hypothesis", "nbclient", "ipykernel"):  # test_notebook runs in make test
        assert pkg in test_extra
    assert "AMPY_CUDA=$(AMPY_CUDA)" in _recipe(mk, "build")
    assert "AMPY_CUDA=$(AMPY_CUDA)" in _recipe(mk, "pytest")
    assert "export AMPY_CUDA=1" in open(os.path.join(ROOT, ".ci", "run")).read()


@pytest.mark.skipif(not __import__("shutil").which("make"), reason="make is not installed")
def test_make_test_forces_cuda_wherever_nvcc_is():
    import shutil
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in ("AMPY_CUDA", "MAKEFLAGS")}
    out = subprocess.run(["make", "-n", "-C", ROOT, "build", "VENV=/nonexistent-venv"],
                         capture_output=True, text=True, env=env).stdout
    has_nvcc = shutil.which("nvcc") or os.path.exists(
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"))
    assert ("AMPY_CUDA=1 " if has_nvcc else "AMPY_CUDA=auto ") in out
    out = subprocess.run(["make", "-n", "-C", ROOT, "build", "VENV=/nonexistent-venv"],
                         capture_output=True, text=True, env=dict(env, AMPY_CUDA="1")).stdout
    assert "AMPY_CUDA=1 " in out  # CI's export wins
