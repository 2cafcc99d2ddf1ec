"""CUDA backend on a GPU: casts bit-identical to the CPU and torch, cuBLAS GEMM
vs torch.matmul and float64, the AMP kernels vs torch's CUDA ops and the CPU
kernels, the caching allocator, DLPack and __cuda_array_interface__ with
torch CUDA tensors. Everything skips without a GPU (test_cuda_build.py covers
that machine). NOTE: written without a GPU; first run on benchmarks/gpu_check.sh.
"""
import numpy as np
import pytest

import ampy
import ampy.cuda

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not ampy.cuda.is_available(), reason="no CUDA device")]

TORCH_CUDA = torch.cuda.is_available()
need_torch_cuda = pytest.mark.skipif(not TORCH_CUDA, reason="torch has no CUDA here")
HALF = [ampy.float16, ampy.bfloat16]
ALL = [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64, ampy.int64, ampy.int32,
       ampy.uint8, ampy.bool]


def bits(t):
    a = t.cpu().numpy(force=True) if hasattr(t, "is_cuda") else t
    return np.ascontiguousarray(a).view(np.uint8)


# ---------------------------------------------------------------- runtime
def test_devices_and_memory():
    assert ampy.cuda.device_count() >= 1
    assert isinstance(ampy.cuda.get_device_name(0), str)
    ampy.cuda.empty_cache()
    base = ampy.cuda.memory_allocated()
    x = ampy.zeros(1 << 20, device="cuda")
    assert x.is_cuda and x.device == ampy.device("cuda", 0)
    assert ampy.cuda.memory_allocated() >= base + 4 * (1 << 20)
    assert ampy.cuda.max_memory_allocated() >= ampy.cuda.memory_allocated()
    del x
    assert ampy.cuda.memory_allocated() == base
    reserved = ampy.cuda.memory_reserved()
    y = ampy.zeros(1 << 20, device="cuda")  # reuses the cached block
    assert ampy.cuda.memory_reserved() == reserved
    del y
    ampy.cuda.empty_cache()
    assert ampy.cuda.memory_reserved() <= reserved


def test_round_trip_and_sync_points():
    x = ampy.randn(7, 33)
    g = x.cuda()
    assert g.is_cuda and not x.is_cuda
    np.testing.assert_array_equal(g.cpu().numpy(), x.numpy())
    assert g[0, 0].item() == x[0, 0].item()
    assert g.tolist() == x.tolist()
    assert "cuda" in repr(g) or repr(g)


# ---------------------------------------------------------------- casts
@pytest.mark.parametrize("dt", HALF)
def test_all_half_patterns_to_float_and_back(dt):
    pats = np.arange(65536, dtype=np.uint16)
    cpu_half = ampy.empty(65536, dtype=dt)
    cpu_half.numpy().view(np.uint16)[:] = pats
    g = cpu_half.cuda()
    np.testing.assert_array_equal(bits(g.float()), bits(cpu_half.float()))
    np.testing.assert_array_equal(bits(g.double()), bits(cpu_half.double()))
    np.testing.assert_array_equal(bits(g.float().to(dt)), bits(cpu_half.float().to(dt)))


@pytest.mark.parametrize("dt", HALF)
def test_float_to_half_bits_match_cpu_and_torch(dt):
    rng = np.random.default_rng(1)
    u = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x477FF000,
                         0x477FEFFF, 0x33000000, 0x33000001, 0x38800000, 0x387FFFFF],
                        dtype=np.uint32)
    f = np.concatenate([u, specials]).view(np.float32)
    x = ampy.from_numpy(f)
    gpu = x.cuda().to(dt).cpu()
    cpu = x.to(dt)
    np.testing.assert_array_equal(bits(gpu), bits(cpu))
    if TORCH_CUDA:
        tdt = torch.float16 if dt is ampy.float16 else torch.bfloat16
        t = torch.from_numpy(f).cuda().to(tdt).cpu().view(torch.int16).numpy()
        finite = np.isfinite(f)  # torch's NaN payloads differ by design (see cast.h)
        np.testing.assert_array_equal(bits(gpu).view(np.int16)[finite], t[finite])


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_cast_matrix_matches_cpu(src, dst):
    x = (ampy.randn(5, 37) * 300).to(src)
    np.testing.assert_array_equal(bits(x.cuda().to(dst)), bits(x.to(dst)))


def test_strided_and_broadcast_copies():
    x = ampy.randn(6, 8)
    g = x.cuda()
    np.testing.assert_array_equal(g.t().contiguous().cpu().numpy(), x.t().contiguous().numpy())
    np.testing.assert_array_equal(g[1::2, ::3].cpu().numpy(), x[1::2, ::3].numpy())
    out = ampy.zeros(4, 6, 8, device="cuda", dtype=ampy.float16)
    out.copy_(g)
    np.testing.assert_array_equal(out.cpu().numpy(), np.broadcast_to(x.half().numpy(), (4, 6, 8)))
    h = ampy.zeros(8, 6)
    h.copy_(g.t())  # device -> strided host
    np.testing.assert_array_equal(h.numpy(), x.t().numpy())


# ---------------------------------------------------------------- GEMM
def _rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("dt", [ampy.float16, ampy.bfloat16, ampy.float32])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 5), (128, 255, 64), (512, 4096, 256)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_gemm_vs_float64(dt, m, k, n, ta, tb):
    import ampy as _kernels  # the GEMM ops route CUDA tensors to cuBLAS in _C
    rng = np.random.default_rng(m * k + n)
    a64 = rng.standard_normal((m, k))
    b64 = rng.standard_normal((k, n))
    a = ampy.from_numpy(np.ascontiguousarray(a64.T) if ta else a64).to(dt)
    b = ampy.from_numpy(np.ascontiguousarray(b64.T) if tb else b64).to(dt)
    ga, gb = a.cuda(), b.cuda()
    ga = ga.t() if ta else ga
    gb = gb.t() if tb else gb
    out = _kernels.mm(ga, gb).float().cpu().numpy().astype(np.float64)
    ref = (ampy.from_numpy(a64).to(dt).double().numpy() @
           ampy.from_numpy(b64).to(dt).double().numpy())
    tol = {ampy.float32: 1e-5, ampy.float16: 2e-3, ampy.bfloat16: 1e-2}[dt]
    assert _rel(out, ref) < tol


