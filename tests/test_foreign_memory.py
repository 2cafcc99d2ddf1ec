"""Foreign memory: read-only and misaligned input at
every entry point, and the DLPack destructors' error handling.

Item 10: memory ampy did not allocate and may not write (a NumPy array with
writeable=False, np.frombuffer over bytes, a mode="r" memmap, a DLPack 1.0
tensor flagged read-only) gives a read-only tensor: every view of it is
read-only, every write path raises RuntimeError and leaves the bytes as they
were (torch only warns, then writes), and it exports read-only (numpy(),
__array__, __dlpack__). Item 11: misaligned data (np.frombuffer(...,
offset=1)) never reaches the kernels: from_numpy/from_dlpack copy it to
aligned memory (the copy refuses writes, which could not reach the
original), and every read gives NumPy's answer; this file runs in the ASan +
UBSan build too (make asan). Item 12: np.from_dlpack of a bfloat16 tensor
raises NumPy's own error, not SystemError.
"""
import gc
import io

import numpy as np
import pytest
import torch

import ampy
from ampy import nn

READONLY = "is read-only"
COPIED = "cannot be written: ampy copied the misaligned memory"


# ---- entry points (each returns the tensor and a function reading the foreign bytes) ----------
def _ro_array():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    a.flags.writeable = False
    return a


def _src_from_numpy():
    a = _ro_array()
    return ampy.from_numpy(a), a


def _src_as_tensor():
    a = _ro_array()
    return ampy.as_tensor(a), a


def _src_frombuffer():
    b = np.arange(12, dtype=np.float32).tobytes()
    a = np.frombuffer(b, dtype=np.float32).reshape(4, 3)
    return ampy.from_numpy(a), a


def _src_memmap(tmp_path):
    f = tmp_path / "m.bin"
    np.arange(12, dtype=np.float32).tofile(f)
    a = np.memmap(f, dtype=np.float32, mode="r", shape=(4, 3))
    return ampy.from_numpy(a), a


def _src_dlpack_numpy_object():
    a = _ro_array()
    return ampy.from_dlpack(a), a


def _src_dlpack_capsule():
    a = _ro_array()
    return ampy.from_dlpack(a.__dlpack__(max_version=(1, 0))), a


def _src_view_of_ro():
    t, a = _src_from_numpy()
    return t.t().contiguous().t(), a  # contiguous() of a non-contiguous view copies: writable


SOURCES = {
    "from_numpy": lambda tmp: _src_from_numpy(),
    "as_tensor": lambda tmp: _src_as_tensor(),
    "frombuffer_bytes": lambda tmp: _src_frombuffer(),
    "memmap_r": _src_memmap,
    "from_dlpack_ndarray": lambda tmp: _src_dlpack_numpy_object(),
    "from_dlpack_capsule": lambda tmp: _src_dlpack_capsule(),
}

# views a read-only tensor hands out: all read-only
VIEWS = {
    "self": lambda t: t,
    "slice": lambda t: t[1:],
    "row": lambda t: t[0],
    "transpose": lambda t: t.t(),
    "view": lambda t: t.view(12),
    "reshape": lambda t: t.reshape(2, 6),
    "detach": lambda t: t.detach(),
    "expand": lambda t: t[:1].expand(4, 3),
    "as_strided": lambda t: t.as_strided((2, 2), (3, 1)),
}


def _param_step(opt_cls, **kw):
    def run(t):
        p = nn.Parameter(t)
        p.grad = ampy.ones(tuple(t.shape))
        opt_cls([p], lr=0.1, **kw).step()
    return run


def _scaler_step(t):
    p = nn.Parameter(t)
    opt = ampy.optim.SGD([p], lr=0.1)
    scaler = ampy.amp.GradScaler("cpu", init_scale=2.0)
    scaler.scale((p * 1.0).sum()).backward()
    scaler.step(opt)


def _unscale(t):
    ampy.amp.functional.non_finite_check_and_unscale_(
        [t], ampy.zeros(1), ampy.full((1,), 0.5))


def _load_state_dict(t):
    lin = nn.Linear(3, 4)
    lin.weight = nn.Parameter(t)
    lin.load_state_dict({"weight": ampy.ones(4, 3), "bias": ampy.zeros(4)})


