"""OneCycleLR: torch's 1cycle policy (Smith & Topin), per step: the lr
anneals from max_lr / div_factor up to max_lr over pct_start of the steps,
then down to initial_lr / final_div_factor (three_phase: back to
initial_lr first, then down), by cosine or linear annealing; with
cycle_momentum the momentum (SGD, RMSprop) or beta1 (Adam) moves the
opposite way between max_momentum and base_momentum."""
import math
import numbers

from ._base import LRScheduler, _check_optimizer, _format_param

__all__ = ["OneCycleLR"]


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"Expected positive integer {name}, but got {value}")
    return value


def _phases(total, pct_start, three_phase):
    """The schedule's phases as (end_step, start_lr, end_lr, start_momentum,
    end_momentum), the names being param-group keys."""
    up = float(pct_start * total) - 1
    if three_phase:
        return [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * total) - 2, "max_lr", "initial_lr", "base_momentum",
                 "max_momentum"),
                (total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
    return [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]


class OneCycleLR(LRScheduler):
    """torch.optim.lr_scheduler.OneCycleLR (same arguments and defaults);
    step() once per batch, total_steps (or epochs * steps_per_epoch) times."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            self.total_steps = _positive_int(total_steps, "total_steps")
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_positive_int(epochs, "epochs") *
                                _positive_int(steps_per_epoch, "steps_per_epoch"))
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._schedule_phases = _phases(self.total_steps, pct_start, three_phase)
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            max_ms = _format_param("max_momentum", optimizer, max_momentum)
            base_ms = _format_param("base_momentum", optimizer, base_momentum)
        if last_epoch == -1:
            for group, m in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
            if cycle_momentum:
                for group, hi, lo in zip(optimizer.param_groups, max_ms, base_ms):
                    self._set_momentum(group, hi)
                    group["max_momentum"] = hi
                    group["base_momentum"] = lo
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs, momenta = [], []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._schedule_phases):
                if step <= end or i == last:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        momenta.append(self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        for group, m in zip(self.optimizer.param_groups, momenta):
            if not isinstance(m, numbers.Real):
                raise TypeError(f"OneCycleLR: momentum {m!r} is not a number")
            self._set_momentum(group, m)
        return lrs
