"""Hostile checkpoints: crafted files that only a bad actor or a broken writer makes.

Each case starts from a real ampy.save file, changes one thing (a header
field of one tensor, the header's shape as a whole, the metadata, the object
tree, the length prefix, or the file's length) and re-computes the CRC the
way a careful forger would, so the targeted check is the one that must fire.
Every case must raise CheckpointError (a ValueError) whose message names the
key that is wrong (the tensor's name, or the part of the file), never another
exception, never a crash, and never allocate more than the file's size
(checked with tracemalloc, which sees NumPy's buffers).
"""
import io
import json
import struct
import tracemalloc
import zlib

import pytest

import ampy
from ampy.serialization import CheckpointError

PLACEHOLDER = '"ampy.crc32":"--------"'


def base_file():
    sd = {"w": ampy.nn.Parameter(ampy.ones(2, 3)), "i": ampy.arange(4), "b":
          ampy.tensor([True, False]), "h": ampy.ones(3, dtype=ampy.bfloat16).requires_grad_(),
          "e": ampy.zeros(0, 5), "n": [1, 2.5, "x", None, (3,)]}
    buf = io.BytesIO()
    ampy.save(sd, buf)
    raw = buf.getvalue()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:], raw


HEADER, DATA, GOOD = base_file()
NAMES = [k for k in HEADER if k != "__metadata__"]
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}


def with_crc(header_text, data, length=None):
    """The file for this header text (which holds the CRC placeholder) and
    data, with a correct CRC; ``length`` overrides the length prefix."""
    raw = header_text.encode("utf-8", "surrogatepass") if isinstance(header_text, str) \
        else header_text
    prefix = struct.pack("<Q", len(raw) if length is None else length)
    crc = zlib.crc32(data, zlib.crc32(raw, zlib.crc32(prefix)))
    return prefix + raw.replace(PLACEHOLDER.encode(), b'"ampy.crc32":"%08x"' % crc) + data


def dump(header):
    meta = dict(header.get("__metadata__", {})) if isinstance(header, dict) else None
    if isinstance(meta, dict) and "ampy.crc32" in meta:
        meta["ampy.crc32"] = "--------"
        header = {**header, "__metadata__": meta}
    return json.dumps(header, separators=(",", ":"))


def edited(name, field, value):
    h = json.loads(json.dumps(HEADER))
    if field is None:
        h[name] = value
    elif value is DELETE:
        del h[name][field]
    else:
        h[name][field] = value
    return with_crc(dump(h), DATA)


DELETE = object()


def with_tree(tree):
    h = json.loads(json.dumps(HEADER))
    h["__metadata__"]["ampy.tree"] = tree if isinstance(tree, str) else json.dumps(tree)
    return with_crc(dump(h), DATA)


# ------------------------------------------------------------------ the cases
def entry_cases():
    for name in NAMES:
        e = HEADER[name]
        begin, end = e["data_offsets"]
        dt = e["dtype"]
        bad_dtypes = [DELETE, 5, None, [dt], {"d": dt}, True, dt.lower(), "", "F8_E4M3", "U64",
                      "C64", dt + " ", "\u0000", "F" * 10000]
        if end > begin:  # another valid dtype of another size: the sizes disagree
            bad_dtypes.append(next(d for d in SIZES if SIZES[d] != SIZES[dt]))
        for v in bad_dtypes:
            yield f"{name}.dtype={str(v)[:20]!r}", edited(name, "dtype", v), name
        shape = e["shape"]
        bad_shapes = [DELETE, None, "2", 3, {}, [2.0], [True], [-1], [-2 ** 63], [2 ** 63],
                      [2 ** 64], [2 ** 62, 2 ** 62, 0], [2 ** 70, 0], [0, 2 ** 70],
                      [2 ** 31, 2 ** 31], [2 ** 62, 4], [1] * 17, [1] * 64, [[2]], ["2"],
                      [None], [1e300], [float("nan")], [10 ** 1000, 0], [1] * 100000]
        if 0 not in shape:  # a shape of another size (a 0-size one may change freely)
            bad_shapes += [[0] + shape, shape + [2]]
        else:
            bad_shapes.append([1 if s == 0 else s for s in shape])
        for v in bad_shapes:
            yield f"{name}.shape={str(v)[:20]}", edited(name, "shape", v), name
        bad_offsets = [DELETE, None, "0,4", [begin], [begin, end, end], [str(begin), str(end)],
                       [float(begin), float(end)], [True, end], [-8, end - 8],
                       [begin + 1, end + 1], [begin, 2 ** 64], [2 ** 64, 2 ** 64 + end - begin],
                       [begin, len(DATA) + 8], [-(2 ** 63), end]]
        if end > begin:  # (a 0-size tensor may sit at any tensor boundary)
            bad_offsets += [[end, begin], [begin - 1, end - 1] if begin else [1, end + 1],
                            [0, end - begin] if begin else [1, end + 1]]
        for v in bad_offsets:
            yield f"{name}.data_offsets={str(v)[:20]}", edited(name, "data_offsets", v), name
        for v in (None, [], "x", 5, {**e, "extra": 1}, {"dtype": dt}, {}):
            yield f"{name}=entry {str(v)[:20]}", edited(name, None, v), name


