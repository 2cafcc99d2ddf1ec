"""ampy.save / ampy.load: bits round-trip, safetensors interop, bit-identical
resume in a fresh process, killed saves, truncated and corrupted files."""
import io
import json
import math
import os
import pathlib
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections import OrderedDict

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ampy
from ampy.serialization import CheckpointError

from _helpers import ALL_DTYPES, NP_DTYPE as NP_OF

ROOT = str(pathlib.Path(ampy.__file__).resolve().parent.parent)
ENV = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}



def random_bits(dtype, shape, rs):
    """A tensor of random bit patterns (NaN payloads, subnormals, -0 included)."""
    npdt = np.dtype(NP_OF[dtype])
    n = int(np.prod(shape, dtype=np.int64))
    if dtype is ampy.bool:
        arr = rs.randint(0, 2, n).astype(np.bool_)
    else:
        arr = rs.randint(0, 256, n * npdt.itemsize).astype(np.uint8).view(npdt)
    return ampy.from_numpy(arr.reshape(shape).copy())


def raw(t):
    """The tensor's bytes in C order (an oracle independent of ampy.save)."""
    return np.ascontiguousarray(t.detach().numpy()).tobytes()


def assert_same(a, b, where="obj"):
    """Same structure, same types, same tensor dtype/shape/bits, floats as bits."""
    assert type(a) is type(b), f"{where}: {type(a)} vs {type(b)}"
    if isinstance(a, ampy.Tensor):
        assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape), where
        assert raw(a) == raw(b), f"{where}: bits differ"
        assert a.requires_grad == b.requires_grad, where
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


# ================================================================ (a) round trip
SHAPES = [(), (0,), (3, 0, 2), (1,), (7,), (3, 5), (2, 3, 4)]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_round_trip_bits_every_dtype_and_shape(tmp_path, dtype):
    rs = np.random.RandomState(ALL_DTYPES.index(dtype))
    obj = {f"s{i}": random_bits(dtype, s, rs) for i, s in enumerate(SHAPES)}
    base = random_bits(dtype, (4, 6), rs)
    obj["transposed"] = base.t()
    obj["strided"] = base[::2, 1::3]
    obj["column"] = base[:, 2]
    obj["expanded"] = random_bits(dtype, (1, 3), rs).expand(4, 3)
    assert not obj["transposed"].is_contiguous() and not obj["expanded"].is_contiguous()
    before = {k: raw(v) for k, v in obj.items()}
    path = tmp_path / "t.safetensors"
    ampy.save(obj, path)
    back = ampy.load(path)
    assert list(back) == list(obj)
    for k, v in obj.items():
        b = back[k]
        assert b.dtype is dtype and tuple(b.shape) == tuple(v.shape) and b.is_contiguous()
        assert raw(b) == before[k] == raw(v), k   # inputs unchanged too
    single = random_bits(dtype, (), rs)
    ampy.save(single, str(path))
    got = ampy.load(str(path))
    assert isinstance(got, ampy.Tensor) and raw(got) == raw(single) and got.ndim == 0


def test_round_trip_nested_structures(tmp_path):
    rs = np.random.RandomState(1)
    t = random_bits(ampy.float16, (2, 3), rs)
    p = ampy.nn.Parameter(random_bits(ampy.float32, (3,), rs) * 0 + 1.5)
    g = ampy.ones(2, requires_grad=True)
    obj = {
        "model": OrderedDict([("fc.weight", t), ("fc.bias", p.detach())]),
        "state": {0: {"step": ampy.tensor(3.0), "exp_avg": t.float()}, 7: {}},
        "groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "foreach": None,
                    "nesterov": False, "params": [0, 7]}],
        "floats": [0.0, -0.0, 5e-324, float("inf"), -float("inf"), float("nan"),
                   struct.unpack("<d", bytes.fromhex("0100000000f8ffff"))[0], 1 / 3],
        "ints": [0, -1, 2 ** 70, -(2 ** 63)],
        "strings": ["", "é ü ∑ 🙂", "\x00\n\"\\", "T"],
        "keys": {None: 1, True: 2, 2.5: 3, "": 4, -3: 5},
        "empty": [[], (), {}, OrderedDict()],
        "shared": [t, t],
        "param": p, "needs_grad": g,
        "tuple_of_lists": ([1, [2, (3,)]],),
        "rng": ampy.get_rng_state(),
    }
    path = tmp_path / "n.ckpt"
    ampy.save(obj, path)
    back = ampy.load(path)
    assert_same(obj, back)
    assert back["shared"][0] is back["shared"][1]          # identity kept
    assert type(back["param"]) is ampy.nn.Parameter and back["param"].requires_grad
    assert back["needs_grad"].requires_grad and back["needs_grad"].is_leaf
    assert type(back["model"]) is OrderedDict and type(back["state"]) is dict
    # file objects too
    buf = io.BytesIO()
    ampy.save(obj, buf)
    buf.seek(0)
    assert_same(obj, ampy.load(buf))
    assert buf.getvalue() == path.read_bytes()


