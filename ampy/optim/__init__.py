"""ampy.optim — torch.optim's SGD, Adam and AdamW over ampy's fused C kernels
(ampy/amp/functional.py), with optional float32 master weights."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
