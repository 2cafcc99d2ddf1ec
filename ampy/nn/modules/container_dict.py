"""ModuleDict, ParameterList and ParameterDict: containers whose entries are
registered on the container, so that parameters() / state_dict() name them
as torch does ("transformer.h.0.attn.weight" for a ModuleDict holding a
ModuleList, "params.0" for a ParameterList entry, "params.key" for a
ParameterDict entry)."""
from collections import OrderedDict
from collections.abc import Iterable, Mapping
import operator

from ..._tensor import Tensor
from ..parameter import Parameter
from .module import Module

__all__ = ["ModuleDict", "ParameterList", "ParameterDict"]


def _pairs(values, kind, update_name, sort_plain=False):
    """(key, value) pairs of a mapping or an iterable of pairs, with torch's
    messages for anything else. ParameterDict sorts the keys of a plain
    (unordered) mapping, as torch's does."""
    if not isinstance(values, Iterable):
        raise TypeError(f"{update_name}.update should be called with an iterable of key/value "
                        f"pairs, but got {type(values).__name__}")
    if isinstance(values, (OrderedDict, ModuleDict, ParameterDict)):
        return list(values.items())
    if isinstance(values, Mapping):
        return sorted(values.items()) if sort_plain else list(values.items())
    out = []
    for j, p in enumerate(values):
        if not isinstance(p, Iterable):
            raise TypeError(f"{kind} update sequence element #{j} should be Iterable; is"
                            f"{type(p).__name__}")
        p = tuple(p)
        if len(p) != 2:
            raise ValueError(f"{kind} update sequence element #{j} has length {len(p)}; 2 is "
                             f"required")
        out.append(p)
    return out


class ModuleDict(Module):
    """An ordered dict of Modules, each registered under its key."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, module in _pairs(modules, "ModuleDict", "ModuleDict"):
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict is not callable: index it by key")


def _as_param(value):
    """A plain Tensor becomes a Parameter, as torch's containers do."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _entry_repr(k, p):
    if isinstance(p, Tensor):
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        size = "x".join(str(s) for s in p.shape)
        dev = "" if p.device.type == "cpu" else f" ({p.device})"
        return f"({k}): {kind} containing: [{p.dtype} of size {size}{dev}]"
    return f"({k}): Object of type: {type(p).__name__}"


class ParameterList(Module):
    """A list of Parameters, registered under "0", "1", ... (Tensors are
    wrapped as Parameters; other objects are kept as plain attributes)."""

    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self += values

    def _key(self, idx):
        idx = operator.index(idx)
        if not -self._size <= idx < self._size:
            raise IndexError(f"index {idx} is out of range")
        return str(idx % self._size)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        return getattr(self, self._key(idx))

    def __setitem__(self, idx, param):
        setattr(self, self._key(idx), _as_param(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        key = str(self._size)
        object.__setattr__(self, "_size", self._size + 1)
        setattr(self, key, _as_param(value))
        return self

    def extend(self, values):
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(i, p) for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of Parameters, registered under their (string) keys."""

    def __init__(self, parameters=None):
        super().__init__()
        object.__setattr__(self, "_keys", OrderedDict())
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be str, not {type(key).__name__}")
        self._keys[key] = None
        setattr(self, key, _as_param(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k = next(reversed(self._keys))
        return k, self.pop(k)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        for key, value in _pairs(parameters, "ParameterDict", "ParametersDict", True):
            self[key] = value

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
