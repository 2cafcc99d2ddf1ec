"""The write check of every write path.

Item 17: a write into a tensor with several elements on one memory location
(expand's zero strides, a self-overlapping as_strided view) raises torch's
"unsupported operation: more than one element of the written-to tensor ..."
wherever torch raises it: in-place ops, out=, copy_, setitem, nn.init fills.
fill_/zero_ (one value: overlap is harmless), setitem of one row and
index_put_ (torch warns, then writes) behave as in torch. torch raises only
for zero strides; ampy also raises for an as_strided view whose elements
really overlap (torch writes those with undefined results), decided exactly.

Item 18: an out= op while grad mode is on and any argument (out included)
requires grad raises torch's "functions with out=... arguments don't support
automatic differentiation" message; fill_/zero_ of a leaf that requires grad
raise torch's leaf message. Every raise leaves values and versions unchanged.
"""
import inspect
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

import ampy
from ampy import nn

OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


def _ones(M, shape):
    return M.ones(*shape)


# (name, write(M, t)) for every write path a user reaches; t is a 4x3 target
WRITERS = [
    ("add_", lambda M, t: t.add_(1)),
    ("sub_", lambda M, t: t.sub_(1)),
    ("mul_", lambda M, t: t.mul_(2)),
    ("div_", lambda M, t: t.div_(2)),
    ("neg_", lambda M, t: t.neg_()),
    ("exp_", lambda M, t: t.exp_()),
    ("relu_", lambda M, t: t.relu_()),
    ("clamp_", lambda M, t: t.clamp_(0, 1)),
    ("pow_", lambda M, t: t.pow_(2)),
    ("iadd", lambda M, t: t.__iadd__(1)),
    ("add_tensor", lambda M, t: t.add_(_ones(M, (4, 3)))),
    ("copy_", lambda M, t: t.copy_(M.arange(12.0).reshape(4, 3))),
    ("copy_row", lambda M, t: t.copy_(M.arange(3.0))),
    ("setitem_all_scalar", lambda M, t: t.__setitem__(slice(None), 2.0)),
    ("setitem_all_tensor", lambda M, t: t.__setitem__(slice(None), M.arange(12.0).reshape(4, 3))),
    ("setitem_ellipsis", lambda M, t: t.__setitem__(Ellipsis, 3.0)),
    ("setitem_cols", lambda M, t: t.__setitem__((slice(None), slice(0, 2)), 5.0)),
    ("out_add", lambda M, t: M.add(_ones(M, (4, 3)), 1, out=t)),
    ("out_mul", lambda M, t: M.mul(_ones(M, (4, 3)), 2, out=t)),
    ("out_exp", lambda M, t: M.exp(_ones(M, (4, 3)), out=t)),
    ("out_clamp", lambda M, t: M.clamp(_ones(M, (4, 3)), 0, 1, out=t)),
    ("init_uniform", lambda M, t: M.nn.init.uniform_(t)),
    ("init_normal", lambda M, t: M.nn.init.normal_(t)),
    # torch lets these through (the written value is the same for every alias)
    ("fill_", lambda M, t: t.fill_(2.0)),
    ("zero_", lambda M, t: t.zero_()),
    ("setitem_row", lambda M, t: t.__setitem__(0, 7.0)),
    ("init_constant", lambda M, t: M.nn.init.constant_(t, 4.0)),
]
IDS = [w[0] for w in WRITERS]
HARMLESS = {"fill_", "zero_", "setitem_row", "init_constant"}


def _outcome(M, write):
    """(exception type, message) or (None, the target's values after the write)."""
    t = M.zeros(1, 3).expand(4, 3)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            write(M, t)
    except Exception as e:  # noqa: BLE001 (the comparison is the test)
        return type(e).__name__, str(e)
    return None, np.asarray(t.tolist())


@pytest.mark.parametrize("name,write", WRITERS, ids=IDS)
def test_expanded_target_matches_torch(name, write):
    kind_t, res_t = _outcome(torch, write)
    kind_a, res_a = _outcome(ampy, write)
    assert kind_a == kind_t, (res_a, res_t)
    if kind_t is None:
        np.testing.assert_array_equal(res_a, res_t)
    else:
        assert OVERLAP in res_t and res_a == res_t
    assert (name in HARMLESS) == (kind_t is None)


