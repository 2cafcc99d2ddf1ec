"""The op table is consistent with its declarations.

Every backward rule, non-differentiable mark and grad_fn name belongs to a
declared op (a misspelt name raises at import); every op's autocast policy is
torch's list (ampy/_policy_lists.py) or an override listed below with its
reason, and is set before any autocast region opens; every op is exposed
under the Python names its declaration gives, set on ampy.Tensor in one
module; every op has a test case; the printers show the table.
"""
import ast
import io
import os
import subprocess
import sys

import pytest

import ampy
from ampy import _dispatch
from ampy._policy_lists import DEVICES, torch_policy
from ampy.autograd._registry import NAMES, NON_DIFFERENTIABLE
from double_backward_cases import CASES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# op name -> {device: policy}: where an op's policy differs from torch's list,
# and why. (Empty: every op has torch's policy.)
POLICY_OVERRIDES = {}

# ops whose gradient is tested outside tests/double_backward_cases.py
TESTED_ELSEWHERE = {
    "to_device": "needs a second device: tests/test_cuda_runtime.py::test_cuda_to_device_backward_returns_grad_to_source",
}


def test_every_rule_belongs_to_an_op():
    for name, op in _dispatch.ops().items():
        if op.backward is not None:
            assert callable(op.backward), name
            assert hasattr(op.backward, "save"), f"{name}: rule not declared with backward()"


def test_non_differentiable_and_grad_fn_names_are_ops():
    table = _dispatch.ops()
    assert sorted(NON_DIFFERENTIABLE - set(table)) == []
    assert sorted(set(NAMES) - set(table)) == []


def test_misspelt_registrations_raise():
    with pytest.raises(LookupError, match="no op named 'ad'"):
        _dispatch.backward("ad", save=())(lambda ctx, g: (g,))
    with pytest.raises(ValueError, match="declared twice"):
        _dispatch.defop("add")(lambda x: x)
    with pytest.raises(ValueError, match="unknown device"):
        _dispatch.defop("test_op_table_gpu", devices=("gpu",))


def test_every_op_has_torchs_policy_or_a_listed_override():
    for name, op in _dispatch.ops().items():
        want = dict(torch_policy(name))
        want.update(POLICY_OVERRIDES.get(name, {}))
        assert op.policy == want, name


def test_policy_is_set_before_any_autocast_region():
    code = ("import ampy\nfrom ampy import _dispatch\n"
            "print(_dispatch.get_op('linear').policy, _dispatch.get_op('exp').policy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ("{'cpu': 'lower_precision_fp', 'cuda': 'lower_precision_fp'} "
                   "{'cuda': 'fp32'}")


def test_every_op_declares_its_devices():
    for name, op in _dispatch.ops().items():
        assert op.devices and set(op.devices) <= set(DEVICES) and op.devices[0] == "cpu", name


def _tensor_assignments():
    """Names set on Tensor: the class body of ampy/_tensor.py and the
    `Tensor.<name> = ...` lines of ampy/_methods.py."""
    names = set()
    tree = ast.parse(open(os.path.join(ROOT, "ampy", "_tensor.py")).read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Tensor":
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    tree = ast.parse(open(os.path.join(ROOT, "ampy", "_methods.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id == "Tensor"):
                    names.add(t.attr)
    return names


def _resolve(dotted):
    owner, _, attr = dotted.rpartition(".")
    obj = {"ampy": ampy, "Tensor": ampy.Tensor, "ampy.nn.functional": ampy.nn.functional}[owner]
    return getattr(obj, attr, None)


def test_every_op_is_exposed_under_its_declared_names():
    assigned = _tensor_assignments()
    for name, op in _dispatch.ops().items():
        for dotted in op.names:
            assert _resolve(dotted) is not None, f"op {name!r}: {dotted} does not exist"
            if dotted.startswith("Tensor."):
                assert dotted[7:] in assigned, f"op {name!r}: {dotted} is not set in one place"


def test_tensor_methods_are_set_in_one_module_only():
    """No module but ampy/_methods.py assigns attributes of Tensor."""
    for dirpath, _, files in os.walk(os.path.join(ROOT, "ampy")):
        for f in files:
            path = os.path.join(dirpath, f)
            if not f.endswith(".py") or path.endswith(os.path.join("ampy", "_methods.py")):
                continue
            rel = os.path.relpath(path, ROOT)
            for node in ast.walk(ast.parse(open(path).read())):
                targets = node.targets if isinstance(node, ast.Assign) else []
                for t in targets:
                    assert not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == "Tensor"), f"{rel}:{node.lineno}"
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
                    arg = node.args[0] if node.args else None
                    assert not (isinstance(arg, ast.Name) and arg.id == "Tensor"), \
                        f"{rel}:{node.lineno}"


def test_every_op_has_a_test_case():
    for name in _dispatch.ops():
        assert name in CASES or name in TESTED_ELSEWHERE, f"op {name!r} has no test case"


def test_print_ops_shows_every_field():
    buf = io.StringIO()
    _dispatch.print_ops(file=buf)
    text = buf.getvalue()
    assert text.count("\n    forward  ampy/") == len(_dispatch.ops())
    block = text[text.index("\nlinear\n") + 1:].split("\n")[:6]
    assert block[0] == "linear"
    assert block[1].startswith("    forward  ampy/_gemm.py:")
    assert block[2].startswith("    backward ampy/autograd/_rules_gemm.py:")
    assert block[3] == "    policy   cpu=lower_precision_fp cuda=lower_precision_fp"
    assert block[4] == "    devices  cpu,cuda"
    assert "ampy.linear" in block[5]


def test_print_policy_lists_the_table():
    buf = io.StringIO()
    ampy.amp.print_policy(file=buf)
    rows = {line.split()[0]: line.split()[1:] for line in buf.getvalue().splitlines()[2:]}
    assert rows["linear"] == ["lower_precision_fp", "lower_precision_fp"]
    assert rows["exp"] == ["-", "fp32"]
    assert "add" not in rows


def test_a_mark_under_a_name_that_is_no_op_raises(monkeypatch):
    from ampy.autograd import _registry
    monkeypatch.setattr(_registry, "NON_DIFFERENTIABLE", NON_DIFFERENTIABLE | {"equal"})
    with pytest.raises(LookupError, match="'equal'"):
        _registry.check_names()
