"""ampy.nn.functional — torch.nn.functional's names and signatures.

layer_norm, cross_entropy, nll_loss, embedding, dropout and mse_loss are the
fused C kernels of csrc/nn.c (forward and backward, fp32 accumulation; ops in
ampy/nn/_ops.py). linear comes from ampy's GEMM, the activations and softmax
from ampy's element-wise math; they are composed of ops that carry their own
backward rules.
"""
import numbers
import warnings

from .. import _C
from .. import _dtype as D
from .. import _gemm, _math, _math_reduce
from .._creation import default_generator
from .._dispatch import dispatch, get_op
from .._shape import broadcast_shapes
from .._tensor import Tensor
from ..amp.autocast_mode import is_autocast_enabled
from ..autograd import is_grad_enabled
from ._ops import REDUCTIONS, Saved

__all__ = ["linear", "relu", "relu_", "gelu", "silu", "hardswish", "tanh", "sigmoid", "softmax",
           "log_softmax", "layer_norm", "dropout", "embedding", "cross_entropy", "nll_loss",
           "mse_loss"]

_LN, _CE, _NLL, _EMB, _DROP, _MSE, _HSW, _HSW_ = (get_op(n) for n in (
    "layer_norm", "cross_entropy", "nll_loss", "embedding", "dropout", "mse_loss", "hardswish",
    "hardswish_"))


def _grad_wanted(*ts):
    return is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


def _check_tensor(x, fn, arg):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' must be Tensor, not {type(x).__name__}")


def _reduction(size_average, reduce, reduction):
    """torch's _Reduction.legacy_get_string, then the enum value."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", stacklevel=3)
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return REDUCTIONS[reduction]


# ----------------------------------------------------------- composed ops
def linear(input, weight, bias=None):
    """input @ weight.T + bias (ampy's GEMM: fp32 accumulation)."""
    return _gemm.linear(input, weight, bias)


def relu(input, inplace=False):
    if inplace:
        return relu_(input)
    return _math.relu(input)


def relu_(input):
    return _math.relu_(input)


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh.")
    return _math.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    # in place with autograd: from a clone, so the backward keeps the input it saved
    out = _math.silu(input.clone() if inplace and input.requires_grad else input)
    if inplace:
        input.copy_(out)
        return input
    return out


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6 element-wise, as torch.nn.functional.hardswish."""
    return dispatch(_HSW_ if inplace else _HSW, input)


def tanh(input):
    return _math.tanh(input)


def sigmoid(input):
    return _math.sigmoid(input)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call "
                      "to include dim=X as an argument.", stacklevel=_stacklevel)
    return _math_reduce.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
        warnings.warn("Implicit dimension choice for log_softmax has been deprecated. Change the "
                      "call to include dim=X as an argument.", stacklevel=_stacklevel)
    return _math_reduce.log_softmax(input, dim, dtype=dtype)


# ------------------------------------------------------------- fused ops
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the trailing `normalized_shape` dims (one fused
    C pass per row; half inputs compute in fp32 and round once)."""
    _check_tensor(input, "layer_norm", "input")
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _check_tensor(t, "layer_norm", name)
            if tuple(t.shape) != shape:
                raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, "
                                   f"but got {name} of shape {list(t.shape)} and "
                                   f"normalized_shape = {list(shape)}")
    saved = Saved() if _grad_wanted(input, weight, bias) else None
    return dispatch(_LN, input, shape, weight, bias, float(eps), saved)


