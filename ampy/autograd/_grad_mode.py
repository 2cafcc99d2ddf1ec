"""Grad mode: whether ops record the autograd graph (per thread, like torch).

`no_grad`, `enable_grad` and `set_grad_enabled` work as context managers and as
decorators. The state lives in a `threading.local` (torch's grad mode is
thread-local, not per asyncio task: an `await` inside `with no_grad()` lets the
loop's other tasks run with grad off, as in torch). Each `__enter__` pushes an
entry holding the previous value on its thread's stack instead of storing it
on `self`, so one instance can be entered recursively (a decorated recursive
function) or from several threads.

Exits out of order are exact, where torch leaks: a generator suspended inside
`no_grad()` and closed inside another grad-mode block, or finished in another
thread, removes its own entry from the stack of the thread that entered it;
the entry above it inherits the value to restore, so every thread is back to
its own mode once all its blocks have exited. As decorators, the classes
enter around each step of a generator function (torch does the same).
"""
import threading

from .. import _contextlib

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]


class _State(threading.local):
    enabled = True        # record the graph
    create_graph = False  # backward rules themselves are being recorded

    def __init__(self):
        self.stack = []


_state = _State()

# One entry per thread that has grad mode off right now. While it is empty
# (the common case) the dispatch hook knows grad mode is on without the
# thread-local lookup, which costs more than the rest of its fast path. A list
# because append() and pop() are atomic: no lock on the recording path, which
# switches grad mode off around every recorded forward.
_OFF_LIST = []


def _set(mode):
    """Set this thread's grad mode, keeping _OFF_LIST in step."""
    st = _state
    if st.enabled != mode:
        if mode:
            st.enabled = True
            _OFF_LIST.pop()
        else:
            _OFF_LIST.append(None)
            st.enabled = False


def is_grad_enabled():
    """True when ops on tensors that require grad record the graph."""
    return _state.enabled


class _Entry:
    """One open grad-mode block: the mode to restore, and the stack and the
    thread-local dict of the thread it was entered on."""

    __slots__ = ("prev", "stack", "tdict", "owner")

    def __init__(self, prev, stack, tdict, owner):
        self.prev, self.stack, self.tdict, self.owner = prev, stack, tdict, owner


def _set_in(tdict, mode):
    """_set for the thread whose `_state.__dict__` is ``tdict`` (any thread)."""
    if tdict.get("enabled", True) != mode:
        if mode:
            tdict["enabled"] = True
            _OFF_LIST.pop()
        else:
            _OFF_LIST.append(None)
            tdict["enabled"] = False


def _push(owner, prev, mode):
    st = _state
    e = _Entry(prev, st.stack, st.__dict__, owner)
    st.stack.append(e)
    owner.__dict__.setdefault("_entries", []).append(e)
    _set(mode)


def _pop(owner):
    """Close ``owner``'s innermost block on this thread (else its latest one,
    when a generator entered on another thread finishes here)."""
    entries = owner.__dict__.get("_entries")
    stack = _state.stack
    e = next((x for x in reversed(stack) if x.owner is owner), None)
    if e is None:
        if not entries:
            raise RuntimeError(f"{type(owner).__name__}.__exit__() called without a "
                               f"matching __enter__()")
        e = entries[-1]
        stack = e.stack
    entries.remove(e)
    i = next(k for k in range(len(stack) - 1, -1, -1) if stack[k] is e)
    if i == len(stack) - 1:
        stack.pop()
        _set_in(e.tdict, e.prev)
    else:  # a block entered after it is still open: it restores what e saw
        stack[i + 1].prev = e.prev
        del stack[i]


class _GradModeBase:
    """Context manager and decorator that sets grad mode to `self._mode()`."""

    def _mode(self):
        raise NotImplementedError

    def __enter__(self):
        _push(self, _state.enabled, self._mode())
        return None

    def __exit__(self, exc_type, exc, tb):
        _pop(self)
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}() can decorate a callable, got "
                            f"{type(fn).__name__}")
        return _contextlib.decorate(self, fn)

    def clone(self):
        return self


class _BareDecoratable(_GradModeBase):
    """Also usable as a bare decorator (`@no_grad` without parentheses)."""

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        if orig_func is not None:
            return self(orig_func)
        return self

    def __init__(self, orig_func=None):
        pass


class no_grad(_BareDecoratable):
    """Disable graph recording: `with ampy.no_grad():` or `@ampy.no_grad()`."""

    def _mode(self):
        return False


class enable_grad(_BareDecoratable):
    """Enable graph recording inside a no_grad region."""

    def _mode(self):
        return True


class set_grad_enabled(_GradModeBase):
    """set_grad_enabled(mode): a function (takes effect at once, like torch),
    a context manager (restores the previous mode on exit) and a decorator."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'mode' must be bool, not "
                            f"{type(mode).__name__}")
        self.mode = mode
        # torch applies the mode at construction so that a bare call works
        self._prev = _state.enabled
        self._fresh = True
        _set(mode)

    def _mode(self):
        return self.mode

    def __enter__(self):
        # right after construction the mode is already set: restore the one
        # that was current before it on exit
        prev = self._prev if self._fresh else _state.enabled
        self._fresh = False
        _push(self, prev, self.mode)
        return None

    def __call__(self, fn):
        # used as a decorator: construction must not have changed the mode
        if self._fresh:
            _set(self._prev)
            self._fresh = False
        return super().__call__(fn)

    def clone(self):
        return self
