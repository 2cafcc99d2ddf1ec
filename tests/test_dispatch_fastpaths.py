"""The fast paths of the recording/dispatch layer give exactly what the
general code gives (the general code is the oracle; NumPy checks the values).

- reshape / getitem forwards in ampy/_tensor.py: same shape, strides, offset
  and memory as ampy._views.reshape / ampy._indexing.getitem;
- Tensor.shape built in C is an ampy.Size equal to the dims;
- Tensor._alias() / detach() views: same elements, no history;
- recording: grad-mode state is restored when a forward raises or itself
  switches grad mode on; the per-op info cache follows a new backward rule.
"""
import re

import numpy as np
import pytest

import ampy
from ampy import _indexing, _tensor, _views


def _layout(t):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.data_ptr())


def _sources():
    rng = np.random.default_rng(0)
    base = ampy.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    yield base
    yield base.transpose(0, 2)                 # not contiguous
    yield base[:, 1:2]                          # size-1 dim
    yield base.reshape(24)
    yield base.reshape(4, 1, 6).transpose(0, 1)  # contiguous, odd stride on a size-1 dim
    yield base[1]
    yield ampy.ones(0, 3)                       # empty
    yield ampy.ones(())                         # 0-d


@pytest.mark.parametrize("shape", [(24,), (2, 12), (4, 3, 2), (6, 4), (2, 3, 4), (1, 24),
                                   (24, 1), (-1,), (3, -1), (2, 2, 2, 3), (0,), (0, 3),
                                   (), (1,), (3, 0)])
def test_reshape_fast_path_matches_views(shape):
    for x in _sources():
        try:
            want = _views.reshape(x, *shape)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=re.escape(str(e))):
                _tensor._fwd_reshape(x, shape)
            continue
        got = _tensor._fwd_reshape(x, shape)
        assert _layout(got) == _layout(want) or (
            tuple(got.shape) == tuple(want.shape) and got.data_ptr() != x.data_ptr() and
            want.data_ptr() != x.data_ptr())  # both copies
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(got.numpy(), np.asarray(x.numpy()).reshape(shape))


_KEYS = [0, 1, -1, -2, 2, 5, -6, slice(None), slice(1, None), slice(None, 2), slice(-2, None),
         slice(0, 1), slice(1, 1), slice(3, 1), slice(None, None, 2), slice(1, 100, 3),
         slice(-100, 100), slice(None, -1), slice(0, 2, 1)]


@pytest.mark.parametrize("key", _KEYS, ids=repr)
def test_getitem_fast_path_matches_indexing(key):
    for x in _sources():
        try:
            want = _indexing.getitem(x, key)[0]
        except (IndexError, RuntimeError, ValueError) as e:
            with pytest.raises(type(e)):
                _tensor._fwd_getitem(x, key)
            continue
        got = _tensor._fwd_getitem(x, key)
        assert _layout(got) == _layout(want)
        np.testing.assert_array_equal(got.numpy(), np.asarray(x.numpy())[key])


def test_getitem_bad_steps_still_raise():
    x = ampy.ones(4)
    for key in (slice(None, None, 0), slice(None, None, -1)):
        with pytest.raises(ValueError, match="step must be greater than zero"):
            x[key]
    with pytest.raises(IndexError, match="out of bounds"):
        x[4]
    with pytest.raises(IndexError):
        ampy.ones(())[0]


