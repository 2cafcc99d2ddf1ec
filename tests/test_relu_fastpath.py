"""relu of contiguous float32/float16/bfloat16 runs in registers on AVX-512
(ewise.c's ewx_relu): the bits must be the portable path's and torch's, for
-0, NaN, infinities, subnormals and odd lengths (the masked tail)."""
import numpy as np
import pytest
import torch

import ampy
from ampy import _C
from _helpers import stable_seed

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.5, -3.5, 65504.0, -1e-7]


def _data(n, dtype):
    rng = np.random.default_rng(stable_seed("relu", n, dtype))
    x = rng.standard_normal(n).astype(np.float32)
    x[: min(n, len(SPECIAL))] = SPECIAL[: min(n, len(SPECIAL))]
    return x


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 40001])
def test_relu_bits_equal_the_portable_path_and_torch(dtype, n, cpu_path):
    x = _data(n, dtype)
    a = ampy.tensor(x).to(getattr(ampy, dtype))
    got = ampy.relu(a)
    _C._set_cpu_level("portable")
    try:
        ref = ampy.relu(a)
    finally:
        _C._set_cpu_level(cpu_path)
    np.testing.assert_array_equal(got.float().numpy().view(np.uint32),
                                  ref.float().numpy().view(np.uint32))
    t = torch.relu(torch.tensor(x).to(getattr(torch, dtype))).float().numpy()
    finite = ~np.isnan(t)
    np.testing.assert_array_equal(got.float().numpy()[finite].view(np.uint32),
                                  t[finite].view(np.uint32))
    assert np.isnan(got.float().numpy()[~finite]).all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_relu_strided_and_inplace(dtype):
    x = _data(2000, dtype).reshape(40, 50)
    a = ampy.tensor(x).to(getattr(ampy, dtype))
    t = torch.tensor(x).to(getattr(torch, dtype))
    np.testing.assert_array_equal(ampy.relu(a.t()).float().numpy(), torch.relu(t.t()).float().numpy())
    a.relu_()
    t.relu_()
    np.testing.assert_array_equal(a.float().numpy(), t.float().numpy())
