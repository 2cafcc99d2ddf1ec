"""ampy.Tensor: the Python face of _C.TensorBase.

This file holds the core of the class: attributes, conversions, views and
indexing, and the op declarations of the views, casts and copies. The other
methods and operators (math, GEMM, creation, autograd, DLPack) are set on
the class in one place, ampy/_methods.py; they all go through the op table
in ampy/_dispatch.py.
"""
import numpy as np

from . import _C
from . import _dtype as D
from . import _devices, _indexing, _views
from ._convert import as_tensor_like, from_numpy, tensor
from ._devices import device
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._format import format_tensor
from ._shape import contiguous_strides, numel, wrap_dim

__all__ = ["Tensor", "Size", "device"]


class Size(tuple):
    """torch.Size: a tuple of ints with a torch-style repr."""

    __slots__ = ()

    def __repr__(self):
        return f"ampy.Size({list(self)})"

    def numel(self):
        return numel(self)


_CPU = device("cpu")


def _parse_to_args(args, kwargs):
    """Tensor.to(dtype) / to(device) / to(device, dtype) / to(other) / to(..., dtype=)."""
    dev = kwargs.pop("device", None)
    dt = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, (str, device)) and (isinstance(a, device) or
                                               a.split(":")[0] in ("cpu", "cuda")):
            dev = a
        elif a is not None:
            dt = D.to_dtype(a)
    return (device(dev) if dev is not None else None), (D.to_dtype(dt) if dt is not None else None)


