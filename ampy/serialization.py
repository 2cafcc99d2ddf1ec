"""ampy.save / ampy.load: checkpoints in the safetensors file format.

A checkpoint is one safetensors file (readable by the ``safetensors`` package
and any other safetensors reader):

    8 bytes   N, the header length (unsigned little-endian)
    N bytes   JSON header: {name: {"dtype", "shape", "data_offsets"}, ...,
              "__metadata__": {str: str}}, padded with spaces to 8 bytes
    rest      the tensors' bytes, little-endian, C order, back to back

The tensors get readable names from their place in the object ("fc1.weight",
"state.0.exp_avg", ...). Everything that is not a tensor — the nesting of
dicts/lists/tuples, numbers, strings, bools, None, which tensors are the same
object, requires_grad and Parameter — is one JSON string in the metadata
("ampy.tree"). "ampy.crc32" is a CRC-32 of the whole file (taken with the
8 hex digits of the field itself replaced by "--------"), so a flipped bit
anywhere, header or data, is reported rather than loaded.

Saving writes a temporary file next to the target, flushes and fsyncs it and
renames it over the target (os.replace), then fsyncs the directory: a crash
during a save leaves the previous checkpoint whole (a killed process can
leave its ``.<name>.ampy-tmp-*`` file behind, never a broken ``path``).

Loading needs only NumPy (and ml_dtypes for bfloat16), never torch. It checks
everything before it builds anything: header length, JSON, dtypes, shapes,
offsets (in range, no overlap, no hole, sizes matching dtype x shape), the
checksum and the tree. A bad file raises ``CheckpointError`` (a ValueError)
that names the file and the problem. A safetensors file written by another
tool (no "ampy.tree") loads as a dict {name: tensor}.
"""
import json
import math
import os
import re
import struct
import sys
import zlib

import numpy as np

from . import _C
from . import _dtype as D
from . import _devices
from ._checkpoint_tree import _Reader, _Writer

__all__ = ["save", "load"]

FORMAT_VERSION = "1"
MAX_HEADER = 100 * 1000 * 1000        # the safetensors package's own limit
_CHUNK = 16 << 20                      # bytes per read/write call
_CRC_KEY = "ampy.crc32"
_PLACEHOLDER = "--------"
_CRC_RE = re.compile(rb'"ampy\.crc32":"([0-9a-f]{8})"')

_ST_OF = {D.float32: "F32", D.float16: "F16", D.bfloat16: "BF16", D.float64: "F64",
          D.int64: "I64", D.int32: "I32", D.uint8: "U8", D.bool: "BOOL"}
_OF_ST = {v: k for k, v in _ST_OF.items()}
# safetensors dtypes ampy has no type for: loaded widened to int64 (exact)
_WIDEN = {"I8": np.int8, "I16": np.int16, "U16": np.uint16, "U32": np.uint32}
_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1,
             "I8": 1, "I16": 2, "U16": 2, "U32": 4}


class CheckpointError(ValueError):
    """A checkpoint file is truncated, corrupted or not a safetensors file."""


# =========================================================================== save
def _host_array(t):
    """The tensor's bytes as a flat little-endian uint8 array (C order)."""
    t = t.detach()
    if t.is_cuda:
        t = t.cpu()
    a = t.contiguous()._numpy()
    a = np.ascontiguousarray(a)
    if sys.byteorder == "big" and a.dtype.itemsize > 1:
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.reshape(-1).view(np.uint8)


