"""The op table and the dispatch path (ampy/_dispatch.py)."""
import numpy as np
import pytest

import ampy
from ampy import _dispatch


# table names whose public spelling differs: Tensor.to, indexing, max/min with a dim,
# nn.functional.hardswish(x, inplace=True)
SPELLED = {"to_dtype": "to", "to_device": "to", "getitem": "__getitem__",
           "setitem": "__setitem__", "max_dim": "max", "min_dim": "min",
           "hardswish_": "hardswish"}
SPELLED.update({"lstm_cell_fused": "lstm_cell", "gru_cell_fused": "gru_cell",
                "rnn_cell_fused": "rnn_tanh_cell"})  # the fused step behind torch's cells
SPELLED.update({"rnn_layer": "lstm"})  # one layer of torch.lstm / nn.LSTM / GRU / RNN
SPELLED.update({"max_pool3d_with_indices": "max_pool3d"})  # max_pool3d(return_indices=True)


def test_every_op_has_a_forward_and_a_public_name():
    """Every op in the table is reachable: a function of ampy or ampy.nn.functional,
    or a Tensor method, under its own name or its spelling in SPELLED."""
    table = _dispatch.ops()
    spaces = (ampy, ampy.Tensor, ampy.nn.functional)
    nameless = []
    for name, op in table.items():
        assert op.name == name
        assert callable(op.forward)
        public = SPELLED.get(name, name)
        if not any(callable(getattr(ns, public, None)) for ns in spaces):
            nameless.append(name)
    assert not nameless, f"ops without a public function or method: {nameless}"
    assert set(SPELLED) <= set(table), set(SPELLED) - set(table)


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


# the cnn ops torch names after its ATen kernels: spelled nn.functional.pad / interpolate
SPELLED.update({n: "pad" for n in ("_pad_circular", "constant_pad_nd", "reflection_pad1d",
                                   "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
                                   "replication_pad2d", "replication_pad3d")})
SPELLED.update({"upsample_nearest2d": "interpolate", "upsample_bilinear2d": "interpolate"})
