"""ampy.optim.lr_scheduler — torch.optim.lr_scheduler's schedulers with
torch's trajectories, state_dict format and warnings (see _base.py for the
protocol and the optimizer-step-order check)."""
from ._base import EPOCH_DEPRECATION_WARNING, LRScheduler
from ._cycle import OneCycleLR
from ._plateau import ReduceLROnPlateau
from ._schedules import (CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, MultiStepLR,
                         StepLR)
from ._sequential import SequentialLR
from ._more import (ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts, CyclicLR,
                    MultiplicativeLR, PolynomialLR)

_LRScheduler = LRScheduler

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "OneCycleLR", "LambdaLR", "LinearLR", "SequentialLR", "ReduceLROnPlateau",
           "EPOCH_DEPRECATION_WARNING", "ConstantLR", "PolynomialLR", "MultiplicativeLR",
           "CosineAnnealingWarmRestarts", "CyclicLR", "ChainedScheduler"]
