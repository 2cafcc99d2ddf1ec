"""The padding layers: ConstantPad1d/2d, ZeroPad2d, ReflectionPad1d/2d,
ReplicationPad1d/2d (torch.nn's argument forms: an int pads every side)."""
from .. import _functional_cnn as FC
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d"]


class _Pad(Module):
    _sides = 2
    _mode = "constant"

    def __init__(self, padding, value=None):
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * self._sides
        self.padding = tuple(padding)
        if len(self.padding) != self._sides:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of "
                             f"{self._sides} ints")
        self.value = value

    def forward(self, input):
        if self._mode == "constant":
            return FC.pad(input, self.padding, "constant", self.value)
        return FC.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self._mode == "constant" else "")


class ConstantPad1d(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_Pad):
    _sides = 4

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad2d(_Pad):
    _sides = 4

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    _mode = "reflect"


class ReflectionPad2d(_Pad):
    _sides = 4
    _mode = "reflect"


class ReplicationPad1d(_Pad):
    _mode = "replicate"


class ReplicationPad2d(_Pad):
    _sides = 4
    _mode = "replicate"
