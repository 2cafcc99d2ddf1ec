"""Samplers: which indices a DataLoader reads, in which order and batches
(torch.utils.data's Sampler, SequentialSampler, RandomSampler,
SubsetRandomSampler, WeightedRandomSampler, BatchSampler) and
torch.utils.data.distributed's DistributedSampler. Random orders come from ampy's
generators (Philox), so they are reproducible from a seed but are not
torch's permutations."""
import math
import numbers

import numpy as np

from ... import _creation, _dtype as D
from ... import _sorting, _tensor

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DistributedSampler"]


def _randperm(n, generator=None):
    """A uniformly random permutation of range(n) as a list of ints: the
    argsort of n float64 uniforms from `generator` (ties have probability
    ~n^2 / 2^53 and keep index order)."""
    if n == 0:
        return []
    u = _creation.rand(n, generator=generator, dtype=D.float64).numpy()
    return np.argsort(u, kind="stable").tolist()


def _randint(high, size, generator=None):
    return _creation.randint(0, high, (size,), generator=generator).numpy().tolist()


class Sampler:
    """Base class: __iter__ yields indices (or lists of indices)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation per iteration (replacement=False), or
    num_samples indices drawn with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples,
                                                                 numbers.Integral) or \
                self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            yield from _randint(n, self.num_samples, self.generator)
            return
        for _ in range(self.num_samples // n):
            yield from _randperm(n, self.generator)
        yield from _randperm(n, self.generator)[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, new per iteration."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices of range(len(weights)), index i drawn with
    probability proportional to weights[i] (ampy.multinomial with
    `generator`); without replacement no index repeats."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral) or \
                num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        if isinstance(weights, _tensor.Tensor):
            w = weights.detach().to(D.float64)
        else:
            w = _creation.tensor(np.asarray(weights, dtype=np.float64))
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = w
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        w = self.weights.numpy()
        if (w < 0).any():
            raise RuntimeError("invalid multinomial distribution (encountering probability "
                               "entry < 0): weights must be non-negative")
        if not self.replacement and self.num_samples > w.shape[0]:
            raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                               f"replacement: num_samples={self.num_samples} > len(weights)="
                               f"{w.shape[0]}")
        idx = _sorting.multinomial(self.weights, self.num_samples, self.replacement,
                                  generator=self.generator)
        yield from idx.numpy().tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of batch_size (the last
    one shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or \
                batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler):
    """The share of `dataset`'s indices for process `rank` of `num_replicas`
    (torch's DistributedSampler: indices rank, rank + num_replicas, ... of
    the (shuffled) index list, padded by repeating it or, with drop_last,
    cut to a multiple of num_replicas). ampy has no process group, so
    num_replicas and rank must be given. The shuffle is a permutation from a
    generator seeded with seed + epoch (set_epoch): the same on every rank,
    but not torch's permutation."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        for name, v in (("num_replicas", num_replicas), ("rank", rank)):
            if v is None:
                raise RuntimeError(f"DistributedSampler: ampy has no distributed package "
                                   f"(process group); pass {name} explicitly")
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"DistributedSampler: {name} must be an int, got "
                                f"{type(v).__name__}")
        if num_replicas <= 0:
            raise ValueError(f"Invalid num_replicas {num_replicas}, num_replicas should be a "
                             f"positive integer")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = _creation.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = _randperm(n, g)
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad > 0:
                reps = math.ceil(pad / len(indices))
                indices += (indices * reps)[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch mixed into the shuffle's seed (call before each epoch)."""
        self.epoch = epoch
