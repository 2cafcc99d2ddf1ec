"""Grad mode: whether ops record the autograd graph (per thread, like torch).

`no_grad`, `enable_grad` and `set_grad_enabled` work as context managers and as
decorators. The state lives in a `threading.local` (torch's grad mode is
thread-local, not per asyncio task); each `__enter__` pushes the previous value
on a per-thread stack instead of storing it on `self`, so one instance can be
entered recursively (a decorated recursive function) or from several threads.
"""
import functools
import threading

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


class _GradModeBase:
    """Context manager and decorator that sets grad mode to `self._mode()`."""

    def _mode(self):
        raise NotImplementedError

    def __enter__(self):
        st = _state
        st.stack.append(st.enabled)
        _set(self._mode())
        return None

    def __exit__(self, exc_type, exc, tb):
        _set(_state.stack.pop())
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}() can decorate a callable, got "
                            f"{type(fn).__name__}")
        ctx = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with ctx:
                return fn(*args, **kwargs)

        return wrapper

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
        st = _state
        # right after construction the mode is already set: restore the one
        # that was current before it on exit
        st.stack.append(self._prev if self._fresh else st.enabled)
        self._fresh = False
        _set(self.mode)
        return None

    def __call__(self, fn):
        # used as a decorator: construction must not have changed the mode
        if self._fresh:
            _set(self._prev)
            self._fresh = False
        return super().__call__(fn)

    def clone(self):
        return self
