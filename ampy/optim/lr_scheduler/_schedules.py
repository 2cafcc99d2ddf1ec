"""The epoch-indexed schedules: StepLR, MultiStepLR, ExponentialLR,
LambdaLR, LinearLR and CosineAnnealingLR, each with torch's chainable
get_lr (from the groups' current lrs, so schedulers compose) and, where
torch has it, its closed form for step(epoch)."""
import bisect
import collections
import math
import numbers
import types

from ._base import LRScheduler

__all__ = ["StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR", "LinearLR",
           "CosineAnnealingLR"]


def _number(value, cls, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{cls}: '{name}' must be a number, not {type(value).__name__}")
    return value


class StepLR(LRScheduler):
    """Multiply each group's lr by gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if isinstance(step_size, bool) or not isinstance(step_size, numbers.Integral) or \
                step_size < 1:
            raise ValueError(f"StepLR: 'step_size' must be a positive int, got {step_size!r}")
        self.step_size = int(step_size)
        self.gamma = _number(gamma, "StepLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply each group's lr by gamma at every milestone epoch (a
    milestone listed k times multiplies by gamma ** k)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        milestones = list(milestones)
        for m in milestones:
            if isinstance(m, bool) or not isinstance(m, numbers.Integral):
                raise TypeError(f"MultiStepLR: milestones must be ints, got {m!r}")
        self.milestones = collections.Counter(milestones)
        self.gamma = _number(gamma, "MultiStepLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._group_lrs()
        k = self.milestones[self.last_epoch]
        return [lr * self.gamma ** k for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect.bisect_right(ms, self.last_epoch) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply each group's lr by gamma every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = _number(gamma, "ExponentialLR", "gamma")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class _LambdasState:
    """state_dict / load_state_dict of a scheduler holding self.lr_lambdas, in torch's
    format: plain functions are not saved (None); callable objects save their __dict__."""

    _NOT_SAVED = ("optimizer", "lr_lambdas")

    def state_dict(self):
        sd = super().state_dict()
        sd["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else f.__dict__.copy()
                            for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict):
        lambdas = state_dict.get("lr_lambdas") if isinstance(state_dict, dict) else None
        super().load_state_dict(state_dict)
        for f, saved in zip(self.lr_lambdas, lambdas or []):
            if saved is not None:
                f.__dict__.update(saved)


class LambdaLR(_LambdasState, LRScheduler):
    """lr = base_lr * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas = [lr_lambda] * n
        else:
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        for i, f in enumerate(self.lr_lambdas):
            if not callable(f):
                raise TypeError(f"LambdaLR: lr_lambda[{i}] is a {type(f).__name__}, not callable")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * f(self.last_epoch) for f, b in zip(self.lr_lambdas, self.base_lrs)]



class LinearLR(LRScheduler):
    """Scale each group's lr linearly from start_factor to end_factor over
    total_iters epochs, then keep it."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._group_lrs()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._group_lrs()
        d = self.end_factor - self.start_factor
        ratio = 1.0 + d / (self.total_iters * self.start_factor + (self.last_epoch - 1) * d)
        return [lr * ratio for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        d = self.end_factor - self.start_factor
        return [b * (self.start_factor + d * min(self.total_iters, self.last_epoch) /
                     self.total_iters) for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from base_lr to eta_min over T_max epochs (torch's
    recursive form, which keeps following the cosine past T_max and composes
    with other schedulers; step(epoch) uses the closed form
    eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if isinstance(T_max, bool) or not isinstance(T_max, numbers.Real) or T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: 'T_max' must be a positive number, got "
                             f"{T_max!r}")
        self.T_max = T_max
        self.eta_min = _number(eta_min, "CosineAnnealingLR", "eta_min")
        super().__init__(optimizer, last_epoch)

    def _closed(self, base):
        return self.eta_min + (base - self.eta_min) * (
            1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2

    def get_lr(self):
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._group_lrs()
        if self._step_count == 1 and e > 0:
            return [self._closed(b) for b in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [lr + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                    for b, lr in zip(self.base_lrs, self._group_lrs())]
        ratio = (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
        return [ratio * (lr - lo) + lo for lr in self._group_lrs()]

    def _get_closed_form_lr(self):
        lo = self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]