@need_torch_cuda
@pytest.mark.parametrize("dt,tdt", [(ampy.float16, torch.float16), (ampy.bfloat16, torch.bfloat16)])
def test_gemm_vs_torch_batched(dt, tdt):
    import ampy as _kernels  # the GEMM ops route CUDA tensors to cuBLAS in _C
    ta = torch.randn(4, 96, 200, device="cuda", dtype=tdt)
    tb = torch.randn(4, 200, 72, device="cuda", dtype=tdt)
    a, b = ampy.from_dlpack(ta), ampy.from_dlpack(tb)
    out = torch.from_dlpack(_kernels.bmm(a, b))
    ref = torch.bmm(ta.double(), tb.double())
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-2
    w = torch.randn(48, 200, device="cuda", dtype=tdt)
    bias = torch.randn(48, device="cuda", dtype=tdt)
    lin = torch.from_dlpack(_kernels.linear(ampy.from_dlpack(ta), ampy.from_dlpack(w),
                                            ampy.from_dlpack(bias)))
    ref = torch.nn.functional.linear(ta.double(), w.double(), bias.double())
    assert ((lin.double() - ref).norm() / ref.norm()).item() < 1e-2


# ---------------------------------------------------------------- AMP kernels
amp_kernels = pytest.mark.skipif(not hasattr(getattr(ampy, "_C_cuda", None), "_api"),
                                 reason="ampy._C_cuda not built")


@amp_kernels
@need_torch_cuda
@pytest.mark.parametrize("inv", [1.0, 0.5, 1.0 / 65536])
def test_unscale_vs_torch(inv):
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    g = torch.Generator(device="cuda").manual_seed(0)
    sizes = [1, 7, 65536, 65537, 300001, 5]
    ts = [torch.randn(s, device="cuda", generator=g) * 100 for s in sizes]
    ts[3][-1] = float("inf")
    halves = [t.half() for t in ts[:3]]
    ref = [t.clone() for t in ts]
    found_t = torch.zeros(1, device="cuda")
    torch._amp_foreach_non_finite_check_and_unscale_(ref, found_t, torch.full((1,), inv,
                                                                               device="cuda"))
    mine = [ampy.from_dlpack(t) for t in ts + halves]
    found = ampy.zeros(1, device="cuda")
    _amp.non_finite_check_and_unscale_(mine, found, ampy.full((1,), inv).cuda())
    assert found.item() == 1.0 == found_t.item()
    for a, b in zip(ts, ref):
        assert torch.equal(a, b) or torch.equal(a.isnan(), b.isnan())
    clean = [torch.randn(1000, device="cuda", dtype=torch.bfloat16)]
    f2 = ampy.zeros(1, device="cuda")
    _amp.non_finite_check_and_unscale_([ampy.from_dlpack(clean[0])], f2, ampy.ones(1).cuda())
    assert f2.item() == 0.0


@amp_kernels
def test_unscale_flags_overflow_after_unscaling():
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    x = ampy.full((10,), 60000.0, dtype=ampy.float16).cuda()
    found = ampy.zeros(1, device="cuda")
    _amp.non_finite_check_and_unscale_([x], found, ampy.full((1,), 4.0).cuda())
    assert found.item() == 1.0


@amp_kernels
@need_torch_cuda
def test_update_scale_trajectory_vs_torch():
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    rng = np.random.default_rng(3)
    s_t, g_t = torch.full((1,), 65536.0, device="cuda"), torch.zeros(1, dtype=torch.int32,
                                                                      device="cuda")
    s_a, g_a = ampy.full((1,), 65536.0).cuda(), ampy.zeros(1, dtype=ampy.int32).cuda()
    for step in range(300):
        inf = float(rng.random() < 0.2)
        torch._amp_update_scale_(s_t, g_t, torch.full((1,), inf, device="cuda"), 2.0, 0.5, 3)
        _amp.update_scale_(s_a, g_a, ampy.full((1,), inf).cuda(), 2.0, 0.5, 3)
        assert s_a.item() == s_t.item() and g_a.item() == g_t.item(), step


@amp_kernels
@pytest.mark.parametrize("pdt", [ampy.float32, ampy.float16, ampy.bfloat16])
@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_matches_cpu_kernel_bitwise(pdt, decoupled):
    from ampy.amp import functional as F
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    sizes = [3, 70000, 129]
    kw = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, amsgrad=False,
              maximize=False, decoupled_weight_decay=decoupled)
    cpu = dict(p=[ampy.randn(s).to(pdt) for s in sizes])
    cpu["g"] = [ampy.randn(s).to(pdt) for s in sizes]
    cpu["m"] = [ampy.zeros(s) for s in sizes]
    cpu["v"] = [ampy.zeros(s) for s in sizes]
    cpu["st"] = [ampy.zeros(1) for _ in sizes]
    cpu["ma"] = [p.float() if pdt is not ampy.float32 else None for p in cpu["p"]]
    gpu = {k: [None if x is None else x.cuda() for x in v] for k, v in cpu.items()}
    inv = ampy.full((1,), 0.5)
    for _ in range(5):
        F.adam_step_(cpu["p"], cpu["g"], cpu["m"], cpu["v"], None, cpu["st"],
                     master_params=cpu["ma"] if pdt is not ampy.float32 else None,
                     inv_scale=inv, **kw)
        _amp.adam_step_(gpu["p"], gpu["g"], gpu["m"], gpu["v"], None, gpu["st"],
                        master_params=gpu["ma"] if pdt is not ampy.float32 else None,
                        inv_scale=inv.cuda(), **kw)
    for k in ("p", "m", "v", "st"):
        for a, b in zip(cpu[k], gpu[k]):
            np.testing.assert_array_equal(bits(b), bits(a), err_msg=k)