def dropout(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Zero each element with probability p and scale the rest by 1/(1-p).
    The keep-mask is drawn by ampy's Philox generator (fill_random kind RANDOM_BERNOULLI)."""
    _check_tensor(input, "dropout", "input")
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not input.dtype.is_floating_point:
        raise RuntimeError("dropout: expected a floating-point input")
    if not training or p == 0 or input.numel() == 0:
        return input
    g = generator or default_generator
    mask = (_C.empty(tuple(input.shape), D.uint8) if input._device_index < 0  # CUDA: drawn there
            else _C._empty_device(tuple(input.shape), D.uint8, input._device_index))
    seed, off = g._take(mask.numel())
    _C.fill_random(mask, _C.RANDOM_BERNOULLI, seed, off, 1.0 - float(p), 0.0)
    scale = 0.0 if p == 1 else 1.0 / (1.0 - float(p))
    out = dispatch(_DROP, input, mask, scale)
    if inplace:
        input.copy_(out)
        return input
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """weight[input]: rows of `weight` picked by integer indices of any shape."""
    _check_tensor(input, "embedding", "indices")
    _check_tensor(weight, "embedding", "weight")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported by ampy")
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if input.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {input.dtype} instead "
                           f"(while checking arguments for embedding)")
    n = weight.shape[0]
    if padding_idx is not None:
        if padding_idx > 0 and padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    idx = input if input.dtype is D.int64 else _C.cast(input, D.int64)
    return dispatch(_EMB, weight, idx, padding_idx)


def _class_targets(input, target, fn):
    """(rows (M, C), targets (M,), output shape for reduction='none')."""
    _check_tensor(input, fn, "input")
    _check_tensor(target, fn, "target")
    if target.dtype not in (D.int64, D.int32, D.uint8):
        raise RuntimeError(f"expected scalar type Long but found {target.dtype}")
    if target.dtype is not D.int64:
        target = _C.cast(target, D.int64)
    if input.ndim == 0:
        raise ValueError(f"Expected input to have at least 1 dimension (got 0)")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ValueError(f"Expected target to be a 0-d tensor for a 1-d input, got "
                             f"{list(target.shape)}")
        return input.reshape(1, input.shape[0]), target.reshape(1), ()
    n, c = input.shape[0], input.shape[1]
    rest = tuple(input.shape[2:])
    if tuple(target.shape) != (n,) + rest:
        if target.shape[:1] != input.shape[:1]:
            raise ValueError(f"Expected input batch_size ({n}) to match target batch_size "
                             f"({target.shape[0] if target.ndim else 0}).")
        raise RuntimeError(f"Expected target size {[n] + list(rest)}, got {list(target.shape)}")
    if rest:
        perm = (0,) + tuple(range(2, input.ndim)) + (1,)
        rows = input.permute(*perm).reshape(-1, c)
    else:
        rows = input
    return rows, target.reshape(-1).contiguous(), (n,) + rest


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax + nll_loss over the class dim (dim 1, or 0 for a 1-d input)
    in one fused C pass; class-index targets, or class probabilities (a
    floating target shaped like input)."""
    red = _reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{label_smoothing}")
    if isinstance(target, Tensor) and target.dtype.is_floating_point:
        return _cross_entropy_probs(input, target, weight, red, label_smoothing)
    rows, t, shape = _class_targets(input, target, "cross_entropy")
    _check_weight(weight, rows, "cross_entropy")
    saved = Saved() if _grad_wanted(input, weight) else None
    out = dispatch(_CE, rows, t, weight, int(ignore_index), red, float(label_smoothing), saved)
    return out.reshape(*shape) if red == _C.NN_REDUCTION_NONE else out


def _check_weight(weight, rows, fn):
    if weight is not None:
        _check_tensor(weight, fn, "weight")
        if weight.ndim != 1 or weight.shape[0] != rows.shape[1]:
            raise RuntimeError(f"weight tensor should be defined either for all "
                               f"{rows.shape[1]} classes or no classes but got weight tensor of "
                               f"shape: {list(weight.shape)}")


def _cross_entropy_probs(input, target, weight, red, ls):
    """Probability targets: -(sum_c w_c * p_c * log_softmax(x)_c), composed of
    ampy's element-wise ops (the class-index path is the fused one)."""
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected target size {list(input.shape)}, got "
                           f"{list(target.shape)}")
    # torch's autocast casts cross_entropy's inputs to float32 whatever the
    # target kind; this path is composed of ops, so the cast is made here
    if input.dtype in (D.float16, D.bfloat16, D.float32) and \
            is_autocast_enabled(input.device.type):
        input, target = input.float(), target.float()
        weight = weight if weight is None else weight.float()
    dim = 0 if input.ndim == 1 else 1
    c = input.shape[dim]
    logp = log_softmax(input, dim)
    if ls > 0:
        target = target * (1 - ls) + ls / c
    prod = logp * target
    if weight is not None:
        shape = [1] * input.ndim
        shape[dim] = c
        prod = prod * weight.reshape(*shape)
    loss = -_math_reduce.sum(prod, dim)
    if red == _C.NN_REDUCTION_NONE:
        return loss
    total = _math_reduce.sum(loss)
    if red == _C.NN_REDUCTION_MEAN:
        n = input.numel() // c
        return total / n if n else total / 0.0
    return total


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-weight[t] * input[t] over the class dim, input being log-probabilities."""
    red = _reduction(size_average, reduce, reduction)
    rows, t, shape = _class_targets(input, target, "nll_loss")
    _check_weight(weight, rows, "nll_loss")
    out = dispatch(_NLL, rows, t, weight, int(ignore_index), red)
    return out.reshape(*shape) if red == _C.NN_REDUCTION_NONE else out


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean (or sum / none) of (input - target)^2, accumulated in double."""
    _check_tensor(input, "mse_loss", "input")
    _check_tensor(target, "mse_loss", "target")
    if weight is not None:
        raise NotImplementedError("mse_loss: weight is not supported by ampy")
    red = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      f"broadcasting. Please ensure they have the same size.", stacklevel=2)
        shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
        if shape is None:
            raise RuntimeError(f"The size of tensor a ({input.shape[-1]}) must match the size "
                               f"of tensor b ({target.shape[-1]})")
        input, target = input.expand(*shape), target.expand(*shape)
    if input.dtype is not target.dtype:
        dt = D.promote_types(input.dtype, target.dtype)
        input, target = input.to(dt), target.to(dt)
    return dispatch(_MSE, input, target, red)


