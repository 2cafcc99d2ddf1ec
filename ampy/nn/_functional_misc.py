"""torch.nn.functional's remaining layers, composed from ampy ops (so
autograd and autocast come from the ops used): normalize,
cosine_similarity, pairwise_distance, pdist, pixel_shuffle/unshuffle,
channel_shuffle, unfold/fold, bilinear, embedding_bag,
local_response_norm, lp_pool1d/2d/3d, max_unpool1d/2d/3d, affine_grid,
grid_sample, upsample*, the *_with_indices pool names, and
adaptive_max_pool3d (an op of its own over csrc/cnn_pool3d.c).
"""
import math
import numbers

from .. import _C
from .. import _creation as C
from .. import _dtype as D
from .. import _views as V
from .._convert import tensor as _tensor
from .._dispatch import CPU, backward, defop, dispatch, get_op
from .._math_reduce import cat, stack
from .._tensor import Tensor
from ..amp import autocast_mode as _AM
from . import _functional_cnn as FC
from . import _functional_pool as FP
from . import _ops_pool3d as P3
from ._ops import Saved

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "pdist", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "unfold", "fold",
           "bilinear", "embedding_bag", "local_response_norm", "lp_pool1d", "lp_pool2d",
           "lp_pool3d", "adaptive_max_pool3d", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
           "affine_grid", "grid_sample", "upsample", "upsample_nearest", "upsample_bilinear"]


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _tup(v, n, fn, arg):
    if _is_int(v):
        return (int(v),) * n
    v = tuple(v)
    if len(v) != n or not all(_is_int(e) for e in v):
        raise TypeError(f"{fn}(): argument '{arg}' must be an int or a tuple of {n} ints")
    return tuple(int(e) for e in v)


def _check(t, fn, arg="input"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position 1) must be Tensor, not "
                        f"{type(t).__name__}")


def _fp32_cpu(*ts):
    """torch's CPU autocast fp32 policy for the ops it lists that ampy composes:
    float16/bfloat16 CPU tensors run in float32 while CPU autocast is on."""
    if not _AM.is_autocast_enabled("cpu"):
        return ts
    return tuple(t.float() if isinstance(t, Tensor) and t.is_cpu
                 and t.dtype in (D.float16, D.bfloat16) else t for t in ts)


# ------------------------------------------------------------- distances
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps) (torch.nn.functional.normalize)."""
    _check(input, "normalize")
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported")
    n = input.norm(p, dim, keepdim=True).clamp_min(eps)
    return input / n.expand_as(input)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum over dim of (x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps)),
    x1 and x2 broadcast first (torch.nn.functional.cosine_similarity)."""
    _check(x1, "cosine_similarity", "x1")
    _check(x2, "cosine_similarity", "x2")
    shape = _broadcast(x1.shape, x2.shape, "cosine_similarity")
    a, b = x1.expand(shape), x2.expand(shape)
    na = a.norm(2, dim, keepdim=True).clamp_min(eps)
    nb = b.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((a / na) * (b / nb)).sum(dim)


