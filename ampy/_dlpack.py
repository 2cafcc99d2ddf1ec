"""DLPack interop (zero copy both ways), for CPU and CUDA tensors.

``Tensor.__dlpack__`` / ``Tensor.__dlpack_device__`` follow the Python array
API standard (DLPack 1.0 capsules when the consumer passes ``max_version``,
legacy ones otherwise), and ``ampy.from_dlpack(x)`` takes any object with
``__dlpack__`` (torch, NumPy, CuPy, JAX) or a raw capsule. The C side is
csrc/py/dlpack_py.c. The Tensor methods are set on the class by
ampy/_methods.py.

Streams (CUDA): ampy runs its work on one stream per device. On export, a
consumer that names a stream gets ampy's pending work finished first (a
synchronise: simple and always correct); on import, ampy passes its own
stream so the producer orders its work before ampy's.
"""
from . import _C
from . import _devices

__all__ = ["from_dlpack"]

_KDLCPU, _KDLCUDA = _C.DLPACK_CPU, _C.DLPACK_CUDA


def _dlpack_device(self):
    i = self._device_index
    return (_KDLCUDA, i) if i >= 0 else (_KDLCPU, 0)


def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    if self.requires_grad:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
    t = self
    if dl_device is not None and tuple(dl_device) != _dlpack_device(self):
        if copy is False:
            raise BufferError("__dlpack__: exporting to another device needs a copy")
        kind, idx = dl_device
        if kind == _KDLCPU:
            t = t.cpu()
        elif kind == _KDLCUDA:
            t = t.to(f"cuda:{idx}")
        else:
            raise BufferError(f"__dlpack__: unsupported dl_device {dl_device!r}")
    elif copy:
        t = t.clone()
    if t.is_cuda and stream is not None and stream != -1:
        _devices.cuda().synchronize(t._device_index)
    versioned = max_version is not None and tuple(max_version)[0] >= 1
    return _C._to_dlpack(t.detach(), versioned)


def from_dlpack(ext_tensor):
    """A tensor sharing the memory of ``ext_tensor`` (an object with
    ``__dlpack__``, or a DLPack capsule), like ``torch.from_dlpack``."""
    if type(ext_tensor).__name__ == "PyCapsule":
        return _C._from_dlpack(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, "
                        f"not {type(ext_tensor).__name__}")
    kind, idx = ext_tensor.__dlpack_device__()
    kwargs = {}
    if int(kind) == _KDLCUDA:
        kwargs["stream"] = _devices.cuda()._stream_handle(int(idx))
    try:
        cap = ext_tensor.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:  # a producer that predates DLPack 1.0's keywords
        cap = ext_tensor.__dlpack__(**kwargs)
    return _C._from_dlpack(cap)


_TYPESTR = {"float32": "<f4", "float16": "<f2", "float64": "<f8", "int64": "<i8",
            "int32": "<i4", "uint8": "|u1", "bool": "|b1"}


def _cuda_array_interface(self):
    """__cuda_array_interface__ v3 (Numba/CuPy), CUDA tensors only; `stream`
    is ampy's stream for the device, which consumers synchronise with."""
    if self._device_index < 0:
        raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type: "
                             f"{self.dtype} (use __array_interface__ / numpy())")
    if self.requires_grad:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. "
                           "If gradients aren't required, use var.detach() to get Variable that "
                           "doesn't require grad.")
    typestr = _TYPESTR.get(self.dtype.name)
    if typestr is None:
        raise TypeError(f"dtype {self.dtype} has no __cuda_array_interface__ type string")
    isz = self.element_size()
    strides = None if self.is_contiguous() else tuple(s * isz for s in self.stride())
    return {"shape": tuple(self.shape), "typestr": typestr,
            "data": (self.data_ptr() if self.numel() else 0, self._readonly), "version": 3,
            "strides": strides,
            "stream": _devices.cuda()._stream_handle(self._device_index)}