def test_chunked_io_file_objects_and_paths(tmp_path, monkeypatch):
    import ampy.serialization as S
    rs = np.random.RandomState(4)
    obj = {"a": random_bits(ampy.float64, (5, 3), rs), "b": random_bits(ampy.uint8, (13,), rs),
           "c": [random_bits(ampy.bfloat16, (0,), rs), random_bits(ampy.int32, (7,), rs)]}
    monkeypatch.setattr(S, "_CHUNK", 7)              # reads and writes in odd-sized pieces
    path = tmp_path / "c.safetensors"
    ampy.save(obj, os.fsencode(path))                # bytes paths work too
    assert_same(obj, ampy.load(os.fsencode(path)))

    class WriteOnly:                                 # not seekable: built in memory first
        def __init__(self):
            self.parts = []

        def write(self, b):
            self.parts.append(bytes(b))

        def seekable(self):
            return False

    class ReadOnly:                                  # no readinto, no seek
        def __init__(self, data):
            self.data = data

        def read(self, n=-1):
            out, self.data = self.data, b""
            return out

    w = WriteOnly()
    ampy.save(obj, w)
    assert b"".join(w.parts) == path.read_bytes()
    assert_same(obj, ampy.load(ReadOnly(path.read_bytes())))
    with open(path, "rb") as fh:
        assert_same(obj, ampy.load(fh, weights_only=True))
    with pytest.raises(TypeError, match="mmap"):
        ampy.load(path, mmap=True)


