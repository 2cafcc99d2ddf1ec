"""Timing shared by the benchmark scripts (benchmarks/bench_*.py import it as
``from _harness import median_time``; the script's folder is on sys.path), and
the memory-bandwidth ceiling of a row, measured on the row's own working set
(ceiling_kernel, ceiling_percent)."""
import statistics
import time


def median_time(fn, reps=15, warmup=2, min_time=None):
    """Median seconds of one call of fn, after `warmup` untimed calls, over `reps`
    timed samples. With min_time (seconds), each sample times a group of calls,
    sized so that the samples together take about min_time, and counts the
    group's mean: for calls far shorter than the clock's resolution."""
    for _ in range(warmup):
        fn()
    group = 1
    if min_time is not None:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.02:
            fn()
            n += 1
        per_call = max((time.perf_counter() - t0) / n, 1e-9)
        group = max(5, int(min_time / per_call / reps))
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(group):
            fn()
        samples.append((time.perf_counter() - t0) / group)
    return statistics.median(samples)


_CEILINGS = {}


def _group_time(fn, group):
    t0 = time.perf_counter()
    for _ in range(group):
        fn()
    return (time.perf_counter() - t0) / group


def _group_size(fn, sample_time):
    fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.01:
        fn()
        n += 1
    return max(1, int(sample_time * n / (time.perf_counter() - t0)))


def ceiling_kernel(nbytes, threads=1, inputs=1):
    """The memory-bandwidth ceiling of a kernel that moves `nbytes` in all
    (bytes in + bytes out) and reads about `inputs` times the bytes it writes
    (2: two input streams into one output, or a float32 -> half cast), as a
    list of callables moving those same bytes; the ceiling is the fastest.
    Same working set, so an L2-resident kernel meets an L2-resident copy and a
    DRAM-sized one a DRAM-sized copy: NumPy's copyto and ampy's C copy
    (threaded like the kernels, so call it at their thread count; it may store
    around the cache where NumPy does not) of nbytes / 2 float32 bytes into
    nbytes / 2, and with inputs >= 2 NumPy's triad c = a + b over three
    buffers of nbytes / 3: a kernel reading two bytes per written one pays
    relatively less write-allocate traffic than a copy and can outrun it (an
    L2-sized float32 -> bfloat16 cast measured 1.4x a copy of its bytes).
    Cached per (size, threads, inputs)."""
    import numpy as np

    import ampy
    from ampy import _C

    key = (int(nbytes), threads, inputs)
    if key in _CEILINGS:
        return _CEILINGS[key]
    n = max(16, int(nbytes) // 8)
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    asrc, adst = ampy.from_numpy(src), ampy.from_numpy(dst)
    cands = [lambda: np.copyto(dst, src), lambda: _C.copy_(adst, asrc)]
    if inputs >= 2:
        m = max(16, int(nbytes) // 12)
        a, b, c = np.ones(m, np.float32), np.ones(m, np.float32), np.empty(m, np.float32)
        cands.append(lambda: np.add(a, b, out=c))
    _CEILINGS[key] = cands
    return cands


def ceiling_percent(fn, nbytes, threads=1, inputs=1, rounds=9, sample_time=0.004):
    """The kernel fn (which moves nbytes, bytes in + out) as a percentage of the
    ceiling of the same working set (ceiling_kernel): the two timed in
    alternation, a group of calls of each per round (the ceiling's time: its
    fastest candidate in that round), and the median of the per-round ratios
    ceiling time / kernel time, which survives background load far better
    than two separately measured rates. Run it at the kernel's thread count."""
    cands = ceiling_kernel(nbytes, threads, inputs)
    gk = _group_size(fn, sample_time)
    gc = [_group_size(c, sample_time / len(cands)) for c in cands]
    r = []
    for _ in range(rounds):
        tk = _group_time(fn, gk)
        tc = min(_group_time(c, g) for c, g in zip(cands, gc))
        r.append(tc / tk)
    return 100 * statistics.median(r)
