"""torch.nn.functional's margin, embedding and likelihood losses, composed
from ampy ops (so backward comes from the ops used): margin_ranking_loss,
hinge_embedding_loss, soft_margin_loss, multilabel_soft_margin_loss,
cosine_embedding_loss, triplet_margin_loss, poisson_nll_loss,
gaussian_nll_loss, multi_margin_loss, triplet_margin_with_distance_loss.
The ones on torch's CPU autocast fp32 list run in float32 there.
"""
import math

import numpy as np

from .. import _dtype as D
from .._creation import arange, full as _full
from .._math import where
from .._convert import tensor
from .._tensor import Tensor
from ._functional_act import logsigmoid
from ._functional_loss import _legacy
from ._functional_misc import _broadcast, _fp32_cpu, pairwise_distance

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "multi_margin_loss",
           "triplet_margin_with_distance_loss", "multilabel_margin_loss"]


def _check(t, fn, arg):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be Tensor, not {type(t).__name__}")


def _same_shape(fn, *ts):
    """torch's broadcast error for shapes that do not broadcast."""
    shape = tuple(ts[0].shape)
    for t in ts[1:]:
        shape = _broadcast(shape, tuple(t.shape), fn)
    return shape


def _red_check(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target (input1 - input2) + margin)."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    fn = "margin_ranking_loss"
    for a, t in (("input1", input1), ("input2", input2), ("target", target)):
        _check(t, fn, a)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.shape}, input2: {input2.shape}, "
                           f"target: {target.shape} ")
    _same_shape(fn, input1, input2, target)
    input1, input2, target = _fp32_cpu(input1, input2, target)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), red)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target == 1, max(0, margin - input) where target == -1."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    _check(input, "hinge_embedding_loss", "input")
    _check(target, "hinge_embedding_loss", "target")
    _same_shape("hinge_embedding_loss", target, input)
    input, target = _fp32_cpu(input, target)
    neg = where(target != 1, (margin - input).clamp_min(0), 0.0)
    pos = where(target != -1, input, 0.0)
    return _reduce(neg + pos, red)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    _check(input, "soft_margin_loss", "input")
    _check(target, "soft_margin_loss", "target")
    _same_shape("soft_margin_loss", input, target)
    input, target = _fp32_cpu(input, target)
    return _reduce((-target * input).exp().log1p(), red)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """-(t logsigmoid(x) + (1 - t) logsigmoid(-x)), times weight, averaged over
    the last (class) dim."""
    red = _legacy(size_average, reduce, reduction)
    if red not in ("none", "mean", "sum"):
        raise ValueError(red + " is not valid")
    _check(input, "multilabel_soft_margin_loss", "input")
    _check(target, "multilabel_soft_margin_loss", "target")
    _same_shape("multilabel_soft_margin_loss", target, input)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        _check(weight, "multilabel_soft_margin_loss", "weight")
        loss = loss * weight
    c = input.shape[-1] if input.ndim else 1
    loss = loss.sum(loss.ndim - 1) / c if loss.ndim else loss / c
    return _reduce(loss, red)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(input1, input2) where target == 1, max(0, cos - margin) where
    target == -1 (cosine over the last dim)."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    fn = "cosine_embedding_loss"
    for a, t in (("input1", input1), ("input2", input2), ("target", target)):
        _check(t, fn, a)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if target.ndim == 1 and input1.ndim != 2 or target.ndim == 0 and input1.ndim != 1:
        raise RuntimeError(f"{target.ndim}D target tensor expects {target.ndim + 1}D input "
                           f"tensors, but found inputs with sizes {list(input1.shape)} and "
                           f"{list(input2.shape)}.")
    _same_shape(fn, input1, input2)
    _broadcast(tuple(target.shape), tuple(input1.shape[:-1]), fn)
    input1, input2, target = _fp32_cpu(input1, input2, target)
    d = input1.ndim - 1
    eps = 1e-12
    dot = (input1 * input2).sum(d)
    m1 = (input1 * input1).sum(d) + eps
    m2 = (input2 * input2).sum(d) + eps
    cos = dot / (m1 * m2).sqrt()
    pos = where(target == 1, 1 - cos, 0.0)
    neg = where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(pos + neg, red)


