"""scaled_dot_product_attention: the op (fused C kernel, csrc/attention.c),
its backward rule and torch's argument checks.

The forward hands the kernel strided views that share one batch shape:
batch dims of query, key and value broadcast (stride 0), key and value heads
repeated for grouped-query attention (enable_gqa: the query's head dim is
split into (key heads, group) and key/value get stride 0 over the group),
and the mask broadcast to (batch..., L, S). Nothing is copied. The kernel
saves the row log-sum-exp; the rule reads it with the output (save_out) and
sums dK/dV over the broadcast and grouped dims.

Autocast: torch's lists put scaled_dot_product_attention in lower precision
on CPU and CUDA (`defop` applies them), which casts a float attn_mask too.
Under create_graph=True the rule is the composite `_sdpa_graph` (softmax
and matmuls of ampy ops) so the gradient can be differentiated again; it
has no dropout (the fused kernel's Philox mask is not an op), so a second
derivative through dropout_p > 0 raises.

A float attn_mask that requires grad gets torch's gradient: the mask is
added to the scores, so its gradient is the softmax backward's score
gradient P (dP - rowsum(dO O)), summed over the dims it was broadcast
along. The kernel writes it per batch item only when asked (the no-grad
mask keeps the O(T * block) workspace); CUDA tensors take the composite.
"""
import math

from .. import _C
from .. import _dtype as D
from .._creation import arange, default_generator
from .._dispatch import CPU_CUDA, backward, defop, dispatch, get_op
from .._shape import broadcast_shapes, numel
from .._tensor import Tensor
from ..autograd import is_grad_enabled
from ..autograd._ops import O, cast, sum_to, upcast
from . import _ops_graph as G
from ._ops import Saved

__all__ = ["scaled_dot_product_attention"]

_TORCH_NAME = {D.float32: "float", D.float64: "double", D.float16: "c10::Half",
               D.bfloat16: "c10::BFloat16", D.int64: "long int", D.int32: "int",
               D.bool: "bool", D.uint8: "unsigned char"}


def _tname(dt):
    return _TORCH_NAME.get(dt, str(dt))


def _heads(q, k, gqa):
    """(key heads, group) for grouped-query attention, or None."""
    if not gqa or q.ndim < 3 or k.shape[-3] == q.shape[-3]:
        return None
    return k.shape[-3], q.shape[-3] // k.shape[-3]


def sdpa_views(q, k, v, mask, gqa):
    """q, k, v and the mask as views of one batch shape (the kernel's)."""
    split = _heads(q, k, gqa)
    if split is not None:
        hk, g = split
        q = O.reshape(q, tuple(q.shape[:-3]) + (hk, g) + tuple(q.shape[-2:]))
        k, v = O.unsqueeze(k, -3), O.unsqueeze(v, -3)
    batch = broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    q, k, v = (O.expand(t, batch + tuple(t.shape[-2:])) if tuple(t.shape[:-2]) != batch else t
               for t in (q, k, v))
    if mask is not None:
        full = tuple(batch) + (q.shape[-2], k.shape[-2])
        if split is not None:
            mfull = tuple(batch[:-2]) + (split[0] * split[1],) + full[-2:]
            mask = _split_heads(O.expand(mask, mfull) if tuple(mask.shape) != mfull else mask,
                                full)
        elif tuple(mask.shape) != full:
            mask = O.expand(mask, full)
    return q, k, v, mask, batch


def _split_heads(m, full):
    """m (..., H, L, S) viewed as (..., H / g, g, L, S): head h = i * g + j."""
    st = tuple(m.stride())
    strides = st[:-3] + (st[-3] * full[-3], st[-3]) + st[-2:]
    return O.as_strided(m, full, strides, m.storage_offset())


def _out_shape(query, batch, split, ev):
    """The output's shape: the kernel's batch with the grouped heads merged."""
    lead = tuple(batch[:-2]) + (split[0] * split[1],) if split is not None else tuple(batch)
    return lead + (query.shape[-2], ev)


def _mask_grad_back(dm, mask, split):
    """The kernel's (batch..., L, S) mask gradient summed back to the mask's
    shape, in the mask's dtype."""
    if split is not None:
        dm = O.reshape(dm, tuple(dm.shape[:-4]) + (-1,) + tuple(dm.shape[-2:]))
    return cast(sum_to(dm, tuple(mask.shape)), mask.dtype)


def _wants_mask_grad(ctx, mask):
    return (mask is not None and mask.dtype is not D.bool and len(ctx.needs_input_grad) > 3
            and ctx.needs_input_grad[3])