def test_save_rejects_unsupported_objects(tmp_path):
    path = tmp_path / "x.safetensors"
    ampy.save({"ok": 1}, path)
    good = path.read_bytes()
    for bad, what in [({"a": {1, 2}}, "set"), ([np.zeros(2)], "ndarray"),
                      ({"m": object()}, "object"), ({(1, 2): 3}, "key"),
                      ({"a": [1, np.float32(2)]}, "float32"), (b"bytes", "bytes")]:
        with pytest.raises(TypeError, match="argument 'obj'") as e:
            ampy.save(bad, path)
        assert what in str(e.value)
    assert "obj['a'][1]" in str(pytest.raises(TypeError, ampy.save, {"a": [1, np.int64(2)]},
                                              path).value)
    deep = []
    for _ in range(100000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        ampy.save(deep, path)
    for bad_f in (3, None, 2.5):
        with pytest.raises(TypeError, match="argument 'f'"):
            ampy.save({}, bad_f)
        with pytest.raises(TypeError, match="argument 'f'"):
            ampy.load(bad_f)
    assert path.read_bytes() == good and os.listdir(tmp_path) == ["x.safetensors"]
    with pytest.raises(FileNotFoundError):
        ampy.save({}, tmp_path / "no" / "dir.safetensors")
    with pytest.raises(FileNotFoundError):
        ampy.load(tmp_path / "missing.safetensors")


def test_map_location(tmp_path):
    path = tmp_path / "m.safetensors"
    t = ampy.arange(6).reshape(2, 3)
    ampy.save({"t": t}, path)
    for loc in (None, "cpu", ampy.device("cpu")):
        assert raw(ampy.load(path, map_location=loc)["t"]) == raw(t)
    with pytest.raises(TypeError, match="map_location"):
        ampy.load(path, map_location=3)
    with pytest.raises(ValueError, match="map_location"):
        ampy.load(path, map_location="tpu")
    if not ampy.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            ampy.load(path, map_location="cuda")
    else:
        got = ampy.load(path, map_location="cuda")["t"]
        assert got.is_cuda and raw(got.cpu()) == raw(t)


def test_rng_state_is_complete_and_checked():
    ampy.manual_seed(5)
    ampy.randn(7)                     # odd count: no cached normal may leak into the state
    st = ampy.get_rng_state()
    a = (ampy.randn(5), ampy.rand(3), ampy.randint(0, 9, (4,)),
         ampy.nn.functional.dropout(ampy.ones(9), 0.5))
    ampy.manual_seed(99)
    ampy.randn(3)
    ampy.set_rng_state(st)
    b = (ampy.randn(5), ampy.rand(3), ampy.randint(0, 9, (4,)),
         ampy.nn.functional.dropout(ampy.ones(9), 0.5))
    assert all(raw(x) == raw(y) for x, y in zip(a, b))
    g = ampy.Generator().manual_seed(2 ** 64 - 1)
    g._take(2 ** 40 + 3)
    h = ampy.Generator()
    h.set_state(g.get_state())
    assert (h._seed, h._offset) == (g._seed, g._offset)
    for bad in (ampy.tensor([1, 2, 3]), ampy.tensor([-1, 0, 0, 0]),
                ampy.tensor([2 ** 32, 0, 0, 0]), ampy.tensor([1.0, 0, 0, 0])):
        with pytest.raises(RuntimeError, match="4-element state"):
            ampy.set_rng_state(bad)
    with pytest.raises(TypeError, match="new_state"):
        ampy.set_rng_state([1, 2, 3, 4])
    ampy.set_rng_state(st)
    assert raw(ampy.get_rng_state()) == raw(st)


def _trees():
    rs = np.random.RandomState(5)
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(-2 ** 80, 2 ** 80), st.text(max_size=8),
        st.floats(allow_nan=True, allow_infinity=True),
        st.builds(lambda d, s: random_bits(d, s, rs), st.sampled_from(ALL_DTYPES),
                  st.lists(st.integers(0, 3), max_size=3).map(tuple)))
    keys = st.one_of(st.text(max_size=6), st.integers(-5, 5), st.none(), st.booleans())
    return st.recursive(leaves, lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(keys, kids, max_size=4),
        st.dictionaries(st.text(max_size=4), kids, max_size=4).map(OrderedDict)), max_leaves=12)


@settings(max_examples=30)
@given(_trees())
def test_round_trip_random_trees(obj):
    buf = io.BytesIO()
    ampy.save(obj, buf)
    buf.seek(0)
    assert_same(obj, ampy.load(buf))


# ======================================================= (b) safetensors interop
def test_safetensors_package_reads_ampy_files(tmp_path):
    pytest.importorskip("safetensors", reason="safetensors is not installed (test extra)")
    from safetensors import safe_open
    from safetensors.numpy import load_file
    rs = np.random.RandomState(2)
    obj = {f"{d.name}.w": random_bits(d, (3, 4), rs) for d in ALL_DTYPES}
    obj["scalar"] = random_bits(ampy.float64, (), rs)
    obj["empty"] = random_bits(ampy.bfloat16, (0, 2), rs)
    obj["view"] = random_bits(ampy.float16, (4, 4), rs).t()
    obj["meta"] = {"step": 3, "lr": 0.5}
    path = tmp_path / "a.safetensors"
    ampy.save(obj, path)
    loaded = load_file(str(path))
    tensors = {k: v for k, v in obj.items() if isinstance(v, ampy.Tensor)}
    assert set(loaded) == set(tensors)
    for k, t in tensors.items():
        assert loaded[k].dtype == np.dtype(NP_OF[t.dtype]) and loaded[k].shape == tuple(t.shape)
        assert loaded[k].tobytes() == raw(t), k
    with safe_open(str(path), "np") as f:
        meta = f.metadata()
        assert meta["ampy.format"] == "1" and len(meta["ampy.crc32"]) == 8
        assert json.loads(meta["ampy.tree"])
        assert f.get_tensor("view").tobytes() == raw(obj["view"])
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file as tload
    tl = tload(str(path))
    assert tl["bfloat16.w"].dtype == torch.bfloat16
    assert tl["bfloat16.w"].view(torch.int16).numpy().tobytes() == raw(obj["bfloat16.w"])