@amp_kernels
def test_skipped_step_changes_nothing():
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    p = ampy.randn(1000).half().cuda()
    ma, g = p.float(), ampy.randn(1000).half().cuda()
    m, v, st = ampy.zeros(1000).cuda(), ampy.zeros(1000).cuda(), ampy.zeros(1).cuda()
    before = [bits(x) for x in (p, ma, m, v, st)]
    _amp.adam_step_([p], [g], [m], [v], None, [st], lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                    weight_decay=0.0, amsgrad=False, maximize=False, master_params=[ma],
                    found_inf=ampy.ones(1).cuda())
    for b0, x in zip(before, (p, ma, m, v, st)):
        np.testing.assert_array_equal(b0, bits(x))


@amp_kernels
@need_torch_cuda
def test_adam_fp32_vs_torch_fused():
    from ampy.amp import functional as _amp  # routes CUDA tensors in _C
    torch.manual_seed(0)
    ps = [torch.randn(s, device="cuda") for s in (10, 100000)]
    ref = [p.clone().requires_grad_(True) for p in ps]
    opt = torch.optim.Adam(ref, lr=1e-2, weight_decay=0.1, fused=True)
    mine = [ampy.from_dlpack(p) for p in ps]
    m = [ampy.zeros(p.numel()).cuda() for p in ps]
    v = [ampy.zeros(p.numel()).cuda() for p in ps]
    st = [ampy.zeros(1).cuda() for _ in ps]
    for _ in range(20):
        grads = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, grads):
            r.grad = g.clone()
        opt.step()
        _amp.adam_step_(mine, [ampy.from_dlpack(g) for g in grads], m, v, None, st, lr=1e-2,
                        beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, amsgrad=False,
                        maximize=False)
    for p, r in zip(ps, ref):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- interop
@need_torch_cuda
def test_dlpack_cuda_zero_copy_both_ways():
    t = torch.arange(12.0, device="cuda").reshape(3, 4)
    a = ampy.from_dlpack(t)
    assert a.is_cuda and a.data_ptr() == t.data_ptr()
    back = torch.from_dlpack(a)
    assert back.device.type == "cuda" and back.data_ptr() == t.data_ptr()
    g = ampy.ones(5, device="cuda")
    tg = torch.from_dlpack(g)
    tg.add_(1)
    assert g.tolist() == [2.0] * 5


def test_cuda_array_interface():
    g = ampy.arange(6.0).cuda()
    cai = g.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (6,) and cai["typestr"] == "<f4"
    assert cai["data"][0] == g.data_ptr()
    if TORCH_CUDA:
        assert torch.as_tensor(g, device="cuda").tolist() == g.tolist()


# ---------------------------------------------------------------- training
def test_training_loop_on_cuda_runs_and_matches_cpu():
    """The DESIGN.md loop with device="cuda": ops without CUDA kernels run via the
    CPU fallback, so the numbers must match the CPU run closely."""
    nn = pytest.importorskip("ampy.nn")
    if not hasattr(ampy, "optim") or not hasattr(ampy, "amp"):
        pytest.skip("training API not on this checkout")
    from ampy.amp import GradScaler, autocast
    losses = {}
    for dev in ("cpu", "cuda"):
        ampy.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(dev)
        opt = ampy.optim.AdamW(model.parameters(), lr=1e-2)
        scaler = GradScaler(dev)
        x, y = ampy.randn(64, 16).to(dev), ampy.randint(0, 4, (64,)).to(dev)
        out = []
        for _ in range(5):
            opt.zero_grad()
            with autocast(dev, dtype=ampy.float16):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.append(loss.item())
        losses[dev] = out
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=2e-2)


# ================================================================ device kernels vs CPU
# Element-wise (cuda/ewise.cu), reductions / softmax (cuda/reduce.cu), nn
# kernels and Philox fills (cuda/nn.cu). The oracle is ampy's CPU kernel on the
# same inputs (itself tested against NumPy/torch in the CPU suites). Ops whose
# formula is pure IEEE arithmetic (ampy/ewise_expr.h, --fmad=false) must give
# the CPU's bits; ops that call libm (exp, log, tanh, erf, pow, ...) may differ
# by a few ulp (CUDA libdevice vs glibc): see _TOL.
import warnings  # noqa: E402

from ampy import _C  # noqa: E402

FLOATS = [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64]
_CODE = {n: i for i, n in enumerate(_C.ewise_ops())}
# ops computed with + - * / sqrt, comparisons, rounding functions: bit-exact
EXACT_UNARY = {"abs", "neg", "reciprocal", "square", "sign", "sqrt", "rsqrt", "relu", "floor",
               "ceil", "round", "trunc", "frac", "isnan", "isinf", "isfinite", "logical_not",
               "leaky_relu"}
LIBM_UNARY = {"exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
              "tanh", "atan", "sigmoid", "gelu", "gelu_tanh", "erf", "silu", "softplus", "elu",
              "mish", "asin", "acos", "sinh", "cosh", "logsigmoid"}
EXACT_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum", "fmax", "fmin", "fmod",
                "remainder", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                "logical_or", "logical_xor"}