REFUSED = [w for w in WRITERS if w[0] not in HARMLESS]


@pytest.mark.parametrize("name,write", REFUSED, ids=[w[0] for w in REFUSED])
def test_expanded_raise_leaves_memory_and_version(name, write):
    base = ampy.arange(3.0).reshape(1, 3)
    t = base.expand(4, 3)
    v0 = base._version
    with pytest.raises(RuntimeError, match=OVERLAP):
        write(ampy, t)
    assert base.tolist() == [[0.0, 1.0, 2.0]] and base._version == v0


def test_index_put_on_expanded_warns_as_torch():
    for M in (torch, ampy):
        t = M.zeros(1, 3).expand(4, 3)
        with pytest.warns(UserWarning, match="index_put_ on expanded tensors is deprecated"):
            t[M.tensor([0, 2])] = 5.0
        assert np.asarray(t.tolist()).tolist() == [[5.0] * 3] * 4


def test_fresh_and_contiguous_targets_never_warn_or_raise():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = ampy.zeros(4, 3)
        x[ampy.tensor([0, 2])] = 1.0
        x.t().add_(1)
        x[:, 1].mul_(3)
        x.as_strided((2, 2), (3, 1)).add_(1)
    ref = torch.zeros(4, 3)
    ref[torch.tensor([0, 2])] = 1.0
    ref.t().add_(1)
    ref[:, 1].mul_(3)
    ref.as_strided((2, 2), (3, 1)).add_(1)
    assert x.tolist() == ref.tolist()


# ---- as_strided: exact overlap (ampy raises where elements really overlap) -------------------
@pytest.mark.parametrize("name,write", WRITERS, ids=IDS)
def test_as_strided_self_overlap_raises(name, write):
    """zeros(6) viewed (4, 3) with strides (1, 1): rows overlap. torch writes
    (undefined order); ampy refuses, except the one-value fills torch allows
    for expand too."""
    base = ampy.zeros(6)
    t = base.as_strided((4, 3), (1, 1))
    if name in HARMLESS:
        write(ampy, t)
        ref = torch.zeros(6)
        write(torch, ref.as_strided((4, 3), (1, 1)))
        assert base.tolist() == ref.tolist()
        return
    with pytest.raises(RuntimeError, match=OVERLAP):
        write(ampy, t)
    assert base.tolist() == [0.0] * 6


def _offsets(size, stride):
    offs = [0]
    for n, s in zip(size, stride):
        offs = [o + i * s for o in offs for i in range(n)]
    return offs


@given(size=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       stride=st.lists(st.integers(0, 6), min_size=3, max_size=3))
def test_as_strided_add_exact_overlap(size, stride):
    """add_ on a random as_strided view: raises iff two elements share an
    offset (brute force); otherwise adds 1 to each viewed element once, as
    torch does."""
    stride = stride[:len(size)]
    offs = _offsets(size, stride)
    n = max(offs) + 1
    base = ampy.zeros(n)
    view = base.as_strided(tuple(size), tuple(stride))
    if len(set(offs)) < len(offs):
        with pytest.raises(RuntimeError, match=OVERLAP):
            view.add_(1)
        assert base.tolist() == [0.0] * n
        return
    view.add_(1)
    expect = np.zeros(n)
    expect[offs] += 1
    ref = torch.zeros(n)
    ref.as_strided(tuple(size), tuple(stride)).add_(1)
    assert base.tolist() == expect.tolist() == ref.tolist()


def test_interleaved_strides_without_overlap_write():
    """strides (4, 3) over (3, 3) interleave (the quick test cannot tell) but
    no two elements meet: the exact check lets the write through."""
    base = ampy.zeros(15)
    base.as_strided((3, 3), (4, 3)).add_(1)
    ref = torch.zeros(15)
    ref.as_strided((3, 3), (4, 3)).add_(1)
    assert base.tolist() == ref.tolist()


# ---- item 18: out= and fills while something requires grad ---------------------------------------
def _out_functions():
    names = []
    for n in sorted(ampy.__all__):
        f = getattr(ampy, n, None)
        if not callable(f) or not hasattr(torch, n):
            continue
        try:
            ps = inspect.signature(f).parameters
        except (TypeError, ValueError):
            continue
        if "out" in ps and ps["out"].kind is inspect.Parameter.KEYWORD_ONLY:
            req = [p for p in ps.values() if p.default is inspect.Parameter.empty and
                   p.kind is not inspect.Parameter.KEYWORD_ONLY]
            names.append((n, len(req)))
    return names


