"""default_collate / default_convert: torch.utils.data's rules for turning
a list of samples into a batch. Tensors are stacked on a new first
dimension; numpy arrays become tensors and are stacked; Python floats a
float64 tensor, ints an int64 tensor (bools a bool tensor); strings and
bytes stay a list; dicts, namedtuples and sequences are collated field by
field (a tuple or list of fields gives a list, as torch)."""
import collections.abc

import numpy as np

from ... import _creation as C, _dtype as D
from ..._convert import as_tensor
from ..._math_reduce import stack
from ..._tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")


def _numpy_ok(a):
    return a.dtype.kind not in "SaUO"


def default_collate(batch):
    """Collate a list of samples into a batch (see the module docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray) or isinstance(elem, np.generic) and \
            not isinstance(elem, (np.str_, np.bytes_)):
        if isinstance(elem, np.ndarray) and not _numpy_ok(elem):
            raise TypeError(_ERR.format(elem.dtype))
        if isinstance(elem, np.ndarray) and elem.ndim > 0:
            return stack([as_tensor(np.ascontiguousarray(b)) for b in batch], 0)
        return as_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return C.tensor(list(batch), dtype=D.bool)
    if isinstance(elem, float):
        return C.tensor(list(batch), dtype=D.float64)
    if isinstance(elem, int):
        return C.tensor(list(batch), dtype=D.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        size = len(next(it))
        if not all(len(e) == size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(_ERR.format(type(elem)))


def default_convert(data):
    """batch_size=None: numpy arrays (and numpy numbers) become tensors,
    containers are converted element by element, everything else is kept."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return as_tensor(data) if _numpy_ok(data) else data
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return type(data)([default_convert(d) for d in data])
    return data
