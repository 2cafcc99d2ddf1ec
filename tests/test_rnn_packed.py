"""The recurrent layer's packed-weight time loop (csrc/rnn_layer_packed.c,
csrc/rnn_kernel_x86.c, csrc/rnn_team.c) against its per-step GEMM loop
(csrc/rnn_layer.c) at the same CPU level: outputs, final states and every
gradient as bits, float32 / float16 / bfloat16, 1 to 3 threads, hidden sizes
that are not multiples of 16, batch 1 and batches past the kernel's 8-row
tile, K past the kernels' K blocks (float32 256, bfloat16 2048), reverse
directions, stacked layers, proj_size (whose steps are the per-step ops) and
sizes that the layer splits into several parts. The packed loop runs only
where ampy_gemm itself would use the kernel whose sums it repeats (AVX-512
FMAs for float32 and float16, vdpbf16ps for bfloat16 with K >= 16): below
those levels, and for the halves at the AMX level, the layer keeps the GEMM
loop; _C._rnn_layer_packed says which loop a product takes."""
import numpy as np
import pytest

import ampy
from ampy import _C
from _helpers import stable_seed

KINDS = {"LSTM": ampy.nn.LSTM, "GRU": ampy.nn.GRU, "RNN": ampy.nn.RNN}
LEVELS = ("portable", "avx2", "avx512", "avx512bf16", "amx")

# (kind, T, B, I, H, extra module arguments); the sizes marked `parts` are
# big enough (2 * B * gates * H^2 >= 2^21 flops per step) to be split into
# one part per thread (at most one part per 2^20 flops).
CASES = [
    ("LSTM", 4, 3, 5, 17, {}),
    ("LSTM", 3, 2, 3, 5, {}),                       # bfloat16: K = 5 the GEMM's FMAs
    ("LSTM", 3, 1, 7, 33, {"bidirectional": True, "num_layers": 2}),
    ("LSTM", 3, 9, 6, 21, {"bias": False, "batch_first": True}),
    ("LSTM", 3, 2, 5, 19, {"proj_size": 7, "bidirectional": True}),
    ("LSTM", 2, 1, 8, 300, {}),                     # K = 300, 1200 past the f32 block
    ("LSTM", 3, 8, 9, 200, {"bidirectional": True}),  # parts
    ("LSTM", 2, 1, 4, 520, {}),                     # parts; bwd K = 2080 past the bf16 block
    ("LSTM", 2, 8, 5, 300, {}),                     # up to 5 parts of uneven blocks
    ("GRU", 4, 3, 5, 17, {}),
    ("GRU", 3, 1, 7, 45, {"bidirectional": True, "num_layers": 2}),
    ("GRU", 3, 8, 6, 213, {}),                      # parts
    ("GRU", 2, 9, 4, 250, {"bidirectional": True}),  # up to 3 parts
    ("RNN", 4, 3, 5, 17, {}),
    ("RNN", 3, 2, 4, 9, {"bidirectional": True}),   # K = 9 both ways
    ("RNN", 3, 1, 7, 31, {"nonlinearity": "relu", "bidirectional": True}),
    ("RNN", 3, 8, 6, 363, {"nonlinearity": "relu"}),  # parts
    ("RNN", 3, 9, 6, 370, {}),                      # parts
]


def _ids(c):
    kind, T, B, I, H, kw = c
    return f"{kind}-T{T}-B{B}-H{H}" + "".join(f"-{k}" for k in sorted(kw))