def _args(M, nreq, rg):
    vals = [M.tensor([0.25, 0.5, 0.75], requires_grad=rg), M.tensor([0.5, 0.25, 0.125]),
            M.tensor([0.75, 0.5, 0.25])]
    return vals[:nreq]


def _try(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)
    return None, None


def _torch_out(name, nreq, leaf_out, rg_input, grad=True):
    out = torch.zeros(3, requires_grad=leaf_out)
    with torch.set_grad_enabled(grad):
        return _try(lambda: getattr(torch, name)(*_args(torch, nreq, rg_input), out=out))


OUT_FNS = _out_functions()
# the functions for which torch raises its out=/autograd error, and those it runs under no_grad
OUT_LEAF = [(n, k) for n, k in OUT_FNS if "functions with out=" in str(_torch_out(n, k, True, False)[1])]
OUT_INPUT = [(n, k) for n, k in OUT_FNS if "functions with out=" in str(_torch_out(n, k, False, True)[1])]
OUT_NOGRAD = [(n, k) for n, k in OUT_FNS if _torch_out(n, k, True, False, grad=False)[0] is None]


def _same_out_error(name, got, want):
    """torch's message, with ampy's function name in front (torch names some
    ops by their aten kernel: 'aten::bitwise_and()', 'pow()' for square)."""
    assert got[0] == want[0] == "RuntimeError"
    prefix, rest = got[1].split("(): ", 1)
    assert rest == want[1].split("(): ", 1)[1] and prefix.isidentifier(), (got, want)


def test_out_functions_found():
    assert len(OUT_FNS) >= 40 and len(OUT_LEAF) >= 40 and len(OUT_NOGRAD) >= 40, OUT_FNS


@pytest.mark.parametrize("name,nreq", OUT_LEAF, ids=[n for n, _ in OUT_LEAF])
def test_out_leaf_requiring_grad_raises_as_torch(name, nreq):
    kind_t, msg_t = _torch_out(name, nreq, True, False)
    a_out = ampy.zeros(3, requires_grad=True)
    v0 = a_out._version
    got = _try(lambda: getattr(ampy, name)(*_args(ampy, nreq, False), out=a_out))
    _same_out_error(name, got, (kind_t, msg_t))
    assert a_out.tolist() == [0.0, 0.0, 0.0] and a_out._version == v0
    assert a_out.grad_fn is None


@pytest.mark.parametrize("name,nreq", OUT_INPUT, ids=[n for n, _ in OUT_INPUT])
def test_out_with_input_requiring_grad_raises_as_torch(name, nreq):
    kind_t, msg_t = _torch_out(name, nreq, False, True)
    out = ampy.zeros(3)
    got = _try(lambda: getattr(ampy, name)(*_args(ampy, nreq, True), out=out))
    _same_out_error(name, got, (kind_t, msg_t))
    assert out.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name,nreq", OUT_NOGRAD, ids=[n for n, _ in OUT_NOGRAD])
def test_out_under_no_grad_writes_as_torch(name, nreq):
    t_out = torch.zeros(3, requires_grad=True)
    with torch.no_grad():
        getattr(torch, name)(*_args(torch, nreq, False), out=t_out)
    a_out = ampy.zeros(3, requires_grad=True)
    with ampy.no_grad():
        getattr(ampy, name)(*_args(ampy, nreq, False), out=a_out)
    np.testing.assert_allclose(np.asarray(a_out.tolist(), dtype=np.float64),
                               t_out.detach().double().numpy(), rtol=1e-6, atol=1e-7)
    assert a_out.requires_grad and a_out.grad_fn is None


@pytest.mark.parametrize("fill", [lambda t: t.fill_(1.0), lambda t: t.zero_(),
                                  lambda t: t.__setitem__(0, 1.0),
                                  lambda t: t.copy_(t.detach() * 0)],
                         ids=["fill_", "zero_", "setitem", "copy_"])
