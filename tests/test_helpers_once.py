"""Small helpers exist once: shape arithmetic in ampy/_shape.py, type
promotion in C (ampy._C.promote_types / can_cast, the rule the ops use)."""
import ast
import itertools
import os

import numpy as np
import pytest
import torch

import ampy
from ampy import _shape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8", "bool"]

# helper names that live in ampy/_shape.py only
ONCE = {"wrap_dim", "broadcast_shapes", "_broadcast_shapes", "contiguous_strides",
        "_contig_strides", "_strides", "numel", "_numel"}


def test_shape_helpers_are_defined_once():
    found = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "ampy")):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            if rel in (os.path.join("ampy", "_shape.py"), os.path.join("ampy", "__init__.py")):
                continue
            tree = ast.parse(open(path).read())
            for node in tree.body:  # module-level functions (methods may be named numel)
                if isinstance(node, ast.FunctionDef) and node.name in ONCE:
                    found.append(f"{rel}:{node.lineno} {node.name}")
    assert found == []


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_promote_types_and_can_cast_match_torch(a, b):
    ta, tb = getattr(torch, a), getattr(torch, b)
    assert ampy.promote_types(a, b).name == str(torch.promote_types(ta, tb)).split(".")[1]
    assert ampy.can_cast(getattr(ampy, a), getattr(ampy, b)) == torch.can_cast(ta, tb)


def test_promote_types_rejects_a_non_dtype():
    with pytest.raises(TypeError, match="dtype"):
        ampy.promote_types(ampy.float32, 3.5)
    with pytest.raises(TypeError, match="promote_types"):
        ampy._C.promote_types(ampy.float32, None)


def test_wrap_dim_validates():
    assert _shape.wrap_dim(-1, 3) == 2 and _shape.wrap_dim(0, 0) == 0
    assert _shape.wrap_dim(np.int64(-2), 2) == 0
    for d, n in ((3, 3), (-4, 3), (1, 0)):
        with pytest.raises(IndexError, match="Dimension out of range"):
            _shape.wrap_dim(d, n)


@pytest.mark.parametrize("shapes", [((2, 1, 3), (4, 1)), ((0, 1), (1, 5)), ((), (3,)),
                                    ((1,), (0,)), ((5, 4), (4,), (1, 1, 1))])
def test_broadcast_shapes_matches_numpy(shapes):
    assert _shape.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


def test_broadcast_shapes_none_on_mismatch():
    assert _shape.broadcast_shapes((2, 3), (4, 3)) is None


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (3, 0, 2), (1, 1)])
def test_contiguous_strides_and_numel_match_torch(shape):
    t = torch.empty(shape)
    assert _shape.contiguous_strides(shape) == t.stride()
    assert _shape.numel(shape) == t.numel()
