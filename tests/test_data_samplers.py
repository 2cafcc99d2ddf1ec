"""ampy.utils.data's WeightedRandomSampler, StackDataset, ChainDataset and
DistributedSampler against torch.utils.data: the deterministic parts
(StackDataset items, ChainDataset order, DistributedSampler index lists
without shuffle) equal torch's; the random parts are checked by their
statistics, their reproducibility from a Generator and their errors."""
import numpy as np
import pytest

import ampy
from ampy.utils import data as AD

torch = pytest.importorskip("torch")
TD = torch.utils.data


# ------------------------------------------------------ StackDataset
def _items(ds):
    return [ds[i] for i in range(len(ds))]


def test_stack_dataset_tuple_and_dict_equal_torch():
    a, b = list(range(5)), [f"s{i}" for i in range(5)]
    x = np.arange(10.0).reshape(5, 2)
    ta = AD.StackDataset(a, b, AD.TensorDataset(ampy.tensor(x)))
    tt = TD.StackDataset(a, b, TD.TensorDataset(torch.tensor(x)))
    assert len(ta) == len(tt)
    for (i, s, (v,)), (j, u, (w,)) in zip(_items(ta), _items(tt)):
        assert (i, s) == (j, u)
        np.testing.assert_array_equal(v.numpy(), w.numpy())
    da, dt = AD.StackDataset(p=a, q=b), TD.StackDataset(p=a, q=b)
    assert _items(da) == _items(dt)
    assert da.__getitems__([3, 0, 4]) == dt.__getitems__([3, 0, 4])
    assert AD.StackDataset(a, b).__getitems__([1, 2]) == TD.StackDataset(a, b).__getitems__([1, 2])


@pytest.mark.parametrize("args,kwargs", [((), {}), (([1, 2], [1]), {}),
                                         ((), dict(x=[1, 2], y=[1, 2, 3])),
                                         (([1],), dict(y=[1]))])
def test_stack_dataset_errors_equal_torch(args, kwargs):
    with pytest.raises(ValueError) as et:
        TD.StackDataset(*args, **kwargs)
    with pytest.raises(ValueError) as ea:
        AD.StackDataset(*args, **kwargs)
    assert str(ea.value) == str(et.value)


def test_stack_dataset_in_dataloader():
    x = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    ds = AD.StackDataset(img=AD.TensorDataset(ampy.tensor(x)), label=list(range(6)))
    batches = list(AD.DataLoader(ds, batch_size=4))
    tb = list(TD.DataLoader(TD.StackDataset(img=TD.TensorDataset(torch.tensor(x)),
                                            label=list(range(6))), batch_size=4))
    assert len(batches) == len(tb)
    for b, t in zip(batches, tb):
        np.testing.assert_array_equal(b["img"][0].numpy(), t["img"][0].numpy())
        np.testing.assert_array_equal(b["label"].numpy(), t["label"].numpy())


# ------------------------------------------------------ ChainDataset
def _streams(base):
    class Stream(base.IterableDataset):
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi

        def __iter__(self):
            return iter(range(self.lo, self.hi))

        def __len__(self):
            return self.hi - self.lo
    return [Stream(0, 3), Stream(10, 10), Stream(5, 9)]


def test_chain_dataset_order_and_len_equal_torch():
    a, t = AD.ChainDataset(_streams(AD)), TD.ChainDataset(_streams(TD))
    assert list(a) == list(t)
    assert len(a) == len(t)
    assert list(AD.DataLoader(a, batch_size=None)) == list(range(3)) + list(range(5, 9))


def test_chain_dataset_rejects_map_style():
    with pytest.raises(AssertionError, match="IterableDataset"):
        list(TD.ChainDataset([[1, 2]]))
    with pytest.raises(AssertionError, match="IterableDataset"):
        list(AD.ChainDataset([[1, 2]]))
    with pytest.raises(AssertionError, match="IterableDataset"):
        len(AD.ChainDataset([[1, 2]]))