def _broadcast(s1, s2, fn):
    n = max(len(s1), len(s2))
    s1 = (1,) * (n - len(s1)) + tuple(s1)
    s2 = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for i, (a, b) in enumerate(zip(s1, s2)):
        if a != b and a != 1 and b != 1:
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b "
                               f"({b}) at non-singleton dimension {i}")
        out.append(b if a == 1 else a)
    return tuple(out)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (torch.nn.functional.pairwise_distance)."""
    _check(x1, "pairwise_distance", "x1")
    _check(x2, "pairwise_distance", "x2")
    d = max(x1.ndim, x2.ndim) - 1
    return (x1 - x2 + eps).norm(p, max(d, 0) if d >= 0 else None, keepdim=keepdim)


def pdist(input, p=2):
    """||input[i] - input[j]||_p for the rows i < j of a 2-d input, in row-major
    order (torch.nn.functional.pdist)."""
    _check(input, "pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    ii = [i for i in range(n) for j in range(i + 1, n)]
    jj = [j for i in range(n) for j in range(i + 1, n)]
    if not ii:
        return C.zeros((0,), dtype=input.dtype)
    i = _tensor(ii, dtype=_int64())
    j = _tensor(jj, dtype=_int64())
    return (input[i] - input[j]).norm(p, 1)


def _int64():
    return D.int64


# --------------------------------------------------------- shuffles
def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r) (torch.nn.functional.pixel_shuffle)."""
    _check(input, "pixel_shuffle")
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *b, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    k = len(b)
    x = input.reshape(*b, c // (r * r), r, r, h, w)
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(*b, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W) (torch.nn.functional.pixel_unshuffle)."""
    _check(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *b, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by "
                           f"downscale_factor, but got height={h}, width={w}, "
                           f"downscale_factor={r}")
    k = len(b)
    x = input.reshape(*b, c, h // r, r, w // r, r)
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(*b, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, g * k, *) -> channels regrouped as (k, g) (torch.nn.functional.channel_shuffle)."""
    _check(input, "channel_shuffle")
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value "
                           f"of groups:{g}")
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.ndim} dimension(s)")
    n, c, *rest = input.shape
    if c % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {g} groups.")
    x = input.reshape(n, g, c // g, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


native_channel_shuffle = channel_shuffle


# ------------------------------------------------------------ unfold / fold
def _unfold_index(spatial, k, d, p, s, fn):
    """Flat indices into the padded plane: (kh*kw, L), and (L blocks per dim)."""
    hp, wp = spatial[0] + 2 * p[0], spatial[1] + 2 * p[1]
    nb = []
    for i in range(2):
        n = (spatial[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1
        nb.append(n)
    if nb[0] < 1 or nb[1] < 1:
        raise RuntimeError(f"Given input with spatial size ({spatial[0]}, {spatial[1]}), "
                           f"kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, {d[1]}), "
                           f"padding=({p[0]}, {p[1]}), calculated shape of the array of sliding "
                           f"blocks as ({nb[0]}, {nb[1]}), but its components must be at "
                           f"least one.")
    rows = [(a * d[0] + bh * s[0]) * wp + (b * d[1] + bw * s[1])
            for a in range(k[0]) for b in range(k[1])
            for bh in range(nb[0]) for bw in range(nb[1])]
    idx = _tensor(rows, dtype=_int64()).reshape(k[0] * k[1] * nb[0] * nb[1])
    return idx, nb, (hp, wp)


def _fold_args(kernel_size, dilation, padding, stride, fn):
    k = _tup(kernel_size, 2, fn, "kernel_size")
    d = _tup(dilation, 2, fn, "dilation")
    p = _tup(padding, 2, fn, "padding")
    s = _tup(stride, 2, fn, "stride")
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: "
                           f"{k[0]} kernel_width: {k[1]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: "
                           f"{d[0]} dilation_width: {d[1]}")
    if min(p) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} "
                           f"pad_width: {p[1]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: "
                           f"{s[0]} stride_width: {s[1]}")
    return k, d, p, s


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col (torch.nn.functional.unfold): (N, C, H, W) -> (N, C kh kw, L)."""
    _check(input, "unfold")
    fn = "im2col"
    k, d, p, s = _fold_args(kernel_size, dilation, padding, stride, fn)
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported "
                                  f"(got {input.ndim}D)")
    batched = input.ndim == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    idx, nb, (hp, wp) = _unfold_index((h, w), k, d, p, s, fn)
    if p[0] or p[1]:
        x = FC.pad(x, (p[1], p[1], p[0], p[0]))
    flat = x.reshape(n, c, hp * wp)
    cols = flat.index_select(2, idx)
    out = cols.reshape(n, c * k[0] * k[1], nb[0] * nb[1])
    return out if batched else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im (torch.nn.functional.fold): (N, C kh kw, L) -> (N, C, H, W),
    overlapping blocks summed."""
    _check(input, "fold")
    fn = "col2im"
    o = _tup(output_size, 2, fn, "output_size")
    k, d, p, s = _fold_args(kernel_size, dilation, padding, stride, fn)
    if input.ndim not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input "
                                  f"Tensors are supported (got {input.ndim}D)")
    batched = input.ndim == 3
    x = input if batched else input.unsqueeze(0)
    n, ckk, L = x.shape
    if ckk % (k[0] * k[1]):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ckk} and "
                           f"kernel_size=({k[0]}, {k[1]})")
    idx, nb, (hp, wp) = _unfold_index(o, k, d, p, s, fn)
    if nb[0] * nb[1] != L:
        raise RuntimeError(f"Given output_size=({o[0]}, {o[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"stride=({s[0]}, {s[1]}), expected size of input's dimension 2 to "
                           f"match the calculated number of sliding blocks {nb[0]} * {nb[1]} = "
                           f"{nb[0] * nb[1]}, but got input.size(2)={L}.")
    c = ckk // (k[0] * k[1])
    src = x.reshape(n, c, k[0] * k[1] * L)
    index = idx.reshape(1, 1, -1).expand(n, c, idx.shape[0])
    out = C.zeros((n, c, hp * wp), dtype=x.dtype).scatter_add(2, index, src)
    out = out.reshape(n, c, hp, wp)
    if p[0] or p[1]:
        out = out[:, :, p[0]:p[0] + o[0], p[1]:p[1] + o[1]]
    return out if batched else out.squeeze(0)


