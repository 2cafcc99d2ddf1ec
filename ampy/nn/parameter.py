"""ampy.nn.Parameter: a Tensor that a Module registers as a parameter."""
from .._creation import empty
from .._tensor import Tensor, _rebuild

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A Tensor subclass with requires_grad=True by default. Parameter(data)
    shares data's memory (no copy), as torch.nn.Parameter does."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be a Tensor, not "
                            f"{type(data).__name__}")
        t = data.detach()  # a new tensor object on the same memory, no history
        t.__class__ = cls
        t.requires_grad_(bool(requires_grad))
        return t

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self.detach().numpy().copy(), self.dtype.name,
                                     self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = out
        return out


def _rebuild_parameter(arr, dtype_name, requires_grad):
    return Parameter(_rebuild(arr, dtype_name, False), requires_grad)