def _build_header(writer, tree_json):
    header, offset = {}, 0
    for name, t in writer.tensors:
        if t.dtype not in _ST_OF:
            raise TypeError(f"ampy.save: argument 'obj': tensor {name!r} has dtype {t.dtype}, "
                            f"which safetensors cannot store")
        nbytes = t.numel() * t.dtype.itemsize
        header[name] = {"dtype": _ST_OF[t.dtype], "shape": [int(s) for s in t.shape],
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = {"ampy.format": FORMAT_VERSION, "ampy.tree": tree_json,
                              _CRC_KEY: _PLACEHOLDER}
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    raw += b" " * (-len(raw) % 8)
    return raw


def _write(f, writer, raw):
    """Writes the file to the open binary file f (positioned at 0); returns
    the crc32 and the offset of the crc field's digits."""
    prefix = struct.pack("<Q", len(raw))
    crc = zlib.crc32(prefix)
    crc = zlib.crc32(raw, crc)
    f.write(prefix)
    f.write(raw)
    for name, t in writer.tensors:
        a = _host_array(t)
        if a.size != t.numel() * t.dtype.itemsize:
            raise RuntimeError(f"ampy.save: tensor {name!r} gave {a.size} bytes, expected "
                               f"{t.numel() * t.dtype.itemsize}")
        for i in range(0, a.size, _CHUNK):
            part = memoryview(a[i:i + _CHUNK])
            crc = zlib.crc32(part, crc)
            f.write(part)
    pos = raw.index(b'"%s":"%s"' % (_CRC_KEY.encode(), _PLACEHOLDER.encode()))
    return crc, 8 + pos + len(_CRC_KEY) + 4


def save(obj, f):
    """Save obj — a tensor, or dicts/lists/tuples nesting tensors, int, float,
    bool, str and None (model/optimizer/GradScaler state_dicts, RNG state,
    step counters) — to f (a path, or a binary file object) as a
    safetensors file. Saving to a path is atomic (temporary file, fsync,
    rename). Tensors keep dtype, shape and bits; views are saved contiguous."""
    writer = _Writer()
    try:
        tree = writer.node(obj, [])
        tree_json = json.dumps(tree, separators=(",", ":"), ensure_ascii=True,
                               allow_nan=False)
    except RecursionError:
        raise ValueError("ampy.save: argument 'obj' is nested too deeply") from None
    raw = _build_header(writer, tree_json)
    if len(raw) > MAX_HEADER:
        raise ValueError(f"ampy.save: the header ({len(raw)} bytes) is over the safetensors "
                         f"limit of {MAX_HEADER} bytes; too many tensors or too much "
                         f"non-tensor data")
    if hasattr(f, "write"):
        _save_to_file_object(f, writer, raw)
        return
    if not isinstance(f, (str, bytes, os.PathLike)):
        raise TypeError(f"ampy.save: argument 'f' must be a str, os.PathLike or a binary file "
                        f"object, not {type(f).__name__}")
    path = os.fsdecode(os.fspath(f))
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.ampy-tmp-{os.getpid()}-{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with open(fd, "wb", buffering=1 << 20) as out:
            crc, at = _write(out, writer, raw)
            out.flush()
            out.seek(at)
            out.write(b"%08x" % crc)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(folder)


def _save_to_file_object(f, writer, raw):
    start = f.tell() if f.seekable() else None
    if start is None:  # not seekable: build in memory, then write once
        import io
        buf = io.BytesIO()
        _save_to_file_object(buf, writer, raw)
        f.write(buf.getvalue())
        return
    crc, at = _write(f, writer, raw)
    end = f.tell()
    f.seek(start + at)
    f.write(b"%08x" % crc)
    f.seek(end)
    if hasattr(f, "flush"):
        f.flush()


def _fsync_dir(folder):
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# =========================================================================== load
def _bad(src, msg):
    return CheckpointError(f"ampy.load: {src}: {msg}")


def _read_exact(f, n, src, what):
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            raise _bad(src, f"file is truncated ({what}: expected {n} bytes, got {got})")
        got += k
    return buf


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


_INT64_MAX = (1 << 63) - 1


def _unique_keys(pairs):
    """json object_pairs_hook: a repeated key is an error (json keeps the last)."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


class _Duplicate(ValueError):
    pass


def _check_shape(shape, dt, name, src):
    """shape: a list of at most MAX_DIMS ints in [0, 2**63) whose element count
    times the item size fits int64 (so no later size computation can wrap)."""
    if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
        raise _bad(src, f"tensor {name!r}: shape must be a list of non-negative ints, "
                        f"got {str(shape)[:80]}")
    if len(shape) > _C.MAX_DIMS:
        raise _bad(src, f"tensor {name!r}: shape has {len(shape)} dims, at most "
                        f"{_C.MAX_DIMS} supported")
    count = _ITEMSIZE[dt]
    for s in shape:
        count *= max(s, 1)  # (a 0 dim does not excuse an absurd one: each must fit too)
        if count > _INT64_MAX:
            raise _bad(src, f"tensor {name!r}: shape {str(shape)[:80]} is too large (its size "
                            f"in bytes overflows int64)")
    return math.prod(shape) * _ITEMSIZE[dt]


def _parse_header(raw, data_len, src):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(src, f"header is not UTF-8 ({e}); not a safetensors file, or corrupted") \
            from None
    if not text.startswith("{"):
        raise _bad(src, "header does not start with '{'; not a safetensors file, or corrupted")
    try:
        header = json.loads(text, object_pairs_hook=_unique_keys)
    except _Duplicate as e:
        raise _bad(src, f"header names {e.args[0]!r} twice") from None
    except (ValueError, RecursionError) as e:
        raise _bad(src, f"header is not valid JSON ({e}); the file is corrupted") from None
    if not isinstance(header, dict):
        raise _bad(src, "header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in meta.items()):
        raise _bad(src, "header's __metadata__ must map strings to strings")
    entries = []
    for name, e in header.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise _bad(src, f"tensor {name!r}: header entry must hold exactly dtype, shape and "
                            f"data_offsets")
        dt, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if not isinstance(dt, str):
            raise _bad(src, f"tensor {name!r}: dtype must be a string")
        if dt not in _ITEMSIZE:
            raise _bad(src, f"tensor {name!r}: dtype {dt!r} is unknown or has no ampy type "
                            f"(ampy loads F32 F16 BF16 F64 I64 I32 U8 BOOL, and I8 I16 U16 U32 "
                            f"widened to int64)")
        nbytes = _check_shape(shape, dt, name, src)
        if not (isinstance(offs, list) and len(offs) == 2 and all(_is_int(o) for o in offs)):
            raise _bad(src, f"tensor {name!r}: data_offsets must be two ints, got "
                            f"{str(offs)[:80]}")
        begin, end = offs
        if not 0 <= begin <= end <= data_len:
            raise _bad(src, f"tensor {name!r}: data_offsets {offs} out of range of the "
                            f"{data_len}-byte data section (truncated or corrupted file)")
        if end - begin != nbytes:
            raise _bad(src, f"tensor {name!r}: {end - begin} data bytes do not match dtype "
                            f"{dt} and shape {shape} ({nbytes} bytes)")
        entries.append((begin, end, name, dt, shape))
    entries.sort(key=lambda x: (x[0], x[1]))
    pos, prev = 0, None
    for begin, end, name, _, _ in entries:
        if begin != pos:
            after = "the start" if prev is None else f"tensor {prev!r}"
            raise _bad(src, f"tensor {name!r}: data_offsets start at {begin}, expected {pos} "
                            f"({'overlapping' if begin < pos else 'a hole after'} {after})")
        pos, prev = end, name
    if pos != data_len:
        raise _bad(src, f"the tensors cover {pos} bytes but the data section holds {data_len} "
                        f"(extra bytes, or a corrupted header)")
    return entries, meta


def _read_file(f, size, src):
    """Reads and checks the whole file; returns (arrays {name: ndarray}, meta, order)."""
    if size < 8:
        raise _bad(src, f"file is truncated ({size} bytes; a safetensors file starts with an "
                        f"8-byte header length)")
    prefix = bytes(_read_exact(f, 8, src, "header length"))
    (n,) = struct.unpack("<Q", prefix)
    if n > MAX_HEADER:
        raise _bad(src, f"header length {n} is over the {MAX_HEADER}-byte limit (corrupted, "
                        f"or not a safetensors file)")
    if n > size - 8:
        raise _bad(src, f"header length {n} runs past the end of the {size}-byte file "
                        f"(truncated or corrupted)")
    raw = bytes(_read_exact(f, n, src, "header"))
    data_len = size - 8 - n
    entries, meta = _parse_header(raw, data_len, src)
    ampy_keys = [k for k in meta if k.startswith("ampy.")]
    checked = bool(ampy_keys)
    if checked:
        for k in ("ampy.format", "ampy.tree", _CRC_KEY):
            if k not in meta:
                raise _bad(src, f"metadata lacks {k!r} (corrupted ampy checkpoint)")
        if meta["ampy.format"] != FORMAT_VERSION:
            raise _bad(src, f"ampy checkpoint format {meta['ampy.format']!r} is not "
                            f"{FORMAT_VERSION!r} (written by another ampy version, or corrupted)")
        found = _CRC_RE.findall(raw)
        if len(found) != 1 or found[0].decode() != meta[_CRC_KEY]:
            raise _bad(src, "checksum field is malformed (corrupted ampy checkpoint)")
        crc = zlib.crc32(prefix)
        crc = zlib.crc32(_CRC_RE.sub(b'"ampy.crc32":"' + _PLACEHOLDER.encode() + b'"', raw), crc)
    arrays = {}
    for begin, end, name, dt, shape in entries:
        buf = np.empty(end - begin, dtype=np.uint8)
        view = memoryview(buf)
        got = 0
        while got < buf.size:
            k = f.readinto(view[got:got + _CHUNK])
            if not k:
                raise _bad(src, "file is truncated (tensor data ended early)")
            if checked:
                crc = zlib.crc32(view[got:got + k], crc)
            got += k
        arrays[name] = (buf, dt, shape)
    if f.read(1):
        raise _bad(src, "file grew while it was read")
    if checked and "%08x" % crc != meta[_CRC_KEY]:
        raise _bad(src, f"checksum mismatch (stored {meta[_CRC_KEY]}, computed {crc:08x}): "
                        f"the file is corrupted")
    return arrays, meta, [e[2] for e in entries]


def _to_tensor(buf, dt, shape, name, src):
    if dt in _WIDEN:
        a = buf.view(np.dtype(_WIDEN[dt]).newbyteorder("<")).astype(np.int64)
    else:
        if dt == "BOOL" and buf.size and buf.max() > 1:
            raise _bad(src, f"tensor {name!r}: BOOL data holds bytes other than 0 and 1")
        a = buf.view(_OF_ST[dt]._np.newbyteorder("<"))
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
    try:
        return _C.from_numpy(a.reshape(shape))
    except (ValueError, RuntimeError, TypeError) as e:  # (the header checks should catch all)
        raise _bad(src, f"tensor {name!r}: cannot be built ({e})") from None


def _device_fn(map_location):
    """A function placing a loaded tensor saved on device `saved` (str or None)."""
    if map_location is None:
        target = None
    elif isinstance(map_location, str) or type(map_location).__name__ == "device":
        target = str(map_location)
        if target not in ("cpu",) and not target.startswith("cuda"):
            raise ValueError(f"ampy.load: map_location {map_location!r} is not 'cpu' or a "
                             f"'cuda' device")
        if target.startswith("cuda"):
            cuda = _devices.cuda()
            if not cuda.is_available():  # (before reading anything; a short traceback)
                raise cuda._unavailable(f"ampy.load: map_location={target!r}",
                                        "map_location='cpu'") from None
    else:
        raise TypeError(f"ampy.load: argument 'map_location' must be None, a str or an "
                        f"ampy.device, not {type(map_location).__name__}")

    def place(t, saved):
        dev = target if target is not None else saved
        if dev is None or dev == "cpu":
            return t
        if not _devices.cuda().is_available():
            raise RuntimeError(f"ampy.load: attempting to load a tensor onto {dev!r}, but CUDA "
                               f"is not available; pass map_location='cpu' to load it on the "
                               f"CPU")
        return t.to(dev)
    return place


def load(f, map_location=None, *, weights_only=None, **kwargs):
    """Load what ampy.save wrote: the same nesting, numbers, strings and
    tensors (same dtype, shape and bits). A safetensors file of another tool
    loads as {name: tensor}. map_location: None (where they were saved), 'cpu'
    or a 'cuda' device. weights_only is accepted for torch compatibility (the
    format holds data only, nothing is ever executed). Raises CheckpointError
    (a ValueError) for a truncated or corrupted file."""
    if kwargs:
        raise TypeError(f"ampy.load() got unexpected keyword argument(s) {sorted(kwargs)}")
    place = _device_fn(map_location)
    if hasattr(f, "read"):
        src = repr(getattr(f, "name", type(f).__name__))
        if not hasattr(f, "readinto") or not f.seekable():
            import io
            f = io.BytesIO(f.read())
        start = f.tell()
        size = f.seek(0, os.SEEK_END) - start
        f.seek(start)
        arrays, meta, order = _read_file(f, size, src)
    else:
        if not isinstance(f, (str, bytes, os.PathLike)):
            raise TypeError(f"ampy.load: argument 'f' must be a str, os.PathLike or a binary "
                            f"file object, not {type(f).__name__}")
        path = os.fsdecode(os.fspath(f))
        src = repr(path)
        with open(path, "rb", buffering=0) as fh:
            size = os.fstat(fh.fileno()).st_size
            arrays, meta, order = _read_file(fh, size, src)
    tensors = {}
    for name in order:
        buf, dt, shape = arrays.pop(name)
        tensors[name] = _to_tensor(buf, dt, shape, name, src)
    if "ampy.tree" not in meta:  # a plain safetensors file
        return {name: place(tensors[name], None) for name in order}
    try:
        tree = json.loads(meta["ampy.tree"], object_pairs_hook=_unique_keys)
    except _Duplicate as e:
        raise _bad(src, f"the object tree repeats the key {e.args[0]!r} in a node") from None
    except (ValueError, RecursionError) as e:
        raise _bad(src, f"the object tree is not valid JSON ({e})") from None
    try:
        return _Reader(tensors, place, lambda msg: _bad(src, msg)).node(tree)
    except RecursionError:
        raise _bad(src, "the object tree is nested too deeply") from None
