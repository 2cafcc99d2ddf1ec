"""ampy.utils.data — torch.utils.data's datasets, samplers, DataLoader and
default_collate for ampy tensors."""
from ._collate import default_collate, default_convert
from ._worker import WorkerInfo, get_worker_info
from . import distributed  # noqa: F401 (torch.utils.data.distributed)
from .dataloader import DataLoader
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,
                      Subset, TensorDataset, random_split)
from .sampler import (BatchSampler, DistributedSampler, RandomSampler, Sampler,
                      SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "StackDataset",
           "ChainDataset", "Subset", "random_split", "DataLoader", "default_collate",
           "default_convert", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler",
           "WorkerInfo", "get_worker_info"]