# ------------------------------------------------------ DistributedSampler
@pytest.mark.parametrize("n", [0, 1, 7, 10, 12, 13])
@pytest.mark.parametrize("replicas", [1, 3, 4, 16])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_without_shuffle_equals_torch(n, replicas, drop_last):
    data = list(range(n))
    for rank in range(replicas):
        kw = dict(num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        t = TD.distributed.DistributedSampler(data, **kw)
        a = AD.distributed.DistributedSampler(data, **kw)
        assert len(a) == len(t)
        assert a.total_size == t.total_size
        assert list(a) == list(t)


def test_distributed_sampler_shuffle_partitions_and_epochs():
    n, r = 23, 4
    ranks = [AD.DistributedSampler(range(n), num_replicas=r, rank=k, seed=5) for k in range(r)]
    lists = [list(s) for s in ranks]
    t = [list(TD.distributed.DistributedSampler(range(n), num_replicas=r, rank=k))
         for k in range(r)]
    assert [len(x) for x in lists] == [len(x) for x in t]
    flat = sum(lists, [])
    assert sorted(set(flat)) == list(range(n))       # all covered, padding repeats
    assert len(flat) == ranks[0].total_size
    assert lists[0] == list(ranks[0])                # same epoch -> same order
    for s in ranks:
        s.set_epoch(1)
    again = [list(s) for s in ranks]
    assert again != lists
    assert sorted(set(sum(again, []))) == list(range(n))
    other = AD.DistributedSampler(range(n), num_replicas=r, rank=0, seed=5)
    other.set_epoch(1)
    assert list(other) == again[0]
    seed6 = AD.DistributedSampler(range(n), num_replicas=r, rank=0, seed=6)
    assert list(seed6) != lists[0]


def test_distributed_sampler_drop_last_shuffle_is_partition():
    n, r = 23, 4
    parts = [list(AD.DistributedSampler(range(n), r, k, drop_last=True)) for k in range(r)]
    flat = sum(parts, [])
    assert len(flat) == len(set(flat)) == 20


def test_distributed_sampler_errors():
    with pytest.raises(RuntimeError, match="num_replicas"):
        AD.DistributedSampler(range(4), rank=0)
    with pytest.raises(RuntimeError, match="rank"):
        AD.DistributedSampler(range(4), num_replicas=2)
    for bad in (2, 5, -1):
        with pytest.raises(ValueError) as et:
            TD.distributed.DistributedSampler(range(4), num_replicas=2, rank=bad)
        with pytest.raises(ValueError, match="rank") as ea:
            AD.DistributedSampler(range(4), num_replicas=2, rank=bad)
        assert str(ea.value) == str(et.value)


# ------------------------------------------------------ WeightedRandomSampler
W = [0.5, 0.0, 2.0, 1.0, 0.25, 4.0]


def test_weighted_with_replacement_frequencies():
    n = 100_000
    g = ampy.Generator().manual_seed(3)
    s = AD.WeightedRandomSampler(W, n, generator=g)
    idx = list(s)
    assert len(idx) == len(s) == n
    counts = np.bincount(idx, minlength=len(W))
    p = np.asarray(W) / sum(W)
    se = np.sqrt(n * p * (1 - p))
    assert counts[1] == 0
    assert np.all(np.abs(counts - n * p) <= 5 * se + 1e-9), (counts, n * p)
    tc = np.bincount(list(TD.WeightedRandomSampler(W, n)), minlength=len(W))
    assert np.all(np.abs(counts - tc) <= 5 * np.sqrt(2) * se + 1e-9)


def test_weighted_without_replacement_distinct_and_no_zero_weight():
    g = ampy.Generator().manual_seed(0)
    first = np.zeros(len(W))
    for _ in range(400):
        idx = list(AD.WeightedRandomSampler(W, 5, replacement=False, generator=g))
        assert len(set(idx)) == 5
        assert 1 not in idx
        first[idx[0]] += 1
    # the first draw is distributed as the weights
    p = np.asarray(W) / sum(W)
    assert np.all(np.abs(first - 400 * p) <= 5 * np.sqrt(400 * p * (1 - p)) + 1e-9)


def test_weighted_tensor_weights_and_reproducible():
    w = ampy.tensor([1.0, 3.0, 0.5], dtype=ampy.float32)
    a = list(AD.WeightedRandomSampler(w, 50, generator=ampy.Generator().manual_seed(9)))
    b = list(AD.WeightedRandomSampler(w, 50, generator=ampy.Generator().manual_seed(9)))
    c = list(AD.WeightedRandomSampler(w, 50, generator=ampy.Generator().manual_seed(10)))
    assert a == b and a != c
    assert all(isinstance(i, int) for i in a)
    g = ampy.Generator().manual_seed(9)
    s = AD.WeightedRandomSampler(w, 50, generator=g)
    assert list(s) == a and list(s) != a   # the generator's stream moves on


def test_weighted_errors_like_torch():
    for bad in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="num_samples") as et:
            TD.WeightedRandomSampler(W, bad)
        with pytest.raises(ValueError, match="num_samples") as ea:
            AD.WeightedRandomSampler(W, bad)
        assert str(ea.value) == str(et.value)
    with pytest.raises(ValueError, match="replacement"):
        TD.WeightedRandomSampler(W, 3, replacement=1)
    with pytest.raises(ValueError, match="replacement"):
        AD.WeightedRandomSampler(W, 3, replacement=1)
    with pytest.raises(ValueError, match="weights") as et:
        TD.WeightedRandomSampler([[1.0, 2.0]], 3)
    with pytest.raises(ValueError, match="weights") as ea:
        AD.WeightedRandomSampler([[1.0, 2.0]], 3)
    assert str(ea.value) == str(et.value)
    ts, as_ = TD.WeightedRandomSampler([1.0, -1.0], 3), AD.WeightedRandomSampler([1.0, -1.0], 3)
    with pytest.raises(RuntimeError, match="< 0"):
        list(ts)
    with pytest.raises(RuntimeError, match="weights"):
        list(as_)
    with pytest.raises(RuntimeError, match="without replacement"):
        list(TD.WeightedRandomSampler([1.0, 2.0], 3, replacement=False))
    with pytest.raises(RuntimeError, match="without replacement"):
        list(AD.WeightedRandomSampler([1.0, 2.0], 3, replacement=False))


def test_weighted_in_dataloader():
    ds = AD.TensorDataset(ampy.arange(6))
    s = AD.WeightedRandomSampler(W, 12, generator=ampy.Generator().manual_seed(1))
    got = [b[0].numpy().tolist() for b in AD.DataLoader(ds, batch_size=5, sampler=s)]
    s2 = AD.WeightedRandomSampler(W, 12, generator=ampy.Generator().manual_seed(1))
    assert sum(got, []) == list(s2)
    assert [len(b) for b in got] == [5, 5, 2]
