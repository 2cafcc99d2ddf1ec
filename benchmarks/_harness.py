"""Timing shared by the benchmark scripts (benchmarks/bench_*.py import it as
``from _harness import median_time``; the script's folder is on sys.path)."""
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
