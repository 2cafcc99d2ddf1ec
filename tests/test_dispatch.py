"""The op table and the dispatch path (ampy/_dispatch.py)."""
import numpy as np
import pytest

import ampy
from ampy import _dispatch


def test_every_op_has_a_forward_and_a_name():
    table = _dispatch.ops()
    assert len(table) >= 16
    for name, op in table.items():
        assert op.name == name
        assert callable(op.forward)


def test_unknown_op_is_a_key_error_naming_it():
    with pytest.raises(KeyError, match="no_such_op"):
        _dispatch.get_op("no_such_op")


def test_hooks_see_every_dispatched_call():
    seen = []
    saved = (_dispatch._hooks.autocast, _dispatch._hooks.autograd)
    try:
        def spy(op, args, kwargs):
            seen.append(op.name)
            return args, kwargs
        _dispatch._hooks.autocast = spy
        x = ampy.tensor(np.arange(6.0, dtype=np.float32)).reshape(2, 3)
        y = x.transpose(0, 1).to(ampy.float16)
        assert "transpose" in seen and "to_dtype" in seen
        np.testing.assert_array_equal(y.float().numpy(), np.arange(6.0).reshape(2, 3).T)
    finally:
        _dispatch._hooks.autocast, _dispatch._hooks.autograd = saved


def test_views_share_memory_and_version_counter():
    x = ampy.zeros(4, 4)
    v = x[1:3, ::2]
    assert v.data_ptr() == x.data_ptr() + 4 * 4
    before = x._version
    v.fill_(1.0)
    assert x._version == v._version > before
    expect = np.zeros((4, 4), np.float32)
    expect[1:3, ::2] = 1
    np.testing.assert_array_equal(x.numpy(), expect)
