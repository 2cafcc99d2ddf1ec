"""Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d and ConvTranspose3d: torch's constructor checks, parameter
names and shapes (so state_dicts load both ways), initialisation
(kaiming_uniform_(a=sqrt(5)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))) and
repr. padding_mode "zeros" pads inside the kernel; "reflect", "replicate"
and "circular" pad the input first, by index arithmetic on the input
(ampy/nn/modules/_conv_pad.py), as torch's _conv_forward does with F.pad.
"""
import math

from ... import _creation as C
from .. import _conv_functional as CF
from .. import init
from ..parameter import Parameter
from ._conv_pad import pad_nd
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]

_MODES = ("zeros", "reflect", "replicate", "circular")
_MODE_SET = {"zeros", "reflect", "replicate", "circular"}
_PADDING_STRINGS = {"same", "valid"}  # a set, printed as torch prints its own


class _ConvNd(Module):
    __constants__ = ["stride", "padding", "dilation", "groups", "padding_mode", "output_padding",
                     "in_channels", "out_channels", "kernel_size"]

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        n = len(kernel_size)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{_PADDING_STRINGS}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _MODES:
            raise ValueError(f"padding_mode must be one of {_MODE_SET}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.transposed = dilation, transposed
        self.output_padding, self.groups, self.padding_mode = output_padding, groups, padding_mode
        self._reversed_padding_repeated_twice = _reversed_twice(padding, kernel_size, dilation, n)
        wshape = ((in_channels, out_channels // groups) if transposed else
                  (out_channels, in_channels // groups)) + tuple(kernel_size)
        self.weight = Parameter(C.empty(wshape, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(C.empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        n = len(self.kernel_size)
        if self.padding != (0,) * n:
            s += ", padding={padding}"
        if self.dilation != (1,) * n:
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * n:
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


def _reversed_twice(padding, kernel_size, dilation, n):
    """torch's _reversed_padding_repeated_twice: F.pad's (left, right) pairs,
    last dim first."""
    out = [0, 0] * n
    if isinstance(padding, str):
        if padding == "same":
            for d, k, i in zip(dilation, kernel_size, range(n - 1, -1, -1)):
                total = d * (k - 1)
                left = total // 2
                out[2 * i], out[2 * i + 1] = left, total - left
        return out
    return [p for p in reversed(padding) for _ in range(2)]


class _Conv(_ConvNd):
    _fn = None

    def __init__(self, n, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        ks = CF.int_tuple(kernel_size, n, "kernel_size")
        st = CF.int_tuple(stride, n, "stride")
        pad = padding if isinstance(padding, str) else CF.int_tuple(padding, n, "padding")
        dil = CF.int_tuple(dilation, n, "dilation")
        super().__init__(in_channels, out_channels, ks, st, pad, dil, False, (0,) * n, groups,
                         bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        fn = type(self)._fn
        if self.padding_mode != "zeros":
            x = pad_nd(input, self._reversed_padding_repeated_twice, self.padding_mode)
            return fn(x, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over (N, C, L) input; weight (out, in / groups, k)."""

    _fn = staticmethod(CF.conv1d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)


class Conv2d(_Conv):
    """2-d convolution over (N, C, H, W) input; weight (out, in / groups, kH, kW)."""

    _fn = staticmethod(CF.conv2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)


class Conv3d(_Conv):
    """3-d convolution over (N, C, D, H, W) input; weight (out, in / groups, kD,
    kH, kW)."""

    _fn = staticmethod(CF.conv3d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)


class _ConvTransposeNd(_ConvNd):
    _fn = None

    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding,
                 output_padding, groups, bias, dilation, padding_mode, device, dtype):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        ks = CF.int_tuple(kernel_size, n, "kernel_size")
        st = CF.int_tuple(stride, n, "stride")
        pad = padding if isinstance(padding, str) else CF.int_tuple(padding, n, "padding")
        dil = CF.int_tuple(dilation, n, "dilation")
        opad = CF.int_tuple(output_padding, n, "output_padding")
        super().__init__(in_channels, out_channels, ks, st, pad, dil, True, opad, groups, bias,
                         padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        """torch's _ConvTransposeNd._output_padding."""
        if output_size is None:
            return self.output_padding
        n = len(self.kernel_size)
        size = [int(s) for s in output_size]
        nd = input.ndim - 2 if input.ndim == n + 2 else input.ndim - 1
        if len(size) == nd + 2:
            size = size[2:]
        elif len(size) == nd + 1 and input.ndim == n + 1:
            size = size[1:]
        if len(size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have "
                             f"{n} or {n + 2} elements (got {len(output_size)})")
        spatial = tuple(input.shape[-n:])
        lo, hi = [], []
        for d in range(n):
            m = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d] +
                 self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            lo.append(m)
            hi.append(m + self.stride[d] - 1)
        for d in range(n):
            if not lo[d] <= size[d] <= hi[d]:
                raise ValueError(f"requested an output size of {tuple(size)}, but valid sizes "
                                 f"range from {lo} to {hi} (for an input of "
                                 f"{input.shape[-n:]})")
        return tuple(size[d] - lo[d] for d in range(n))

    def forward(self, input, output_size=None):
        if isinstance(self.padding, str):
            raise ValueError(f"{type(self).__name__}: only padding of ints is supported, not "
                             f"{self.padding!r}")
        opad = self._output_padding(input, output_size)
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding, opad,
                              self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over (N, C, L) input; weight (in, out / groups,
    k). forward takes torch's optional output_size, which picks the
    output_padding."""

    _fn = staticmethod(CF.conv_transpose1d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, groups, bias, dilation, padding_mode, device, dtype)


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution; weight (in, out / groups, kH, kW). forward
    takes torch's optional output_size, which picks the output_padding."""

    _fn = staticmethod(CF.conv_transpose2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, groups, bias, dilation, padding_mode, device, dtype)


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution; weight (in, out / groups, kD, kH, kW).
    forward takes torch's optional output_size, which picks the
    output_padding."""

    _fn = staticmethod(CF.conv_transpose3d)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding,
                         output_padding, groups, bias, dilation, padding_mode, device, dtype)