# ------------------------------------------------------------------ bilinear
def bilinear(input1, input2, weight, bias=None):
    """y[..., k] = input1 @ weight[k] @ input2 + bias[k] (torch.nn.functional.bilinear)."""
    _check(input1, "bilinear", "input1")
    _check(input2, "bilinear", "input2")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got "
                           f"{weight.ndim}D")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {weight.shape[2]}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[0] if bias.ndim else 0} but expected {weight.shape[0]}")
    lead = tuple(input1.shape[:-1])
    o, i, j = weight.shape
    a = input1.reshape(-1, i)
    b = input2.reshape(-1, j)
    t = (a.unsqueeze(1).unsqueeze(3) * weight.unsqueeze(0) * b.unsqueeze(1).unsqueeze(2))
    y = t.sum((2, 3))
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, o)


# ------------------------------------------------------------- embedding_bag
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embedding rows
    (torch.nn.functional.embedding_bag): a 2-d input is one bag per row, a
    1-d input is split at offsets."""
    _check(input, "embedding_bag")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max: got {mode!r}")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse are "
                                  "not supported")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                      f"per_sample_weights is only supported for "
                                      f"mode='sum' (got mode='{mode}'). Please open a feature "
                                      f"request on GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            psw_shape = tuple(per_sample_weights.shape)
            raise ValueError(f"embedding_bag: If per_sample_weights ({psw_shape}) is not "
                             f"None, then it must have the same shape as the input "
                             f"({tuple(input.shape)})")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("padding_idx must be within num_embeddings")
        padding_idx = padding_idx % num
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets).__name__}")
        b, n = input.shape
        bounds = [(r * n, (r + 1) * n) for r in range(b)]
        flat = input.reshape(-1)
        psw = None if per_sample_weights is None else per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        off = [int(v) for v in offsets.tolist()]
        n = input.shape[0]
        if off and off[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                               f"mini-batch has to start from position 0. However, got "
                               f"{off[0]}")
        if off and off[-1] > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length ({n}), "
                               f"but got offsets[-1] of {off[-1]}")
        ends = off[1:] + ([] if include_last_offset else [n])
        bounds = list(zip(off, ends))
        flat = input
        psw = per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    ids = flat.tolist()
    rows = []
    d = weight.shape[1]
    for lo, hi in bounds:
        keep = [t for t in range(lo, hi) if padding_idx is None or ids[t] != padding_idx]
        if not keep:
            rows.append(C.zeros((d,), dtype=weight.dtype))
            continue
        pos = _tensor(keep, dtype=_int64())
        e = weight[flat[pos]]
        if psw is not None:
            e = e * psw[pos].unsqueeze(1)
        if mode == "sum":
            rows.append(e.sum(0))
        elif mode == "mean":
            rows.append(e.mean(0))
        else:
            rows.append(e.amax(0))
    if not rows:
        return C.zeros((0, d), dtype=weight.dtype)
    return stack(rows, 0)


# --------------------------------------------------------- local_response_norm
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha / size * sum of squares over `size` neighbouring
    channels) ** beta (torch.nn.functional.local_response_norm)."""
    _check(input, "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    if input.ndim > 3:
        (input,) = _fp32_cpu(input)  # (torch pools these through avg_pool3d: fp32 on CPU)
    c = input.shape[1]
    sq = input * input
    lo, hi = size // 2, (size - 1) // 2
    rest = tuple(input.shape[2:])
    parts = [sq]
    if lo:
        parts.insert(0, C.zeros((input.shape[0], lo) + rest, dtype=sq.dtype))
    if hi:
        parts.append(C.zeros((input.shape[0], hi) + rest, dtype=sq.dtype))
    padded = cat(parts, 1) if len(parts) > 1 else sq
    acc = padded.narrow(1, 0, c)
    for j in range(1, size):
        acc = acc + padded.narrow(1, j, c)
    div = (acc * (alpha / size) + k).pow(beta)
    return input / div


# ------------------------------------------------------------------- lp_pool
def _lp(out, p, kprod):
    return (out.sign() * out.abs().relu()).mul(kprod).pow(1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p) ^ (1/p) (torch.nn.functional.lp_pool1d)."""
    _check(input, "lp_pool1d")
    if stride is not None:
        out = FP.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = FP.avg_pool1d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    k = kernel_size if _is_int(kernel_size) else kernel_size[0]
    return _lp(out, norm_type, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p) ^ (1/p) (torch.nn.functional.lp_pool2d)."""
    _check(input, "lp_pool2d")
    kh, kw = _tup(kernel_size, 2, "lp_pool2d", "kernel_size")
    out = FC.avg_pool2d(input.pow(norm_type), (kh, kw), stride, 0, ceil_mode)
    return _lp(out, norm_type, kh * kw)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p) ^ (1/p) (torch.nn.functional.lp_pool3d)."""
    _check(input, "lp_pool3d")
    kd, kh, kw = _tup(kernel_size, 3, "lp_pool3d", "kernel_size")
    out = FP.avg_pool3d(input.pow(norm_type), (kd, kh, kw), stride, 0, ceil_mode)
    return _lp(out, norm_type, kd * kh * kw)


# ------------------------------------------------------- adaptive_max_pool3d
@defop("adaptive_max_pool3d", devices=CPU, names=("ampy.nn.functional.adaptive_max_pool3d",))
def _adaptive_max_pool3d_fwd(input, out_dhw, saved):
    """The largest element of each adaptive window; saved.a gets the flat
    argmax indices (id * H + ih) * W + iw."""
    y, idx = _C.cnn_adaptive_max_pool3d_fwd(P3._c(input), tuple(int(v) for v in out_dhw))
    saved.a = idx
    return y


@backward("adaptive_max_pool3d", save=(0,))
@P3.G.adjoint(P3._gather_apply(3))
def _adaptive_max_pool3d_bwd(ctx, g):
    x, _, saved = ctx.args
    return P3._scatter(g, saved.a, x, 3), None, None


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Adaptive 3-d max pooling (torch.nn.functional.adaptive_max_pool3d);
    output_size an int or a triple whose None entries keep the input's
    size. With return_indices, also the flat index in each volume."""
    fn = "adaptive_max_pool3d"
    FC._check_tensor(input, fn, "input")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{fn}(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    if output_size is None:
        raise TypeError(f"{fn}(): argument 'output_size' must be an int or a sequence")
    if _is_int(output_size):
        size = [int(output_size)] * 3
    else:
        size = list(output_size)
        if len(size) != 3:
            raise RuntimeError(f"{fn}(): internal error: output_size.size() must be 3")
        size = [input.shape[input.ndim - 3 + i] if v is None else int(v)
                for i, v in enumerate(size)]
    for i in range(1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {i} being empty")
    FC._check_float(input, fn)
    if any(v < 0 for v in size):
        bad = next(v for v in size if v < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                           f"{list(input.shape[:-3]) + size}")
    (input,) = _fp32_cpu(input)  # (torch's CPU autocast runs it in float32)
    saved = Saved()
    y = dispatch(_AMP3, input, tuple(size), saved)
    return (y, saved.a) if return_indices else y


_AMP3 = get_op("adaptive_max_pool3d")


# ------------------------------------------------------ the *_with_indices names
def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """max_pool1d returning (output, indices)."""
    return FP.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """max_pool2d returning (output, indices)."""
    return FC.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """max_pool3d returning (output, indices)."""
    return FP.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool1d returning (output, indices)."""
    return FP.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool2d returning (output, indices)."""
    return FP.adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool3d returning (output, indices)."""
    return adaptive_max_pool3d(input, output_size, True)


# ------------------------------------------------------------------ max_unpool
def _unpool(input, indices, k, kernel_size, stride, padding, output_size, fn):
    _check(input, fn)
    ks = _tup(kernel_size, k, fn, "kernel_size")
    st = ks if stride is None else _tup(stride, k, fn, "stride")
    pd = _tup(padding, k, fn, "padding")
    if input.ndim not in (k + 1, k + 2):
        raise RuntimeError(f"{fn}(): Expected {k + 1}D or {k + 2}D input, but got "
                           f"{list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input "
                           f"tensor ({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    spatial = list(input.shape[-k:])
    default = [(spatial[i] - 1) * st[i] - 2 * pd[i] + ks[i] for i in range(k)]
    if output_size is None:
        out = default
    else:
        out = [int(v) for v in output_size]
        if len(out) == k + 2 or (len(out) == k + 1 and input.ndim == k + 1):
            out = out[-k:]
        if len(out) != k:
            raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} "
                             f"elements, but it has a length of '{len(out)}'")
        for i in range(k):
            lo, hi = default[i] - st[i], default[i] + st[i]
            if not lo < out[i] < hi:
                raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {i} must '
                                 f'be between {lo} and {hi})')
    (input,) = _fp32_cpu(input)  # (max_unpool2d/3d are on CPU autocast's fp32 list)
    lead = tuple(input.shape[:-k])
    vol = 1
    for v in out:
        vol *= v
    src = input.reshape(*lead, -1)
    idx = indices.reshape(*lead, -1)
    if idx.numel():
        bad = (idx < 0) | (idx >= vol)
        if bool(bad.any().item()):
            first = int(idx.reshape(-1)[bad.reshape(-1).long().argmax()].item())
            raise RuntimeError(f"Found an invalid max index: {first} (output volumes are of "
                               f"size {'x'.join(str(v) for v in out)})")
    res = C.zeros(lead + (vol,), dtype=input.dtype).scatter(len(lead), idx, src)
    return res.reshape(*lead, *out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: input placed at indices, zeros
    elsewhere (torch.nn.functional.max_unpool1d)."""
    return _unpool(input, indices, 1, kernel_size, stride, padding, output_size, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d (torch.nn.functional.max_unpool2d)."""
    return _unpool(input, indices, 2, kernel_size, stride, padding, output_size, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool3d (torch.nn.functional.max_unpool3d)."""
    return _unpool(input, indices, 3, kernel_size, stride, padding, output_size, "max_unpool3d")


# ---------------------------------------------------- affine_grid / grid_sample
def _base(n, align_corners, dtype):
    if n <= 1:
        return C.zeros((max(n, 0),), dtype=dtype)
    v = C.linspace(-1.0, 1.0, n, dtype=dtype)
    return v if align_corners else v * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """The (N, H, W, 2) sampling grid of a batch of 2 x 3 affine matrices
    (torch.nn.functional.affine_grid; 4-d sizes)."""
    _check(theta, "affine_grid", "theta")
    align_corners = bool(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = list(size)
    if len(size) != 4:
        raise NotImplementedError(f"affine_grid only supports 4D sizes, for 2D affine "
                                  f"transforms. Got size {size}.")
    if theta.ndim != 3 or tuple(theta.shape[-2:]) != (2, 3):
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{size}. Got {list(theta.shape)}.")
    n, _, h, w = size
    if theta.shape[0] != n:
        raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{size}. Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    xs = _base(w, align_corners, theta.dtype).reshape(1, w).expand(h, w)
    ys = _base(h, align_corners, theta.dtype).reshape(h, 1).expand(h, w)
    base = stack([xs, ys, C.ones((h, w), dtype=theta.dtype)], 2).reshape(1, h * w, 3)
    grid = base.expand(n, h * w, 3).matmul(theta.transpose(1, 2))
    return grid.reshape(n, h, w, 2)


def _unnorm(c, size, align_corners):
    if align_corners:
        return (c + 1) * ((size - 1) / 2)
    return ((c + 1) * size - 1) / 2


def _reflect(c, lo, hi):
    """Reflects c into [lo, hi] (twice the range is the period)."""
    if hi <= lo:
        return c * 0 + lo
    span = hi - lo
    x = (c - lo).abs()
    flips = (x / span).floor()
    extra = x - flips * span
    even = flips.remainder(2) == 0
    return (extra + lo).where(even, hi - extra)


def _coords(c, size, padding_mode, align_corners):
    c = _unnorm(c, size, align_corners)
    if padding_mode == "reflection":
        if align_corners:
            c = _reflect(c, 0.0, float(size - 1))
        else:
            c = _reflect(c, -0.5, size - 0.5)
    if padding_mode in ("border", "reflection"):
        # the clip passes the gradient strictly inside (0, size - 1) only, as torch's
        inside = (c > 0) & (c < size - 1)
        c = c.where(inside, c.detach().clamp(0, size - 1))
    return c


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples the 4-d input at the grid's (x, y) points in [-1, 1]
    (torch.nn.functional.grid_sample): modes bilinear and nearest, padding
    zeros, border or reflection; differentiable in input and grid."""
    _check(input, "grid_sample")
    _check(grid, "grid_sample", "grid")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode 'bicubic' is not supported by ampy")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    align_corners = bool(align_corners)
    if input.ndim != 4:
        raise NotImplementedError("grid_sample: ampy samples 4-d inputs only")
    if grid.ndim != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size 2 in last dimension, "
                           f"but got grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if input.dtype != grid.dtype:
        names = {"float32": "Float", "float64": "Double", "bfloat16": "BFloat16",
                 "float16": "Half"}
        a, b = (names.get(str(t).split(".")[-1], str(t)) for t in (input.dtype, grid.dtype))
        raise RuntimeError(f"grid_sampler(): expected scalar type {a} but found {b} (input "
                           f"and grid must have the same dtype)")
    input, grid = _fp32_cpu(input, grid)  # (grid_sampler is on CPU autocast's fp32 list)
    n, c, h, w = input.shape
    _, ho, wo, _ = grid.shape
    gx = _coords(grid.select(3, 0), w, padding_mode, align_corners)
    gy = _coords(grid.select(3, 1), h, padding_mode, align_corners)
    flat = input.reshape(n, c, h * w)

    def tap(ix, iy):
        """input at integer points (ix, iy) (N, Ho, Wo), zero outside."""
        inside = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
        cx = ix.clamp(0, w - 1)
        cy = iy.clamp(0, h - 1)
        lin = (cy * w + cx).long().reshape(n, 1, ho * wo).expand(n, c, ho * wo)
        v = flat.gather(2, lin).reshape(n, c, ho, wo)
        return v * inside.unsqueeze(1).to(input.dtype)

    if mode == "nearest":
        return tap(gx.detach().round(), gy.detach().round())
    x0 = gx.detach().floor()
    y0 = gy.detach().floor()
    x1, y1 = x0 + 1, y0 + 1
    wx1 = gx - x0
    wx0 = 1 - wx1
    wy1 = gy - y0
    wy0 = 1 - wy1
    out = (tap(x0, y0) * (wx0 * wy0).unsqueeze(1) + tap(x1, y0) * (wx1 * wy0).unsqueeze(1)
           + tap(x0, y1) * (wx0 * wy1).unsqueeze(1) + tap(x1, y1) * (wx1 * wy1).unsqueeze(1))
    return out


# ------------------------------------------------------------- upsample aliases
def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """The deprecated name of interpolate (torch.nn.functional.upsample)."""
    return FC.interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """interpolate(mode='nearest') (torch.nn.functional.upsample_nearest)."""
    return FC.interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """interpolate(mode='bilinear', align_corners=True) (torch.nn.functional.upsample_bilinear)."""
    return FC.interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
