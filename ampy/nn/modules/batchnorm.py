"""BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d and GroupNorm (torch.nn's
parameters, buffers, state_dict keys and running-stat rules)."""
import warnings

import numpy as np

from ... import _creation as C
from ... import _dtype as D
from ..._tensor import Tensor
from .. import _functional_cnn as FC
from .. import init
from ..parameter import Parameter
from .module import Module

from .. import _functional_norm as FN

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "GroupNorm"]


class _BatchNorm(Module):
    """torch's _NormBase and _BatchNorm: weight (ones) and bias (zeros, unless
    bias=False) when affine;
    running_mean (zeros), running_var (ones) and num_batches_tracked (int64 0)
    buffers when track_running_stats. momentum=None makes the running stats
    a cumulative average (factor 1 / num_batches_tracked)."""

    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(C.empty((num_features,), dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(C.empty((num_features,), dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", C.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", C.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", C.zeros((), dtype=D.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return FC.batch_norm(input, self.running_mean if keep else None,
                             self.running_var if keep else None, self.weight, self.bias,
                             use_batch, factor, self.eps)

    def _load_from_state_dict(self, state_dict, prefix, strict, missing, unexpected, errors,
                              assign):
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict = dict(state_dict)
            state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                               else C.zeros((), dtype=D.int64))
        elif key in state_dict and not isinstance(state_dict[key], Tensor):
            # a foreign 0-d counter (torch's) keeps its 0-d shape
            state_dict = dict(state_dict)
            state_dict[key] = C.full((), int(np.asarray(state_dict[key])), dtype=D.int64)
        super()._load_from_state_dict(state_dict, prefix, strict, missing, unexpected, errors,
                                      assign)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) inputs."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W) inputs."""

    _dims = (5,)


class _InstanceNorm(_BatchNorm):
    """torch's _InstanceNorm: affine and track_running_stats default to
    False; each (sample, channel) is normalised with its own statistics in
    training (or without running stats), the running stats (when tracked)
    get the batch average of the per-sample updates; num_batches_tracked is
    registered but never counted. A (C, ...) input without a batch dim is
    normalised as a batch of one."""

    _no_batch = 0

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def _check_input_dim(self, input):
        if input.ndim not in (self._no_batch, self._no_batch + 1):
            raise ValueError(f"expected {self._no_batch}D or {self._no_batch + 1}D input (got "
                             f"{input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.ndim - self._no_batch
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          "can silence this warning by not passing in num_features, which is "
                          "not used because affine=False", stacklevel=2)
        batched = input.ndim != self._no_batch
        x = input if batched else input.unsqueeze(0)
        out = FN.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               0.0 if self.momentum is None else self.momentum, self.eps)
        return out if batched else out.squeeze(0)

    def _load_from_state_dict(self, state_dict, prefix, strict, missing, unexpected, errors,
                              assign):
        if not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var") if prefix + n in
                    state_dict]
            if keys:
                errors.append("Unexpected running stats buffer(s) {names} for {klass} with "
                              "track_running_stats=False. If state_dict is a checkpoint saved "
                              "before 0.4.0, this may be expected because {klass} does not "
                              "track running stats by default since 0.4.0. Please remove these "
                              "keys from state_dict. If the running stats are actually needed, "
                              "instead set track_running_stats=True in {klass} to enable them. "
                              "See the documentation of {klass} for details.".format(
                                  names=" and ".join(f'"{k}"' for k in keys),
                                  klass=type(self).__name__))
                state_dict = {k: v for k, v in state_dict.items() if k not in keys}
        super()._load_from_state_dict(state_dict, prefix, strict, missing, unexpected, errors,
                                      assign)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) or (C, L) inputs."""

    _no_batch = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) or (C, H, W) inputs."""

    _no_batch = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _no_batch = 4


class GroupNorm(Module):
    """Group norm of num_channels channels in num_groups groups; weight ones,
    bias zeros when affine."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(C.empty((num_channels,), dtype=dtype, device=device))
            self.bias = Parameter(C.empty((num_channels,), dtype=dtype, device=device))
            init.ones_(self.weight)
            init.zeros_(self.bias)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return FC.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
