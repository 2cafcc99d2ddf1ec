"""ampy.utils.data against torch.utils.data: the same batches for the same
dataset without shuffling, per-epoch permutations from ampy's generator
(reproducible from a seed), drop_last, samplers, default_collate of
tuples/dicts/numbers/numpy/tensors, and worker processes giving the same
batches as the main process."""
import collections
import os

import numpy as np
import pytest

import ampy
from ampy.utils import data as AD

torch = pytest.importorskip("torch")
TD = torch.utils.data


def _np(x):
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    return x.numpy() if hasattr(x, "numpy") else x


def _same(a, t):
    if isinstance(t, list):
        assert isinstance(a, list) and len(a) == len(t)
        for x, y in zip(a, t):
            _same(x, y)
    elif isinstance(t, dict):
        assert a.keys() == t.keys()
        for k in t:
            _same(a[k], t[k])
    elif isinstance(t, np.ndarray):
        assert a.dtype == t.dtype and a.shape == t.shape
        np.testing.assert_array_equal(a, t)
    else:
        assert a == t


X = np.arange(4 * 11, dtype=np.float32).reshape(11, 4)
Y = np.arange(11)


def _tensor_sets():
    return (AD.TensorDataset(ampy.tensor(X), ampy.tensor(Y)),
            TD.TensorDataset(torch.tensor(X), torch.tensor(Y)))


@pytest.mark.parametrize("kw", [dict(), dict(batch_size=3), dict(batch_size=3, drop_last=True),
                                dict(batch_size=11), dict(batch_size=20),
                                dict(batch_size=None)])
def test_batches_equal_torch_without_shuffle(kw):
    ads, tds = _tensor_sets()
    a = [_np(b) for b in AD.DataLoader(ads, **kw)]
    t = [_np(b) for b in TD.DataLoader(tds, **kw)]
    _same(a, t)
    assert len(AD.DataLoader(ads, **kw)) == len(TD.DataLoader(tds, **kw))


class _Dicts(AD.Dataset):
    Point = collections.namedtuple("Point", "x y")

    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"img": np.full((2, 3), i, np.float32), "label": i, "w": 0.5 * i,
                "name": f"s{i}", "pair": (i, np.float64(i) / 2), "flag": i % 2 == 0,
                "pt": self.Point(i, [i, i + 1])}