def test_ampy_reads_safetensors_package_files(tmp_path):
    pytest.importorskip("safetensors", reason="safetensors is not installed (test extra)")
    from safetensors.numpy import save_file
    rs = np.random.RandomState(3)
    arrays = {
        "f32": rs.randn(3, 4).astype(np.float32), "f16": rs.randn(5).astype(np.float16),
        "bf16": rs.randn(2, 2).astype(ml_dtypes.bfloat16), "f64": np.array(np.pi),
        "i64": rs.randint(-2 ** 62, 2 ** 62, (4,), dtype=np.int64),
        "i32": rs.randint(-9, 9, (2, 0)).astype(np.int32),
        "u8": rs.randint(0, 256, (6,)).astype(np.uint8), "b": rs.rand(5) > 0.5,
        "i8": np.array([-128, 0, 127], np.int8), "i16": np.array([-32768, 7], np.int16),
        "u16": np.array([65535, 1], np.uint16), "u32": np.array([2 ** 32 - 1], np.uint32),
    }
    path = tmp_path / "np.safetensors"
    save_file(arrays, str(path), metadata={"format": "np"})
    got = ampy.load(path)
    assert set(got) == set(arrays)
    for k, a in arrays.items():
        t = got[k]
        assert tuple(t.shape) == a.shape
        if k in ("i8", "i16", "u16", "u32"):       # widened to int64, exactly
            assert t.dtype is ampy.int64 and t.numpy().tolist() == a.tolist()
        else:
            assert np.dtype(NP_OF[t.dtype]) == a.dtype and raw(t) == a.tobytes(), k
    save_file({"u64": np.array([1], np.uint64)}, str(path))
    with pytest.raises(CheckpointError, match="U64"):
        ampy.load(path)
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as tsave
    tt = {"w": torch.randn(4, 3, dtype=torch.bfloat16), "h": torch.randn(2).half(),
          "n": torch.arange(5)}
    tsave(tt, str(path))
    got = ampy.load(path)
    for k, v in tt.items():
        bits = v.view(torch.int16) if v.dtype in (torch.bfloat16, torch.float16) else v
        assert raw(got[k]) == bits.numpy().tobytes(), k


# ========================================== (c) bit-identical resume, fresh process
TRAIN = r'''
import sys
sys.modules["torch"] = None                    # saving, loading, training: no torch needed
import numpy as np, ampy
from ampy import nn
from ampy.amp import autocast, GradScaler
mode, ckpt, out, N, M = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
OVERFLOW = {2, N + 1, N + 2, N + 3}          # forced inf/nan gradients, some after the save
ampy.manual_seed(0 if mode == "full" else 1234)   # resume starts from other weights

def mlp(dtype):
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3)).to(dtype)

ma = mlp(ampy.float16)                        # fp16 params, fp32 masters
oa = ampy.optim.AdamW(ma.parameters(), lr=1e-2, master_weights=True)
sa = GradScaler("cpu", init_scale=2.0 ** 12, growth_interval=3, hysteresis=2)
mb = mlp(ampy.float32)                        # fp32 params under fp16 autocast
ob = ampy.optim.SGD(mb.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
sb = GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
lb = ampy.optim.lr_scheduler.StepLR(ob, step_size=4, gamma=0.5)
mc = mlp(ampy.bfloat16)                       # bf16 params, SGD momentum with masters
oc = ampy.optim.SGD(mc.parameters(), lr=0.05, momentum=0.9, master_weights=True)
losses, skipped = [], []

def batch(step):
    rs = np.random.RandomState(1000 + step)
    return ampy.tensor(rs.randn(6, 8).astype(np.float32)), ampy.tensor(rs.randint(0, 3, 6))

def train(step):
    x, y = batch(step)
    for m, o, s, bad in ((ma, oa, sa, float("inf")), (mb, ob, sb, float("nan")), (mc, oc, None, 0)):
        with autocast("cpu", dtype=ampy.float16 if s is not None else ampy.bfloat16):
            loss = nn.functional.cross_entropy(m(x.to(next(m.parameters()).dtype)).float(), y)
        (s.scale(loss) if s is not None else loss).backward()
        if s is not None and step in OVERFLOW:
            list(m.parameters())[step % 4].grad.fill_(bad)
        if s is not None:
            s.step(o); s.update(); skipped.append(s.last_step_skipped)
        else:
            o.step()
        o.zero_grad()
        if o is ob:
            lb.step()
        losses.append(loss.item())

def everything(step):
    return {"step": step, "ma": ma.state_dict(), "mb": mb.state_dict(), "mc": mc.state_dict(),
            "oa": oa.state_dict(), "ob": ob.state_dict(), "oc": oc.state_dict(),
            "sa": sa.state_dict(), "sb": sb.state_dict(), "lb": lb.state_dict(),
            "rng": ampy.get_rng_state()}

if mode == "full":
    for step in range(N):
        train(step)
    ampy.save(everything(N), ckpt)
    losses.clear(); skipped.clear()
else:
    ck = ampy.load(ckpt)
    assert ck["step"] == N
    for m, o, k in ((ma, oa, "a"), (mb, ob, "b"), (mc, oc, "c")):
        m.load_state_dict(ck["m" + k]); o.load_state_dict(ck["o" + k])
    sa.load_state_dict(ck["sa"]); sb.load_state_dict(ck["sb"]); lb.load_state_dict(ck["lb"])
    ampy.set_rng_state(ck["rng"])
for step in range(N, N + M):
    train(step)
res = everything(N + M)
res["losses"], res["skipped"] = losses, skipped
ampy.save(res, out)
'''


