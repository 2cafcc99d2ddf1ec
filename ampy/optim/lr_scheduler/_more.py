"""ConstantLR, PolynomialLR, MultiplicativeLR, CosineAnnealingWarmRestarts, CyclicLR and
ChainedScheduler, with torch 2.13's trajectories (chainable get_lr from the groups' current
lrs, the closed forms of step(epoch)) and state_dict formats."""
import math
import numbers
import types

from ._base import LRScheduler, _check_optimizer, _format_param
from ._plateau import ReduceLROnPlateau
from ._schedules import _LambdasState

__all__ = ["ConstantLR", "PolynomialLR", "MultiplicativeLR", "CosineAnnealingWarmRestarts",
           "CyclicLR", "ChainedScheduler"]


def _callables(optimizer, fns, cls):
    n = len(optimizer.param_groups)
    if not isinstance(fns, (list, tuple)):
        fns = [fns] * n
    elif len(fns) != n:
        raise ValueError(f"Expected {n} lr_lambdas, but got {len(fns)}")
    for f in fns:
        if not callable(f):
            raise TypeError(f"lr_lambda should be a function, but got {type(f).__name__}")
    return list(fns)


def _fn_state(f):
    """torch's saved form of a user callable: None for a plain function, else its __dict__."""
    return None if f is None or isinstance(f, types.FunctionType) else f.__dict__.copy()


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until total_iters epochs have passed, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._group_lrs()]
        if self.last_epoch != self.total_iters:
            return self._group_lrs()
        return [lr * (1.0 / self.factor) for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._group_lrs()
        t = self.total_iters
        f = ((1.0 - self.last_epoch / t) / (1.0 - (self.last_epoch - 1) / t)) ** self.power
        return [lr * f for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        t = self.total_iters
        return [b * (1.0 - min(t, self.last_epoch) / t) ** self.power for b in self.base_lrs]


class MultiplicativeLR(_LambdasState, LRScheduler):
    """Each epoch multiplies a group's lr by lr_lambda(epoch) (one function or one per
    group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer(optimizer)
        self.lr_lambdas = _callables(optimizer, lr_lambda, "MultiplicativeLR")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        return [lr * f(self.last_epoch) for f, lr in zip(self.lr_lambdas, self._group_lrs())]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from base_lr to eta_min over T_i epochs, restarting with
    T_i *= T_mult (SGDR); step(epoch) takes fractional epochs."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i))
                / 2 for b in self.base_lrs]

    def step(self, epoch=None):
        """One epoch on (or to `epoch`, fractional allowed); torch's restart arithmetic."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            T_cur, T_i = self.T_cur + 1, self.T_i
            if T_cur >= T_i:
                T_cur, T_i = T_cur % T_i, T_i * self.T_mult
        else:
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Real):
                raise TypeError(f"'epoch' must be a number, not {type(epoch).__name__}")
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            T_i = self.T_i
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    T_i = self.T_0 * self.T_mult ** n
            else:
                T_i, T_cur = self.T_0, epoch
        old = (self.T_cur, self.T_i, self.last_epoch)
        self.T_cur, self.T_i, self.last_epoch = T_cur, T_i, math.floor(epoch)
        self._get_lr_called_within_step = True   # torch's flag (saved in state_dict)
        try:
            lrs = self.get_lr()
        except BaseException:
            self.T_cur, self.T_i, self.last_epoch = old
            raise
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = self._group_lrs()


class CyclicLR(LRScheduler):
    """The lr cycles between base_lr and max_lr (triangular, triangular2, exp_range or a
    custom scale_fn), stepped per batch; with cycle_momentum the momentum (or Adam's beta1)
    cycles the opposite way between max_momentum and base_momentum."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        if cycle_momentum and "momentum" not in optimizer.defaults and \
                "betas" not in optimizer.defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                             "option enabled")
        if cycle_momentum:
            base_m = _format_param("base_momentum", optimizer, base_momentum)
            max_m = _format_param("max_momentum", optimizer, max_momentum)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom, self.scale_mode = scale_fn, scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums, self.max_momentums = base_m, max_m
            if last_epoch == -1:
                for mx, bs, group in zip(max_m, base_m, optimizer.param_groups):
                    self._set_momentum(group, mx)
                    group["max_momentum"], group["base_momentum"] = mx, bs
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, m):
        if self.use_beta1:
            group["betas"] = (m, *group["betas"][1:])
        else:
            group["momentum"] = m

    def _init_scale_fn(self):
        if self._scale_fn_custom is not None:
            return
        if self.mode in ("triangular", "triangular2"):
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        f = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        s = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [b + (m - b) * f * s for b, m in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, bs, mx in zip(self.optimizer.param_groups, self.base_momentums,
                                     self.max_momentums):
                self._set_momentum(group, mx - (mx - bs) * f * s)
        return lrs

    def state_dict(self):
        sd = super().state_dict()
        sd["_scale_fn_custom"] = _fn_state(self._scale_fn_custom)
        return sd

    def load_state_dict(self, state_dict):
        saved = dict(state_dict)
        fn = saved.pop("_scale_fn_custom", None)
        super().load_state_dict(saved)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


class ChainedScheduler(LRScheduler):
    """Steps every scheduler of the list, in order, on each step()."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"ChainedScheduler at index {i} should have `optimizer` as its "
                                f"attribute.")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"ChainedScheduler does not support `ReduceLROnPlateau` "
                                 f"scheduler as it requires additional kwargs to be specified "
                                 f"when calling `step`, but got one at index {i} in the given "
                                 f"schedulers sequence.")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the same "
                                 f"optimizer, but got scheduler {type(s).__name__} at index "
                                 f"{i} has {s.optimizer}, which is different from "
                                 f"{type(optimizer).__name__}.")
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]

    def state_dict(self):
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        sd["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return sd

    def load_state_dict(self, state_dict):
        saved = dict(state_dict)
        subs = saved.pop("_schedulers")
        self.__dict__.update(saved)
        for s, sub in zip(self._schedulers, subs):
            s.load_state_dict(sub)
