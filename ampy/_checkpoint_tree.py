"""The object tree of an ampy checkpoint: everything in a saved object that is
not a tensor's bytes.

``_Writer`` walks the object given to ``ampy.save``: it collects each tensor
once (by identity, so shared tensors stay shared) under a readable name from
its place ("fc1.weight", "state.0.exp_avg") and turns the nesting into a JSON
tree of tagged nodes:

    None, bool, int, str     themselves
    float                    {"F": repr, or "nan:<8 bytes hex>" to keep a NaN's bits}
    dict / OrderedDict       {"D" / "O": [[key, value], ...]}
    list / tuple             {"L" / "U": [values]}
    tensor                   {"T": name, "g": 1 if it requires grad, "p": 1 if a
                             Parameter, "d": device if not the CPU}

``_Reader`` rebuilds the object from that tree and the loaded tensors,
rejecting any node it does not know; ``bad(msg)`` makes the exception it
raises (serialization.py's CheckpointError naming the file).
"""
import math
import re
import struct
from collections import OrderedDict

from ._tensor import Tensor
from .nn.parameter import Parameter


class _Writer:
    """Walks the object: collects the tensors (each once) and builds the tree."""

    def __init__(self):
        self.tensors = []        # (name, tensor)
        self.by_id = {}          # id(tensor) -> name
        self.names = set()
        self.keep = []           # keeps ids valid while walking

    def _name(self, path):
        base = ".".join(str(p) for p in path) if path else "tensor"
        name, n = base, 1
        while name in self.names or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        self.names.add(name)
        return name

    def node(self, obj, path):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return {"F": _float_str(float(obj))}
        if isinstance(obj, Tensor):
            return self._tensor(obj, path)
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if not (k is None or isinstance(k, (bool, int, float, str))):
                    raise TypeError(f"ampy.save: argument 'obj': dict keys must be str, int, "
                                    f"float, bool or None; got a {type(k).__name__} key at "
                                    f"{_where(path)}")
                items.append([self.node(k, path), self.node(v, path + [k])])
            return {"O" if isinstance(obj, OrderedDict) else "D": items}
        if isinstance(obj, (list, tuple)):
            vals = [self.node(v, path + [i]) for i, v in enumerate(obj)]
            return {"U" if isinstance(obj, tuple) else "L": vals}
        raise TypeError(f"ampy.save: argument 'obj': cannot save an object of type "
                        f"{type(obj).__module__}.{type(obj).__qualname__} at {_where(path)}; "
                        f"supported: ampy.Tensor and dict/list/tuple of tensors, int, float, "
                        f"bool, str, None")

    def _tensor(self, t, path):
        key = id(t)
        if key in self.by_id:
            name = self.by_id[key]
        else:
            name = self._name(path)
            self.by_id[key] = name
            self.keep.append(t)
            self.tensors.append((name, t))
        out = {"T": name}
        if t.requires_grad:
            out["g"] = 1
        if isinstance(t, Parameter):
            out["p"] = 1
        if t.is_cuda:
            out["d"] = str(t.device)
        return out


def _where(path):
    return "obj" + "".join(f"[{p!r}]" for p in path)


def _float_str(x):
    if math.isnan(x):
        return "nan:" + struct.pack("<d", x).hex()
    return repr(x)


_DEVICE_RE = re.compile(r"(cpu|cuda)(:(0|[1-9][0-9]{0,8}))?")


def _is_device(dev):
    return isinstance(dev, str) and _DEVICE_RE.fullmatch(dev) is not None


class _Reader:
    def __init__(self, tensors, place, bad):
        self.tensors, self.place, self.bad = tensors, place, bad
        self.made = {}

    def node(self, n):
        if n is None or isinstance(n, (bool, int, str)):
            return n
        if isinstance(n, dict) and len(n) >= 1:
            if "T" in n:
                return self._tensor(n)
            if len(n) == 1:
                (tag, v), = n.items()
                if tag == "F" and isinstance(v, str):
                    return self._float(v)
                if tag in ("L", "U") and isinstance(v, list):
                    vals = [self.node(x) for x in v]
                    return vals if tag == "L" else tuple(vals)
                if tag in ("D", "O") and isinstance(v, list):
                    out = OrderedDict() if tag == "O" else {}
                    for item in v:
                        if not (isinstance(item, list) and len(item) == 2):
                            raise self.bad("object tree: malformed dict item")
                        k = self.node(item[0])
                        if not (k is None or isinstance(k, (bool, int, float, str))):
                            raise self.bad("object tree: unhashable dict key")
                        out[k] = self.node(item[1])
                    return out
        raise self.bad(f"object tree: unknown node {str(n)[:80]!r}")

    def _float(self, s):
        if s.startswith("nan:"):
            try:
                return struct.unpack("<d", bytes.fromhex(s[4:]))[0]
            except (ValueError, struct.error):
                raise self.bad(f"object tree: bad float {s!r}") from None
        try:
            return float(s)
        except ValueError:
            raise self.bad(f"object tree: bad float {s!r}") from None

    def _tensor(self, n):
        name = n["T"]
        extra = set(n) - {"T", "g", "p", "d"}
        if not isinstance(name, str) or extra:
            raise self.bad(f"object tree: malformed tensor node {str(n)[:80]!r}")
        if name in self.made:
            return self.made[name]
        if name not in self.tensors:
            raise self.bad(f"object tree refers to tensor {name!r}, which the file lacks")
        dev = n.get("d")
        if dev is not None and not _is_device(dev):
            raise self.bad(f"object tree: tensor {name!r} has a malformed device "
                                 f"{str(dev)[:40]!r}")
        grad, param = n.get("g", 0), n.get("p", 0)
        if grad not in (0, 1) or param not in (0, 1):  # (True/False are 1/0)
            raise self.bad(f"object tree: tensor {name!r} has malformed flags "
                                 f"{str(n)[:80]}")
        t = self.tensors[name]
        if grad and not t.dtype.is_floating_point:
            raise self.bad(f"object tree: tensor {name!r} requires grad but has dtype "
                                 f"{t.dtype} (only floating point tensors can require "
                                 f"gradients)")
        t = self.place(t, dev)
        if param:
            t = Parameter(t, requires_grad=bool(grad))
        elif grad:
            t.requires_grad_(True)
        self.made[name] = t
        return t