WRITES = {
    "add_": lambda t: t.add_(1),
    "mul_": lambda t: t.mul_(2),
    "neg_": lambda t: t.neg_(),
    "exp_": lambda t: t.exp_(),
    "clamp_": lambda t: t.clamp_(0, 1),
    "iadd": lambda t: t.__iadd__(1),
    "out_add": lambda t: ampy.add(ampy.ones(tuple(t.shape)), 1, out=t),
    "out_self": lambda t: ampy.mul(t, 2, out=t),
    "copy_": lambda t: t.copy_(ampy.ones(tuple(t.shape))),
    "fill_": lambda t: t.fill_(5.0),
    "zero_": lambda t: t.zero_(),
    "setitem_int": lambda t: t.__setitem__(0, 1.0),
    "setitem_slice": lambda t: t.__setitem__(slice(None), 1.0),
    "setitem_index": lambda t: t.__setitem__(ampy.tensor([0]), 1.0),
    "setitem_mask": lambda t: t.__setitem__(t > 2, 0.0),
    "init_uniform": lambda t: nn.init.uniform_(t),
    "init_normal": lambda t: nn.init.normal_(t),
    "init_constant": lambda t: nn.init.constant_(t, 1.0),
    "sgd_step": _param_step(ampy.optim.SGD),
    "sgd_momentum_step": _param_step(ampy.optim.SGD, momentum=0.9),
    "adam_step": _param_step(ampy.optim.Adam),
    "adamw_step": _param_step(ampy.optim.AdamW),
    "scaler_step": _scaler_step,
    "unscale_": _unscale,
    "load_state_dict": _load_state_dict,
}


def _ok_for_view(wname, vname):
    """Writes whose shape rules need the 2-d / full target."""
    needs_full = {"sgd_step", "sgd_momentum_step", "adam_step", "adamw_step", "scaler_step",
                  "unscale_", "load_state_dict"}
    return vname == "self" or wname not in needs_full


@pytest.mark.filterwarnings("ignore:GradScaler")
@pytest.mark.parametrize("wname", sorted(WRITES))
@pytest.mark.parametrize("sname", sorted(SOURCES))
def test_every_write_refused_bytes_unchanged(sname, wname, tmp_path):
    t, a = SOURCES[sname](tmp_path)
    before = np.array(a, copy=True)
    assert t._readonly
    with pytest.raises(RuntimeError, match=READONLY):
        WRITES[wname](t)
    np.testing.assert_array_equal(np.asarray(a), before)
    np.testing.assert_array_equal(np.asarray(t.tolist(), dtype=np.float32), before)


VIEW_WRITES = [(v, w) for v in sorted(VIEWS) for w in sorted(WRITES) if _ok_for_view(w, v)]


@pytest.mark.filterwarnings("ignore:GradScaler")
@pytest.mark.parametrize("vname,wname", VIEW_WRITES, ids=[f"{v}-{w}" for v, w in VIEW_WRITES])
def test_views_of_readonly_refuse_writes(vname, wname):
    t, a = _src_from_numpy()
    v = VIEWS[vname](t)
    assert v._readonly
    before = a.copy()
    with pytest.raises(RuntimeError):
        WRITES[wname](v)
    np.testing.assert_array_equal(a, before)


def test_memmap_read_only_add_does_not_crash(tmp_path):
    t, a = _src_memmap(tmp_path)
    with pytest.raises(RuntimeError, match=r"add: argument 'self' is read-only"):
        t.add_(1)
    assert (t + 1).tolist() == (np.asarray(a) + 1).tolist()  # reads and new results work
    del t, a
    gc.collect()


def test_bytes_object_is_never_mutated():
    b = bytes(np.ones(4, np.float32).tobytes())
    t = ampy.from_numpy(np.frombuffer(b, dtype=np.float32))
    with pytest.raises(RuntimeError, match=READONLY):
        t.add_(1)
    assert b == np.ones(4, np.float32).tobytes()


@pytest.mark.parametrize("sname", sorted(SOURCES))
def test_copies_and_results_are_writable(sname, tmp_path):
    t, a = SOURCES[sname](tmp_path)
    for w in (t.clone(), ampy.tensor(np.asarray(a)), t + 0, t.to(ampy.float16), t.t().contiguous()):
        assert not w._readonly
        w.add_(1)
    np.testing.assert_array_equal(np.asarray(a), np.arange(12, dtype=np.float32).reshape(4, 3))


def test_readonly_exports_readonly():
    t, a = _src_from_numpy()
    for arr in (t.numpy(), np.asarray(t), np.asarray(t[1:]), np.from_dlpack(t)):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[...] = 0
    cap = t.__dlpack__(max_version=(1, 0))
    back = ampy.from_dlpack(cap)
    assert back._readonly and back.data_ptr() == a.ctypes.data
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()  # a legacy capsule cannot say read-only (NumPy refuses the same way)
    w = ampy.zeros(3)
    assert w.numpy().flags.writeable and np.from_dlpack(w).flags.writeable


