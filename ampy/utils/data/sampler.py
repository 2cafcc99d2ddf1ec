"""Samplers: which indices a DataLoader reads, in which order and batches
(torch.utils.data's Sampler, SequentialSampler, RandomSampler,
SubsetRandomSampler, BatchSampler). Random orders come from ampy's
generators (Philox), so they are reproducible from a seed but are not
torch's permutations."""
import numbers

import numpy as np

from ... import _creation, _dtype as D

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "BatchSampler"]


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
