"""The cnn kernels that split planes or channels across ampy's thread pool
(batch_norm, group_norm, the avg/adaptive/max pools, the pads, bilinear
and nearest interpolation): outputs and every gradient have the same bits
at 1 and 2 threads on every CPU path, on shapes large enough that each
kernel really hands a chunk to the second thread (each channel's or
group's reduction stays on one thread, so its order does not change),
and both runs agree with torch 2.13 CPU within the float64-refereed bound
of test_cnn_ops.py (float64: within 1e-9 of torch's). The per-op grids with their exact-bits claims are in
test_cnn_ops.py and test_cnn_kernel_paths.py.
"""
import numpy as np
import pytest

import ampy

from _helpers import bits, host_f64
from test_cnn_ops import _np, _params, _near as _near_half

torch = pytest.importorskip("torch")

DTYPES = (ampy.float32, ampy.bfloat16, ampy.float16, ampy.float64)


def _bn_train(M):
    return lambda x, w, b: M.nn.functional.batch_norm(x, None, None, w, b, training=True)


def _bn_eval(M):
    def f(x, w, b):
        rm = (M.arange(16) * 0.01).to(x.dtype)
        rv = (M.arange(16) * 0.1 + 0.5).to(x.dtype)
        return M.nn.functional.batch_norm(x, rm, rv, w, b, training=False)
    return f


F = lambda M: M.nn.functional  # noqa: E731
X = (4, 16, 48, 48)  # every kernel's grain is met at least twice over
CASES = {
    "batch_norm train": (_bn_train, True),
    "batch_norm eval": (_bn_eval, True),
    "group_norm 4": (lambda M: lambda x, w, b: F(M).group_norm(x, 4, w, b), True),
    "group_norm 16": (lambda M: lambda x, w, b: F(M).group_norm(x, 16, w, b), True),
    "avg_pool2d 2": (lambda M: lambda x: F(M).avg_pool2d(x, 2), False),
    "avg_pool2d 3/2/1": (lambda M: lambda x: F(M).avg_pool2d(x, 3, 2, 1), False),
    "adaptive_avg (7,7)": (lambda M: lambda x: F(M).adaptive_avg_pool2d(x, (7, 7)), False),
    "max_pool2d 3/2/1": (lambda M: lambda x: F(M).max_pool2d(x, 3, 2, 1), False),
    "pad reflect": (lambda M: lambda x: F(M).pad(x, (1, 2, 2, 1), mode="reflect"), False),
    "pad replicate": (lambda M: lambda x: F(M).pad(x, (2, 1, 1, 2), mode="replicate"), False),
    "bilinear x2": (lambda M: lambda x: F(M).interpolate(x, scale_factor=2, mode="bilinear"),
                    False),
    "bilinear align": (lambda M: lambda x: F(M).interpolate(
        x, size=(61, 35), mode="bilinear", align_corners=True), False),
    "nearest x2": (lambda M: lambda x: F(M).interpolate(x, scale_factor=2), False),
}


def _inputs(affine):
    xs = [_np(X, 3)]
    if affine:
        xs += [_np((X[1],), 4), _np((X[1],), 5)]
    return xs


def _near(a, t, ref, dt):
    """torch's float64 is its own reference: float64 within 1e-9 relative."""
    if dt is ampy.float64:
        np.testing.assert_allclose(host_f64(a), t.detach().numpy(), rtol=1e-9, atol=1e-12)
    else:
        _near_half(a, t, ref, dt)


def _run(fn_a, fn_t, xs, dt, threads):
    old = ampy.get_num_threads()
    try:
        ampy.set_num_threads(threads)
        return _params(fn_a, fn_t, xs, dt)
    finally:
        ampy.set_num_threads(old)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_threads_same_bits(cpu_path, case, dt):
    mk, affine = CASES[case]
    xs = _inputs(affine)
    one = _run(mk(ampy), mk(torch), xs, dt, 1)
    two = _run(mk(ampy), mk(torch), xs, dt, 2)
    ya1, yt, ga1, gt, yr, gr = one
    ya2, _, ga2, _, _, _ = two
    np.testing.assert_array_equal(bits(ya1), bits(ya2))
    _near(ya1, yt, yr, dt)
    for a1, a2, t, r in zip(ga1, ga2, gt, gr):
        assert a1 is not None and a2 is not None
        np.testing.assert_array_equal(bits(a1), bits(a2))
        _near(a1, t, r, dt)