def _grads_back(dq, dk, dv, query, key, value, split):
    """The kernel's dq, dk, dv summed back to the inputs' shapes."""
    if split is not None:
        dq = O.reshape(dq, tuple(dq.shape[:-4]) + (-1,) + tuple(dq.shape[-2:]))
        dk, dv = O.sum(dk, (-3,)), O.sum(dv, (-3,))
    return (sum_to(dq, tuple(query.shape)), sum_to(dk, tuple(key.shape)),
            sum_to(dv, tuple(value.shape)))


# ------------------------------------------------------------------- the op
@defop("scaled_dot_product_attention", devices=CPU_CUDA,
       names=("ampy.nn.functional.scaled_dot_product_attention",))
def sdpa_fwd(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=1.0,
             enable_gqa=False, seed=0, offset=0, saved=None):
    """softmax(scale * query @ key^T + mask) @ value, fused (flash attention)."""
    q, k, v, m, batch = sdpa_views(query, key, value, attn_mask, enable_gqa)
    out, lse = _C.attention_fwd(q, k, v, m, bool(is_causal), float(scale), float(dropout_p),
                                int(seed), int(offset), saved is not None)
    if saved is not None:
        saved.a = lse
    shape = _out_shape(query, batch, _heads(query, key, enable_gqa), value.shape[-1])
    return out if tuple(out.shape) == shape else out.reshape(*shape)


@backward("scaled_dot_product_attention", save=(0, 1, 2, 3), save_out=True)
@G.with_graph(lambda ctx, g: _sdpa_graph(ctx, g))
def sdpa_bwd(ctx, g):
    query, key, value, mask, p, causal, scale, gqa, seed, offset, saved = ctx.args
    want_dm = _wants_mask_grad(ctx, mask)
    if want_dm and query._device_index >= 0:
        return _sdpa_graph(ctx, g)
    split = _heads(query, key, gqa)
    q, k, v, m, batch = sdpa_views(query, key, value, mask, gqa)
    shape = tuple(batch) + (q.shape[-2], value.shape[-1])
    out = ctx.out[0].reshape(*shape)
    g = g if g.dtype is query.dtype else _C.cast(g, query.dtype)
    g = g.reshape(*shape)
    g = g if g.is_contiguous() else g.contiguous()
    if not out.is_contiguous():
        out = out.contiguous()
    res = _C.attention_bwd(q, k, v, m, bool(causal), float(scale), float(p), int(seed),
                           int(offset), out, g, saved.a, want_dm)
    dm = _mask_grad_back(res[3], mask, split) if want_dm else None
    return _grads_back(*res[:3], query, key, value, split) + (dm,) + (None,) * 7


def _sdpa_graph(ctx, g):
    """The same gradients from ampy ops (create_graph=True)."""
    query, key, value, mask, p, causal, scale, gqa, seed, offset, saved = ctx.args
    if p > 0:
        raise NotImplementedError("scaled_dot_product_attention: create_graph=True through "
                                  "dropout_p > 0 is not supported by ampy")
    split = _heads(query, key, gqa)
    q, k, v, m, batch = sdpa_views(query, key, value, mask, gqa)
    q, k, v = upcast(q), upcast(k), upcast(v)
    s = O.mul(O.matmul(q, O.transpose(k, -2, -1)), float(scale))
    keep = _keep(m, causal, q.shape[-2], k.shape[-2], s)
    if m is not None and m.dtype is not D.bool:
        s = O.add(s, upcast(m))
    if keep is not None:
        s = O.where(keep, s, float("-inf"))
    pr = O.softmax(s, -1)
    pr = O.where(O.isnan(pr), 0.0, pr)
    gg = O.reshape(upcast(g), tuple(batch) + (q.shape[-2], v.shape[-1]))
    dv = O.matmul(O.transpose(pr, -2, -1), gg)
    dp = O.matmul(gg, O.transpose(v, -2, -1))
    dsu = O.mul(pr, O.sub(dp, O.sum(O.mul(dp, pr), (-1,), keepdim=True)))
    ds = O.mul(dsu, float(scale))
    dq = O.matmul(ds, k)
    dk = O.matmul(O.transpose(ds, -2, -1), q)
    dm = _mask_grad_back(dsu, mask, split) if _wants_mask_grad(ctx, mask) else None
    return _grads_back(dq, dk, dv, query, key, value, split) + (dm,) + (None,) * 7


