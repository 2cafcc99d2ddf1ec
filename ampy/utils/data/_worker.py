"""DataLoader worker processes (num_workers > 0), torch's design.

Tasks go round robin over the workers that are still active, at most
prefetch_factor * num_workers in flight, each through that worker's index
queue; results come back on one queue and are yielded in task order.

- Map-style datasets: task k is batch k of the sampler (so it goes to
  worker k % num_workers).
- IterableDataset: every worker iterates its own copy of the dataset
  (iter(dataset) once it has started, after worker_init_fn), so without
  sharding by get_worker_info() every worker yields every item, as torch.
  Task k asks the worker for its next batch; a worker whose iterator is
  exhausted answers with a stop marker, is marked inactive, and the tasks
  it still holds are skipped: the batches come round robin over the
  workers, skipping the exhausted ones.

Worker w seeds ampy's default generator and Python's `random` with
base_seed + w (base_seed drawn from the loader's generator per iteration,
as torch draws it) before worker_init_fn(w) runs; get_worker_info()
describes the worker inside it. Persistent workers outlive an epoch: the
next epoch sends each worker a resume message (a map fetcher keeps going,
an iterable one calls iter(dataset) again) and drops every result up to the
workers' acknowledgements, then sends its own tasks, numbered from 0."""
import dataclasses
import multiprocessing
import pickle
import queue
import random
import traceback

from ... import _creation

__all__ = ["WorkerInfo", "get_worker_info"]

_info = None
_RESUME = "resume"


class _Stop:
    """A worker's answer once its dataset iterator is exhausted."""

    def __init__(self, wid):
        self.wid = wid


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """id, num_workers, seed and dataset (this worker's copy) of a DataLoader
    worker, as torch's (frozen: its fields cannot be set)."""
    id: int
    num_workers: int
    seed: int
    dataset: object
    rng: object = None
    worker_method: str = "multiprocessing"


def get_worker_info():
    """The WorkerInfo of this DataLoader worker process; None in the main
    process."""
    return _info


class _KeyErrorText(str):
    """A KeyError's message that prints as written (KeyError shows its
    argument's repr, which would fold the traceback onto one line)."""

    def __repr__(self):
        return self


class _WorkerError:
    """An exception raised in a worker, carried to the main process as
    torch carries it: its type (when it pickles) and its formatted
    traceback. `reraise` raises the same type there with the message
    "Caught <Type> in DataLoader worker process <w>.\nOriginal Traceback ...";
    a type that cannot be rebuilt from one message becomes RuntimeError."""

    def __init__(self, e, wid):
        kind = type(e)
        try:
            pickle.loads(pickle.dumps(kind))
        except Exception:  # a class local to a function: its name only
            kind = None
        self.kind = kind
        self.text = (f"Caught {type(e).__name__} in DataLoader worker process {wid}.\n"
                     "Original " + "".join(traceback.format_exception(e)))

    def reraise(self):
        kind, text = self.kind, self.text
        if kind is KeyError:
            text = _KeyErrorText(text)
        elif getattr(kind, "message", None):  # torch: types that take message=
            raise kind(message=text)
        try:
            err = kind(text) if kind is not None else RuntimeError(text)
        except Exception:
            raise RuntimeError(text) from None
        raise err


def _wrap(e, wid):
    return _WorkerError(e, wid)


def _worker_loop(wid, nw, seed, dataset, fetch, init_fn, index_q, result_q):
    global _info
    _creation.manual_seed(seed)
    random.seed(seed)
    _info = WorkerInfo(wid, nw, seed, dataset)
    error = None
    try:
        if init_fn is not None:
            init_fn(wid)
        fetch.begin()
    except Exception as e:  # reported with the first batch this worker owns
        error = e
    ended = False
    while True:
        task = index_q.get()
        if task is None:
            return
        if task == _RESUME:
            ended = False
            try:
                fetch.begin()
            except Exception as e:
                error = e
            result_q.put((_RESUME, None, None))
            continue
        if ended:
            continue
        k, indices = task
        try:
            if error is not None:
                e, error = error, None
                raise e
            result_q.put((k, fetch(indices), None))
        except StopIteration as e:
            if not fetch.iterable:
                result_q.put((k, None, _wrap(e, wid)))
                continue
            ended = True
            result_q.put((k, _Stop(wid), None))
        except Exception as e:
            result_q.put((k, None, _wrap(e, wid)))


class _MultiProcessIter:
    """Batches fetched by worker processes, in task order. `batches`: the
    index lists of a map-style dataset, or None for an IterableDataset
    (fetch then pulls each worker's next batch). persistent: the workers
    stay up at the end of the batches, for reset()."""

    def __init__(self, loader, batches, fetch, seed, persistent=False):
        self._workers = []
        if loader.prefetch_factor <= 0:
            raise AssertionError("prefetch_factor must be greater than 0 for "
                                 "MultiProcessingDataLoaderIter")
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
        self._prefetch = loader.prefetch_factor * nw
        self._start(batches)

    def _start(self, batches):
        self._batches = None if batches is None else iter(batches)
        self._sent = self._next = 0
        self._done = {}
        self._owner = {}
        self._active = [True] * len(self._workers)
        self._cursor = 0
        for _ in range(self._prefetch):
            self._send()

    def alive(self):
        return bool(self._workers)

    def reset(self, batches):
        """A new epoch on the same workers."""
        for q in self._index_qs:
            q.put(_RESUME)
        acks = 0
        while acks < len(self._workers):
            acks += self._get()[0] == _RESUME
        self._start(batches)

    def _get(self):
        try:
            return self._result_q.get(timeout=self._timeout)
        except queue.Empty:
            self.close()
            raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")

    def _next_worker(self):
        """The next active worker in the round robin, or None."""
        n = len(self._workers)
        for _ in range(n):
            w, self._cursor = self._cursor, (self._cursor + 1) % n
            if self._active[w]:
                return w
        return None

    def _send(self):
        indices = None
        if self._batches is not None:
            indices = next(self._batches, _Stop)
            if indices is _Stop:
                return
        w = self._next_worker()
        if w is None:
            return
        self._index_qs[w].put((self._sent, indices))
        self._owner[self._sent] = w
        self._sent += 1

    def __iter__(self):
        return self

    def _ready(self):
        """Skip the tasks of exhausted workers; True when task _next is due."""
        while self._next < self._sent:
            if self._next in self._done or self._active[self._owner[self._next]]:
                return True
            del self._owner[self._next]
            self._next += 1
        return False

    def __next__(self):
        while self._ready() and self._next not in self._done:
            k, data, err = self._get()
            if isinstance(data, _Stop):
                self._active[data.wid] = False
                self._send()
                continue
            self._done[k] = (data, err)
        if self._next >= self._sent:
            if not self._persistent:
                self.close()
            raise StopIteration
        data, err = self._done.pop(self._next)
        del self._owner[self._next]
        self._next += 1
        if err is not None:
            self.close()
            err.reraise()
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
