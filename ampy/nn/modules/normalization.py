"""RMSNorm."""
import numbers

from ... import _creation as C
from .. import _rms_norm
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["RMSNorm"]


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2 over the trailing dims) + eps) * weight (ones);
    eps=None means the machine epsilon of the input's op-math dtype (torch)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(C.empty(self.normalized_shape, dtype=dtype, device=device))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return _rms_norm.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
