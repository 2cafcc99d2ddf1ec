"""Datasets: torch.utils.data's Dataset, IterableDataset, TensorDataset,
ConcatDataset, StackDataset, ChainDataset, Subset and random_split."""
import bisect
import math
import numbers

from .sampler import _randperm

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "StackDataset",
           "ChainDataset", "Subset", "random_split"]


class Dataset:
    """A map-style dataset: __getitem__(index) and (usually) __len__."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream-style dataset: __iter__ yields the samples."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        raise TypeError("ConcatDataset does not support IterableDataset")


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); every tensor has the same first
    dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0] if tensors[0].ndim else None
        if any(t.ndim == 0 or t.shape[0] != n for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes, total = [], 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][idx - start]


class StackDataset(Dataset):
    """Sample i of several equally long datasets together: a tuple
    (StackDataset(a, b)) or a dict (StackDataset(x=a, y=b))."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = args if args else tuple(kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        named = isinstance(self.datasets, dict)
        items = self.datasets.items() if named else enumerate(self.datasets)
        rows = [{} if named else [] for _ in indices]
        for k, d in items:
            many = getattr(d, "__getitems__", None)
            if callable(many):
                got = many(indices)
                if len(got) != len(indices):
                    raise ValueError(f"Nested dataset's output size mismatch. Expected "
                                     f"{len(indices)}, got {len(got)}")
            else:
                got = [d[i] for i in indices]
            for row, v in zip(rows, got):
                if named:
                    row[k] = v
                else:
                    row.append(v)
        return rows if named else [tuple(r) for r in rows]

    def __len__(self):
        return self._length


class ChainDataset(IterableDataset):
    """IterableDatasets one after the other (chained while iterating)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def _split_lengths(lengths, n):
    """torch's rule: fractions summing to 1 become counts (floor, then the
    remainder handed out one by one from the first)."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        return counts
    return list(lengths)


def random_split(dataset, lengths, generator=None):
    """Split `dataset` into non-overlapping Subsets of the given lengths (or
    fractions) by a random permutation drawn from `generator` (ampy's
    default generator when None)."""
    n = len(dataset)
    counts = _split_lengths(lengths, n)
    if any(isinstance(c, bool) or not isinstance(c, numbers.Integral) or c < 0 for c in counts):
        raise ValueError(f"random_split: lengths must be non-negative ints or fractions, got "
                         f"{lengths!r}")
    if sum(counts) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _randperm(n, generator)
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[start:start + c]))
        start += c
    return out
