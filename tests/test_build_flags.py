"""Build rough edges: the host C of ampy._C_cuda compiles with ampy._C's flags, `make test`
does not need root (fuzz, which may apt-get clang, is opt-in and CI still runs it), and
`make ctest` compiles csrc/ once for all C tests, and the SIMD target strings are spelled
once (csrc/simd.h)."""
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _setup_flags(env):
    """setup.py's _flags() under env (setup.py itself runs setup() at import)."""
    src = (ROOT / "setup.py").read_text()
    code = src[src.index("def _flags():"):src.index("def build_jobs(")]
    ns = {"os": os}
    old = dict(os.environ)
    try:
        os.environ.update(env)
        for k in ("AMPY_SANITIZE", "AMPY_DEBUG"):
            if k not in env:
                os.environ.pop(k, None)
        exec(code, ns)
        return ns["_flags"]()
    finally:
        os.environ.clear()
        os.environ.update(old)


class _Ext:
    def __init__(self, name, args):
        self.name, self.extra_compile_args = name, args


class _Cmd:
    def __init__(self, exts):
        self.extensions = exts


@pytest.mark.parametrize("env", [{}, {"AMPY_DEBUG": "1"}, {"AMPY_SANITIZE": "1"}])
def test_cuda_host_c_uses_the_c_extension_flags(env):
    b = _load("ampy_cuda_build", ROOT / "cuda" / "ampy_cuda_build.py")
    cflags, _ = _setup_flags(env)
    got = b.host_c_flags(_Cmd([_Ext("ampy._C_cuda", []), _Ext("ampy._C", cflags)]))
    expect = [f for f in cflags if "sanitize" not in f] + ["-fPIC"]
    assert got == expect
    for f in ("-std=c11", "-Wall", "-Wextra", "-fno-math-errno", "-fvisibility=hidden"):
        assert f in got
    assert ("-O0" if env.get("AMPY_DEBUG") else "-O3") in got and "-O2" not in got


def test_cuda_host_c_needs_the_c_extension():
    b = _load("ampy_cuda_build", ROOT / "cuda" / "ampy_cuda_build.py")
    with pytest.raises(RuntimeError, match="ampy._C"):
        b.host_c_flags(_Cmd([]))


def _make_n(*targets):
    if not shutil.which("make"):
        pytest.skip("no make")
    r = subprocess.run(["make", "-n", "-C", str(ROOT), "PY=true", *targets],
                       capture_output=True, text=True)
    return r.stdout + r.stderr


def _rule_prereqs(target):
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:([^\n]*)$", text, flags=re.M)
    assert m, target
    return m.group(1).split()


def test_make_test_does_not_fuzz_but_ci_does():
    assert "fuzz" not in _rule_prereqs("test")
    assert set(_rule_prereqs("test")) >= {"build", "ctest", "pytest", "asan"}
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test fuzz$", ci, flags=re.M)


def test_ctest_compiles_each_source_once():
    out = _make_n("-B", "ctest")
    tests = sorted((ROOT / "tests" / "c").glob("test_*.c"))
    csrc = sorted((ROOT / "csrc").glob("*.c"))
    assert tests and csrc
    for src in csrc:
        n = len(re.findall(rf"(?<![\w/])csrc/{re.escape(src.name)}\b", out))
        assert n == 1, f"{src.name} compiled {n} times by make ctest"
    # no command that builds the C tests (a shell loop over them) names a csrc/ source:
    # they link the library
    for cmd in out.replace("\\\n", " ").splitlines():
        if "tests/c/test_" in cmd:
            assert not re.search(r"(?<![\w/])csrc/\w+\.c\b", cmd), cmd[:300]


def test_simd_target_strings_are_spelled_once():
    """Only csrc/simd.h spells the AVX2/AVX-512 feature lists for attributes; the GEMM
    files' `#pragma GCC target` regions (which GCC does not macro-expand) are the only
    other place."""
    bad = []
    for p in sorted((ROOT / "csrc").rglob("*")):
        if p.suffix not in (".c", ".h", ".inc") or p.name == "simd.h":
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"target\(\s*\"", line) and "#pragma" not in line:
                bad.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)
