"""ampy.amp — automatic mixed precision: autocast, GradScaler and their kernels.

    from ampy.amp import autocast, GradScaler

- ``autocast`` (also ``ampy.autocast``, with the other names torch has on
  its package: ``ampy.is_autocast_enabled``, ...): regions in which ops run in float16 /
  bfloat16 or float32 according to the policy table (``print_policy()``);
- ``GradScaler``: dynamic loss scaling (torch.amp.GradScaler's behaviour);
- ``custom_fwd`` / ``custom_bwd`` for ``ampy.autograd.Function``, and
  ``register_autocast`` so user ops join the table;
- ``functional``: the C kernels (check+unscale, scale update, fused steps).
"""
from . import functional
from ._policy import POLICIES, format_policy, policy_table, print_policy
from .autocast_mode import (autocast, clear_autocast_cache, custom_bwd, custom_fwd,
                            get_autocast_dtype, is_autocast_available, is_autocast_cache_enabled,
                            is_autocast_enabled, register_autocast, set_autocast_cache_enabled,
                            set_autocast_dtype, set_autocast_enabled)
from .grad_scaler import GradScaler, OptState

__all__ = ["autocast", "GradScaler", "OptState", "custom_fwd", "custom_bwd", "register_autocast",
           "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "set_autocast_enabled", "set_autocast_dtype", "is_autocast_cache_enabled",
           "set_autocast_cache_enabled", "clear_autocast_cache", "print_policy",
           "format_policy", "policy_table", "POLICIES", "functional"]

