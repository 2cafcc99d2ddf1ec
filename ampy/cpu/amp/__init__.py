"""ampy.cpu.amp — the old torch.cpu.amp names: ``from ampy.cpu.amp import autocast``.
Deprecated spellings of ampy.amp's, each warning with torch's FutureWarning."""
from .autocast_mode import autocast
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler"]