def header_cases():
    text = dump(HEADER)
    meta = HEADER["__metadata__"]
    for v in ("[]", '"x"', "5", "null", "true"):
        yield f"header={v}", with_crc(v, DATA), "header"
    for m in ([], {"ampy.format": 1, "ampy.tree": meta["ampy.tree"], "ampy.crc32": "--------"},
              {"ampy.format": "1", "ampy.crc32": "--------"},
              {"ampy.tree": meta["ampy.tree"], "ampy.crc32": "--------"},
              {"ampy.format": "2", "ampy.tree": meta["ampy.tree"], "ampy.crc32": "--------"},
              {"ampy.format": "1", "ampy.tree": meta["ampy.tree"]}):
        h = {**HEADER, "__metadata__": m}
        yield f"metadata={sorted(m) if isinstance(m, dict) else m}", with_crc(dump(h), DATA), \
            "format" if m and m.get("ampy.format") == "2" else "metadata"
    for v in ('["x"]', '"XYZ"', '"0000000g"', '"0123456789"', "null"):
        t = text.replace(PLACEHOLDER, '"ampy.crc32":' + v)
        yield f"crc field {v}", with_crc(t, DATA), "metadata"
    h = {**HEADER, "__metadata__": {**meta, "ampy.crc32": "--------", "x": 5}}
    yield "metadata value not str", with_crc(dump(h), DATA), "metadata"
    # raw-text edits the JSON module would not write
    first = NAMES[0]
    entry = json.dumps(HEADER[first], separators=(",", ":"))
    dup = text.replace("{", "{" + json.dumps(first) + ":" + entry + ",", 1)
    yield "duplicate tensor key", with_crc(dup, DATA), first
    dup_field = text.replace('"dtype":', '"dtype":"F32","dtype":', 1)
    yield "duplicate dtype field", with_crc(dup_field, DATA), "dtype"
    for k, junk in enumerate(("x", " x", "}", ",", "\x00")):
        yield f"trailing junk {k}", with_crc(text + junk, DATA), "header"
    yield "deep nesting", with_crc(text.replace('"shape":', '"shape":' + "[" * 100000, 1),
                                   DATA), "header"
    yield "deep nesting closed", with_crc(
        text.replace('"shape":[2,3]', '"shape":' + "[" * 50000 + "]" * 50000, 1), DATA), "header"
    yield "5000-digit number", with_crc(
        text.replace('"shape":[2,3]', '"shape":[' + "9" * 5000 + "]", 1), DATA), "header"
    yield "1e400", with_crc(text.replace('"shape":[2,3]', '"shape":[1e400,3]', 1), DATA), "'w'"
    yield "NaN literal", with_crc(text.replace('"shape":[2,3]', '"shape":[NaN,3]', 1), DATA), "'w'"
    yield "Infinity offset", with_crc(text.replace('"data_offsets":[0,24]',
                                                   '"data_offsets":[0,Infinity]', 1), DATA), "'w'"
    yield "bad utf-8", with_crc(text.encode().replace(b'"w"', b'"\xff"', 1), DATA), "UTF-8"
    yield "utf-8 bom", with_crc(b"\xef\xbb\xbf" + text.encode(), DATA), "header"
    yield "leading space", with_crc(" " + text, DATA), "header"
    yield "lone surrogate", with_crc(text.replace('"w"', '"\ud800"', 1), DATA), "header"


def length_cases():
    n = len(dump(HEADER))
    body = GOOD[8:]
    for v in (0, 1, 2, 7, n - 1, n + 1, n + 8, len(body), len(body) + 1, 100 * 1000 * 1000 + 1,
              2 ** 63, 2 ** 64 - 1):
        yield f"length prefix {v}", struct.pack("<Q", v) + body, "header"