INT_BINARY = EXACT_BINARY - {"div"} | {"pow", "bitwise_and", "bitwise_or", "bitwise_xor"}
_EPS = {ampy.float32: 2.0**-23, ampy.float16: 2.0**-10, ampy.bfloat16: 2.0**-7,
        ampy.float64: 2.0**-52}


def _tol(dt, ulps=8):
    e = _EPS.get(dt, 0.0) * ulps
    return dict(rtol=e, atol=e)


def _host(t):
    t = t.detach().cpu()
    return t.double().numpy() if t.dtype is not ampy.bool else t.numpy()


def _same_bits(g, c):
    np.testing.assert_array_equal(bits(g.cpu()), bits(c))


def _close(g, c, dt, ulps=8):
    np.testing.assert_allclose(_host(g), _host(c), equal_nan=True, **_tol(dt, ulps))


def _sample(shape, dt, seed=0, specials=True):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(int(np.prod(shape))) * 3).astype(np.float64)
    if specials and a.size >= 12:
        a[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1e-30, 80.0, -80.0, 2.5]
    if dt in (ampy.int64, ampy.int32, ampy.uint8):
        a = np.nan_to_num(np.round(a * 10), posinf=7, neginf=-7) % (200 if dt is ampy.uint8 else 1e9)
    return ampy.from_numpy(a.reshape(shape)).to(dt)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("name", sorted(EXACT_UNARY | LIBM_UNARY))
def test_unary_vs_cpu(name, dt):
    x = _sample((37, 129), dt)
    alpha = {"softplus": 1.5, "leaky_relu": 0.1, "elu": 0.7}.get(name)
    beta = 10.0 if name == "softplus" else None
    c = _C.ewise(_CODE[name], None, alpha, beta, x)
    g = _C.ewise(_CODE[name], None, alpha, beta, x.cuda())
    assert g.is_cuda and g.dtype is c.dtype and tuple(g.shape) == tuple(c.shape)
    if name in EXACT_UNARY:
        _same_bits(g, c)
    else:
        _close(g, c, c.dtype)


@pytest.mark.parametrize("name", ["abs", "neg", "square", "sign", "relu", "floor", "logical_not",
                                  "bitwise_not", "isfinite"])
@pytest.mark.parametrize("dt", [ampy.int64, ampy.int32, ampy.uint8, ampy.bool])
def test_unary_int_vs_cpu(name, dt):
    x = _sample((5, 33), dt)
    try:
        c = _C.ewise(_CODE[name], None, None, None, x)
    except (TypeError, RuntimeError) as e:
        with pytest.raises(type(e)):
            _C.ewise(_CODE[name], None, None, None, x.cuda())
        return
    _same_bits(_C.ewise(_CODE[name], None, None, None, x.cuda()), c)


@pytest.mark.parametrize("dt", FLOATS + [ampy.int64, ampy.int32])
@pytest.mark.parametrize("name", sorted(EXACT_BINARY | INT_BINARY | {"pow", "atan2"}))
def test_binary_broadcast_strided_vs_cpu(name, dt):
    is_int = dt in (ampy.int64, ampy.int32)
    if is_int and name not in INT_BINARY:
        pytest.skip("float-only op")
    if not is_int and name.startswith("bitwise"):
        pytest.skip("integer-only op")
    a = _sample((4, 1, 65), dt, 1)
    b = _sample((65, 3), dt, 2).t()  # (3, 65), non-contiguous: broadcast + strides
    if is_int and name in ("fmod", "remainder", "floor_divide"):
        b = ampy.where(b == 0, ampy.ones_like(b), b)
    if is_int and name == "pow":
        b = b.abs() % 5
    c = _C.ewise(_CODE[name], None, None, None, a, b)
    g = _C.ewise(_CODE[name], None, None, None, a.cuda(), b.cuda())
    assert tuple(g.shape) == (4, 3, 65)
    if name in ("pow", "atan2") and not is_int:
        _close(g, c, c.dtype)
    else:
        _same_bits(g, c)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16])
def test_scalars_promotion_alpha_and_inplace(dt):
    x = _sample((8, 31), dt, 3)
    gx = x.cuda()
    # Python numbers (host scalars), alpha, mixed dtypes, 0-dim CPU tensors
    _same_bits(ampy.add(gx, 2.5, alpha=3), ampy.add(x, 2.5, alpha=3))
    _same_bits(ampy.sub(gx, gx * 0.5, alpha=0.25), ampy.sub(x, x * 0.5, alpha=0.25))
    _same_bits(gx * 3, x * 3)
    _same_bits(gx / 7, x / 7)
    y = _sample((31,), ampy.float32, 4)
    _same_bits(gx + y.cuda(), x + y)  # half + float32 -> float32
    s = ampy.tensor(1.75)
    _same_bits(gx * s, x * s)  # a 0-dim CPU tensor joins a CUDA op
    _same_bits(ampy.where(gx > 0, gx, 0.0), ampy.where(x > 0, x, 0.0))
    _same_bits(ampy.clamp(gx, -1.0, 0.5), ampy.clamp(x, -1.0, 0.5))
    _same_bits(ampy.lerp(gx, gx * 2, 0.3), ampy.lerp(x, x * 2, 0.3))
    _same_bits(ampy.addcmul(gx, gx, gx, value=0.5), ampy.addcmul(x, x, x, value=0.5))
    _same_bits(ampy.addcdiv(gx, gx, gx + 4, value=2), ampy.addcdiv(x, x, x + 4, value=2))
    # in place on a strided view, and the overlapping x[1:] += x[:-1]
    cx, gy = x.clone(), gx.clone()
    cx[:, ::2].mul_(3)
    gy[:, ::2].mul_(3)
    _same_bits(gy, cx)
    cx[1:].add_(cx[:-1])
    gy[1:].add_(gy[:-1])
    _same_bits(gy, cx)


