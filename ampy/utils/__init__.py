"""ampy.utils — torch.utils's module paths under ampy (ampy.utils.data)."""
from . import data

__all__ = ["data"]
