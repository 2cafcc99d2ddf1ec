"""LRScheduler: torch.optim.lr_scheduler.LRScheduler's protocol (the lr set
at construction for epoch 0; each step() advances one epoch through the
subclass's chainable get_lr(); step(epoch) takes the closed form where
there is one) and torch's check that optimizer.step() ran before the first
scheduler.step().

That check is torch's: the scheduler wraps optimizer.step with a function
that sets optimizer._opt_called; the second scheduler.step() (the first one
by the user) warns when it was never set. A step that GradScaler skipped
because of inf/NaN gradients does not count as a call, as in torch where
the skipped optimizer.step() is never called (ampy's fused optimizers are
called and skip inside their kernel: the wrapper reads the scaler's
found_inf for CPU tensors; on a GPU it does not sync and counts the call, as
torch's fused GPU optimizers do).

A step whose schedule raises (a lr_lambda that raises or returns a
non-number) changes nothing: every group's lr is computed before any is
set, and last_epoch moves only then. Arguments are checked before the
optimizer's groups are touched."""
import functools
import numbers
import warnings
import weakref

from ..optimizer import Optimizer

__all__ = ["LRScheduler", "EPOCH_DEPRECATION_WARNING"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being "
    "deprecated where possible. Please use `scheduler.step()` to step the "
    "scheduler. During the deprecation, if epoch is different from None, the "
    "closed form is used instead of the new chainable form, where available. "
    "Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose."
)

_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
    "In PyTorch 1.1.0 and later, you should call them in the opposite order: "
    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this "
    "will result in PyTorch skipping the first value of the learning rate schedule. "
    "See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")

_OVERRIDE_WARNING = (
    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
    "initialization. Please, make sure to call `optimizer.step()` before "
    "`lr_scheduler.step()`. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")


def _skipped_by_scaler(opt):
    """True when GradScaler handed this (fused) step a non-zero found_inf on
    the CPU: the kernel skipped it."""
    fi = getattr(opt, "found_inf", None)
    if fi is None or getattr(fi, "device", None) is None or fi.device.type != "cpu":
        return False
    return bool(fi.item())


def _patch_step(opt):
    """Wrap opt.step (once) so that a call is recorded in opt._opt_called."""
    if hasattr(opt.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = weakref.ref(opt)
    func = opt.step.__func__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        o = opt_ref()
        out = func.__get__(o, o.__class__)(*args, **kwargs)
        if not _skipped_by_scaler(o):
            o._opt_called = True
        return out

    wrapper._wrapped_by_lr_sched = True
    opt.step = wrapper


def _check_epoch(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"'{name}' must be an int, not {type(value).__name__}")
    if value < -1:
        raise ValueError(f"'{name}' must be >= -1, got {value}")
    return int(value)


def _format_param(name, optimizer, param):
    """One value per param group (a list/tuple of that length, or one value)."""
    n = len(optimizer.param_groups)
    if isinstance(param, (list, tuple)):
        if len(param) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has {n}.")
        return list(param)
    return [param] * n


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    """Base class; subclasses give get_lr() (torch's chainable form, reading
    self.last_epoch, self.base_lrs and the groups' current lrs) and, where
    torch has one, _get_closed_form_lr()."""

    _is_initial = False
    _step_count = 0

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(optimizer)
        _check_epoch(last_epoch, "last_epoch")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming scheduler with last_epoch >= 0.")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        _patch_step(optimizer)
        self._initial_step()

    def _initial_step(self):
        """The construction's step: sets the lr of epoch 0 (last_epoch + 1)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The lrs the last step() set, one per param group."""
        return self._last_lr

    def _group_lrs(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def step(self, epoch=None):
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(_OVERRIDE_WARNING, UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(_ORDER_WARNING, UserWarning, stacklevel=2)
        if epoch is not None:
            _check_epoch(epoch, "epoch")
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._step_count += 1
        try:
            self._update_lr(epoch)
        except BaseException:
            self._step_count -= 1
            raise

    def _update_lr(self, epoch=None):
        """Move to the next epoch (or `epoch`) and set every group's lr; on
        a failure nothing changes."""
        old = self.last_epoch
        self._get_lr_called_within_step = True  # torch's flag (saved in state_dict)
        try:
            if epoch is None:
                self.last_epoch = old + 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
            values = list(values)
            for i, lr in enumerate(values):
                if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
                    raise TypeError(f"{type(self).__name__}: the schedule gave a "
                                    f"{type(lr).__name__} for param_groups[{i}], expected a "
                                    f"number")
        except BaseException:
            self.last_epoch = old
            raise
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = self._group_lrs()

    _NOT_SAVED = ("optimizer",)

    def state_dict(self):
        """Every attribute but the optimizer (torch's format)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._NOT_SAVED}

    def load_state_dict(self, state_dict):
        """Checked before anything is replaced: last_epoch an int, base_lrs
        one number per parameter group."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"{type(self).__name__}.load_state_dict: expected a dict, got "
                            f"{type(state_dict).__name__}")
        if "last_epoch" in state_dict:
            _check_epoch(state_dict["last_epoch"], "last_epoch")
        if "base_lrs" in state_dict:
            lrs = state_dict["base_lrs"]
            n = len(self.optimizer.param_groups)
            if not isinstance(lrs, (list, tuple)) or len(lrs) != n or any(
                    isinstance(v, bool) or not isinstance(v, numbers.Real) for v in lrs):
                raise ValueError(f"{type(self).__name__}.load_state_dict: 'base_lrs' must be "
                                 f"{n} numbers (one per parameter group), got {lrs!r}")
        self.__dict__.update({k: v for k, v in state_dict.items() if k not in self._NOT_SAVED})
