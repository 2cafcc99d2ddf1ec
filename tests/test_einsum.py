"""einsum against torch 2.13 and float64 NumPy: the contraction patterns
attention code uses, their gradients, ellipsis broadcasting, autocast dtypes
(torch's CPU einsum runs bmm, so contractions follow bmm's lower-precision
policy and element-wise products stay float32) and torch's errors."""
import numpy as np
import pytest
import torch

import ampy

from _helpers import AMPY_DTYPE, NP_DTYPE, TORCH_DTYPE, UNIT_ROUNDOFF, host_f64

PATTERNS = [
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 6, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 5, 6), (2, 3, 6, 8)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("ij,jk->ik", [(4, 5), (5, 3)]),
    ("i,j->ij", [(4,), (3,)]),
    ("bi,bi->b", [(3, 7), (3, 7)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("i,i->", [(6,), (6,)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bij,j->bi", [(2, 3, 4), (4,)]),
    ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    # repeated subscripts within one operand: its diagonal
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("bii->bi", [(2, 3, 3)]),
    ("iji->ij", [(3, 2, 3)]),
    ("ij,jj->i", [(3, 4), (4, 4)]),
    ("bii,bij->bj", [(2, 3, 3), (2, 3, 5)]),
    # a letter that only one operand has, summed away before the contraction
    ("ij,jk->i", [(2, 3), (3, 4)]),
    ("bij,bjk->bk", [(2, 3, 4), (2, 4, 5)]),
]
IDS = [p[0] for p in PATTERNS]


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


@pytest.mark.parametrize("eq,shapes", PATTERNS, ids=IDS)
def test_einsum_float64_and_float32_match_torch(eq, shapes):
    arrs = _arrays(shapes)
    for name, tol in (("float64", 1e-12), ("float32", 2e-6)):
        got = ampy.einsum(eq, *[ampy.tensor(a, dtype=AMPY_DTYPE[name]) for a in arrs])
        want = torch.einsum(eq, *[torch.tensor(a, dtype=TORCH_DTYPE[name]) for a in arrs])
        assert got.dtype.name == name and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(host_f64(got), want.double().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("eq,shapes", PATTERNS, ids=IDS)
def test_einsum_halves_within_one_rounding_of_float64(eq, shapes, name):
    """Half inputs are multiplied and summed in float32 (the GEMM's
    accumulator) and rounded once per contraction: |got - exact| <= u_half |exact|
    + (k - 1) u_half M + k n u_f32 M, with M the sum of |products|, k the
    contractions (one fewer than the operands; each intermediate is rounded to
    the half dtype, as in torch; a letter that only one of several operands
    has is summed away first, one more rounded intermediate) and n the
    longest sum (at most 8 here; 16 used)."""
    arrs = [a.astype(NP_DTYPE[name]).astype(np.float64) for a in _arrays(shapes)]
    got = host_f64(ampy.einsum(eq, *[ampy.tensor(a, dtype=AMPY_DTYPE[name]) for a in arrs]))
    np_eq = eq.replace(" ", "")
    exact = np.einsum(np_eq, *arrs)
    mag = np.einsum(np_eq, *[np.abs(a) for a in arrs])
    k = max(len(arrs) - 1, 1)
    terms, _, out = np_eq.partition("->")
    ops = terms.split(",")
    pre = "->" in np_eq and len(ops) > 1 and any(sum(c in t for t in ops) == 1 and c not in out
                               for c in set(terms) - {","})
    bound = (UNIT_ROUNDOFF[name] * (np.abs(exact) + (k - 1 + pre) * mag)
             + k * 16 * UNIT_ROUNDOFF["float32"] * mag)
    assert np.all(np.abs(got - exact) <= bound + 1e-30)


@pytest.mark.parametrize("eq,shapes", PATTERNS, ids=IDS)
def test_einsum_grads_match_torch(eq, shapes):
    arrs = _arrays(shapes, seed=1)
    xs = [ampy.tensor(a, requires_grad=True) for a in arrs]
    ts = [torch.tensor(a, requires_grad=True) for a in arrs]
    y, ty = ampy.einsum(eq, *xs), torch.einsum(eq, *ts)
    g = np.random.default_rng(2).standard_normal(tuple(ty.shape))
    y.backward(ampy.tensor(g))
    ty.backward(torch.tensor(g))
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("eq,shapes", PATTERNS, ids=IDS)
def test_einsum_autocast_dtype_matches_torch(eq, shapes, dtype):
    arrs = _arrays(shapes)
    with ampy.autocast("cpu", dtype=AMPY_DTYPE[dtype]):
        got = ampy.einsum(eq, *[ampy.tensor(a, dtype=ampy.float32) for a in arrs])
    with torch.autocast("cpu", dtype=TORCH_DTYPE[dtype]):
        want = torch.einsum(eq, *[torch.tensor(a, dtype=torch.float32) for a in arrs])
    assert got.dtype.name == str(want.dtype).split(".")[1]


def test_einsum_strided_operands_and_list_form():
    a, b = _arrays([(5, 4), (3, 5)])
    x, y = ampy.tensor(a), ampy.tensor(b)
    got = ampy.einsum("ij,jk->ik", x.t(), y.t())
    want = torch.einsum("ij,jk->ik", torch.tensor(a).t(), torch.tensor(b).t())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    got = ampy.einsum("bi,bi->b", [x[::2], x[::2]])
    np.testing.assert_allclose(got.numpy(), (a[::2] * a[::2]).sum(1), rtol=1e-12)


@pytest.mark.parametrize("eq,shapes,err,match", [
    ("ij,jk->ik", [(3, 4), (3, 4)], RuntimeError,
     "subscript j has size 3 for operand 1 which does not broadcast with previously seen size 4"),
    ("ij->ik", [(3, 4)], RuntimeError, "output subscript k does not appear"),
    ("ij,jk->ik", [(3, 4)], RuntimeError, "fewer operands were provided"),
    ("ij->ij", [(3, 4), (3, 4)], RuntimeError, "more operands were provided"),
    ("ijk->i", [(3, 4)], RuntimeError, "number of subscripts in the equation"),
    ("ii->i", [(3, 4)], RuntimeError,
     "subscript i is repeated for operand 0 but the sizes don't match, 4 != 3"),
    ("ij,jjk->ik", [(2, 3), (3, 2, 4)], RuntimeError,
     "subscript j is repeated for operand 1 but the sizes don't match, 2 != 3"),
])
def test_einsum_bad_equations_raise_as_torch(eq, shapes, err, match):
    for M in (ampy, torch):
        with pytest.raises(err, match=match):
            M.einsum(eq, *[M.ones(*s) for s in shapes])


def test_einsum_diagonal_of_a_strided_operand_and_its_grad():
    """The diagonal is taken on the operand's own strides (a transposed,
    sliced view here) and its gradient lands on the diagonal only."""
    a = np.random.default_rng(3).standard_normal((5, 6, 6))
    x = ampy.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    got = ampy.einsum("bii->bi", x.transpose(1, 2)[1:, ::2, ::2])
    want = torch.einsum("bii->bi", t.transpose(1, 2)[1:, ::2, ::2])
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    g = np.random.default_rng(4).standard_normal(tuple(want.shape))
    got.backward(ampy.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_einsum_bad_diagonal_leaves_the_operand_unchanged():
    x = ampy.ones(3, 4)
    with pytest.raises(RuntimeError, match="repeated for operand 0"):
        ampy.einsum("ii->i", x)
    np.testing.assert_array_equal(x.numpy(), np.ones((3, 4)))