def _triplet_dims(anchor, positive, negative, fn):
    for a, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check(t, fn, a)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {anchor.ndim}D, "
                           f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin), d the p-norm pairwise distance
    (swap: d(a, n) replaced by min(d(a, n), d(p, n)))."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    _triplet_dims(anchor, positive, negative, "triplet_margin_loss")
    anchor, positive, negative = _fp32_cpu(anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), red)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with a distance function of your own (default
    pairwise_distance); margin must be > 0."""
    _red_check(reduction)
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                         f"got {margin} instead")
    _triplet_dims(anchor, positive, negative, "triplet_margin_with_distance_loss")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target input (log_input) or input - target log(input + eps);
    full adds Stirling's term for target > 1."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    _check(input, "poisson_nll_loss", "input")
    _check(target, "poisson_nll_loss", "target")
    _same_shape("poisson_nll_loss", target, input)
    input, target = _fp32_cpu(input, target)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        t = where(target > 1, target, 1.0)
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, red)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log 2 pi
    if full); var of input's shape, or one dim less, or with a last dim of 1."""
    _check(input, "gaussian_nll_loss", "input")
    _check(target, "gaussian_nll_loss", "target")
    if not isinstance(var, Tensor):
        var = _full((), float(var), dtype=input.dtype)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1) \
                and var.ndim != 0:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # torch clamps a clone in place under no_grad: the gradient passes through as is
    var = var + (var.clamp_min(eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over j != y of max(0, margin - x[y] + x[j])^p (times weight[y]),
    divided by the number of classes."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    _check(input, "multi_margin_loss", "input")
    _check(target, "multi_margin_loss", "target")
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None:
        _check(weight, "multi_margin_loss", "weight")
        if weight.ndim != 1:
            raise ValueError("weight must be one-dimensional")
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or (
            input.ndim <= 1 and input.numel() == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(input.shape)}")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n, c = x.shape
    if target.numel() != n or target.ndim > 1:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal "
                           f"to the number of input samples (batch size). Expected target size "
                           f"[{n}], but got {list(target.shape)}. Input has shape "
                           f"{list(input.shape)}.")
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got "
                           f"{list(weight.shape)}")
    if target.dtype is not D.int64:
        names = {"float32": "Float", "float64": "Double", "int32": "Int", "float16": "Half",
                 "bfloat16": "BFloat16", "int16": "Short", "int8": "Char", "uint8": "Byte",
                 "bool": "Bool"}
        dt = str(target.dtype).split(".")[-1]
        raise RuntimeError(f"expected scalar type Long but found {names.get(dt, dt)}")
    if target.numel() and (bool((target < 0).any()) or bool((target >= c).any())):
        raise RuntimeError("target out of range")
    (x,) = _fp32_cpu(x)
    if weight is not None:
        (weight,) = _fp32_cpu(weight)
    y = target.reshape(-1, 1)
    xy = x.gather(1, y)
    z = (margin - xy + x).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[y.reshape(-1)].reshape(-1, 1)
    cls = arange(c).reshape(1, c)
    z = where(cls == y, 0.0, z)
    loss = z.sum(1) / c
    if input.ndim < 2:
        loss = loss.reshape(target.shape) if target.ndim else loss.reshape(())
    return _reduce(loss, red)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the sum over its targets j (the indices before the first -1) and its
    non-targets i of max(0, 1 - (x[j] - x[i])), divided by C. The targets are read on the
    host (one sync)."""
    red = _red_check(_legacy(size_average, reduce, reduction))
    _check(input, "multilabel_margin_loss", "input")
    _check(target, "multilabel_margin_loss", "target")
    if tuple(input.shape) != tuple(target.shape) or input.ndim not in (1, 2):
        raise ValueError(f"multilabel_margin_loss: expected input and target of the same shape "
                         f"(C,) or (N, C), got input {list(input.shape)} and target "
                         f"{list(target.shape)}")
    input, = _fp32_cpu(input)
    x = input if input.ndim == 2 else input.unsqueeze(0)
    tn = np.asarray(target.numpy()).reshape(x.shape[0], -1).astype(np.int64)
    n, c = x.shape
    cnt = np.zeros((n, c), dtype=np.float64)
    for r in range(n):
        for j in tn[r]:
            if j < 0:
                break
            if j >= c:
                raise IndexError(f"multilabel_margin_loss: target {j} out of range [0, {c})")
            cnt[r, j] += 1
    nontarget = (cnt == 0).astype(np.float64)
    z = (x.unsqueeze(1) - x.unsqueeze(2) + 1).clamp_min(0)  # [n, j, i] = 1 - x_j + x_i
    w = tensor((cnt[:, :, None] * nontarget[:, None, :]).astype(np.float32)).to(x.dtype)
    loss = (z * w).sum((1, 2)) / c
    if input.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, red)
