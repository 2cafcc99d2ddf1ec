"""ampy.optim — torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad and Adadelta
over ampy's fused C kernels (ampy/amp/functional.py), with optional float32
master weights, and torch's lr schedulers (ampy.optim.lr_scheduler)."""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "lr_scheduler"]
