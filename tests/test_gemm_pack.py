"""The bfloat16 GEMM with B packed inside the tasks (csrc/gemm_driver.c walk_b,
csrc/gemm_avx512bf16.c pack_b): packing is data movement, so every output must
keep the bits of the vdpbf16ps model (tests/test_gemm_avx512bf16.py: from +0,
k pairs in order, odd element first, fused and flushed; one rounding in the
epilogue) whatever the packing items, their visiting order, the threads that
pack them and the prefetching; and stay within the fp32-accumulation bound of
float64. The shapes reach several packing groups per block, several K blocks
(K > 2048: smaller items), partial groups, and 1 and 2 threads. Negative
strides cannot occur (ampy tensors, like torch's, have none); zero strides
come from expand. Skipped where the CPU has no AVX512-BF16.
"""
import numpy as np
import pytest

import ampy
from ampy import _C, _gemm

from test_gemm_avx512bf16 import assert_bits, check_f64, model_acc, rand_bf16, t_bf16, view

pytestmark = pytest.mark.skipif(not _C.cpu_info()["avx512_bf16"],
                                reason="the CPU has no AVX512-BF16")
BF16 = ampy.bfloat16


@pytest.fixture(autouse=True)
def pinned():
    _C.gemm_set_impl("avx512bf16")
    n = ampy.get_num_threads()
    yield
    ampy.set_num_threads(n)
    _C.gemm_set_impl("auto")
    _C._set_cpu_level(None)


SHAPES = [(33, 65, 31), (40, 2100, 64), (96, 520, 300), (256, 96, 2049), (70, 300, 4100)]


LAYOUTS = [("row", "row"), ("col", "row"), ("row", "col"), ("gen", "gen"), ("col", "col")]
# the general layouts at K <= 2048 only (the model's run time grows with K)
CASES = [(mnk, la, lb) for mnk in SHAPES for la, lb in LAYOUTS
         if mnk[2] <= 2048 or (la, lb) in LAYOUTS[:3]]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mnk,la,lb", CASES)
def test_bits_shapes_layouts_threads(threads, mnk, la, lb):
    m, n, k = mnk
    ampy.set_num_threads(threads)
    a, b = rand_bf16((m, k), m * 31 + k), rand_bf16((k, n), n * 17 + k)
    got = _gemm.matmul(view(a, la), view(b, lb))
    assert_bits(got, model_acc(a, b), BF16)
    check_f64(got, a, b)


@pytest.mark.parametrize("threads", [1, 2])
def test_bits_zero_stride_operands(threads):
    ampy.set_num_threads(threads)
    m, n, k = 64, 600, 300
    a = rand_bf16((m, k), 1)
    row = rand_bf16((1, n), 2)
    col = rand_bf16((m, 1), 3)
    b_full = np.broadcast_to(row, (k, n)).copy()
    got = _gemm.matmul(view(a, "row"), t_bf16(row).expand(k, n))
    assert_bits(got, model_acc(a, b_full), BF16)
    a_full = np.broadcast_to(col, (m, k)).copy()
    got = _gemm.matmul(t_bf16(col).expand(m, k), view(b_full, "row"))
    assert_bits(got, model_acc(a_full, b_full), BF16)


@pytest.mark.parametrize("threads", [1, 2])
def test_bits_batched_and_broadcast_b(threads):
    ampy.set_num_threads(threads)
    a = rand_bf16((3, 48, 130), 4)
    b = rand_bf16((130, 700), 5)
    got = _gemm.matmul(t_bf16(a), t_bf16(b))
    want = np.stack([model_acc(a[i], b) for i in range(3)])
    assert_bits(got, want, BF16)


def test_two_threads_match_one_thread_bits():
    a, b = rand_bf16((300, 4100), 6), rand_bf16((4100, 260), 7)
    ta, tb = view(a, "col"), view(b, "row")
    ampy.set_num_threads(1)
    one = _gemm.matmul(ta, tb).float().numpy()
    ampy.set_num_threads(2)
    for _ in range(3):
        two = _gemm.matmul(ta, tb).float().numpy()
        assert np.array_equal(one.view(np.uint32), two.view(np.uint32))