def _run(case, dtype):
    """Forward and backward of one module: the outputs and every gradient as bits."""
    kind, T, B, I, H, kw = case
    dt = getattr(ampy, dtype)
    rng = np.random.default_rng(stable_seed("rnn_packed", case[:5], sorted(kw), dtype))
    m = KINDS[kind](I, H, **kw)
    m.load_state_dict({k: ampy.tensor(rng.uniform(-0.3, 0.3, tuple(v.shape)).astype(np.float32))
                       for k, v in m.state_dict().items()})
    m = m.to(dt)
    shape = (B, T, I) if kw.get("batch_first") else (T, B, I)
    x = ampy.tensor(rng.standard_normal(shape).astype(np.float32)).to(dt).requires_grad_()
    L, D = kw.get("num_layers", 1), 2 if kw.get("bidirectional") else 1
    hs = kw.get("proj_size") or H
    h0 = ampy.tensor(rng.standard_normal((L * D, B, hs)).astype(np.float32)).to(dt)
    h0.requires_grad_()
    states = [h0]
    if kind == "LSTM":
        c0 = ampy.tensor(rng.standard_normal((L * D, B, H)).astype(np.float32)).to(dt)
        states.append(c0.requires_grad_())
    y, s = m(x, tuple(states) if kind == "LSTM" else h0)
    finals = list(s) if kind == "LSTM" else [s]
    loss = (y.float() * y.float()).sum() + sum((1.5 * f.float()).sum() for f in finals)
    loss.backward()
    got = [y] + finals + [x.grad] + [t.grad for t in states] + [p.grad for p in m.parameters()]
    return [g.detach().float().numpy().view(np.uint32).copy() for g in got]


def _threads(n):
    old = ampy.get_num_threads()
    ampy.set_num_threads(n)
    return old


# 3 threads only for the hidden sizes the loop splits into parts (case[4] >= 200)
RUNS = [(c, t) for c in CASES for t in (1, 2, 3) if t < 3 or c[4] >= 200]


@pytest.mark.parametrize("case,threads", RUNS, ids=[f"{_ids(c)}-t{t}" for c, t in RUNS])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_packed_loop_bits_equal_the_gemm_loop(case, dtype, threads, cpu_path):
    old = _threads(threads)
    try:
        packed = _run(case, dtype)
        assert _C._rnn_layer_set_packed(False)
        try:
            assert not _C._rnn_layer_packed(dtype, case[4])
            ref = _run(case, dtype)
        finally:
            _C._rnn_layer_set_packed(True)
    finally:
        ampy.set_num_threads(old)
    assert len(packed) == len(ref)
    for i, (a, b) in enumerate(zip(packed, ref)):
        np.testing.assert_array_equal(a, b, err_msg=f"output/gradient #{i}")


def _expected(dtype, K, level):
    """The loop the layer must take: the packed one exactly where ampy_gemm
    itself would run the product on the kernel whose sums it repeats."""
    at = LEVELS.index(level)
    if dtype == "float32":
        return at >= LEVELS.index("avx512")
    if dtype == "float16":  # AMX splits float16 into bfloat16 pairs: other sums
        return LEVELS.index("avx512") <= at < LEVELS.index("amx")
    # bfloat16: vdpbf16ps only; the GEMM takes FMAs below K = 16, AMX at the AMX level
    return at == LEVELS.index("avx512bf16") and K >= 16


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("K", [5, 16, 512, 2080])
def test_packed_loop_only_where_the_gemm_runs_the_same_kernel(dtype, K, cpu_path):
    assert _C._rnn_layer_packed(dtype, K) is _expected(dtype, K, cpu_path)


def test_packed_loop_follows_a_pinned_gemm_implementation():
    if not _C.gemm_impl_available("avx512bf16"):
        pytest.skip("the CPU has no AVX512-BF16")
    _C.gemm_set_impl("avx2")
    try:
        assert not any(_C._rnn_layer_packed(d, 64) for d in ("float32", "float16", "bfloat16"))
    finally:
        _C.gemm_set_impl("auto")
    _C.gemm_set_impl("avx512bf16")
    try:
        assert all(_C._rnn_layer_packed(d, 64) for d in ("float32", "float16", "bfloat16"))
        assert _C._rnn_layer_packed("bfloat16", 5)  # pinned: vdpbf16ps at every K
    finally:
        _C.gemm_set_impl("auto")


def test_packed_switch_rejects_other_dtypes():
    with pytest.raises(ValueError):
        _C._rnn_layer_packed("float64", 8)
