"""DataLoader: batches of a dataset as torch.utils.data.DataLoader builds
them (sampler -> batch_sampler -> fetch -> collate_fn), in the main process
or in num_workers worker processes (_worker.py) with the same batches; an
IterableDataset is iterated by each worker on its own copy, as torch."""
import numbers

from ... import _creation

from ._collate import default_collate, default_convert
from ._worker import _MultiProcessIter
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader"]


class _MapFetch:
    """indices -> collate_fn([dataset[i] ...]) (or one sample unbatched)."""

    iterable = False

    def __init__(self, dataset, collate_fn, batched):
        self.dataset, self.collate_fn, self.batched = dataset, collate_fn, batched

    def begin(self):
        """A new pass (nothing to do for a map-style dataset)."""

    def __call__(self, indices):
        if self.batched:
            return self.collate_fn([self.dataset[i] for i in indices])
        return self.collate_fn(self.dataset[indices])


class _IterFetch:
    """The next batch of an IterableDataset's iterator: batch_size samples
    collated (the last one short unless drop_last), or one sample converted
    when batch_size is None; StopIteration at the end, as torch's fetcher."""

    iterable = True

    def __init__(self, dataset, collate_fn, batched, batch_size, drop_last):
        self.dataset, self.collate_fn, self.batched = dataset, collate_fn, batched
        self.batch_size, self.drop_last = batch_size, drop_last
        self._it, self._ended = None, False

    def begin(self):
        """A new pass: iter(dataset), called when the pass starts."""
        self._it, self._ended = iter(self.dataset), False

    def __call__(self, _=None):
        if self._ended:
            raise StopIteration
        if not self.batched:
            return self.collate_fn(next(self._it))
        batch = []
        for _ in range(self.batch_size):
            try:
                batch.append(next(self._it))
            except StopIteration:
                self._ended = True
                break
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)


def _drain(fetch):
    while True:
        try:
            batch = fetch()
        except StopIteration:
            return
        yield batch


def _check_prefetch(num_workers, prefetch_factor):
    """torch's checks and default (2 with workers, None without)."""
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                         "let num_workers > 0 to enable multiprocessing, otherwise set "
                         "prefetch_factor to None.")
    if num_workers > 0 and prefetch_factor is None:
        return 2
    if prefetch_factor is not None:
        if isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, numbers.Integral):
            raise TypeError(f"prefetch_factor option should be an int, not "
                            f"{type(prefetch_factor).__name__}")
        if prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
    return prefetch_factor


def _check_args(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last, num_workers):
    if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or \
            num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                         "disable multiprocessing.")
    if isinstance(dataset, IterableDataset):
        if shuffle not in (None, False):
            raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                             f"option, but got shuffle={shuffle}")
        if sampler is not None:
            raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler "
                             f"option, but got sampler={sampler}")
        if batch_sampler is not None:
            raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                             f"batch_sampler option, but got batch_sampler={batch_sampler}")
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or
                                      drop_last):
        raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                         "shuffle, sampler, and drop_last")


class DataLoader:
    """torch.utils.data.DataLoader(dataset, batch_size=1, shuffle=None,
    sampler=None, batch_sampler=None, num_workers=0, collate_fn=None,
    pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
    multiprocessing_context=None, generator=None, *, prefetch_factor=None,
    persistent_workers=False, pin_memory_device=""). prefetch_factor:
    batches in flight per worker (default 2; only with num_workers > 0, as
    torch checks). shuffle draws a new
    permutation per epoch from `generator` (ampy's default generator when
    None). pin_memory is accepted and does nothing (CPU memory is what the
    batches are in). Workers are started per iteration, or once for all
    epochs with persistent_workers=True (worker_init_fn and the workers'
    seeding then happen once, and the base seed is drawn from `generator`
    only when they start, as torch does). With an IterableDataset each
    worker iterates its own copy (shard it with get_worker_info(), or every
    worker yields every item, as torch); the batches come round robin over
    the workers until each is exhausted."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        _check_args(dataset, batch_size, shuffle, sampler, batch_sampler, drop_last,
                    num_workers)
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.prefetch_factor = _check_prefetch(int(num_workers), prefetch_factor)
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.persistent_workers = bool(persistent_workers)
        self._workers_iter = None
        self.dataset = dataset
        self.num_workers = int(num_workers)
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if batch_sampler is not None:
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._iterable and
                                                  self.batch_size is not None)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    def _fetch(self):
        if self._iterable:
            return _IterFetch(self.dataset, self.collate_fn, self._auto_collation,
                              self.batch_size, self.drop_last)
        return _MapFetch(self.dataset, self.collate_fn, self._auto_collation)

    def __iter__(self):
        order = None
        if not self._iterable:
            order = self.batch_sampler if self._auto_collation else self.sampler
        if self.persistent_workers and self._workers_iter is not None and \
                self._workers_iter.alive():
            self._workers_iter.reset(order)
            return self._workers_iter
        # drawn in both modes and for both kinds of dataset (as torch does), so
        # a seeded generator gives the same shuffled batches with and without
        # workers
        seed = int(_creation.randint(0, 2 ** 62, (1,), generator=self.generator).item())
        fetch = self._fetch()
        if self.num_workers == 0:
            if self._iterable:
                fetch.begin()
                return _drain(fetch)
            return (fetch(b) for b in order)
        it = _MultiProcessIter(self, order, fetch, seed, self.persistent_workers)
        if self.persistent_workers:
            self._workers_iter = it
        return it
