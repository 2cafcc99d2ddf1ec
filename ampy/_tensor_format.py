"""format(t, spec) / f-strings on tensors and is_floating_point, as torch's.

torch formats a 0-d tensor of its own class through ``item()`` (so
``f"{loss:.4f}"`` prints a number); any other tensor accepts only the empty
spec (its str()) and raises TypeError for a real one.
"""
from ._tensor import Tensor

__all__ = ["tensor_format", "is_floating_point"]


def tensor_format(self, format_spec):
    if self.ndim == 0 and type(self) is Tensor:
        return self.item().__format__(format_spec)
    if format_spec:
        raise TypeError(f"unsupported format string passed to {type(self).__name__}.__format__")
    return str(self)


def is_floating_point(input):
    """True for float16, bfloat16, float32 and float64 tensors."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_floating_point(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    return input.dtype.is_floating_point