class _sync_checks:
    """ampy.cuda.set_sync_checks(on) for a with-block."""

    def __init__(self, on=True):
        self.on = on

    def __enter__(self):
        self.prev = ampy.cuda.get_sync_checks()
        ampy.cuda.set_sync_checks(self.on)

    def __exit__(self, *exc):
        ampy.cuda.set_sync_checks(self.prev)


def test_integer_division_by_zero_raises_at_next_sync():
    """A deferred device-side check: no host wait at the op, the CPU's error
    at the next synchronisation (then cleared); at the op in sync-checks mode."""
    a = ampy.tensor([4, 5, 6]).cuda()
    b = ampy.tensor([1, 0, 2]).cuda()
    with _sync_checks(False):
        q = ampy.floor_divide(a, b)  # queued: does not wait for the device
        with pytest.raises(RuntimeError, match="ZeroDivisionError.*synchronisation"):
            q.cpu()
        assert q.cpu().tolist()[0] == 4  # the record was cleared by the report
    with _sync_checks(True):
        with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
            ampy.floor_divide(a, b)
    assert (a.cpu().tolist(), b.cpu().tolist()) == ([4, 5, 6], [1, 0, 2])


def test_cat_stack_on_device():
    a, b = _sample((3, 5), ampy.float32, 20), _sample((2, 5), ampy.float16, 21)
    g = ampy.cat([a.cuda(), b.cuda()], 0)
    assert g.is_cuda
    _same_bits(g, ampy.cat([a, b], 0))
    _same_bits(ampy.stack([a.cuda(), a.cuda()], 1), ampy.stack([a, a], 1))


def test_mixed_devices_rejected():
    with pytest.raises(RuntimeError, match="device"):
        ampy.ones(3).cuda() + ampy.ones(3)


# ---------------------------------------------------------------- reductions / softmax
@pytest.mark.parametrize("dt", FLOATS + [ampy.int64, ampy.bool])
@pytest.mark.parametrize("dims,keep", [(None, False), (0, False), (1, True), ((0, 2), False),
                                       (-1, False)])
def test_reductions_vs_cpu(dt, dims, keep):
    x = _sample((6, 7, 129), dt, 5, specials=False)
    g = x.cuda()
    ops = ["sum", "prod", "amax", "amin", "all", "any"]
    if dt.is_floating_point:
        ops += ["mean", "var", "std", "norm", "logsumexp"]
    for name in ops:
        kw = {}
        if name in ("amax", "amin"):
            kw = dict(dim=() if dims is None else dims, keepdim=keep)
        elif name == "logsumexp":
            kw = dict(dim=(0, 1, 2) if dims is None else dims, keepdim=keep)
        elif name == "norm":
            kw = dict(dim=dims, keepdim=keep)
        elif name in ("all", "any") and isinstance(dims, tuple):
            kw = dict(dim=dims[0], keepdim=keep)
        elif dims is not None:
            kw = dict(dim=dims, keepdim=keep)
        c = getattr(ampy, name)(x, **kw)
        r = getattr(ampy, name)(g, **kw)
        assert r.is_cuda and r.dtype is c.dtype and tuple(r.shape) == tuple(c.shape), name
        if name in ("amax", "amin", "all", "any") or not dt.is_floating_point:
            _same_bits(r, c)
        else:  # double accumulation in another order: at most 1 ulp of the result
            _close(r, c, c.dtype, ulps=2)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.int64])
def test_split_reductions_vs_cpu(dt):
    """Few outputs over many elements (several blocks per output) and column
    sums (a thread per output and chunk): both paths of cuda/reduce.cu."""
    x = _sample((1 << 20,), dt, 18, specials=False)
    g = x.cuda()
    for name in ("sum", "amax", "amin", "argmax", "argmin", "any", "all") + (
            ("mean", "norm") if dt.is_floating_point else ()):
        c, r = getattr(ampy, name)(x), getattr(ampy, name)(g)
        if name in ("sum", "mean", "norm") and dt.is_floating_point:
            _close(r, c, c.dtype, ulps=2)
        else:
            _same_bits(r, c)
    m = x.reshape(4096, 256)
    for dim in (0, 1):
        _close(ampy.sum(m.cuda(), dim), ampy.sum(m, dim), dt, ulps=2) if dt.is_floating_point \
            else _same_bits(ampy.sum(m.cuda(), dim), ampy.sum(m, dim))
        cv, ci = ampy.max(m, dim)
        gv, gi = ampy.max(m.cuda(), dim)
        _same_bits(gv, cv)
        assert gi.cpu().tolist() == ci.tolist()


@pytest.mark.parametrize("dt", FLOATS)
def test_max_min_argmax_with_nan_and_ties(dt):
    a = np.array([[1.0, 3.0, 3.0, -2.0], [np.nan, 5.0, np.nan, 1.0], [2.0, 2.0, 2.0, 2.0]])
    x = ampy.from_numpy(a).to(dt)
    g = x.cuda()
    for d in (0, 1):
        cv, ci = ampy.max(x, d)
        gv, gi = ampy.max(g, d)
        _same_bits(gv, cv)
        assert gi.cpu().tolist() == ci.tolist()
        assert ampy.argmax(g, d).cpu().tolist() == ampy.argmax(x, d).tolist()
        assert ampy.argmin(g, d).cpu().tolist() == ampy.argmin(x, d).tolist()
    with pytest.raises(IndexError):
        ampy.amax(ampy.empty(0, 3).cuda())


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_vs_cpu(dt, dim, log):
    x = _sample((9, 17, 300), dt, 6, specials=False)
    f = ampy.log_softmax if log else ampy.softmax
    c, g = f(x, dim), f(x.cuda(), dim)
    _close(g, c, dt, ulps=8)
    xt = x.transpose(0, 2)  # strided lines
    _close(f(xt.cuda(), 1), f(xt, 1), dt, ulps=8)


