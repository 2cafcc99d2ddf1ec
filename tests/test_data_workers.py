"""DataLoader options beside torch 2.13's: prefetch_factor (its checks and
default), IterableDataset with num_workers > 0 (each worker iterates its own
copy; unsharded items repeat per worker; sharding by get_worker_info() and
by worker_init_fn; workers that run out at different times; drop_last and
batch_size=None), get_worker_info()'s fields, persistent_workers with an
IterableDataset, and a worker's error. Every batch list is compared with
torch's exactly (integers)."""
import dataclasses
import os

import numpy as np
import pytest

import ampy
import ampy.utils.data as AD

torch = pytest.importorskip("torch")
TD = torch.utils.data


def _np(b):
    if isinstance(b, (list, tuple)):
        return [_np(x) for x in b]
    if isinstance(b, dict):
        return {k: _np(v) for k, v in b.items()}
    return np.asarray(b.numpy() if hasattr(b, "numpy") else b).tolist()


def _stream(base, info_fn, sharded, lengths=None):
    """An IterableDataset class on `base`: items 0..11, sharded round robin
    over the workers when `sharded`; `lengths` caps each worker's items."""

    class Stream(base):
        start, stop = 0, 12

        def __iter__(self):
            info = info_fn()
            items = range(self.start, self.stop)
            if info is not None and sharded:
                items = items[info.id::info.num_workers]
            if info is not None and lengths is not None:
                items = items[:lengths[info.id]]
            return iter(list(items))
    return Stream()


def _both(sharded=False, lengths=None, epochs=1, **kw):
    a = AD.DataLoader(_stream(AD.IterableDataset, AD.get_worker_info, sharded, lengths), **kw)
    t = TD.DataLoader(_stream(TD.IterableDataset, TD.get_worker_info, sharded, lengths), **kw)
    return ([[_np(b) for b in a] for _ in range(epochs)],
            [[_np(b) for b in t] for _ in range(epochs)])


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # torch's iterator
def test_prefetch_factor_checks_as_torch():
    for M in (AD, TD):
        with pytest.raises(ValueError) as e:
            M.DataLoader(list(range(4)), prefetch_factor=2)
        assert "prefetch_factor option could only be specified in multiprocessing" in str(e.value)
        with pytest.raises(ValueError, match="prefetch_factor option should be non-negative"):
            M.DataLoader(list(range(4)), num_workers=1, prefetch_factor=-1)
        with pytest.raises(TypeError):
            M.DataLoader(list(range(4)), num_workers=1, prefetch_factor="2")
        assert M.DataLoader(list(range(4)), num_workers=2).prefetch_factor == 2
        assert M.DataLoader(list(range(4))).prefetch_factor is None
        with pytest.raises(AssertionError, match="prefetch_factor must be greater than 0"):
            iter(M.DataLoader(list(range(4)), num_workers=1, prefetch_factor=0))
    with pytest.raises(ValueError) as ea:
        AD.DataLoader(list(range(4)), prefetch_factor=2)
    with pytest.raises(ValueError) as et:
        TD.DataLoader(list(range(4)), prefetch_factor=2)
    assert str(ea.value) == str(et.value)


@pytest.mark.parametrize("prefetch", [1, 2, 5])
def test_map_dataset_any_prefetch_factor_same_batches(prefetch):
    kw = dict(batch_size=2, num_workers=2, prefetch_factor=prefetch)
    a = [_np(b) for b in AD.DataLoader(list(range(11)), **kw)]
    t = [_np(b) for b in TD.DataLoader(list(range(11)), **kw)]
    assert a == t


@pytest.mark.parametrize("kw", [dict(batch_size=3), dict(batch_size=5, drop_last=True),
                                dict(batch_size=None), dict(batch_size=5)])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_unsharded_items_repeat_per_worker_as_torch(workers, kw):
    a, t = _both(num_workers=workers, **kw)
    assert a == t
    n = 12 if kw["batch_size"] is None else None
    if n is not None:
        assert len(a[0]) == workers * n


@pytest.mark.parametrize("prefetch", [1, 2, 4])
@pytest.mark.parametrize("workers", [2, 3])
def test_sharded_by_worker_info_as_torch(workers, prefetch):
    a, t = _both(sharded=True, num_workers=workers, batch_size=2, prefetch_factor=prefetch)
    assert a == t
    assert sorted(x for b in a[0] for x in b) == list(range(12))