class _TorchDicts(TD.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return _Dicts()[i]


def _norm(b):
    b = dict(b)
    b["pt"] = list(b["pt"])
    return _np(b)


@pytest.mark.parametrize("bs", [1, 3, 7])
def test_dict_tuple_number_numpy_collate_as_torch(bs):
    a = [_norm(b) for b in AD.DataLoader(_Dicts(), batch_size=bs)]
    t = [_norm(b) for b in TD.DataLoader(_TorchDicts(), batch_size=bs)]
    _same(a, t)


def test_default_collate_of_tensors_and_errors():
    b = AD.default_collate([ampy.ones(2, 3), ampy.zeros(2, 3)])
    assert tuple(b.shape) == (2, 2, 3)
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        AD.default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        AD.default_collate([object(), object()])
    assert AD.default_collate(["a", "b"]) == ["a", "b"]


def _epochs(seed, n_epochs=3, **kw):
    ads, _ = _tensor_sets()
    g = ampy.Generator().manual_seed(seed)
    dl = AD.DataLoader(ads, batch_size=4, shuffle=True, generator=g, **kw)
    return [[b[1].numpy().tolist() for b in dl] for _ in range(n_epochs)]


def test_shuffle_is_a_new_permutation_per_epoch_and_reproducible():
    e = _epochs(5)
    for epoch in e:
        flat = sum(epoch, [])
        assert sorted(flat) == list(range(11))
        assert [len(b) for b in epoch] == [4, 4, 3]
    assert e[0] != e[1] != e[2]
    assert _epochs(5) == e
    assert _epochs(6) != e


def test_shuffle_drop_last():
    ads, _ = _tensor_sets()
    dl = AD.DataLoader(ads, batch_size=4, shuffle=True, drop_last=True,
                       generator=ampy.Generator().manual_seed(1))
    got = [b[1].numpy().tolist() for b in dl]
    assert len(got) == len(dl) == 2 and all(len(b) == 4 for b in got)
    assert len(set(sum(got, []))) == 8


def test_samplers_and_batch_sampler():
    ads, tds = _tensor_sets()
    bs = AD.BatchSampler(AD.SequentialSampler(ads), batch_size=4, drop_last=False)
    assert list(bs) == list(TD.BatchSampler(TD.SequentialSampler(tds), 4, False))
    a = [b[1].numpy().tolist() for b in AD.DataLoader(ads, batch_sampler=bs)]
    assert a == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    s = AD.RandomSampler(ads, replacement=True, num_samples=30,
                         generator=ampy.Generator().manual_seed(0))
    drawn = list(s)
    assert len(drawn) == 30 and all(0 <= i < 11 for i in drawn)
    sub = AD.SubsetRandomSampler([1, 5, 9], generator=ampy.Generator().manual_seed(0))
    assert sorted(sub) == [1, 5, 9]
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        AD.BatchSampler(AD.SequentialSampler(ads), 0, False)
    with pytest.raises(ValueError, match="mutually exclusive"):
        AD.DataLoader(ads, batch_sampler=bs, batch_size=2)
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        AD.DataLoader(ads, sampler=AD.SequentialSampler(ads), shuffle=True)


def test_subset_random_split_concat():
    ads, _ = _tensor_sets()
    parts = AD.random_split(ads, [0.5, 0.3, 0.2], generator=ampy.Generator().manual_seed(2))
    assert [len(p) for p in parts] == [len(p) for p in TD.random_split(range(11),
                                                                        [0.5, 0.3, 0.2])]
    idx = sorted(int(p[i][1]) for p in parts for i in range(len(p)))
    assert idx == list(range(11))
    with pytest.raises(ValueError, match="Sum of input lengths"):
        AD.random_split(ads, [3, 3])
    c = ads + AD.Subset(ads, [0, 1])
    assert len(c) == 13 and int(c[12][1]) == 1 and int(c[-1][1]) == 1


class _Stream(AD.IterableDataset):
    def __iter__(self):
        return iter(range(10))


def test_iterable_dataset_batches_as_torch():
    class TStream(TD.IterableDataset):
        def __iter__(self):
            return iter(range(10))
    for kw in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)]:
        a = [_np(b) for b in AD.DataLoader(_Stream(), **kw)]
        t = [_np(b) for b in TD.DataLoader(TStream(), **kw)]
        _same(a, t)


class _Noisy(AD.Dataset):
    """Each sample draws from ampy's default generator: seeded per worker."""

    def __len__(self):
        return 9

    def __getitem__(self, i):
        info = AD.get_worker_info()
        return i, (-1 if info is None else info.id)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_give_the_same_batches_in_order(workers):
    ads, _ = _tensor_sets()
    ref = _epochs(9, 2)
    assert _epochs(9, 2, num_workers=workers) == ref
    plain = [_np(b) for b in AD.DataLoader(ads, batch_size=2)]
    _same([_np(b) for b in AD.DataLoader(ads, batch_size=2, num_workers=workers,
                                         pin_memory=True)], plain)
    # batch k is fetched by worker k % num_workers (torch's round robin)
    ids = [b[1].numpy().tolist() for b in AD.DataLoader(_Noisy(), batch_size=2,
                                                        num_workers=workers)]
    assert ids == [[k % workers] * len(b) for k, b in enumerate(ids)]