def test_writable_imports_stay_zero_copy_and_writable():
    a = np.zeros(3, np.float32)
    for t in (ampy.from_numpy(a), ampy.as_tensor(a), ampy.from_dlpack(a),
              ampy.from_dlpack(torch.from_numpy(a))):
        assert not t._readonly and t.data_ptr() == a.ctypes.data
        t.add_(1)
    assert a.tolist() == [4.0, 4.0, 4.0]


def test_readonly_flag_from_versioned_torch_capsule_is_absent():
    src = torch.zeros(3)
    t = ampy.from_dlpack(src)
    assert not t._readonly
    t.add_(2)
    assert src.tolist() == [2.0, 2.0, 2.0]


def test_checkpoint_load_gives_writable_aligned_tensors(tmp_path):
    sd = {"w": ampy.arange(6.0).reshape(2, 3), "h": ampy.ones(5, dtype=ampy.float16),
          "i": ampy.arange(4)}
    f = tmp_path / "c.safetensors"
    ampy.save(sd, str(f))
    for src in (str(f), io.BytesIO(f.read_bytes())):
        got = ampy.load(src)
        for k, v in got.items():
            assert not v._readonly and v.data_ptr() % v.element_size() == 0
            assert v.tolist() == sd[k].tolist()
            v.add_(1)


# ---- item 12: DLPack destructors keep the error indicator --------------------------------------
def test_numpy_from_dlpack_bfloat16_raises_numpys_error():
    x = ampy.ones(3, dtype=ampy.bfloat16)
    with pytest.raises(Exception) as ei:
        np.from_dlpack(x)
    assert not isinstance(ei.value, SystemError), ei.value
    assert "dtype" in str(ei.value).lower()
    assert x.tolist() == [1.0, 1.0, 1.0]  # the tensor survives the failed export
    gc.collect()


def test_unconsumed_capsules_freed_during_an_exception_keep_it():
    def boom():
        caps = [ampy.ones(2).__dlpack__(max_version=(1, 0)), ampy.ones(2).__dlpack__()]
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        boom()
    a = np.ones(2, np.float32)
    t = ampy.from_dlpack(a)

    def drop_in_except():
        nonlocal t
        try:
            raise ValueError("kept")
        except ValueError:
            del t  # the producer's deleter runs while ValueError is being handled
            gc.collect()
            raise

    with pytest.raises(ValueError, match="kept"):
        drop_in_except()


# ---- item 11: misaligned data ----------------------------------------------------------------
MIS_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32]


def _values(dtype, shape):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


def _misaligned(dtype, shape, writable=True):
    """An array of `shape` at an odd address (np.frombuffer(..., offset=1)),
    holding _values; its aligned twin for the reference."""
    ref = _values(dtype, shape)
    raw = b"\x00" + ref.tobytes()
    buf = bytearray(raw) if writable else raw
    a = np.frombuffer(buf, dtype=dtype, offset=1, count=ref.size).reshape(shape)
    assert not a.flags.aligned and a.flags.writeable == writable
    return a, ref


LAYOUTS = {"contiguous": lambda a: a, "transposed": lambda a: a.T,
           "stepped": lambda a: a[:, ::2], "row": lambda a: a[2]}

IMPORTS = {"from_numpy": ampy.from_numpy, "as_tensor": ampy.as_tensor,
           "tensor": ampy.tensor, "from_dlpack_ndarray": ampy.from_dlpack,
           "from_dlpack_torch": lambda a: ampy.from_dlpack(torch.from_numpy(a))}


def _reads(t, ref):
    """(name, ampy value, NumPy value, exact?) for the read ops of dtype."""
    r64 = ref.astype(np.float64)
    out = [("tolist", np.asarray(t.tolist()), ref, True),
           ("numpy", t.numpy() if not t.requires_grad else None, ref, True),
           ("clone", np.asarray(t.clone().tolist()), ref, True),
           ("index", np.asarray(t[ampy.tensor([0, 1])].tolist()), ref[[0, 1]], True),
           ("item", np.asarray(t.reshape(-1)[3].item()), ref.reshape(-1)[3], True),
           ("max", np.asarray(t.max().item()), ref.max(), True),
           ("min", np.asarray(t.min().item()), ref.min(), True),
           ("gt", np.asarray((t > 0).tolist()), ref > 0, True),
           ("sum", np.asarray(t.sum().item()), r64.sum(), False),
           ("add", np.asarray((t + t).tolist()), r64 + r64, False),
           ("cumsum", np.asarray(t.reshape(-1).cumsum(0).tolist()), r64.reshape(-1).cumsum(), False)]
    if ref.dtype.kind == "f":
        out += [("exp", np.asarray(t.double().exp().tolist()), np.exp(r64), False),
                ("mean", np.asarray(t.mean().item()), r64.mean(), False),
                ("to_f16", t.to(ampy.float16).numpy().view(np.uint16),
                 ref.astype(np.float16).view(np.uint16), True)]
        if ref.ndim == 2 and ref.dtype != np.float64:
            m = t.float()
            out.append(("matmul", np.asarray((m @ m.t()).tolist()), r64 @ r64.T, False))
    return out