@pytest.mark.parametrize("dt", FLOATS + [ampy.int64, ampy.bool])
def test_cumsum_cumprod_bitwise(dt):
    """One thread per line, in order, double (int64) accumulation: the CPU's bits."""
    x = _sample((5, 300, 3), dt, 19, specials=False)
    if dt.is_floating_point:
        x = x / 16
    for f in (ampy.cumsum, ampy.cumprod):
        for d in (0, 1, -1):
            _same_bits(f(x.cuda(), d), f(x, d))


# ---------------------------------------------------------------- nn kernels
def _grads_cpu_gpu(fn, *inputs, need=None):
    """Run fn on CPU and CUDA copies; returns ((out_c, grads_c), (out_g, grads_g))."""
    res = []
    for dev in ("cpu", "cuda"):
        ts = [t.to(dev).detach().requires_grad_(need is None or need[i]) if
              (t.dtype.is_floating_point) else t.to(dev) for i, t in enumerate(inputs)]
        out = fn(*ts)
        (out.float().sum() if out.dim() else out.float()).backward()
        res.append((out, [t.grad for t in ts if t.dtype.is_floating_point]))
    return res


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
@pytest.mark.parametrize("n", [1, 7, 768, 1500])
def test_layer_norm_fwd_bwd_vs_cpu(dt, n):
    F = pytest.importorskip("ampy.nn").functional
    x = _sample((13, n), dt, 7, specials=False)
    w = _sample((n,), dt, 8, specials=False)
    b = _sample((n,), dt, 9, specials=False)
    (oc, gc), (og, gg) = _grads_cpu_gpu(lambda x, w, b: F.layer_norm(x, (n,), w, b), x, w, b)
    _close(og, oc, dt, ulps=4)
    for a, c in zip(gg, gc):
        _close(a, c, dt, ulps=64 if n > 1 else 4)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
@pytest.mark.parametrize("red", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls,weighted", [(0.0, False), (0.1, True)])
def test_cross_entropy_and_nll_vs_cpu(dt, red, ls, weighted):
    F = pytest.importorskip("ampy.nn").functional
    M, C = 50, 1000
    x = _sample((M, C), dt, 10, specials=False)
    t = ampy.from_numpy(np.random.default_rng(11).integers(0, C, M))
    t[3] = -100  # ignore_index
    w = _sample((C,), dt, 12, specials=False).abs() if weighted else None
    for fn in (lambda x: F.cross_entropy(x, t.to(x.device), weight=None if w is None else
                                         w.to(x.device), reduction=red, label_smoothing=ls),
               lambda x: F.nll_loss(F.log_softmax(x, 1), t.to(x.device), weight=None if w is None
                                    else w.to(x.device), reduction=red)):
        (oc, gc), (og, gg) = _grads_cpu_gpu(fn, x)
        _close(og, oc, dt, ulps=16)
        _close(gg[0], gc[0], dt, ulps=16)
    bad = t.clone()
    bad[0] = C
    loss = F.cross_entropy(x.cuda(), bad.cuda())  # deferred check: no wait here
    with pytest.raises((IndexError, RuntimeError), match=f"Target {C} is out of bounds"):
        loss.cpu()
    with _sync_checks(True), pytest.raises(IndexError, match=f"^Target {C} is out of bounds.$"):
        F.cross_entropy(x.cuda(), bad.cuda())


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_mse_loss_vs_cpu(dt, red):
    F = pytest.importorskip("ampy.nn").functional
    x, y = _sample((33, 65), dt, 16, specials=False), _sample((33, 65), dt, 17, specials=False)
    (oc, gc), (og, gg) = _grads_cpu_gpu(lambda x, y: F.mse_loss(x, y, reduction=red), x, y)
    if red == "none":
        _same_bits(og, oc)  # element math identical; only the sums' order differs
    else:
        _close(og, oc, dt, ulps=2)
    for a, c in zip(gg, gc):
        _same_bits(a, c)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16])
def test_embedding_fwd_bwd_bitwise(dt):
    F = pytest.importorskip("ampy.nn").functional
    V, D = 100, 64
    w = _sample((V, D), dt, 13, specials=False)
    idx = ampy.from_numpy(np.random.default_rng(14).integers(0, V, (8, 33)))
    (oc, gc), (og, gg) = _grads_cpu_gpu(lambda w: F.embedding(idx.to(w.device), w,
                                                              padding_idx=5), w)
    _same_bits(og, oc)
    _same_bits(gg[0], gc[0])  # rows added in index order on both sides
    out = F.embedding(ampy.tensor([0, V]).cuda(), w.cuda())  # deferred check
    with pytest.raises((IndexError, RuntimeError), match="index out of range in self"):
        ampy.cuda.synchronize()
    with _sync_checks(True), pytest.raises(IndexError, match="^index out of range in self$"):
        F.embedding(ampy.tensor([0, V]).cuda(), w.cuda())
    del out


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
def test_dropout_mask_and_values_match_cpu(dt):
    F = pytest.importorskip("ampy.nn").functional
    x = _sample((64, 257), dt, 15, specials=False)
    ampy.manual_seed(123)
    c = F.dropout(x, 0.3)
    ampy.manual_seed(123)
    g = F.dropout(x.cuda(), 0.3)
    _same_bits(g, c)  # same Philox draws, same mask-and-scale rounding


# ---------------------------------------------------------------- routing
def test_to_device_backward_returns_grad_to_source():
    x = ampy.randn(5, 3).requires_grad_(True)
    (x.cuda() * 2.0).sum().backward()
    assert not x.grad.is_cuda
    np.testing.assert_array_equal(x.grad.numpy(), np.full((5, 3), 2.0, np.float32))