def _keep(m, causal, L, S, like):
    """The bool keep-mask of the bool attn_mask and the causal rule (or None)."""
    keep = m if m is not None and m.dtype is D.bool else None
    if causal:
        c = O.le(O.reshape(_arange(S), (1, S)), O.reshape(_arange(L), (L, 1)))
        keep = c if keep is None else O.logical_and(keep, c)
    return keep


def _arange(n):
    return arange(n, dtype=D.int64)


# ------------------------------------------------------------------ checks
def check_sdpa(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa):
    """torch's argument checks, with messages that name the argument."""
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.ndim} key.dim: {key.ndim} and value.dim: "
                           f"{value.ndim} instead.")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_tname(query.dtype)} key.dtype: {_tname(key.dtype)} "
                           f"and value.dtype: {_tname(value.dtype)} instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"scaled_dot_product_attention: expected query of a floating dtype, "
                           f"got {query.dtype}")
    if not (query.device == key.device == value.device):
        raise RuntimeError("Expected query, key, and value to have the same device type")
    if key.shape[-1] != query.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: key's last dim ({key.shape[-1]}) "
                           f"must equal query's last dim ({query.shape[-1]})")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions "
                           f"but value has {value.shape[-2]} (dim -2 must match)")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got "
                         f"{dropout_p}")
    full = _check_heads(query, key, value, enable_gqa)
    if attn_mask is not None:
        _check_mask(query, attn_mask, is_causal, full)


def _check_heads(query, key, value, enable_gqa):
    """Head counts for enable_gqa, and batch dims that broadcast."""
    split = None
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hv or hk == 0 or hq % hk:
            raise RuntimeError(f"scaled_dot_product_attention: number of heads in key ({hk}) and "
                               f"value ({hv}) must be equal and divide the number of heads in "
                               f"query ({hq}) for enable_gqa")
        split = (hk, hq // hk)
    qs = tuple(query.shape[:-3]) + split if split else tuple(query.shape[:-2])
    ks, vs = ((tuple(t.shape[:-3]) + (t.shape[-3], 1) if split else tuple(t.shape[:-2]))
              for t in (key, value))
    batch = broadcast_shapes(qs, ks, vs)
    if batch is None:
        raise RuntimeError(f"scaled_dot_product_attention: the batch dims of query "
                           f"{list(query.shape[:-2])}, key {list(key.shape[:-2])} and value "
                           f"{list(value.shape[:-2])} do not broadcast")
    return _out_shape(query, batch, split, value.shape[-1])[:-1] + (key.shape[-2],)


def _check_mask(query, attn_mask, is_causal, full):
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"scaled_dot_product_attention(): argument 'attn_mask' must be Tensor, "
                        f"not {type(attn_mask).__name__}")
    if is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if attn_mask.dtype not in (D.bool, D.float32, query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {_tname(attn_mask.dtype)} and  "
                           f"query.dtype: {_tname(query.dtype)} instead.")
    if broadcast_shapes(tuple(attn_mask.shape), full) != full:
        raise RuntimeError(f"scaled_dot_product_attention: attn_mask of shape "
                           f"{list(attn_mask.shape)} does not broadcast to (..., L, S) = "
                           f"{list(full)}")


def default_scale(query, scale):
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)


# -------------------------------------------------------------- functional
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention: query (..., L, E),
    key (..., S, E), value (..., S, Ev) -> (..., L, Ev). attn_mask: bool
    (True = attend) or float (added to the scores), broadcast to (..., L, S);
    is_causal: query i attends keys j <= i; scale: default 1/sqrt(E);
    dropout_p: applied whenever > 0 (as torch, whatever module mode);
    enable_gqa: key/value heads (dim -3) shared by groups of query heads.
    One fused C kernel, memory O(L*E + block^2) per thread; fp32
    accumulation for float16/bfloat16."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{name}' must be Tensor, "
                            f"not {type(t).__name__}")
    check_sdpa(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    seed = offset = 0
    if dropout_p > 0:
        n = numel(tuple(query.shape[:-1])) * key.shape[-2] * max(1, numel(tuple(key.shape[:-2])))
        seed, offset = default_generator._take(n // 4 + 1)
    wanted = is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (query, key, value, attn_mask))
    return dispatch(_SDPA, query, key, value, attn_mask, float(dropout_p), bool(is_causal),
                    default_scale(query, scale), bool(enable_gqa), int(seed), int(offset),
                    Saved() if wanted else None)


_SDPA = get_op("scaled_dot_product_attention")
