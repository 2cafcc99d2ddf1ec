"""ampy.optim.lr_scheduler — StepLR and LambdaLR with torch's semantics
(the lr is set at construction for epoch 0; each step() advances one epoch).

A step whose schedule raises (a lr_lambda that raises or returns a
non-number) changes nothing: every group's lr is computed before any is
set, and last_epoch moves only then. Arguments are checked before the
optimizer's groups are touched."""
import numbers
from .optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "LambdaLR"]


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        _check_epoch(last_epoch, "last_epoch")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming an optimizer")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def _lr_at(self, base_lr, i, epoch):
        """The closed form: the lr of group i at `epoch`."""
        raise NotImplementedError

    def _next_lr(self, base_lr, i, epoch):
        """The lr for one step() to `epoch` (torch's get_lr; chainable
        schedulers start from the group's current lr)."""
        return self._lr_at(base_lr, i, epoch)

    def get_last_lr(self):
        return self._last_lr

    def step(self, epoch=None):
        new_epoch = self.last_epoch + 1 if epoch is None else _check_epoch(epoch, "epoch")
        lrs = []
        for i, base in enumerate(self.base_lrs):
            lr = (self._next_lr(base, i, new_epoch) if epoch is None
                  else self._lr_at(base, i, new_epoch))
            if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
                raise TypeError(f"{type(self).__name__}: the schedule gave a "
                                f"{type(lr).__name__} for param_groups[{i}], expected a number")
            lrs.append(lr)
        self.last_epoch = new_epoch
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

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
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})


def _check_epoch(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"'{name}' must be an int, not {type(value).__name__}")
    if value < -1:
        raise ValueError(f"'{name}' must be >= -1, got {value}")
    return int(value)


class StepLR(LRScheduler):
    """Multiply each group's lr by gamma every step_size epochs (torch's
    chainable form: from the group's current lr; step(epoch) uses the closed
    form base_lr * gamma ** (epoch // step_size))."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if isinstance(step_size, bool) or not isinstance(step_size, numbers.Integral) or \
                step_size < 1:
            raise ValueError(f"StepLR: 'step_size' must be a positive int, got {step_size!r}")
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real):
            raise TypeError(f"StepLR: 'gamma' must be a number, not {type(gamma).__name__}")
        self.step_size = int(step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _lr_at(self, base_lr, i, epoch):
        return base_lr * self.gamma ** (epoch // self.step_size)

    def _next_lr(self, base_lr, i, epoch):
        # torch's StepLR.get_lr: chainable, from the group's current lr
        lr = self.optimizer.param_groups[i]["lr"]
        if epoch == 0 or epoch % self.step_size != 0:
            return lr
        return lr * self.gamma


class LambdaLR(LRScheduler):
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

    def _lr_at(self, base_lr, i, epoch):
        return base_lr * self.lr_lambdas[i](epoch)