# ---- convolutional-network functions (ampy/nn/_functional_cnn.py)
from ._functional_cnn import (adaptive_avg_pool2d, avg_pool2d, batch_norm,  # noqa: E402
                              dropout1d, dropout2d, dropout3d, group_norm, interpolate,
                              max_pool2d, pad)

__all__ += ["batch_norm", "group_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "pad",
            "interpolate", "dropout1d", "dropout2d", "dropout3d"]
from ._functional_pool import (adaptive_avg_pool1d, adaptive_avg_pool3d,  # noqa: E402
                               adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d, avg_pool3d,
                               max_pool1d, max_pool3d)
__all__ += ["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d"]
from ._functional_norm import instance_norm  # noqa: E402
__all__ += ["instance_norm"]
from ._conv_functional import (conv1d, conv2d, conv3d, conv_transpose1d,  # noqa: E402
                               conv_transpose2d, conv_transpose3d)

__all__ += ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d"]
from .._scatter import one_hot  # noqa: E402  (an indexing op, declared with gather/scatter)

__all__ += ["one_hot"]
from ._ops_attention import scaled_dot_product_attention  # noqa: E402
from ._rms_norm import rms_norm  # noqa: E402
__all__ += ["scaled_dot_product_attention", "rms_norm"]
# ------------------------------------------------------ element-wise losses
from ._functional_loss import *  # noqa: E402,F401,F403
from ._functional_loss import __all__ as _loss_all  # noqa: E402
__all__ += _loss_all
# ------------------------------------------- multi-head attention (nn/_mha.py)
from ._mha import multi_head_attention_forward  # noqa: E402
__all__ += ["multi_head_attention_forward"]
# ---- more activations (_functional_act.py)
from ._functional_act import *  # noqa: E402,F401,F403
from ._functional_act import __all__ as _act_all  # noqa: E402
__all__ += _act_all

# ---- misc layers (_functional_misc.py)
from ._functional_misc import *  # noqa: E402,F401,F403
from ._functional_misc import __all__ as _misc_all  # noqa: E402
__all__ += _misc_all

# ---- more losses (_functional_loss_more.py)
from ._functional_loss_more import *  # noqa: E402,F401,F403
from ._functional_loss_more import __all__ as _loss_more_all  # noqa: E402
__all__ += _loss_more_all
