"""The direct conv2d forward's shape rule and tile edges (csrc/conv_direct.c:
float32 at AVX-512, bfloat16 at AVX512-BF16, ungrouped, OH*OW >= 64; the
patch path below 64 positions and at the other levels), on every CPU level,
against torch's float64 with test_conv.py's fp32-accumulation bound."""
import pytest

from test_conv import TF, _rand, _sums, check_against_float64, torch

CASES = [  # (x shape, w shape, kwargs)
    ((2, 3, 17, 19), (33, 3, 3, 3), dict(padding=1)),                        # O = 32 + 1
    ((1, 7, 16, 17), (5, 7, 3, 3), dict(stride=2, padding=2, bias=False)),    # odd C, stride
    ((2, 5, 15, 13), (6, 5, 3, 2), dict(padding=(2, 1), dilation=(2, 3))),    # dilated
    ((1, 70, 10, 9), (40, 70, 3, 3), dict(padding=1)),                        # C past 64
    ((2, 3, 23, 23), (8, 3, 7, 7), dict(stride=2, padding=3)),                # 7x7 stem
    ((2, 16, 7, 7), (9, 16, 3, 3), dict(padding=1)),                          # P = 49: patch
    ((2, 16, 8, 8), (9, 16, 3, 3), dict(padding=1)),                          # P = 64: direct
]


@pytest.mark.parametrize("dt", ("float32", "bfloat16", "float16"))
@pytest.mark.parametrize("xs,ws,kw", CASES, ids=[str(i) for i in range(len(CASES))])
def test_direct_rule_against_float64(cpu_path, dt, xs, ws, kw):
    kw = dict(kw)
    bias = kw.pop("bias", True)
    arrays = [_rand(*xs), _rand(*ws, seed=1), _rand(ws[0], seed=2) if bias else None]
    fn = lambda M, x, w, b: M.conv2d(x, w, b, **kw)  # noqa: E731
    y_t = TF.conv2d(torch.from_numpy(arrays[0]), torch.from_numpy(arrays[1]), None, **kw)
    ks = _sums(arrays[0], arrays[1], y_t, 1)
    check_against_float64(fn, arrays, _rand(*y_t.shape, seed=3), dt, ks, f"{xs} {ws} {kw}")
