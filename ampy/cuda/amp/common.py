"""amp_definitely_not_available (torch.cuda.amp.common's)."""
from ...amp.autocast_mode import _cuda_available

__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available():
    """True when no CUDA device is usable (torch also asks for XLA; ampy has none)."""
    return not _cuda_available()