@amp_kernels
def test_optimizer_and_scaler_use_cuda_amp_kernels():
    from ampy.amp import functional as AF
    p = ampy.randn(1000).cuda()
    g = ampy.randn(1000).cuda()
    m, v = ampy.zeros(1000).cuda(), ampy.zeros(1000).cuda()
    step = ampy.zeros(()).cuda()
    found = ampy.zeros(()).cuda()
    r = AF.adam_step_([p], [g], [m], [v], None, [step], lr=1e-3, beta1=0.9, beta2=0.999,
                      eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
                      found_inf=found)
    assert r is None  # the device kernel: no host sync, no "stepped" answer
    assert step.item() == 1.0


def test_training_step_uses_no_cpu_fallback():
    """A transformer-like block forward/backward/step on CUDA runs every op on
    the device: the CPU fallback would warn."""
    nn = pytest.importorskip("ampy.nn")
    F = nn.functional
    ampy.manual_seed(0)
    emb = nn.Embedding(50, 32).cuda()
    lin = nn.Linear(32, 32).cuda()
    ln = nn.LayerNorm(32).cuda()
    head = nn.Linear(32, 50).cuda()
    params = list(emb.parameters()) + list(lin.parameters()) + list(ln.parameters()) + \
        list(head.parameters())
    opt = ampy.optim.AdamW(params, lr=1e-3)
    idx = ampy.randint(0, 50, (4, 16)).cuda()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        h = emb(idx)
        h = h + F.dropout(F.gelu(lin(ln(h))), 0.1)
        att = F.softmax(h @ h.transpose(1, 2) / 32 ** 0.5, -1) @ h
        att = ampy.cat([att[:, :8], att[:, 8:]], 1)  # basic indexing: views on the device
        loss = F.cross_entropy(head(att).reshape(-1, 50), idx.reshape(-1), label_smoothing=0.1)
        loss.backward()
        opt.step()
    assert np.isfinite(loss.item())


# ---------------------------------------------------------------- advanced indexing
IDX_DTYPES = [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64, ampy.int64, ampy.int32,
              ampy.uint8, ampy.bool]


class _no_fallback(warnings.catch_warnings):
    """The CPU fallback's RuntimeWarning becomes an error in the with-block."""

    def __enter__(self):
        r = super().__enter__()
        warnings.simplefilter("error", RuntimeWarning)
        return r


def _keys(shape):
    rng = np.random.default_rng(sum(shape))
    i0 = rng.integers(-shape[0], shape[0], 17)  # negative indices and repeats
    i1 = rng.integers(0, shape[1], 17)
    return [
        ampy.from_numpy(i0),                                       # one dim
        (ampy.from_numpy(i0), ampy.from_numpy(i1)),                # adjacent
        (ampy.from_numpy(i0.reshape(17, 1)), slice(None), ampy.from_numpy(i1 % shape[2])),
        (slice(1, None), ampy.from_numpy(i1)),                     # placed after a slice
        [0, 2, 2, -1],                                             # a list
        (Ellipsis, ampy.from_numpy(i1 % shape[2]).to(ampy.int32)),  # int32 indices
    ]


@pytest.mark.parametrize("dt", IDX_DTYPES)
def test_advanced_getitem_matches_cpu_bitwise(dt):
    x = _sample((6, 7, 5), dt, 30, specials=dt.is_floating_point)
    g = x.cuda()
    with _no_fallback():
        for key in _keys(tuple(x.shape)):
            gkey = tuple(k.cuda() if isinstance(k, ampy.Tensor) else k for k in key) \
                if isinstance(key, tuple) else (key.cuda() if isinstance(key, ampy.Tensor) else key)
            for kk in (key, gkey):  # CPU index arrays are moved to the device
                r = g[kk]
                assert r.is_cuda
                _same_bits(r, x[key])


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.int64, ampy.bool])
def test_bool_mask_getitem_and_setitem(dt):
    x = _sample((5, 9), dt, 31, specials=False)
    m = ampy.from_numpy(np.random.default_rng(32).random((5, 9)) < 0.4)
    g = x.cuda()
    for mk in (m, m.cuda()):  # a CUDA mask syncs once for the count
        _same_bits(g[mk], x[m])
    row = ampy.from_numpy(np.array([True, False, True, True, False]))
    _same_bits(g[row.cuda()], x[row])
    _same_bits(g[:, 3][row.cuda()], x[:, 3][row])
    _same_bits(g[m.cuda()], x[m])
    empty = ampy.zeros((5, 9), dtype=ampy.bool)
    assert tuple(g[empty.cuda()].shape) == (0,)
    c, d = x.clone(), g.clone()
    c[m] = 1
    d[m.cuda()] = 1
    _same_bits(d, c)
    t = torch.from_numpy(x.numpy().copy())
    t[torch.from_numpy(m.numpy())] = 1
    np.testing.assert_array_equal(d.cpu().numpy(), t.numpy())


@pytest.mark.parametrize("dt", [ampy.float32, ampy.bfloat16, ampy.int64])
def test_advanced_setitem_last_repeat_wins_like_cpu(dt):
    x = _sample((6, 7, 5), dt, 33, specials=False)
    for key in _keys(tuple(x.shape)):
        c, g = x.clone(), x.cuda()
        shape = tuple(c[key].shape)
        v = _sample(shape, dt, 34, specials=False)
        c[key] = v
        g[key] = v.cuda()
        _same_bits(g, c)
        c[key] = 3
        g[key] = 3
        _same_bits(g, c)
        c[key] = v[-1:] if len(shape) else v  # broadcast value
        g[key] = (v[-1:] if len(shape) else v).cuda()
        _same_bits(g, c)


