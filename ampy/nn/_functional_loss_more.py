"""torch.nn.functional's margin, embedding and likelihood losses, composed
from ampy ops (autograd from those ops): margin_ranking_loss,
hinge_embedding_loss, cosine_embedding_loss, triplet_margin_loss,
triplet_margin_with_distance_loss, soft_margin_loss,
multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss,
poisson_nll_loss, gaussian_nll_loss. The losses on torch's CPU autocast
fp32 list run in float32 inside an autocast region, as torch's."""
import math

import numpy as np

from .. import _dtype as D
from .._convert import tensor
from .._creation import full_like
from .._math import logsigmoid, minimum, where
from .._tensor import Tensor
from ..amp.autocast_mode import is_autocast_enabled

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss"]

_LOW = (D.float16, D.bfloat16)


def _check(x, fn, arg):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _fp32(*ts):
    """Under autocast, half inputs of an fp32-policy loss become float32."""
    t0 = next(t for t in ts if isinstance(t, Tensor))
    if not is_autocast_enabled(t0.device.type):
        return ts
    return tuple(t.float() if isinstance(t, Tensor) and t.dtype in _LOW else t for t in ts)


def _reduce(loss, reduction, fn="loss"):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """mean(max(0, -target * (input1 - input2) + margin))."""
    fn = "margin_ranking_loss"
    for x, a in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _check(x, fn, a)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {tuple(input1.shape)}, input2: "
                           f"{tuple(input2.shape)}, target: {tuple(target.shape)} ")
    _check_reduction(reduction)
    input1, input2, target = _fp32(input1, input2, target)
    loss = (target.neg() * (input1 - input2) + margin).clamp_min(0)
    return _reduce(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target == 1, max(0, margin - input) where target == -1."""
    _check(input, "hinge_embedding_loss", "input")
    _check(target, "hinge_embedding_loss", "target")
    _check_reduction(reduction)
    input, target = _fp32(input, target)
    zero = input.mul(0)
    m = (input.neg() + margin).clamp_min(0)
    loss = _where(target != -1, input, zero) + _where(target != 1, m, zero)
    return _reduce(loss, reduction)


def _where(c, a, b):
    return where(c, a, b)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """mean(log(1 + exp(-target * input)))."""
    _check(input, "soft_margin_loss", "input")
    _check(target, "soft_margin_loss", "target")
    _check_reduction(reduction)
    input, target = _fp32(input, target)
    loss = (target.neg() * input).exp().log1p()
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per sample, the mean over classes of the binary logistic loss."""
    _check(input, "multilabel_soft_margin_loss", "input")
    _check(target, "multilabel_soft_margin_loss", "target")
    _check_reduction(reduction)
    loss = (target * logsigmoid(input) + (target.neg() + 1) * logsigmoid(input.neg())).neg()
    if weight is not None:
        loss = loss * weight
    c = input.ndim - 1
    loss = loss.sum(dim=c) / input.shape[c]
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target == 1, max(0, cos - margin) where -1."""
    fn = "cosine_embedding_loss"
    for x, a in ((input1, "input1"), (input2, "input2"), (target, "target")):
        _check(x, fn, a)
    if input1.ndim not in (1, 2) or input1.ndim != input2.ndim:
        raise RuntimeError(f"cosine_embedding_loss: input1 and input2 must be 1D or 2D with the "
                           f"same dimension, got input1 {input1.ndim}D and input2 "
                           f"{input2.ndim}D")
    if target.ndim != input1.ndim - 1:
        raise RuntimeError(f"cosine_embedding_loss: expected target to be "
                           f"{input1.ndim - 1}D, got {target.ndim}D")
    _check_reduction(reduction)
    input1, input2, target = _fp32(input1, input2, target)
    eps = 1e-12
    prod = (input1 * input2).sum(-1)
    m1 = (input1 * input1).sum(-1) + eps
    m2 = (input2 * input2).sum(-1) + eps
    cos = prod / (m1 * m2).sqrt()
    zero = cos.mul(0)
    loss = _where(target == 1, cos.neg() + 1, zero) + \
        _where(target == -1, (cos - margin).clamp_min(0), zero)
    return _reduce(loss, reduction)


def _pairwise(x1, x2, p=2.0, eps=1e-6):
    return (x1 - x2 + eps).norm(p, dim=-1)


def _check_triplet(anchor, positive, negative, fn):
    for x, a in ((anchor, "anchor"), (positive, "positive"), (negative, "negative")):
        _check(x, fn, a)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {anchor.ndim}D, "
                           f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)), d the p-norm distance."""
    _check_triplet(anchor, positive, negative, "triplet_margin_loss")
    _check_reduction(reduction)
    anchor, positive, negative = _fp32(anchor, positive, negative)
    dp = _pairwise(anchor, positive, p, eps)
    dn = _pairwise(anchor, negative, p, eps)
    if swap:
        dn = minimum(dn, _pairwise(positive, negative, p, eps))
    return _reduce((dp - dn + margin).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance_function (default the
    pairwise 2-norm distance)."""
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                         f"got {margin} instead")
    _check_triplet(anchor, positive, negative, "triplet_margin_with_distance_loss")
    _check_reduction(reduction)
    d = distance_function if distance_function is not None else _pairwise
    dp, dn = d(anchor, positive), d(anchor, negative)
    if swap:
        dn = minimum(dn, d(positive, negative))
    return _reduce((dp - dn + margin).clamp_min(0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input), else input - target *
    log(input + eps); full adds the Stirling term where target > 1."""
    _check(input, "poisson_nll_loss", "input")
    _check(target, "poisson_nll_loss", "target")
    _check_reduction(reduction)
    input, target = _fp32(input, target)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        st = target * target.log() - target + (target * (2 * math.pi)).log() * 0.5
        loss = loss + st.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (input - target) ** 2 / var) (+ 0.5 log(2 pi) when
    full), var clamped to eps (the clamp passes gradients through)."""
    for x, a in ((input, "input"), (target, "target")):
        _check(x, "gaussian_nll_loss", a)
    if isinstance(var, (int, float)):
        var = full_like(input, float(var))
    _check(var, "gaussian_nll_loss", "var")
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != ishape:
        if ishape[:-1] == vshape:
            var = var.unsqueeze(-1)
        elif ishape[:-1] == vshape[:-1] and vshape[-1:] == (1,):
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    v = var + (var.detach().clamp_min(eps) - var.detach())
    loss = ((input - target) ** 2 / v + v.log()) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Per sample, sum over j != y of max(0, margin - x[y] + x[j]) ** p
    (times weight[y]) / C."""
    _check(input, "multi_margin_loss", "input")
    _check(target, "multi_margin_loss", "target")
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if input.ndim not in (1, 2) or input.ndim - 1 != target.ndim or (
            input.ndim == 2 and input.shape[0] != target.shape[0]):
        raise ValueError(f"multi_margin_loss: expected input of shape (N, C) or (C,) and target "
                         f"of shape (N,) or (), got input {list(input.shape)} and target "
                         f"{list(target.shape)}")
    _check_reduction(reduction)
    input, = _fp32(input)
    x = input if input.ndim == 2 else input.unsqueeze(0)
    t = (target if target.ndim == 1 else target.reshape(1)).long()
    c = x.shape[1]
    tn = t.numpy()
    if tn.size and (tn.min() < 0 or tn.max() >= c):
        raise IndexError(f"multi_margin_loss: target out of range [0, {c})")
    xy = x.gather(1, t.unsqueeze(1))
    z = (x - xy + margin).clamp_min(0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.gather(0, t).unsqueeze(1)
    other = np.ones((x.shape[0], c), dtype=bool)
    other[np.arange(x.shape[0]), tn] = False
    z = _where(tensor(other), z, z.mul(0))
    loss = z.sum(1) / c
    if input.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, sum over its targets j (the indices before the first -1)
    and its non-targets i of max(0, 1 - (x[j] - x[i])) / C."""
    _check(input, "multilabel_margin_loss", "input")
    _check(target, "multilabel_margin_loss", "target")
    if tuple(input.shape) != tuple(target.shape) or input.ndim not in (1, 2):
        raise ValueError(f"multilabel_margin_loss: expected input and target of the same shape "
                         f"(C,) or (N, C), got input {list(input.shape)} and target "
                         f"{list(target.shape)}")
    _check_reduction(reduction)
    input, = _fp32(input)
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
    return _reduce(loss, reduction)