def _train(tmp_path, mode, n, m):
    out = tmp_path / f"{mode}.out"
    r = subprocess.run([sys.executable, "-c", TRAIN, mode, str(tmp_path / "ck.safetensors"),
                        str(out), str(n), str(m)], env=ENV, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return ampy.load(out)


def test_resume_in_fresh_process_is_bit_identical(tmp_path):
    n, m = 5, 7
    full = _train(tmp_path, "full", n, m)
    resumed = _train(tmp_path, "resume", n, m)
    assert_same(full, resumed)
    # the window really held skipped steps, growth, moments, masters and RNG use
    assert any(full["skipped"]) and not all(full["skipped"])
    assert all(math.isfinite(x) for x in full["losses"])
    st = full["oa"]["state"][0]
    assert {"step", "exp_avg", "exp_avg_sq", "master_param"} <= set(st)
    assert st["master_param"].dtype is ampy.float32 and full["ma"]["0.weight"].dtype is ampy.float16
    assert "momentum_buffer" in full["ob"]["state"][0] and "master_param" in full["oc"]["state"][0]
    assert full["sa"]["_hysteresis_tracker"] is not None and full["sb"]["scale"] != 2.0 ** 8
    ck = ampy.load(tmp_path / "ck.safetensors")
    assert full["ob"]["param_groups"][0]["lr"] == 0.05 * 0.5 ** ((n + m) // 4)
    assert raw(ck["rng"]) != raw(full["rng"])          # dropout drew numbers after the save
    assert float(full["oa"]["state"][0]["step"]) < n + m   # skipped steps did not count


# ============================================================== (d) killed saves
KILL = r'''
import os, sys, time, ampy, ampy.serialization as S
path, stage = sys.argv[1], sys.argv[2]
def hold(msg):
    print(msg, flush=True); time.sleep(60)
if stage == "data":
    orig = S._host_array
    count = [0]
    def slow(t):
        count[0] += 1
        if count[0] == 3:
            hold("mid-data")
        return orig(t)
    S._host_array = slow
elif stage == "fsync":
    os.fsync = lambda fd: hold("at-fsync")
elif stage == "replace":
    os.replace = lambda a, b: hold("at-replace")
big = {f"w{i}": ampy.full((256, 1024), float(i)) for i in range(8)}
print("saving", flush=True)
ampy.save(big, path)
print("saved", flush=True)
if stage == "timer":
    time.sleep(60)   # wait for the kill even when the save finished first
'''


@pytest.mark.parametrize("stage", ["data", "fsync", "replace", "timer"])
def test_killed_save_leaves_previous_checkpoint(tmp_path, stage):
    path = tmp_path / "model.safetensors"
    old = {"w": ampy.arange(10).float(), "step": 41}
    ampy.save(old, path)
    good = path.read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", KILL, str(path), stage], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline().strip()
        assert first == "saving", proc.stderr.read()
        if stage == "timer":
            time.sleep(0.05)        # somewhere inside the save (or already done)
        else:
            assert proc.stdout.readline().strip() in ("mid-data", "at-fsync", "at-replace")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    back = ampy.load(path)                      # old, or (timer) the complete new one
    if stage != "timer" or path.read_bytes() == good:
        assert path.read_bytes() == good
        assert_same(back, old)
    else:
        assert sorted(back) == [f"w{i}" for i in range(8)]
        assert all(float(back[f"w{i}"][255, 1023]) == i for i in range(8))
    strays = [p for p in os.listdir(tmp_path) if p != "model.safetensors"]
    assert all(p.startswith(".model.safetensors.ampy-tmp-") for p in strays), strays


def test_failed_save_cleans_up_and_keeps_previous(tmp_path, monkeypatch):
    import ampy.serialization as S
    path = tmp_path / "c.safetensors"
    ampy.save({"a": ampy.ones(3)}, path)
    good = path.read_bytes()
    big = {f"t{i}": ampy.full((100,), float(i)) for i in range(6)}
    calls = [0]
    orig = S._host_array

    def failing(t):
        calls[0] += 1
        if calls[0] == 4:
            raise OSError(28, "No space left on device")
        return orig(t)
    monkeypatch.setattr(S, "_host_array", failing)
    with pytest.raises(OSError, match="No space"):
        ampy.save(big, path)
    monkeypatch.setattr(S, "_host_array", orig)

    def bad_fsync(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", bad_fsync)
    with pytest.raises(OSError, match="Input/output"):
        ampy.save(big, path)
    monkeypatch.undo()
    with pytest.raises(KeyboardInterrupt):
        monkeypatch.setattr(os, "replace", lambda a, b: (_ for _ in ()).throw(KeyboardInterrupt))
        ampy.save(big, path)
    monkeypatch.undo()
    assert path.read_bytes() == good and os.listdir(tmp_path) == ["c.safetensors"]
    assert_same(ampy.load(path), {"a": ampy.ones(3)})


# ==================================================== (e) truncated and corrupted
def _sample_file(tmp_path):
    rs = np.random.RandomState(7)
    obj = {"w": random_bits(ampy.float16, (4, 5), rs), "b": random_bits(ampy.bfloat16, (3,), rs),
           "opt": {"state": {0: {"step": ampy.tensor(4.0),
                                 "m": random_bits(ampy.float32, (6,), rs)}},
                   "lr": 0.001, "betas": (0.9, 0.999)},
           "flag": random_bits(ampy.bool, (5,), rs), "n": random_bits(ampy.int64, (2,), rs)}
    path = tmp_path / "s.safetensors"
    ampy.save(obj, path)
    return obj, path, path.read_bytes()


def _load_bytes(tmp_path, data, name="bad.safetensors"):
    if tmp_path is None:             # in memory (faster); the error names the BytesIO
        return ampy.load(io.BytesIO(data))
    p = tmp_path / name
    p.write_bytes(data)
    return ampy.load(p)


def test_truncated_files_raise_clear_errors(tmp_path):
    obj, path, data = _sample_file(tmp_path)
    for cut in range(len(data)):
        with pytest.raises(CheckpointError,
                           match="bad.safetensors" if cut % 10 == 0 else "ampy.load"):
            _load_bytes(tmp_path if cut % 10 == 0 else None, data[:cut])
    with pytest.raises(CheckpointError, match="extra bytes|truncated|data section"):
        _load_bytes(tmp_path, data + b"\0")
    assert_same(ampy.load(path), obj)


def test_every_header_bit_flip_and_data_flips_are_detected(tmp_path):
    obj, path, data = _sample_file(tmp_path)
    (hlen,) = struct.unpack("<Q", data[:8])
    rs = np.random.RandomState(11)
    positions = list(range(8 + hlen)) + list(rs.randint(8 + hlen, len(data), 150))
    for pos in positions:
        bad = bytearray(data)
        bad[pos] ^= 1 << int(rs.randint(0, 8))
        with pytest.raises(CheckpointError):
            _load_bytes(None, bytes(bad))
    for pos in rs.randint(0, len(data), 40):         # random byte values, 1-3 bytes
        bad = bytearray(data)
        for k in range(rs.randint(1, 4)):
            at = min(pos + k, len(data) - 1)
            bad[at] = (bad[at] + rs.randint(1, 256)) % 256
        with pytest.raises(CheckpointError):
            _load_bytes(tmp_path, bytes(bad))
    assert_same(ampy.load(path), obj)


def _file(header, data=b"", n=None):
    h = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def _ampy_file(meta_tree, header_tensors, data):
    """A file with a valid ampy checksum (computed here independently) but the
    given tree, to check that the tree itself is validated."""
    header = dict(header_tensors)
    header["__metadata__"] = {"ampy.format": "1", "ampy.tree": meta_tree,
                              "ampy.crc32": "--------"}
    h = json.dumps(header, separators=(",", ":")).encode()
    prefix = struct.pack("<Q", len(h))
    crc = zlib.crc32(prefix + h + data)
    return prefix + h.replace(b"--------", b"%08x" % crc) + data


def test_malformed_headers_raise_clear_errors(tmp_path):
    f4 = struct.pack("<f", 1.5)
    ok = {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    assert raw(_load_bytes(tmp_path, _file(ok, f4))["a"]) == f4
    cases = {
        "huge length": _file(ok, f4, n=2 ** 64 - 1),
        "length past end": _file(ok, f4, n=10 ** 6),
        "zero length": _file(b"", f4, n=0),
        "bad JSON": _file(b'{"a": {"dtype": "F32", "shape": [1],', f4),
        "not an object": _file(b"[1, 2, 3]", f4),
        "not utf8": _file(b'{"\xff\xfe": 1}', f4),
        "deep JSON": _file(b"{" + b'"a":' * 1 + b"[" * 100000 + b"]" * 100000 + b"}", b""),
        "unknown dtype": _file({"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 4]}}, f4),
        "U64": _file({"a": {"dtype": "U64", "shape": [1], "data_offsets": [0, 8]}}, f4 * 2),
        "size mismatch": _file({"a": {"dtype": "F64", "shape": [1], "data_offsets": [0, 4]}}, f4),
        "negative shape": _file({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}},
                                f4),
        "float shape": _file({"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, f4),
        "bool offset": _file({"a": {"dtype": "U8", "shape": [1], "data_offsets": [False, True]}},
                             b"\1"),
        "out of range": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, f4),
        "reversed": _file({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}}, f4),
        "overlap": _file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, f4 * 3),
        "hole": _file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                       "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, f4 * 3),
        "trailing data": _file(ok, f4 * 2),
        "missing key": _file({"a": {"dtype": "F32", "shape": [1]}}, f4),
        "extra key": _file({"a": {**ok["a"], "x": 1}}, f4),
        "metadata not str": _file({**ok, "__metadata__": {"a": 1}}, f4),
        "bool bytes": _file({"a": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}},
                            b"\1\2"),
        "lost tree": _file({**ok, "__metadata__": {"ampy.format": "1", "ampy.crc32": "0" * 8}},
                           f4),
        "bad crc": _file({**ok, "__metadata__": {"ampy.format": "1", "ampy.tree": '{"T":"a"}',
                                                 "ampy.crc32": "0" * 8}}, f4),
        "newer format": _file({**ok, "__metadata__": {"ampy.format": "9", "ampy.tree": "1",
                                                      "ampy.crc32": "0" * 8}}, f4),
        "crc mismatch": _ampy_file('{"T":"a"}', ok, f4)[:-1] + b"\x01",
        "tree missing tensor": _ampy_file('{"T":"zz"}', ok, f4),
        "tree bad JSON": _ampy_file('{"L":[', ok, f4),
        "tree unknown tag": _ampy_file('{"Q":1}', ok, f4),
        "tree bad float": _ampy_file('{"F":"one"}', ok, f4),
        "tree bad dict": _ampy_file('{"D":[[1]]}', ok, f4),
        "tree list key": _ampy_file('{"D":[[{"L":[]},1]]}', ok, f4),
        "tree deep": _ampy_file('{"L":[' * 50000 + "1" + "]}" * 50000, ok, f4),
    }
    for what, blob in cases.items():
        with pytest.raises(CheckpointError, match="bad.safetensors") as e:
            _load_bytes(tmp_path, blob)
        assert "Traceback" not in str(e.value), what
    assert _load_bytes(tmp_path, _ampy_file('{"L":[{"T":"a"},{"F":"0.5"}]}', ok, f4))[1] == 0.5
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        _load_bytes(tmp_path, cases["crc mismatch"])
    assert issubclass(CheckpointError, ValueError)