def test_inplace_write_of_leaf_requiring_grad(fill):
    t = torch.ones(3, requires_grad=True)
    kind_t, msg_t = _try(lambda: fill(t))
    a = ampy.ones(3, requires_grad=True)
    kind_a, msg_a = _try(lambda: fill(a))
    assert kind_t == kind_a == "RuntimeError"
    assert msg_a == msg_t.replace("a view of a leaf", "a leaf") or msg_a == msg_t
    assert a.tolist() == [1.0, 1.0, 1.0]
    with ampy.no_grad():
        fill(a)
    with torch.no_grad():
        fill(t)
    assert a.tolist() == t.tolist()


def test_parameter_init_still_works():
    lin = nn.Linear(3, 2)
    nn.init.constant_(lin.bias, 0.5)
    nn.init.zeros_(lin.weight)
    assert lin.bias.tolist() == [0.5, 0.5] and lin.weight.tolist() == [[0.0] * 3] * 2
    assert lin.bias.requires_grad and lin.bias.grad_fn is None


# ---- every in-place method of the op table, generated ----------------------------------------
def _inplace_calls():
    """(name, args) for every in-place Tensor method: the first argument
    tuple with which it runs on a plain float32 tensor (collection time).
    In-place ops declared without a Tensor method (hardswish_, reached as
    nn.functional.hardswish(x, inplace=True)) have their own write tests."""
    from ampy import _dispatch
    names = sorted({n for n, op in _dispatch.ops().items()
                    if n.endswith("_") and f"Tensor.{n}" in op.names} |
                   {"clamp_max_", "clamp_min_", "clip_", "round_"})
    found = []
    for n in names:
        if n == "copy_":
            continue
        for nargs in range(4):
            try:
                getattr(ampy.full((4, 3), 0.5), n)(*[0.25] * nargs)
            except (TypeError, RuntimeError, ValueError):
                continue
            found.append((n, nargs))
            break
    return found


INPLACE = _inplace_calls()


def _torch_args(name, nargs):
    """The arguments torch takes for the method: numbers, or tensors where
    torch insists on tensors (addcmul_, lerp_, atan2_, ...)."""
    t = torch.full((4, 3), 0.5)
    for args in ([0.25] * nargs, [torch.full((4, 3), 0.25)] * nargs):
        if _try(lambda: getattr(t, name)(*args))[0] is None:
            return args
    return None


INPLACE_TORCH = [(n, k, _torch_args(n, k)) for n, k in INPLACE
                 if hasattr(torch.Tensor, n) and _torch_args(n, k) is not None]


def _as_ampy(args):
    return [ampy.tensor(a.numpy()) if isinstance(a, torch.Tensor) else a for a in args]


# where ampy is stricter than torch: torch's tril_/triu_ write into an expanded tensor
# (through a contiguous temporary, a result that depends on its loop order); ampy refuses
# it as it refuses every other overlapping write
STRICTER_THAN_TORCH = {"tril_", "triu_"}


@pytest.mark.parametrize("name,nargs,targs", INPLACE_TORCH, ids=[c[0] for c in INPLACE_TORCH])
def test_every_inplace_method_on_expanded_matches_torch(name, nargs, targs):
    t = torch.full((1, 3), 0.5).expand(4, 3)
    kind_t, msg_t = _try(lambda: getattr(t, name)(*targs))
    base = ampy.full((1, 3), 0.5)
    v0 = base._version
    kind_a, msg_a = _try(lambda: getattr(base.expand(4, 3), name)(*_as_ampy(targs)))
    if name in STRICTER_THAN_TORCH:
        assert kind_t is None and kind_a == "RuntimeError" and OVERLAP in msg_a
    else:
        assert (kind_a, msg_a) == (kind_t, msg_t)
        assert OVERLAP in msg_t
    assert base.tolist() == [[0.5] * 3] and base._version == v0


@pytest.mark.parametrize("name,nargs", INPLACE, ids=[n for n, _ in INPLACE])
def test_every_inplace_method_on_overlapping_as_strided_raises(name, nargs):
    base = ampy.full((6,), 0.5)
    with pytest.raises(RuntimeError, match=OVERLAP):
        getattr(base.as_strided((4, 3), (1, 1)), name)(*[0.25] * nargs)
    assert base.tolist() == [0.5] * 6


def test_inplace_methods_found():
    assert len(INPLACE) >= 45 and len(INPLACE_TORCH) >= 45, INPLACE
