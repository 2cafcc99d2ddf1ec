"""The C enums that cross into Python come from _C, never retyped in ampy/.

_C exports them as constants (csrc/py/enums_py.c); this file parses the C headers
(csrc/include/ampy/*.h, and csrc/py/dlpack_py.c for DLPack's device types) and checks
every constant against them, then walks ampy/'s source with `ast`: no integer literal
where a kind, op code, loss reduction or DLPack device is passed or compared, and the
modules that pass them name `_C.<CONSTANT>`.
"""
import ast
import pathlib
import re

import numpy as np
import pytest

import ampy
from ampy import _C

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADERS = ROOT / "csrc" / "include" / "ampy"
PKG = ROOT / "ampy"


def c_values(path, prefix):
    """{NAME: value} for `NAME = value` enum entries and `#define NAME value` lines."""
    text = (HEADERS / path if not isinstance(path, pathlib.Path) else path).read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    vals = {m[0]: int(m[1]) for m in re.findall(rf"\b({prefix}\w*)\s*=\s*(\d+)", text)}
    vals.update({m[0]: int(m[1]) for m in
                 re.findall(rf"#define\s+({prefix}\w*)\s+(\d+)\s*$", text, flags=re.M)})
    assert vals, f"no {prefix}* values found in {path}"
    return vals


@pytest.mark.parametrize("header,prefix,strip,names", [
    ("reduce.h", "AMPY_SCAN_", "AMPY_", ["SCAN_CUMSUM", "SCAN_CUMPROD"]),
    ("random.h", "AMPY_RANDOM_", "AMPY_",
     ["RANDOM_UNIFORM", "RANDOM_NORMAL", "RANDOM_INTEGER", "RANDOM_BERNOULLI"]),
    ("nn.h", "AMPY_NN_REDUCTION_", "AMPY_",
     ["NN_REDUCTION_NONE", "NN_REDUCTION_MEAN", "NN_REDUCTION_SUM"]),
])
def test_constants_equal_the_headers(header, prefix, strip, names):
    vals = c_values(header, prefix)
    assert sorted(n[len(strip):] for n in vals) == sorted(names)
    for cname, v in vals.items():
        got = getattr(_C, cname[len(strip):])
        assert type(got) is int and got == v, cname


def test_max_dims_equals_the_header():
    assert _C.MAX_DIMS == c_values("iter.h", "AMPY_MAX_DIMS")["AMPY_MAX_DIMS"]


def test_dlpack_device_types_equal_the_binding_enum():
    vals = c_values(ROOT / "csrc" / "py" / "dlpack_py.c", "kDL")
    assert (_C.DLPACK_CPU, _C.DLPACK_CUDA, _C.DLPACK_CUDA_HOST, _C.DLPACK_CUDA_MANAGED) == \
        (vals["kDLCPU"], vals["kDLCUDA"], vals["kDLCUDAHost"], vals["kDLCUDAManaged"])
    # the DLPack standard's numbers (dlpack.h), which torch speaks too
    assert (_C.DLPACK_CPU, _C.DLPACK_CUDA) == (1, 2)


def test_ewise_op_table_equals_the_enum():
    """ewise.h declares the ops as one X-macro list, AMPY_EW_<ENUM> numbered in
    list order: _C.EWISE_OPS must be that list, name for name."""
    text = (ROOT / "csrc" / "include" / "ampy" / "ewise.h").read_text()
    body = text[text.index("#define AMPY_EWISE_OPS(X)"):text.index("#define AMPY_EW_ENUM_")]
    rows = re.findall(r"X\((\w+), (\w+), ([123]), [12], (\w+), (FDI|FD|I)\)", body)
    assert rows and len(rows) == body.count("X(")  # every line parsed
    assert len(_C.EWISE_OPS) == len(rows)
    for code, (enum, name, *_rest) in enumerate(rows):
        assert enum == name.upper(), (enum, name)
        assert _C.EWISE_OPS[name] == code, name
    assert list(_C.EWISE_OPS.values()) == list(range(len(rows)))  # in list order


def test_reduce_op_table_equals_the_enum():
    vals = c_values("reduce.h", "AMPY_RED_")
    n = vals.pop("AMPY_RED_NUM_OPS")
    assert len(_C.REDUCE_OPS) == n == len(vals)
    alias = {"norm": "NORM2"}  # torch's name for the 2-norm
    for name, code in _C.REDUCE_OPS.items():
        assert vals["AMPY_RED_" + alias.get(name, name.upper())] == code, name


# ---- no second copy in Python -------------------------------------------------------

def sources():
    return {p.relative_to(PKG).as_posix(): ast.parse(p.read_text(), str(p))
            for p in sorted(PKG.rglob("*.py"))}


