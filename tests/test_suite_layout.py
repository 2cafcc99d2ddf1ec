"""The test suite's own rules: one set of helpers (_helpers.py) instead of copies,
GPU cases marked next to their concern, skips only for a missing GPU, CPU
feature or external package (never on ampy's own attributes or on ampy raising),
and the CPU-path fixture over every level ampy can force."""
import ast
import functools
import pathlib
import re

import ml_dtypes
import numpy as np
import pytest
import torch

import ampy
from ampy import _C

from _helpers import (CPU_LEVELS, DTYPE_NAMES, NP_DTYPE, TORCH_DTYPE, bits, cpu_level_missing,
                      same_bits, ulp_distance)

TESTS = pathlib.Path(__file__).resolve().parent
FILES = sorted(p for p in TESTS.glob("*.py") if p.name != "_helpers.py")
# the files whose kernel-level tests run once per CPU level (cpu_path) or per GEMM
# implementation (impl)
KERNEL_FILES = ["test_cast.py", "test_elementwise.py", "test_elementwise_strided.py",
                "test_reduce.py", "test_nn.py", "test_vecmath.py", "test_block_kernels.py",
                "test_fused.py", "test_amp_kernels.py", "test_optim.py", "test_optim_strided.py",
                "test_gemm.py", "test_gemm_batched.py", "test_gemm_bias.py"]
HALF_VALUES = ("np.float16", "torch.float16", "ml_dtypes.bfloat16", "torch.bfloat16")


@functools.lru_cache(maxsize=None)
def _trees():
    return tuple((p.name, ast.parse(p.read_text(), str(p))) for p in FILES)


def _tests(tree):
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def test_no_copies_of_the_shared_helpers():
    """No test file defines its own bit view, ulp distance or dtype map."""
    own = []
    for name, tree in _trees():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.strip("_") in (
                    "bits", "ulp_dist", "ulp_distance", "median_time"):
                own.append(f"{name}:{node.lineno} def {node.name}")
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                halves = [ast.unparse(v) in HALF_VALUES for v in node.value.values]
                if sum(halves) >= 2:
                    own.append(f"{name}:{node.lineno} a dtype map")
    assert not own, f"use _helpers.py instead: {own}"


def _skip_sources(tree):
    """(line, source) of every skip decision: skipif conditions, importorskip
    arguments, and the tests of the `if`s around pytest.skip."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = ast.unparse(node.func)
            if f.endswith("skipif") and node.args:
                out.append((node.lineno, ast.unparse(node.args[0])))
            if f.endswith("importorskip") and node.args:
                out.append((node.lineno, "importorskip " + ast.unparse(node.args[0])))
        if isinstance(node, ast.If) and any(
                isinstance(c, ast.Expr) and isinstance(c.value, ast.Call)
                and ast.unparse(c.value.func) == "pytest.skip" for c in node.body):
            out.append((node.lineno, ast.unparse(node.test)))
    return out


def test_no_skip_depends_on_ampy_itself():
    bad = []
    for name, tree in _trees():
        for line, src in _skip_sources(tree):
            if re.search(r"hasattr\(ampy|getattr\(ampy|_dispatch\.ops\(\)|importorskip 'ampy",
                         src):
                bad.append(f"{name}:{line}: {src}")
        for node in ast.walk(tree):  # a skip when ampy raises hides the failure
            if isinstance(node, ast.ExceptHandler) and "pytest.skip(" in ast.unparse(node):
                bad.append(f"{name}:{node.lineno}: pytest.skip in an except clause")
    assert not bad, bad


def test_gpu_cases_are_marked():
    """A test that puts data on a GPU is marked requires_cuda (so conftest.py skips
    it without one and `pytest -m cuda` finds it) or checks the machine without
    a GPU (without_cuda, or skips when one is present)."""
    unmarked = []
    for name, tree in _trees():
        module_mark = any(isinstance(n, ast.Assign) and "requires_cuda" in ast.unparse(n.value)
                          and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                          for n in tree.body)
        for fn in _tests(tree):
            src = ast.unparse(fn)
            if not re.search(r"\.cuda\(\)|device='cuda|\.to\('cuda", src):
                continue
            marks = " ".join(ast.unparse(d) for d in fn.decorator_list)
            if module_mark or "requires_cuda" in marks or "without_cuda" in marks:
                continue
            if "if ampy.cuda.is_available():" in src and "pytest.skip(" in src:
                continue
            unmarked.append(f"{name}::{fn.name}")
    assert not unmarked, unmarked


def test_kernel_files_run_on_every_cpu_path():
    missing = []
    for name, tree in _trees():
        if name not in KERNEL_FILES:
            continue
        args = {a.arg for fn in _tests(tree) for a in fn.args.args}
        if not args & {"cpu_path", "impl"}:
            missing.append(name)
    assert not missing, f"no test takes cpu_path (or impl): {missing}"


def test_cpu_levels_are_every_level_ampy_can_force():
    with pytest.raises(ValueError) as e:
        _C._set_cpu_level("no-such-level")
    assert tuple(re.search(r"\(([^)]*)\)", str(e.value)).group(1).split(", ")) == CPU_LEVELS
    try:
        for level in CPU_LEVELS:
            _C._set_cpu_level(level)
            if not cpu_level_missing(level):
                assert _C.cpu_info()["level"] == level  # the fixture really runs that path
    finally:
        _C._set_cpu_level(None)


_VALUES = {"float": [0.0, -0.0, 1.5, -2.0, 65504.0, np.inf, -np.inf, np.nan, 1e-3],
           "int": [0, 1, 7, 100, 255], "bool": [True, False, True]}


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_bits_is_one_view_of_ampy_numpy_and_torch(name):
    kind = "bool" if name == "bool" else "float" if "float" in name else "int"
    with np.errstate(all="ignore"):
        a = np.array(_VALUES[kind], np.float64).astype(NP_DTYPE[name])
    size = np.dtype(NP_DTYPE[name]).itemsize
    want = a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]).copy()
    t = ampy.from_numpy(a.copy())
    th = torch.from_numpy(a.view(np.int16) if name == "bfloat16" else a.copy())
    th = th.view(torch.bfloat16) if name == "bfloat16" else th
    assert th.dtype == TORCH_DTYPE[name] and t.dtype.name == name
    for x in (a, t, th, t.reshape(3, -1) if a.size % 3 == 0 else t):
        got = bits(x)
        assert got.dtype == want.dtype and np.array_equal(got.reshape(-1), want), type(x)
    snap = bits(a)
    a[0] = a[1]
    assert np.array_equal(snap, want), "bits is a copy"
    assert same_bits(t, want.view(NP_DTYPE[name]))
    assert same_bits(t, want) == (np.dtype(NP_DTYPE[name]) == want.dtype)  # dtypes count


def test_ulp_distance():
    one = np.float32(1.0)
    up = np.nextafter(one, np.float32(2.0))
    tiny = np.float32(1e-45)
    got = ulp_distance(np.array([up, tiny, 0.0, np.nan, np.nan, np.inf], np.float32),
                       np.array([one, -tiny, -0.0, np.nan, 1.0, np.float32(3.4028235e38)],
                                np.float32))
    assert got.tolist() == [1, 2, 0, 0, 1 << 40, 1]
    b = np.array([1.0, 1.0078125], ml_dtypes.bfloat16)
    assert ulp_distance(b[1:], b[:1]).tolist() == [1]
