"""ampy.utils.data.distributed: torch.utils.data.distributed's
DistributedSampler (defined in sampler.py)."""
from .sampler import DistributedSampler

__all__ = ["DistributedSampler"]
