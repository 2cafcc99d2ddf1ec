"""Host memory counters of ampy's allocator (csrc/alloc.c), in the shape of
``torch.cuda.memory_stats()`` and friends, for CPU tensors.

Counts the bytes of live tensor storages (the sizes requested, not the
rounded block sizes), their peak since the last ``reset_peak_memory_stats()``,
and the large blocks the cache keeps for reuse.
"""
from . import _C

__all__ = ["memory_stats", "memory_allocated", "max_memory_allocated", "memory_cached",
           "reset_peak_memory_stats"]


def memory_stats():
    """{"allocated_bytes": live storage bytes, "peak_allocated_bytes": their
    maximum since the last reset, "cached_bytes": freed large blocks kept for
    reuse, "live_blocks", "cache_hits", "cache_misses"} of the host allocator."""
    return _C.alloc_stats()


def memory_allocated():
    """Bytes in live host tensor storages."""
    return _C.alloc_stats()["allocated_bytes"]


def max_memory_allocated():
    """Peak of memory_allocated() since the last reset_peak_memory_stats()."""
    return _C.alloc_stats()["peak_allocated_bytes"]


def memory_cached():
    """Bytes of freed large blocks the allocator keeps for reuse."""
    return _C.alloc_stats()["cached_bytes"]


def reset_peak_memory_stats():
    """Start the peak counter again from the bytes allocated now."""
    _C.reset_peak_stats()
