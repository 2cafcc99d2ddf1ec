"""ampy.cuda.amp — the old torch.cuda.amp names that tutorials import:
``from ampy.cuda.amp import autocast, GradScaler``.

As torch 2.13's, each name is a deprecated spelling of ampy.amp's: creating
one warns with a FutureWarning that names the new spelling, then behaves as
``ampy.amp.autocast("cuda", ...)`` / ``ampy.amp.GradScaler("cuda", ...)``:
on a machine without a usable GPU both warn again (UserWarning) and disable
themselves, so the training loop runs unchanged in float32 on the CPU.
"""
from .autocast_mode import autocast, custom_bwd, custom_fwd
from .common import amp_definitely_not_available
from .grad_scaler import GradScaler

__all__ = ["amp_definitely_not_available", "autocast", "custom_bwd", "custom_fwd", "GradScaler"]