class _Random(AD.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return float(ampy.rand(()).item())


def _draws(workers, seed, init=None):
    dl = AD.DataLoader(_Random(), batch_size=1, num_workers=workers, worker_init_fn=init,
                       generator=ampy.Generator().manual_seed(seed))
    return [b.numpy().tolist() for b in dl]


def test_worker_seeding_is_per_worker_and_reproducible():
    """Each worker seeds ampy's default generator with base_seed + worker id
    (base_seed from the loader's generator), as torch seeds its workers."""
    a, b = _draws(2, 1), _draws(2, 1)
    assert a == b
    assert _draws(2, 2) != a
    assert a[0] != a[1]  # workers 0 and 1 draw different streams


def _init_fn(wid):
    ampy.manual_seed(1000 + wid)


def test_worker_init_fn_runs_in_each_worker():
    a = _draws(2, 1, _init_fn)
    assert a == _draws(2, 7, _init_fn)  # the init seeds replace the base seeds
    g0 = ampy.Generator().manual_seed(1000)
    assert a[0] == [float(ampy.rand((), generator=g0).item())]


def test_worker_error_is_raised_in_the_main_process():
    class Bad(AD.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i == 2:
                raise KeyError("broken sample")
            return i
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process 0") as got:
        list(AD.DataLoader(Bad(), batch_size=1, num_workers=2))
    # the message prints as written (not a one-line repr) and carries the worker's traceback
    assert str(got.value).startswith("Caught KeyError in DataLoader worker process 0.\n"
                                     "Original Traceback (most recent call last):\n")
    assert "broken sample" in str(got.value) and "__getitem__" in str(got.value)


class _NeedsTwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


class _OneOf(AD.Dataset):
    """Raises `kind` for item 1; `kind` is one of the exception types below."""

    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        return 3

    def __getitem__(self, i):
        if i == 1:
            raise (self.kind("x", "y") if self.kind is _NeedsTwoArgs else self.kind("bad item"))
        return i


@pytest.mark.parametrize("kind", [ValueError, IndexError, TypeError, ZeroDivisionError,
                                  FileNotFoundError, _NeedsTwoArgs])
def test_worker_error_type_and_message_as_torch(kind):
    """torch re-raises a worker's exception as its own type with the worker's traceback in
    the message; a type that cannot be built from one message becomes RuntimeError."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader as TDL, Dataset as TDS

    class TOneOf(TDS):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return _OneOf(kind)[i]

    with pytest.raises(Exception) as want:
        list(TDL(TOneOf(), batch_size=1, num_workers=2))
    with pytest.raises(Exception) as got:
        list(AD.DataLoader(_OneOf(kind), batch_size=1, num_workers=2))
    assert type(got.value) is type(want.value)
    assert str(got.value).splitlines()[:2] == str(want.value).splitlines()[:2]


def test_module_paths():
    import ampy.utils.data as m
    assert m.DataLoader is AD.DataLoader and ampy.utils.data.default_collate is \
        AD.default_collate


class _Pids(AD.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return i, os.getpid()


def _count_init(wid):
    ampy.manual_seed(500 + wid)


def test_persistent_workers_keep_their_processes_and_draw_as_torch():
    """Three epochs on the same two worker processes. As in torch, the
    loader's generator gives the workers' base seed once, when they start,
    and then one permutation per epoch: the batches are the sampler's draws
    after that single seed draw."""
    gen = ampy.Generator().manual_seed(3)
    dl = AD.DataLoader(_Pids(), batch_size=3, shuffle=True, num_workers=2, generator=gen,
                       persistent_workers=True)
    pids, epochs = set(), []
    for _ in range(3):
        ep = []
        for idx, pid in dl:
            ep.append(idx.numpy().tolist())
            pids.update(pid.numpy().tolist())
        epochs.append(ep)
    assert len(pids) == 2
    ref_gen = ampy.Generator().manual_seed(3)
    ampy.randint(0, 2 ** 62, (1,), generator=ref_gen)  # the workers' base seed
    sampler = AD.BatchSampler(AD.RandomSampler(range(8), generator=ref_gen), 3, False)
    assert epochs == [[list(b) for b in sampler] for _ in range(3)]
    assert len({str(e) for e in epochs}) == 3


def test_persistent_workers_after_an_epoch_left_early():
    dl = AD.DataLoader(_Pids(), batch_size=1, num_workers=2, persistent_workers=True)
    for k, (idx, _) in enumerate(dl):
        if k == 2:
            break
    assert [int(i) for i, _ in dl] == list(range(8))
    assert [int(i) for i, _ in dl] == list(range(8))


def test_persistent_workers_seed_and_init_once_as_torch():
    """worker_init_fn runs once per worker: a second epoch continues each
    worker's stream instead of restarting it."""
    dl = AD.DataLoader(_Random(), batch_size=1, num_workers=2, worker_init_fn=_count_init,
                       persistent_workers=True)
    first = [b.numpy().tolist() for b in dl]
    second = [b.numpy().tolist() for b in dl]
    assert first != second
    fresh = AD.DataLoader(_Random(), batch_size=1, num_workers=2, worker_init_fn=_count_init)
    assert [b.numpy().tolist() for b in fresh] == first == [b.numpy().tolist() for b in fresh]


def test_persistent_workers_need_workers_as_torch():
    for M in (AD, torch.utils.data):
        with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
            M.DataLoader(list(range(4)), persistent_workers=True)