@pytest.mark.parametrize("lengths", [(1, 6, 3), (0, 5, 5), (6, 0, 1)])
def test_workers_exhausted_at_different_times_as_torch(lengths):
    a, t = _both(sharded=False, lengths=lengths, num_workers=3, batch_size=2)
    assert a == t


def _init_shard(wid):
    """torch's documented pattern: worker_init_fn narrows the worker's copy."""
    info = (AD.get_worker_info() if AD.get_worker_info() is not None else TD.get_worker_info())
    ds = info.dataset
    per = -(-(ds.stop - ds.start) // info.num_workers)
    ds.start, ds.stop = ds.start + wid * per, min(ds.start + (wid + 1) * per, ds.stop)


def test_worker_init_fn_sharding_as_torch():
    a, t = _both(num_workers=3, batch_size=2, worker_init_fn=_init_shard)
    assert a == t
    assert sorted(x for b in a[0] for x in b) == list(range(12))


class _Info(AD.IterableDataset):
    def __iter__(self):
        info = AD.get_worker_info()
        yield (info.id, info.num_workers, info.seed, type(info.dataset).__name__,
               info.dataset is not None, os.getpid())


def test_get_worker_info_fields():
    gen = ampy.Generator().manual_seed(5)
    rows = [_np(b) for b in AD.DataLoader(_Info(), batch_size=None, num_workers=3,
                                          generator=gen)]
    assert [r[:2] for r in rows] == [[0, 3], [1, 3], [2, 3]]
    seeds = [r[2] for r in rows]
    assert seeds[1] - seeds[0] == 1 and seeds[2] - seeds[0] == 2     # base_seed + id
    assert all(r[3] == "_Info" and r[4] for r in rows)
    assert len({r[5] for r in rows}) == 3 and os.getpid() not in {r[5] for r in rows}
    assert AD.get_worker_info() is None
    info = AD.WorkerInfo(id=0, num_workers=1, seed=3, dataset=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.id = 2
    assert [f.name for f in dataclasses.fields(info)] == \
        [f.name for f in dataclasses.fields(TD.get_worker_info.__globals__["WorkerInfo"])]


def _count_init(wid):
    info = AD.get_worker_info()
    info.dataset.inits = getattr(info.dataset, "inits", 0) + 1


class _Pids(AD.IterableDataset):
    def __iter__(self):
        info = AD.get_worker_info()
        for i in range(3):
            yield (info.id, i, os.getpid(), getattr(self, "inits", 0))


def test_persistent_workers_with_an_iterable_dataset():
    dl = AD.DataLoader(_Pids(), batch_size=None, num_workers=2, persistent_workers=True,
                       worker_init_fn=_count_init)
    e1 = [_np(b) for b in dl]
    it = iter(dl)
    next(it)                                            # an epoch left early
    e3 = [_np(b) for b in dl]
    assert [r[:2] for r in e1] == [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2]]
    assert [r[:2] for r in e3] == [r[:2] for r in e1]   # iter(dataset) again per epoch
    assert {r[2] for r in e1} == {r[2] for r in e3}     # the same processes
    assert {r[3] for r in e1 + e3} == {1}               # worker_init_fn ran once
    a, t = _both(epochs=2, num_workers=2, batch_size=5, persistent_workers=True)
    assert a == t


class _Bad(AD.IterableDataset):
    def __iter__(self):
        info = AD.get_worker_info()
        yield 1
        if info.id == 1:
            raise ValueError("broken stream")
        yield 2


def test_iterable_worker_error_reaches_the_main_process():
    with pytest.raises(ValueError, match="Caught ValueError in DataLoader worker process 1.\n"
                                         "Original Traceback(?s:.*)broken stream"):
        list(AD.DataLoader(_Bad(), batch_size=None, num_workers=2))


def test_main_process_iterable_unchanged_and_iter_is_eager():
    calls = []

    class S(AD.IterableDataset):
        def __iter__(self):
            calls.append(1)
            return iter(range(5))
    dl = AD.DataLoader(S(), batch_size=2)
    it = iter(dl)
    assert calls == [1]                                 # as torch: iter(dataset) at iter()
    assert [_np(b) for b in it] == [[0, 1], [2, 3], [4]]
