"""Where autocast state lives: a chain of nodes in a ContextVar.

Every ``autocast.__enter__`` pushes a *region* node and every
``set_autocast_*`` call a *setting* node on the chain of the current context
(thread / asyncio task / ``contextvars`` context). The state an op sees, and
what ``is_autocast_enabled()`` reports, is the fold of the chain's live nodes
over the defaults (``effective``), so both always agree.

A region is live from its ``__enter__`` to its ``__exit__``, wherever that
exit runs (the same context, another thread finishing a generator, a
generator closed inside another region). Its exit marks it dead everywhere:

- in the context that entered it, when nothing live was entered after it, the
  chain goes back to exactly what the entry saw (settings made inside the
  region go with it, as torch's ``__exit__`` restores the entry's values);
- when a live region was entered after it (a generator closed inside another
  region), that later region keeps its own settings and the dead one simply
  stops counting: nothing of it leaks past the ``with`` blocks;
- contexts that copied the chain while it was live (tasks, ``to_thread``,
  ``copy_context().run``) stop seeing it too, so a task that outlives its
  region runs, and reports, the state of the regions still open around it.

Setting nodes belong to the region that was innermost-live when they were
made and die with it; made outside every region they stay (torch: a
thread-local value set outside autocast stays).

Folding is cached per node and invalidated by an epoch counter that every
region exit bumps, so an op pays one ContextVar lookup and one comparison.
"""
import contextvars
import threading

from .. import _dtype as D

DEVICE_TYPES = ("cpu", "cuda")
DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16}


class State:
    """One folded autocast state (immutable)."""

    __slots__ = ("enabled", "dtype", "cache_enabled", "depth", "cache", "cache_thread",
                 "active")

    def __init__(self, enabled, dtype, cache_enabled, depth, cache, cache_thread):
        self.enabled = enabled              # {device type: bool}
        self.dtype = dtype                  # {device type: ampy.dtype}
        self.cache_enabled = cache_enabled
        self.depth = depth                  # live regions around (torch's nesting counter)
        self.cache = cache                  # the weight-cast cache of the outermost region
        self.cache_thread = cache_thread    # thread that entered that region
        self.active = any(enabled.values())


BASE = State({d: False for d in DEVICE_TYPES}, dict(DEFAULT_DTYPE), True, 0, None, None)


class Node:
    """A region (``region is self``) or a setting (``region``: its region or None)."""

    __slots__ = ("parent", "region", "enabled", "dtype", "cache_enabled", "alive", "owner",
                 "thread", "cache", "state", "epoch")

    def __init__(self, parent, region, enabled, dtype, cache_enabled):
        self.parent = parent
        self.region = self if region is True else region
        self.enabled = enabled              # {device type: bool} this node sets
        self.dtype = dtype                  # {device type: dtype} this node sets
        self.cache_enabled = cache_enabled  # None: inherited
        self.alive = True
        self.owner = None
        self.thread = threading.get_ident()
        self.cache = {} if region is True else None
        self.state = None
        self.epoch = -1


TOP = contextvars.ContextVar("ampy_autocast_chain", default=None)
_epoch = [0]


def _live(node):
    r = node.region
    return r is None or r.alive


def _apply(st, n):
    enabled = {**st.enabled, **n.enabled} if n.enabled else st.enabled
    dtype = {**st.dtype, **n.dtype} if n.dtype else st.dtype
    ce = st.cache_enabled if n.cache_enabled is None else n.cache_enabled
    if n.region is not n:
        return State(enabled, dtype, ce, st.depth, st.cache, st.cache_thread)
    if st.depth and st.cache_thread == n.thread:  # nested in the same thread: share
        return State(enabled, dtype, ce, st.depth + 1, st.cache, st.cache_thread)
    return State(enabled, dtype, ce, st.depth + 1, n.cache, n.thread)


def effective(node):
    """The folded state of the chain ending at ``node`` (None: the defaults)."""
    ep = _epoch[0]
    todo = []
    while node is not None and node.epoch != ep:
        todo.append(node)
        node = node.parent
    st = BASE if node is None else node.state
    for n in reversed(todo):
        if _live(n):
            st = _apply(st, n)
        n.state, n.epoch = st, ep
    return st


def current():
    node = TOP.get()
    if node is None:
        return BASE
    return node.state if node.epoch == _epoch[0] else effective(node)


def _prune(node):
    """The nearest node at or below ``node`` that still counts."""
    while node is not None and not _live(node):
        node = node.parent
    return node


def _live_region(node):
    while node is not None:
        r = node.region
        if r is None:
            return None
        if r.alive:
            return r
        node = node.parent
    return None


def push_setting(enabled=None, dtype=None, cache_enabled=None):
    """A set_autocast_* call: returns the ContextVar token (for a scoped use)."""
    top = _prune(TOP.get())
    region = _live_region(top)
    enabled, dtype = enabled or {}, dtype or {}
    if top is not None and top.region is region and top.region is not top:
        # settings in a row merge into one node: the chain does not grow with
        # set_autocast_* calls (a loop calling one per step stays O(1))
        enabled, dtype = {**top.enabled, **enabled}, {**top.dtype, **dtype}
        if cache_enabled is None:
            cache_enabled = top.cache_enabled
        top = top.parent
    return TOP.set(Node(top, region, enabled, dtype, cache_enabled))


def push_region(owner, device_type, enabled, dtype, cache_enabled):
    top = _prune(TOP.get())
    n = Node(top, True, {device_type: enabled}, {device_type: dtype} if dtype else {},
             cache_enabled)
    n.owner = owner
    TOP.set(n)
    return n


def find_region(owner, live_nodes):
    """The region ``owner.__exit__`` closes: the innermost one of ``owner``
    on this context's chain, else (exit from another thread or context) the
    one ``owner`` entered last; None when it has none open."""
    n = TOP.get()
    while n is not None:
        if n.region is n and n.alive and n.owner is owner:
            return n
        n = n.parent
    return live_nodes[-1] if live_nodes else None


def close_region(node):
    """Mark ``node`` dead everywhere; in this context, when nothing live was
    entered after it, go back to the chain its entry saw."""
    node.alive = False
    _epoch[0] += 1
    n = TOP.get()
    while n is not None and n is not node:
        if n.region is n and n.alive:  # a region entered later is still open here
            break
        n = n.parent
    if n is node:
        TOP.set(_prune(node.parent))
    node.cache.clear()  # (nested regions of the same thread fill the outermost one's)