def is_int(node):
    return isinstance(node, ast.Constant) and type(node.value) is int


def call_name(node):
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr
    return f.id if isinstance(f, ast.Name) else None


# (callee, index of the argument that is a C kind or op code)
KIND_ARGS = {"fill_random": 1, "scan": 0, "_random": 0, "_scan_op": 1}
REDUCTION_VARS = {"red", "reduction"}
ALIAS_NAMES = {"_KDLCPU", "_KDLCUDA", "_UNIFORM", "_NORMAL", "_BERNOULLI", "_CODE",
               "REDUCTIONS"}


def literal_copies(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and call_name(node) in KIND_ARGS:
            i = KIND_ARGS[call_name(node)]
            if len(node.args) > i and is_int(node.args[i]):
                yield node.lineno, f"{call_name(node)}(...) with a literal kind"
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and \
                node.left.id in REDUCTION_VARS and any(is_int(c) for c in node.comparators):
            yield node.lineno, f"{node.left.id} compared with an integer literal"
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in ALIAS_NAMES or
                isinstance(t, ast.Tuple) and any(getattr(e, "id", None) in ALIAS_NAMES
                                                 for e in t.elts) for t in node.targets):
            if any(is_int(n) for n in ast.walk(node.value)):
                yield node.lineno, "an enum alias assigned an integer literal"
            if any(isinstance(n, ast.Call) and call_name(n) == "enumerate"
                   for n in ast.walk(node.value)):
                yield node.lineno, "an op-code table rebuilt by enumerate()"
        if isinstance(node, ast.Dict) and {getattr(k, "value", None) for k in node.keys} >= \
                {"none", "mean", "sum"} and any(is_int(v) for v in node.values):
            yield node.lineno, "a loss-reduction table of integer literals"


def test_no_literal_enum_copies_in_python():
    bad = [f"ampy/{f}:{line}: {why}" for f, tree in sources().items()
           for line, why in literal_copies(tree)]
    assert not bad, "\n".join(bad)


def c_attrs(tree):
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and
            isinstance(n.value, ast.Name) and n.value.id == "_C"}


@pytest.mark.parametrize("module,names", [
    ("_creation.py", {"RANDOM_UNIFORM", "RANDOM_NORMAL"}),
    ("nn/init.py", {"RANDOM_UNIFORM", "RANDOM_NORMAL"}),
    ("nn/functional.py", {"RANDOM_BERNOULLI", "NN_REDUCTION_NONE", "NN_REDUCTION_MEAN"}),
    ("nn/_ops.py", {"NN_REDUCTION_NONE", "NN_REDUCTION_MEAN", "NN_REDUCTION_SUM"}),
    ("nn/_ops_graph.py", {"NN_REDUCTION_NONE", "NN_REDUCTION_MEAN"}),
    ("_dlpack.py", {"DLPACK_CPU", "DLPACK_CUDA"}),
    ("_math_reduce.py", {"SCAN_CUMSUM", "SCAN_CUMPROD"}),
    ("_math.py", {"EWISE_OPS"}),
])
def test_modules_name_the_c_constants(module, names):
    used = c_attrs(sources()[module])
    assert names <= used, f"ampy/{module} does not use _C.{sorted(names - used)}"


def test_the_scanner_catches_the_old_spellings():
    old = '''
_UNIFORM, _NORMAL = 0, 1
_KDLCPU, _KDLCUDA = 1, 2
REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
_CODE = {n: i for i, n in enumerate(_C.ewise_ops())}
_CUMSUM = _scan_op("cumsum", 0)
def f(mask, red):
    _C.fill_random(mask, 3, 0, 0, 0.5, 0.0)
    _random(1, (2,), None, None)
    return red == 0
'''
    lines = {line for line, _ in literal_copies(ast.parse(old))}
    assert lines == {2, 3, 4, 5, 6, 8, 9, 10}


# ---- behaviour through the constants -------------------------------------------------

def test_scans_random_and_reductions_behave_as_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    for name in ("cumsum", "cumprod"):
        got = getattr(ampy, name)(ampy.tensor(x), 1).numpy()
        ref = getattr(torch, name)(torch.from_numpy(x), 1).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    t = np.array([1, 0, 4])
    for red in ("none", "mean", "sum"):
        got = ampy.nn.functional.cross_entropy(ampy.tensor(x), ampy.tensor(t), reduction=red)
        ref = torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(t),
                                                reduction=red)
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    ampy.manual_seed(7)
    u, n = ampy.rand(1000), ampy.randn(1000)
    assert 0 <= u.numpy().min() and u.numpy().max() < 1 and abs(n.numpy().mean()) < 0.2
    cap = ampy.tensor(x).__dlpack_device__()
    assert tuple(int(v) for v in cap) == (1, 0)