class Tensor(_C.TensorBase):
    """A strided n-d array of float32/float16/bfloat16/float64/int64/int32/uint8/bool."""

    __array_priority__ = 1000
    __array_ufunc__ = None  # NumPy defers to our operators (x + ndarray stays a Tensor)

    # autograd's per-tensor extras, set on the instance only when used; class
    # defaults make reading them as cheap as a plain attribute (recording reads
    # them for every input)
    _output_nr = 0               # which output of grad_fn this tensor is
    _grad_accumulator = None     # weakref to the leaf's AccumulateGrad node
    _is_view_of_grad = False     # a view (made under recording) of a tensor needing grad
    _backward_hooks = None       # leaf hooks (register_hook)
    _post_accumulate_hooks = None

    # ---------------------------------------------------------------- basics
    @property
    def device(self):
        i = self._device_index
        return _CPU if i < 0 else device("cuda", i)

    @property
    def is_cuda(self):
        return self._device_index >= 0

    @property
    def is_cpu(self):
        return self._device_index < 0

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        if not isinstance(requires_grad, bool):
            raise TypeError("requires_grad must be a bool")
        if requires_grad and not (self.dtype.is_floating_point):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you "
                               "want to use a computed variable in a subgraph that doesn't "
                               "require differentiation use var_no_grad = var.detach().")
        self._requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, g):
        if g is not None:
            if not isinstance(g, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of "
                                f"type {type(g).__name__}")
            if tuple(g.shape) != tuple(self.shape):
                raise RuntimeError(f"assigned grad has data of a different size: "
                                   f"{list(g.shape)} vs {list(self.shape)}")
            if g.dtype is not self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._grad = g

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, other):
        raise RuntimeError("ampy does not support assigning Tensor.data; use copy_() under "
                           "ampy.no_grad()")

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self):
        return id(self)

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous"
                               if self.numel() > 1 else
                               "Boolean value of Tensor with no values is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __reduce_ex__(self, proto):
        return (_rebuild, (self.detach().numpy().copy(), self.dtype.name, self.requires_grad))

    def __repr__(self):
        return format_tensor(self)

    __str__ = __repr__

    # ---------------------------------------------------------- NumPy bridge
    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        if self.is_cuda:
            if not force:
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use "
                                "Tensor.cpu() to copy the tensor to host memory first.")
            return self.cpu().numpy()
        return self._numpy()

    def __array__(self, dtype=None, copy=None):
        a = self.detach().numpy(force=True)
        if dtype is not None and np.dtype(dtype) != a.dtype:
            if copy is False:
                raise ValueError("converting to another dtype needs a copy")
            return a.astype(dtype)
        if copy:
            return a.copy()
        return a

    def tolist(self):
        t = self.detach()
        if t.dtype in (D.float16, D.bfloat16):
            t = _C.cast(t, D.float32)
        if t.is_cuda:
            t = t.cpu()
        return t._numpy().tolist()

    # ---------------------------------------------------------- conversions
    def to(self, *args, **kwargs):
        dev, dt = _parse_to_args(args, dict(kwargs))
        out = self
        if dt is not None and dt is not self.dtype:
            out = dispatch(_TO_DTYPE, out, dt)
        if dev is not None and dev != out.device and not (dev.type == "cuda" and dev.index is None
                                                         and out.is_cuda):
            if dev.type == "cuda" and not out.is_cuda:
                cuda = _devices.cuda()
                if not cuda.is_available():  # raised here: a short traceback
                    raise cuda._unavailable() from None
            out = dispatch(_TO_DEVICE, out, dev)
        return out

    def type(self, dtype=None):
        if dtype is None:
            return f"ampy.{self.dtype.name}"
        return self.to(D.to_dtype(dtype))

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def float(self):
        return self.to(D.float32)

    def double(self):
        return self.to(D.float64)

    def long(self):
        return self.to(D.int64)

    def int(self):
        return self.to(D.int32)

    def byte(self):
        return self.to(D.uint8)

    def bool(self):
        return self.to(D.bool)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else (device if isinstance(device, (str, type(
            _CPU))) else f"cuda:{device}"))

    def clone(self):
        return dispatch(_CLONE, self)

    def contiguous(self):
        return self if self.is_contiguous() else dispatch(_CLONE, self)

    def detach(self):
        return self._alias()

    def detach_(self):
        if self.grad_fn is not None:
            self.grad_fn = None
        self._requires_grad = False
        return self

    def copy_(self, src, non_blocking=False):
        return dispatch(_COPY_, self, as_tensor_like(src, self))

    def new_tensor(self, data, dtype=None):
        return tensor(data, dtype=dtype or self.dtype)

    def zero_(self):
        return self.fill_(0)

    # ------------------------------------------------------------------ views
    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (D.dtype, str)) and not isinstance(
                shape[0], int):
            raise NotImplementedError("view(dtype) is not supported")
        return dispatch(_VIEW, self, shape)

    def view_as(self, other):
        return self.view(*other.shape)

    def reshape(self, *shape):
        return dispatch(_RESHAPE, self, shape)

    def reshape_as(self, other):
        return self.reshape(*other.shape)

    def transpose(self, dim0, dim1):
        return dispatch(_TRANSPOSE, self, dim0, dim1)

    swapaxes = swapdims = transpose

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1)) if self.ndim > 1 else self

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def permute(self, *dims):
        return dispatch(_PERMUTE, self, dims)

    def unsqueeze(self, dim):
        return dispatch(_UNSQUEEZE, self, dim)

    def squeeze(self, dim=None):
        return dispatch(_SQUEEZE, self, dim)

    def expand(self, *sizes):
        return dispatch(_EXPAND, self, sizes)

    def expand_as(self, other):
        return self.expand(*other.shape)

    def flatten(self, start_dim=0, end_dim=-1):
        return dispatch(_FLATTEN, self, start_dim, end_dim)

    def unflatten(self, dim, sizes):
        dim = wrap_dim(dim, self.ndim)
        shape = list(self.shape)
        return self.reshape(*(shape[:dim] + list(sizes) + shape[dim + 1:]))

    def narrow(self, dim, start, length):
        return dispatch(_NARROW, self, dim, start, length)

    def select(self, dim, index):
        return dispatch(_SELECT, self, dim, index)

    def unbind(self, dim=0):
        return tuple(self.select(dim, i) for i in range(self.shape[wrap_dim(dim,
                                                                                    self.ndim)]))

    def split(self, split_size, dim=0):
        dim = wrap_dim(dim, self.ndim)
        n = self.shape[dim]
        if isinstance(split_size, int):
            if split_size <= 0 and n > 0:
                raise RuntimeError("split expects split_size be non-negative")
            sizes = [min(split_size, n - i) for i in range(0, n, split_size)] if n else [0]
        else:
            sizes = list(split_size)
            if sum(sizes) != n:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                                   f"(input tensor's size at dimension {dim}), but got "
                                   f"split_sizes={sizes}")
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(dim, start, s))
            start += s
        return tuple(out)

    def chunk(self, chunks, dim=0):
        n = self.shape[wrap_dim(dim, self.ndim)]
        size = -(-n // chunks) if n else 1
        return self.split(max(size, 1), dim)

    def as_strided(self, size, stride, storage_offset=None):
        return _views.as_strided(self, size, stride, storage_offset)

    # --------------------------------------------------------------- indexing
    def __getitem__(self, key):
        return dispatch(_GETITEM, self, key)

    def __setitem__(self, key, value):
        dispatch(_SETITEM, self, key, value)


def _rebuild(arr, dtype_name, requires_grad):
    t = from_numpy(arr.view(D._ALIASES[dtype_name]._np))
    if requires_grad:
        t.requires_grad_(True)
    return t


# ---- the forwards of the ops below -------------------------------------------
def _fwd_to_dtype(x, dt):
    return _C.cast(x, dt)


def _fwd_to_device(x, dev):
    return _devices.cuda()._to_device(x, dev)


def _fwd_clone(x):
    return _C.cast(x, x.dtype)


def _fwd_copy_(dst, src):
    _C.copy_(dst, src)
    return dst


def _fwd_getitem(x, key):
    # fast paths, same views as _indexing.getitem: x[i] and x[a:b(:s)] on dim 0
    c = key.__class__
    if c is int and x.ndim:
        shape = x.shape
        n = shape[0]
        if -n <= key < n:
            st = x.stride()
            return x._view(shape[1:], st[1:], (key + n if key < 0 else key) * st[0])
    elif (c is slice and x.ndim and key.start.__class__ in _INT_OR_NONE and
          key.stop.__class__ in _INT_OR_NONE and
          (key.step is None or (key.step.__class__ is int and key.step > 0))):
        shape = x.shape
        start, stop, step = key.indices(shape[0])
        n = max(0, (stop - start + step - 1) // step)
        st = x.stride()
        return x._view((n,) + shape[1:], (st[0] * step,) + st[1:], start * st[0] if n else 0)
    return _indexing.getitem(x, key)[0]


_INT_OR_NONE = (int, type(None))


def _fwd_reshape(x, shape):
    # fast path, the view _views.reshape makes: a contiguous, non-empty tensor
    # to a shape of ints > 1 (size-1 dims take computeStride's strides there)
    n = x.numel()
    if n and x.is_contiguous():
        prod = 1
        for s in shape:
            if s.__class__ is not int or s < 2:
                break
            prod *= s
        else:
            if prod == n:
                return x._view(shape, contiguous_strides(shape), 0)
    return _views.reshape(x, *shape)


def _fwd_setitem(x, key, value):
    _indexing.setitem(x, key, value)
    return x


# The ops of this file: views (metadata only), casts and copies, which _C
# runs on the tensor's own device; each is exposed as the Tensor methods named.
_DEV = CPU_CUDA
defop("to_dtype", devices=_DEV, names=(
    "Tensor.to", "Tensor.type", "Tensor.half", "Tensor.bfloat16", "Tensor.float",
    "Tensor.double", "Tensor.long", "Tensor.int", "Tensor.byte", "Tensor.bool"))(_fwd_to_dtype)
defop("to_device", devices=_DEV, names=("Tensor.to", "Tensor.cpu", "Tensor.cuda"))(
    _fwd_to_device)
defop("clone", devices=_DEV, names=("Tensor.clone", "Tensor.contiguous"))(_fwd_clone)
defop("copy_", devices=_DEV, names=("Tensor.copy_",))(_fwd_copy_)
defop("view", devices=_DEV, names=("Tensor.view",))(lambda x, shape: _views.view(x, *shape))
defop("reshape", devices=_DEV, names=("Tensor.reshape",))(_fwd_reshape)
defop("transpose", devices=_DEV, names=("Tensor.transpose",))(_views.transpose)
defop("permute", devices=_DEV, names=("Tensor.permute",))(
    lambda x, dims: _views.permute(x, *dims))
defop("unsqueeze", devices=_DEV, names=("Tensor.unsqueeze",))(_views.unsqueeze)
defop("squeeze", devices=_DEV, names=("Tensor.squeeze",))(_views.squeeze)
defop("expand", devices=_DEV, names=("Tensor.expand",))(
    lambda x, sizes: _views.expand(x, *sizes))
defop("flatten", devices=_DEV, names=("Tensor.flatten",))(_views.flatten)
defop("narrow", devices=_DEV, names=("Tensor.narrow",))(_views.narrow)
defop("select", devices=_DEV, names=("Tensor.select",))(_views.select)
defop("getitem", devices=_DEV, names=("Tensor.__getitem__",))(_fwd_getitem)
defop("setitem", devices=_DEV, names=("Tensor.__setitem__",))(_fwd_setitem)

_TO_DTYPE, _TO_DEVICE, _CLONE, _COPY_ = (get_op(n) for n in ("to_dtype", "to_device", "clone",
                                                              "copy_"))
_VIEW, _RESHAPE, _TRANSPOSE, _PERMUTE = (get_op(n) for n in ("view", "reshape", "transpose",
                                                              "permute"))
_UNSQUEEZE, _SQUEEZE, _EXPAND, _FLATTEN = (get_op(n) for n in ("unsqueeze", "squeeze", "expand",
                                                                "flatten"))
_NARROW, _SELECT, _GETITEM, _SETITEM = (get_op(n) for n in ("narrow", "select", "getitem",
                                                             "setitem"))
