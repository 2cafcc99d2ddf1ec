"""ampy.cuda.amp.autocast / custom_fwd / custom_bwd (deprecated spellings, as torch's)."""
import warnings

from ... import _dtype as D
from ...amp import autocast_mode as _ac

__all__ = ["autocast", "custom_fwd", "custom_bwd"]


class autocast(_ac.autocast):
    """``ampy.amp.autocast("cuda", dtype, enabled, cache_enabled)`` after a
    FutureWarning; float16 by default, as torch.cuda.amp.autocast."""

    def __init__(self, enabled=True, dtype=D.float16, cache_enabled=True):
        warnings.warn("`ampy.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`ampy.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``ampy.amp.custom_fwd(..., device_type="cuda")`` after a FutureWarning."""
    warnings.warn("`ampy.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`ampy.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return _ac.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """``ampy.amp.custom_bwd(..., device_type="cuda")`` after a FutureWarning."""
    warnings.warn("`ampy.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`ampy.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return _ac.custom_bwd(bwd, device_type="cuda")
