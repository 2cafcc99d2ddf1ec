"""ampy.cpu.amp.GradScaler (deprecated spelling of ampy.amp.GradScaler("cpu"), as torch's)."""
import warnings

from ...amp import grad_scaler as _gs

__all__ = ["GradScaler"]


class GradScaler(_gs.GradScaler):
    """``ampy.amp.GradScaler("cpu", ...)`` after a FutureWarning."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`ampy.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`ampy.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
