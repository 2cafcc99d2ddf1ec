"""Upsample and Dropout1d/2d/3d (torch.nn's arguments and defaults)."""
from .. import _functional_cnn as FC
from .module import Module

__all__ = ["Upsample", "Dropout1d", "Dropout2d", "Dropout3d"]


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else (tuple(float(f) for f in scale_factor) if scale_factor else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return FC.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None \
            else f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class _DropoutNd(Module):
    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Channel dropout of (N, C, L) or (C, L) inputs."""

    _fn = staticmethod(FC.dropout1d)


class Dropout2d(_DropoutNd):
    """Channel dropout of (N, C, H, W) inputs."""

    _fn = staticmethod(FC.dropout2d)


class Dropout3d(_DropoutNd):
    """Channel dropout of (N, C, D, H, W) or (C, D, H, W) inputs."""

    _fn = staticmethod(FC.dropout3d)
