"""DataLoader worker processes (num_workers > 0), torch's design: batch k
goes to worker k % num_workers through that worker's index queue, results
come back on one queue and are yielded in batch order. Worker w seeds
ampy's default generator and Python's `random` with base_seed + w (base_seed
drawn from the loader's generator per iteration, as torch draws it) before
worker_init_fn(w) runs; get_worker_info() describes the worker inside it.
Persistent workers outlive an epoch: the next epoch first reads and drops
the results still in flight from a loop left early, then sends its own
batches, numbered from 0 again."""
import multiprocessing
import queue
import random

from ... import _creation

__all__ = ["WorkerInfo", "get_worker_info"]

_info = None


class WorkerInfo:
    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


def get_worker_info():
    """The WorkerInfo of this DataLoader worker process; None in the main
    process."""
    return _info


def _worker_loop(wid, nw, seed, dataset, fetch, init_fn, index_q, result_q):
    global _info
    _creation.manual_seed(seed)
    random.seed(seed)
    _info = WorkerInfo(wid, nw, seed, dataset)
    try:
        if init_fn is not None:
            init_fn(wid)
    except Exception as e:  # reported with the first batch this worker owns
        init_error = e
    else:
        init_error = None
    while True:
        task = index_q.get()
        if task is None:
            return
        k, indices = task
        try:
            if init_error is not None:
                raise init_error
            result_q.put((k, fetch(indices), None))
        except Exception as e:
            result_q.put((k, None, RuntimeError(
                f"Caught {type(e).__name__} in DataLoader worker process {wid}: {e}")))


class _MultiProcessIter:
    """Batches of `batches` (lists of indices) fetched by worker processes,
    in order; at most 2 * num_workers batches in flight. persistent: the
    workers stay up at the end of the batches, for reset()."""

    def __init__(self, loader, batches, fetch, seed, persistent=False):
        self._persistent = persistent
        ctx = loader.multiprocessing_context or multiprocessing.get_context("fork")
        if isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        nw = loader.num_workers
        self._result_q = ctx.Queue()
        self._index_qs = [ctx.Queue() for _ in range(nw)]
        self._workers = []
        for w in range(nw):
            p = ctx.Process(target=_worker_loop, daemon=True,
                            args=(w, nw, seed + w, loader.dataset, fetch,
                                  loader.worker_init_fn, self._index_qs[w], self._result_q))
            p.start()
            self._workers.append(p)
        self._timeout = loader.timeout if loader.timeout > 0 else None
        self._start(batches)

    def _start(self, batches):
        self._batches = iter(enumerate(batches))
        self._sent = self._next = 0
        self._done = {}
        for _ in range(2 * len(self._workers)):
            self._send()

    def alive(self):
        return bool(self._workers)

    def reset(self, batches):
        """A new epoch on the same workers."""
        for _ in range(self._sent - self._next - len(self._done)):
            self._get()
        self._start(batches)

    def _get(self):
        try:
            return self._result_q.get(timeout=self._timeout)
        except queue.Empty:
            self.close()
            raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _send(self):
        item = next(self._batches, None)
        if item is not None:
            self._index_qs[item[0] % len(self._workers)].put(item)
            self._sent += 1

    def __iter__(self):
        return self

    def __next__(self):
        if self._next >= self._sent:
            if not self._persistent:
                self.close()
            raise StopIteration
        while self._next not in self._done:
            k, data, err = self._get()
            self._done[k] = (data, err)
        data, err = self._done.pop(self._next)
        self._next += 1
        if err is not None:
            self.close()
            raise err
        self._send()
        return data

    def close(self):
        for q in self._index_qs:
            q.put(None)
        for p in self._workers:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self._workers = []
        self._index_qs = []

    def __del__(self):
        if self._workers:
            self.close()