def test_shape_is_a_size_built_in_c():
    for dims in [(), (3,), (2, 0, 5), (1, 2, 3, 4, 5, 6, 7, 8), (2 ** 40 // 2 ** 38,)]:
        t = ampy.empty(*dims) if dims else ampy.empty(())
        s = t.shape
        assert type(s) is ampy.Size
        assert s == dims and tuple(s) == dims and len(s) == len(dims)
        assert hash(s) == hash(dims)
        assert repr(s) == f"ampy.Size({list(dims)})"
        assert s.numel() == int(np.prod(dims))


def test_alias_and_detach_share_memory_without_history():
    w = ampy.ones(2, 3).requires_grad_()
    y = (w * 2).t()
    for v in (y._alias(), y.detach()):
        assert v.grad_fn is None and not v.requires_grad
        assert _layout(v) == _layout(y)
        assert v._version == y._version


def test_grad_mode_restored_after_forward_raises():
    w = ampy.ones(3).requires_grad_()
    with pytest.raises(RuntimeError):
        ampy.matmul(w, ampy.ones(4))  # raises inside the recorded forward
    assert ampy.is_grad_enabled()
    from ampy.autograd import _grad_mode
    assert _grad_mode._OFF_LIST == []
    assert (w * 2).grad_fn is not None


def test_grad_mode_switched_on_inside_a_forward():
    # a forward that turns grad mode back on must not unbalance the bookkeeping
    from ampy import _dispatch
    from ampy.autograd import _grad_mode

    @_dispatch.defop("test_fastpaths_enable_inside")
    def fwd(x):
        assert not ampy.is_grad_enabled()
        ampy.set_grad_enabled(True)
        return x * 2

    op = _dispatch.get_op("test_fastpaths_enable_inside")
    try:
        w = ampy.ones(2).requires_grad_()
        with pytest.raises(NotImplementedError, match="not implemented"):
            _dispatch.dispatch(op, w).sum().backward()
        assert ampy.is_grad_enabled() and _grad_mode._OFF_LIST == []
        with ampy.no_grad():
            assert _grad_mode._OFF_LIST == [None]
        assert _grad_mode._OFF_LIST == []
    finally:
        _dispatch._TABLE.pop("test_fastpaths_enable_inside", None)


def test_op_info_follows_a_new_rule():
    from ampy import _dispatch
    @_dispatch.defop("test_fastpaths_twice")
    def fwd(x):
        return x * 2

    op = _dispatch.get_op("test_fastpaths_twice")
    try:
        w = ampy.ones(2).requires_grad_()
        with pytest.raises(NotImplementedError, match="test_fastpaths_twice"):
            _dispatch.dispatch(op, w).sum().backward()
        _dispatch.backward("test_fastpaths_twice", save=())(lambda ctx, g: (g * 2,))
        _dispatch.dispatch(op, w).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])
        op.backward = lambda ctx, g: (g * 3,)
        w.grad = None
        _dispatch.dispatch(op, w).sum().backward()
        np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
    finally:
        _dispatch._TABLE.pop("test_fastpaths_twice", None)


def test_fast_paths_record_like_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    v = rng.standard_normal((4, 6)).astype(np.float32)
    for lib in (ampy, torch):
        x = lib.tensor(v).requires_grad_()
        y = x.reshape(2, 12)[1] * 3 + x.reshape(24)[3:9].sum()
        y.sum().backward()
        if lib is ampy:
            ga = x.grad.numpy()
        else:
            gt = x.grad.numpy()
    np.testing.assert_array_equal(ga, gt)


def test_c_input_bookkeeping_matches_python():
    # TensorBase._ag_inputs (C) against _recording._inputs (Python), same state
    from ampy import _C
    from ampy.autograd import _recording as R
    from ampy.autograd._node import Meta, accumulator

    leaf = ampy.ones(2, 3).requires_grad_()
    inner = leaf * 2                        # non-leaf, output 0
    plain = ampy.ones(3)                    # no grad
    ints = ampy.tensor([1, 2])              # not floating: kept as is
    half = ampy.ones(3, dtype=ampy.float16).requires_grad_()

    def norm(x):
        if isinstance(x, Meta):
            return ("meta", tuple(x.shape), x.dtype, x._device_index)
        if isinstance(x, tuple):
            return tuple(norm(y) for y in x)
        return x

    cases = [(leaf, inner), (inner, 2.0, plain), (ints, leaf, None), (half,), (plain, "x"),
             (leaf, leaf), (), (3, slice(1, 2), (1, 2))]
    for args in cases:
        for save in (None, frozenset(), frozenset({0}), frozenset({1, 2})):
            c = _C.TensorBase._ag_inputs(args, save, Meta, accumulator)
            p = R._inputs(args, save, False)
            assert c is not None
            assert len(c) == 4
            for a, b in zip(c, p):
                assert norm(a) == norm(b)
            for x, y in zip(c[0], p[0]):  # kept arguments are the objects themselves
                assert isinstance(x, Meta) or x is y
    # a list holding a tensor: C declines, Python handles it
    assert _C.TensorBase._ag_inputs(([leaf, plain],), None, Meta, accumulator) is None
    with pytest.raises(TypeError, match="_ag_inputs"):
        _C.TensorBase._ag_inputs([leaf], None, Meta, accumulator)
    # the edges point at the graph: grad_fn for a non-leaf, the leaf's accumulator
    _, edges, needs, saved = _C.TensorBase._ag_inputs((inner, leaf, plain), None, Meta,
                                                      accumulator)
    assert edges[0] == (inner.grad_fn, 0) and edges[1][0] is accumulator(leaf)
    assert edges[2] == (None, 0) and needs == (True, True, False)
    assert [t for t, _ in saved] == [inner, leaf, plain]
    assert all(v == t._version for t, v in saved)