def tree_cases():
    tree = json.loads(HEADER["__metadata__"]["ampy.tree"])

    def with_node(name, node):
        t = json.loads(json.dumps(tree))
        for item in t["D"]:
            if item[0] == name:
                item[1] = node
        return with_tree(t)

    for name, node in (("w", {"T": "zz"}), ("w", {"T": 5}), ("w", {"T": None}),
                       ("w", {"T": "w", "x": 1}), ("w", {"T": "w", "g": 2}),
                       ("w", {"T": "w", "g": "1"}), ("w", {"T": "w", "g": [1]}),
                       ("w", {"T": "w", "p": "yes"}), ("w", {"T": "w", "d": 5}),
                       ("w", {"T": "w", "d": "tpu"}), ("w", {"T": "w", "d": "cuda:x"}),
                       ("w", {"T": "w", "d": "cuda:-1"}), ("w", {"T": "w", "d": "CPU"}),
                       ("w", {"T": "w", "d": "cuda:0" * 1000}),
                       ("i", {"T": "i", "g": 1}), ("b", {"T": "b", "g": 1}),
                       ("i", {"T": "i", "g": 1, "p": 1}), ("b", {"T": "b", "g": True})):
        key = node["T"] if isinstance(node["T"], str) else "tensor node"
        yield f"tree {name}={str(node)[:30]}", with_node(name, node), key
    for node in ({"D": [[1]]}, {"D": [1]}, {"D": "x"}, {"D": [[{"L": []}, 1]]},
                 {"D": [[{"T": "w"}, 1]]}, {"Z": 1}, {"F": 5}, {"F": "abc"}, {"F": "nan:zz"},
                 {"L": 5}, {}, 1.5, {"D": [], "L": []}, {"U": {"a": 1}}, [1, 2]):
        yield f"tree node {str(node)[:30]}", with_tree({"D": [["k", node]]}), "object tree"
    for text in ("{", "", "[" * 100000, '{"L":' * 5000 + "1" + "}" * 5000,
                 '{"D":[],"D":[]}', "nan", "\x00"):
        yield f"tree text {text[:12]!r}", with_tree(text), "object tree"


def truncation_cases():
    for k in range(len(GOOD)):
        yield f"truncated to {k}", GOOD[:k], "truncated"
    for junk in (b"\x00", b"\x00" * 7, b"\x00" * 8, b"x" * 1000):
        yield f"{len(junk)} bytes appended", GOOD + junk, "extra bytes"


FAMILIES = {"entry": entry_cases, "header": header_cases, "length": length_cases,
            "tree": tree_cases, "truncation": truncation_cases}


def all_cases():
    return [(fam, *case) for fam, gen in FAMILIES.items() for case in gen()]


# ------------------------------------------------------------------ the tests
def load_bytes(blob):
    return ampy.load(io.BytesIO(blob))


def test_base_file_loads():
    out = load_bytes(GOOD)
    assert out["w"].requires_grad and out["i"].tolist() == [0, 1, 2, 3]
    assert load_bytes(with_crc(dump(HEADER), DATA))["n"] == [1, 2.5, "x", None, (3,)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_crafted_file_raises_checkpoint_error_naming_the_key(family):
    failures = []
    cases = list(FAMILIES[family]())
    assert cases
    tracemalloc.start()
    try:
        for label, blob, key in cases:
            try:
                load_bytes(blob)
            except CheckpointError as e:
                msg = str(e)
                want = key if key.startswith("'") or key in (
                    "header", "metadata", "object tree", "truncated", "extra bytes", "UTF-8",
                    "tensor node", "dtype", "format") else repr(key)
                ok = want in msg or (key == "header" and "header" in msg.lower()) or (
                    key == "metadata" and ("metadata" in msg or "checksum" in msg))
                if not ok:
                    failures.append(f"{label}: message does not name {want}: {msg[:200]}")
            except BaseException as e:  # noqa: BLE001 (any other exception is the bug)
                failures.append(f"{label}: {type(e).__name__}: {str(e)[:200]}")
            else:
                failures.append(f"{label}: loaded without an error")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not failures, f"{len(failures)}/{len(cases)} cases:\n" + "\n".join(failures[:40])
    assert peak < 64 << 20, f"peak allocation {peak} bytes while loading {len(cases)} tiny files"


def test_case_count():
    """The suite's size (reported to the lead); a floor so cases are not lost."""
    assert len(all_cases()) >= 900


# the issue's own examples, one test each
@pytest.mark.parametrize("shape", [[2 ** 62, 2 ** 62, 0], [2 ** 70, 0], [1] * 17, [-1, 3],
                                   [2.0, 3], ["2", 3]])
def test_issue_shapes(shape):
    with pytest.raises(CheckpointError, match="tensor 'w'.*shape"):
        load_bytes(edited("w", "shape", shape))


@pytest.mark.parametrize("name", ["i", "b"])
def test_integer_tensor_marked_requiring_grad(name):
    tree = json.loads(HEADER["__metadata__"]["ampy.tree"])
    for item in tree["D"]:
        if item[0] == name:
            item[1]["g"] = 1
    with pytest.raises(CheckpointError, match=f"tensor '{name}' requires grad"):
        load_bytes(with_tree(tree))


def test_from_a_path_too(tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(edited("w", "shape", [2 ** 62, 2 ** 62, 0]))
    with pytest.raises(CheckpointError, match="bad.safetensors.*tensor 'w'"):
        ampy.load(str(p))