@pytest.mark.parametrize("lname", sorted(LAYOUTS))
@pytest.mark.parametrize("iname", sorted(IMPORTS))
@pytest.mark.parametrize("dtype", MIS_DTYPES, ids=[np.dtype(d).name for d in MIS_DTYPES])
def test_misaligned_reads_match_numpy(dtype, iname, lname):
    a, ref = _misaligned(dtype, (4, 6))
    a, ref = LAYOUTS[lname](a), LAYOUTS[lname](ref)
    t = IMPORTS[iname](a)
    assert t.data_ptr() % t.element_size() == 0  # the kernels only ever see aligned data
    for name, got, want, exact in _reads(t, ref):
        if got is None:
            continue
        if exact:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-3 if
                                       dtype == np.float16 else 1e-5, atol=1e-3, err_msg=name)


@pytest.mark.parametrize("writable", [True, False], ids=["writable", "readonly"])
@pytest.mark.parametrize("iname", ["from_numpy", "as_tensor", "from_dlpack_ndarray",
                                   "from_dlpack_torch"])
@pytest.mark.parametrize("dtype", MIS_DTYPES, ids=[np.dtype(d).name for d in MIS_DTYPES])
def test_misaligned_shared_import_refuses_writes(dtype, iname, writable):
    """The aligned copy cannot share writes with the original: writes raise
    (naming why), the original is untouched, and copies of it are writable."""
    if iname == "from_dlpack_torch" and not writable:
        a, _ = _misaligned(dtype, (4, 6), True)  # torch cannot import read-only arrays
    else:
        a, _ = _misaligned(dtype, (4, 6), writable)
    before = a.copy()
    t = IMPORTS[iname](a)
    assert t._readonly
    msg = COPIED if writable or iname == "from_dlpack_torch" else READONLY
    for w in (lambda: t.add_(1), lambda: t.fill_(0), lambda: t.__setitem__(0, 1),
              lambda: t.copy_(t.clone())):
        with pytest.raises(RuntimeError, match=msg):
            w()
    np.testing.assert_array_equal(a, before)
    c = t.clone()
    c.add_(1)
    np.testing.assert_array_equal(np.asarray(c.tolist()), before + 1)


def test_misaligned_tensor_copies_writable():
    a, ref = _misaligned(np.float32, (3, 5))
    t = ampy.tensor(a)
    assert not t._readonly and t.data_ptr() % 4 == 0
    t.add_(1)
    np.testing.assert_array_equal(t.numpy(), ref + 1)
    np.testing.assert_array_equal(a, ref)


def test_misaligned_zero_size_and_one_byte_dtypes_share():
    raw = bytearray(9)
    u8 = np.frombuffer(raw, dtype=np.uint8, offset=1)
    t = ampy.from_numpy(u8)
    assert not t._readonly and t.data_ptr() == u8.ctypes.data  # 1-byte elements: always aligned
    t.add_(3)
    assert raw[1:] == bytearray([3] * 8)
    e = ampy.from_numpy(np.frombuffer(raw, dtype=np.float32, offset=1, count=0))
    assert e.numel() == 0 and e.tolist() == []


# ---- every in-place method of the op table on read-only memory, generated --------------------
def _inplace_methods():
    from ampy import _dispatch
    names = sorted({n for n in _dispatch.ops() if n.endswith("_")} |
                   {"clamp_max_", "clamp_min_", "clip_", "round_", "fill_", "zero_"})
    found = []
    for n in names:
        for nargs in range(4):
            try:
                getattr(ampy.full((4, 3), 0.5), n)(*[0.25] * nargs)
            except (TypeError, RuntimeError, ValueError, AttributeError):
                continue
            found.append((n, nargs))
            break
    return found


RO_INPLACE = _inplace_methods()


def test_readonly_inplace_methods_found():
    assert len(RO_INPLACE) >= 48, RO_INPLACE


@pytest.mark.parametrize("sname", ["from_numpy", "frombuffer_bytes", "from_dlpack_capsule"])
@pytest.mark.parametrize("name,nargs", RO_INPLACE, ids=[n for n, _ in RO_INPLACE])
def test_every_inplace_method_refuses_readonly(name, nargs, sname, tmp_path):
    t, a = SOURCES[sname](tmp_path)
    before = np.array(a, copy=True)
    v0 = t._version
    with pytest.raises(RuntimeError, match=READONLY):
        getattr(t, name)(*[0.25] * nargs)
    np.testing.assert_array_equal(np.asarray(a), before)
    assert t._version == v0
