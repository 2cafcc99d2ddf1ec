"""The pooling layers: MaxPool1d/2d/3d, AvgPool1d/2d/3d,
AdaptiveAvgPool1d/2d/3d, AdaptiveMaxPool1d/2d (torch.nn's arguments,
defaults and reprs)."""
from .. import _functional_cnn as FC
from .. import _functional_pool as FP
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d"]


class _MaxPoolNd(Module):
    """Max pooling over the last 1, 2 or 3 dims (_fn: the functional form)."""

    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return self._fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                        ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-d max pooling of (N, C, L) or (C, L) inputs."""

    _fn = staticmethod(FP.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling of (N, C, H, W) or (C, H, W) inputs."""

    _fn = staticmethod(FC.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """3-d max pooling of (N, C, D, H, W) or (C, D, H, W) inputs."""

    _fn = staticmethod(FP.max_pool3d)


class _AvgPoolNd(Module):
    """2-d and 3-d average pooling (_fn: the functional form; AvgPool1d below keeps
    torch's 1-tuples and has no divisor_override)."""

    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return self._fn(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                        self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    _fn = staticmethod(FC.avg_pool2d)


class AvgPool3d(_AvgPoolNd):
    _fn = staticmethod(FP.avg_pool3d)


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class AvgPool1d(Module):
    """1-d average pooling; kernel_size, stride and padding kept as 1-tuples (torch)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return FP.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptiveAvgPoolNd(Module):
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return self._fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(FP.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(FC.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(FP.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input):
        return self._fn(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(FP.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(FP.adaptive_max_pool2d)
