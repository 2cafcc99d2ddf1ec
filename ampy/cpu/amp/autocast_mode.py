"""ampy.cpu.amp.autocast (deprecated spelling of ampy.amp.autocast("cpu"), as torch's)."""
import warnings

from ... import _dtype as D
from ...amp import autocast_mode as _ac

__all__ = ["autocast"]


class autocast(_ac.autocast):
    """``ampy.amp.autocast("cpu", dtype, enabled, cache_enabled)`` after a
    FutureWarning; bfloat16 by default, as torch.cpu.amp.autocast."""

    def __init__(self, enabled=True, dtype=D.bfloat16, cache_enabled=True):
        warnings.warn("`ampy.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`ampy.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
