"""ampy.optim — torch.optim's SGD, Adam, AdamW, RMSprop, Adagrad and Adadelta
over ampy's fused C kernels (ampy/amp/functional.py), with optional float32
master weights; Adamax, NAdam, RAdam, Rprop and ASGD as single-tensor Python
steps (ampy/optim/_python_optims.py); and torch's lr schedulers
(ampy.optim.lr_scheduler)."""
from . import lr_scheduler
from ._python_optims import ASGD, NAdam, RAdam, Adamax, Rprop
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "lr_scheduler",
           "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"]