@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16, ampy.float64])
def test_getitem_backward_accumulates_repeats_like_cpu(dt):
    x = _sample((40, 33), dt, 35, specials=False)
    idx = ampy.from_numpy(np.random.default_rng(36).integers(-40, 40, 500))  # many repeats
    for key in (idx, (idx, idx % 33), (slice(None), idx % 33)):
        def fn(t):
            k = tuple(i.to(t.device) if isinstance(i, ampy.Tensor) else i for i in key) \
                if isinstance(key, tuple) else key.to(t.device)
            return t[k] * 1.5
        (oc, gc), (og, gg) = _grads_cpu_gpu(fn, x)
        _same_bits(og, oc)
        _same_bits(gg[0], gc[0])  # repeats added one by one in the CPU rule's order


@need_torch_cuda
def test_advanced_indexing_vs_torch_cuda():
    x = _sample((50, 16), ampy.float32, 37, specials=False)
    idx = np.random.default_rng(38).integers(0, 50, 300)
    tx = torch.from_numpy(x.numpy()).cuda().requires_grad_(True)
    gx = x.cuda().requires_grad_(True)
    ti, gi = torch.from_numpy(idx).cuda(), ampy.from_numpy(idx).cuda()
    (tx[ti] * 2).sum().backward()
    (gx[gi] * 2).sum().backward()
    np.testing.assert_array_equal(gx[gi].detach().cpu().numpy(),
                                  tx[ti].detach().cpu().numpy())
    # torch adds repeats in its own order: equal up to float32 rounding
    np.testing.assert_allclose(gx.grad.cpu().numpy(), tx.grad.cpu().numpy(), rtol=1e-6)


def test_index_out_of_range_deferred_and_sync_checks():
    x = ampy.arange(10.0).cuda()
    bad = ampy.tensor([1, 10]).cuda()
    r = x[bad]  # no host wait: reported at the next synchronisation
    with pytest.raises((IndexError, RuntimeError),
                       match="index 10 is out of bounds for dimension 0 with size 10"):
        r.cpu()
    assert x[ampy.tensor([1, -1]).cuda()].cpu().tolist() == [1.0, 9.0]  # cleared
    with _sync_checks(True):
        with pytest.raises(IndexError, match="^index 10 is out of bounds for dimension 0 "
                                             "with size 10$"):
            x[bad]
        y = x.clone()
        with pytest.raises(IndexError, match="out of bounds"):
            y[bad] = 5.0
        np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())  # unchanged


def test_embedding_backward_many_repeats_bitwise():
    F = pytest.importorskip("ampy.nn").functional
    V, D = 7, 96  # few rows, long segments after the device sort
    w = _sample((V, D), ampy.float16, 39, specials=False)
    idx = ampy.from_numpy(np.random.default_rng(40).integers(0, V, (64, 50)))
    (oc, gc), (og, gg) = _grads_cpu_gpu(lambda w: F.embedding(idx.to(w.device), w), w)
    _same_bits(og, oc)
    _same_bits(gg[0], gc[0])


# ---------------------------------------------------------------- baddbmm
@pytest.mark.parametrize("dt", [ampy.float32, ampy.float16, ampy.bfloat16])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1)])
@pytest.mark.parametrize("ishape", [(3, 17, 9), (17, 9), (9,), (1, 1, 1)])
def test_baddbmm_vs_float64(dt, beta, alpha, ishape):
    rng = np.random.default_rng(41)
    a64, b64 = rng.standard_normal((3, 17, 33)), rng.standard_normal((3, 33, 9))
    i64 = rng.standard_normal(ishape)
    if beta == 0:
        i64[...] = np.nan  # beta == 0 ignores input entirely (torch's rule)
    a, b, inp = (ampy.from_numpy(v).to(dt) for v in (a64, b64, i64))
    with _no_fallback():
        out = ampy.baddbmm(inp.cuda(), a.cuda(), b.cuda(), beta=beta, alpha=alpha)
    assert out.is_cuda and out.dtype is dt and tuple(out.shape) == (3, 17, 9)
    r = lambda t: t.double().numpy()  # noqa: E731
    ref = alpha * (r(a) @ r(b)) + (beta * r(inp) if beta != 0 else 0)
    got = out.float().cpu().numpy().astype(np.float64)
    tol = {ampy.float32: 1e-5, ampy.float16: 2e-3, ampy.bfloat16: 1e-2}[dt]
    assert np.abs(got - ref).max() / np.abs(ref).max() < tol
    cpu = ampy.baddbmm(inp, a, b, beta=beta, alpha=alpha)
    assert np.abs(got - cpu.double().numpy()).max() / np.abs(ref).max() < tol


@need_torch_cuda
def test_baddbmm_vs_torch_cuda_and_backward():
    rng = np.random.default_rng(42)
    a, b, i = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8, 16), (4, 16, 5), (8, 5)))
    ta, tb, ti = (torch.from_numpy(v).cuda().half().requires_grad_(True) for v in (a, b, i))
    ga, gb, gi = (ampy.from_numpy(v).cuda().half().requires_grad_(True) for v in (a, b, i))
    to = torch.baddbmm(ti, ta, tb, beta=0.5, alpha=2.0)
    go = ampy.baddbmm(gi, ga, gb, beta=0.5, alpha=2.0)
    np.testing.assert_allclose(go.float().cpu().numpy(), to.float().cpu().numpy(), rtol=2e-3,
                               atol=2e-3)
    to.float().sum().backward()
    go.float().sum().backward()
    for g, t in ((ga, ta), (gb, tb), (gi, ti)):
        np.testing.assert_allclose(g.grad.float().cpu().numpy(), t.grad.float().cpu().numpy(),
                                   rtol=2e-3, atol=2e-3)
