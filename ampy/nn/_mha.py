"""torch.nn.functional.multi_head_attention_forward, in torch's order of
operations (torch/nn/functional.py), composed of ampy ops:

- input projection with the packed in_proj_weight (one GEMM for
  self-attention) or the separate q/k/v projection weights;
- masks made additive floats (bool True = masked out, as torch's MHA reads
  it, the opposite of scaled_dot_product_attention's bool mask), the key
  padding mask merged into the attention mask per head;
- add_bias_kv's bias_k / bias_v rows, static_k / static_v and add_zero_attn's
  zero row appended to the keys and values, each padding the masks with an
  unmasked column, before the key padding mask is merged;
- need_weights=True: the explicit softmax(q k^T / sqrt(d) + mask) weights
  (returned, averaged over heads by default), need_weights=False: the fused
  scaled_dot_product_attention kernel;
- the output projection.

Tensors are (L, N, E) here; nn.MultiheadAttention transposes batch_first
inputs as torch does. ampy.nn.functional re-exports the function, so this
module reaches the ops below functional directly (pad, softmax, the fused
attention and the dropout op) rather than importing functional back.
"""
import math
import warnings

from .. import _C
from .. import _dtype as D
from .. import _creation as C
from .. import _gemm, _math, _math_reduce
from .._dispatch import dispatch, get_op
from .._tensor import Tensor
from ._functional_cnn import pad
from ._ops_attention import scaled_dot_product_attention

__all__ = ["multi_head_attention_forward", "canonical_mask"]


def canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """torch's F._canonical_mask: a bool mask as 0 / -inf floats of target_type;
    torch's deprecation warning when the other mask's dtype differs."""
    if mask is None:
        return None
    if mask.dtype is not D.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype is not other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use "
                      f"same type for both instead.", stacklevel=3)
    if mask.dtype is D.bool:
        return _math.where(mask, float("-inf"), 0.0).to(target_type)
    return mask


def _in_projection(query, key, value, e, w, b, q_w, k_w, v_w):
    """q, k, v projections: packed (one GEMM when query is key is value)."""
    if w is not None:
        if query is key and key is value:
            proj = _gemm.linear(query, w, b)
            return proj.split(e, dim=-1)
        wq, wkv = w.split([e, 2 * e], dim=0)
        bq, bkv = (None, None) if b is None else b.split([e, 2 * e], dim=0)
        if key is value:
            q = _gemm.linear(query, wq, bq)
            k, v = _gemm.linear(key, wkv, bkv).split(e, dim=-1)
            return q, k, v
        wk, wv = wkv.split(e, dim=0)
        bk, bv = (None, None) if bkv is None else bkv.split(e, dim=0)
        return _gemm.linear(query, wq, bq), _gemm.linear(key, wk, bk), _gemm.linear(value, wv, bv)
    bq, bk, bv = (None,) * 3 if b is None else b.split(e, dim=0)
    return _gemm.linear(query, q_w, bq), _gemm.linear(key, k_w, bk), _gemm.linear(value, v_w, bv)


def _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads):
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{query.ndim}-D query tensor")
    if key_padding_mask is not None:
        want = 1 if not batched else 2
        if key_padding_mask.ndim != want:
            raise AssertionError(f"For {'un' if not batched else ''}batched (3-D) `query`, "
                                 f"expected `key_padding_mask` to be `None` or {want}-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise AssertionError(f"For {'un' if not batched else ''}batched `query`, expected "
                             f"`attn_mask` to be `None`, 2-D or 3-D but found {attn_mask.ndim}-D "
                             f"tensor instead")
    return batched


def _check_key_value(key, value, separate):
    if separate and tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not "
                             f"match value's {tuple(value.shape[:2])}")
    if not separate and tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                             f"{tuple(value.shape)}")


def _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads):
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should "
                               f"be {(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
        raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                           f"{(bsz * num_heads, tgt_len, src_len)}.")
    return attn_mask


def _prepared_mask(attn_mask, key_padding_mask, q, tgt_len, src_len, bsz, num_heads,
                   is_causal, need_weights):
    """(attn_mask (1 or N*H, L, S) float or None, is_causal), before the bias_k /
    zero-attention columns are appended, as torch prepares it."""
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        return None, True
    attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", q.dtype, check_other=False)
    if key_padding_mask is not None:
        is_causal = False
    if attn_mask is not None:
        attn_mask = _attn_mask_3d(attn_mask, tgt_len, src_len, bsz, num_heads)
    return attn_mask, is_causal


def _pad_masks(attn_mask, key_padding_mask):
    """One more unmasked (0) key column in each mask, as torch's pad(mask, (0, 1))."""
    if attn_mask is not None:
        attn_mask = pad(attn_mask, (0, 1))
    if key_padding_mask is not None:
        key_padding_mask = pad(key_padding_mask, (0, 1))
    return attn_mask, key_padding_mask


def _merge_key_padding(attn_mask, key_padding_mask, bsz, num_heads, src_len):
    if key_padding_mask is None:
        return attn_mask
    for d, want in enumerate((bsz, src_len)):
        if key_padding_mask.shape[d] != want:
            raise AssertionError(f"Expected key_padded_mask.shape[{d}] to be {want}, but got "
                                 f"{key_padding_mask.shape[d]}")
    kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
    kpm = kpm.reshape(bsz * num_heads, 1, src_len)
    return kpm if attn_mask is None else attn_mask + kpm


def _heads(x, static, name, bsz, num_heads, head_dim):
    """(N*H, S, head_dim) keys or values, or the caller's static ones."""
    if static is None:
        return x.reshape(x.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if static.shape[0] != bsz * num_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz * num_heads}, but got "
                             f"{static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got "
                             f"{static.shape[2]}")
    return static


def _extend_keys(k, v, attn_mask, key_padding_mask, bias_k, bias_v, add_zero_attn, static_k,
                 static_v, bsz, num_heads, head_dim):
    """bias_k / bias_v rows appended along the sequence (L, N, E layout), the
    heads split, then the zero-attention row, each padding the masks."""
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _math_reduce.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _math_reduce.cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask, key_padding_mask = _pad_masks(attn_mask, key_padding_mask)
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    k = _heads(k, static_k, "static_k", bsz, num_heads, head_dim)
    v = _heads(v, static_v, "static_v", bsz, num_heads, head_dim)
    if add_zero_attn:
        zeros = C.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k = _math_reduce.cat([k, zeros], dim=1)
        v = _math_reduce.cat([v, zeros], dim=1)
        attn_mask, key_padding_mask = _pad_masks(attn_mask, key_padding_mask)
    return k, v, attn_mask, key_padding_mask


def _dropout(w, p):
    """F.dropout(w, p) in training mode: the keep-mask drawn by the default
    Philox generator, the same draw as nn.functional.dropout."""
    if w.numel() == 0:
        return w
    mask = (_C.empty(tuple(w.shape), D.uint8) if w._device_index < 0
            else _C._empty_device(tuple(w.shape), D.uint8, w._device_index))
    seed, off = C.default_generator._take(mask.numel())
    _C.fill_random(mask, _C.RANDOM_BERNOULLI, seed, off, 1.0 - float(p), 0.0)
    return dispatch(_DROP, w, mask, 0.0 if p == 1 else 1.0 / (1.0 - float(p)))


_DROP = get_op("dropout")


def _weights_path(q, k, v, attn_mask, dropout_p, bsz, num_heads, tgt_len, src_len, average):
    """Explicit attention weights (need_weights=True), as torch computes them."""
    q_scaled = q * math.sqrt(1.0 / float(q.shape[-1]))
    if attn_mask is not None:
        w = _gemm.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
    else:
        w = _gemm.bmm(q_scaled, k.transpose(-2, -1))
    w = _math_reduce.softmax(w, -1)
    if dropout_p > 0.0:
        w = _dropout(w, dropout_p)
    out = _gemm.bmm(w, v)
    w = w.view(bsz, num_heads, tgt_len, src_len)
    return out.transpose(0, 1).contiguous(), (w.mean(dim=1) if average else w)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                                 in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                                 out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """(attn_output (L, N, E), attn_weights or None) for (L, N, E) inputs, or
    unbatched (L, E) ones."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"multi_head_attention_forward(): argument '{name}' must be Tensor")
    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    _check_key_value(key, value, use_separate_proj_weight)
    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask",
                                      None if attn_mask is None else attn_mask.dtype,
                                      "attn_mask", query.dtype)
    q, k, v = _in_projection(query, key, value, embed_dim,
                             None if use_separate_proj_weight else in_proj_weight, in_proj_bias,
                             q_proj_weight, k_proj_weight, v_proj_weight)
    attn_mask, is_causal = _prepared_mask(attn_mask, key_padding_mask, q, tgt_len, src_len,
                                          bsz, num_heads, is_causal, need_weights)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k, v, attn_mask, key_padding_mask = _extend_keys(
        k, v, attn_mask, key_padding_mask, bias_k, bias_v, add_zero_attn, static_k, static_v,
        bsz, num_heads, head_dim)
    src_len = k.shape[1]
    attn_mask = _merge_key_padding(attn_mask, key_padding_mask, bsz, num_heads, src_len)
    if not training:
        dropout_p = 0.0
    weights = None
    if need_weights:
        out, weights = _weights_path(q, k, v, attn_mask, dropout_p, bsz, num_heads, tgt_len,
                                     src_len, average_attn_weights)
        out = out.view(tgt_len * bsz, embed_dim)
    else:
        if attn_mask is not None:
            attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1
                         else attn_mask.view(bsz, num_heads, -1, src_len))
        q = q.reshape(bsz, num_heads, tgt_len, head_dim)
        k = k.reshape(bsz, num_heads, src_len, head_dim)
        v = v.reshape(bsz, num_heads, src_len, head_dim)
        out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
        out = out.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    out = _gemm.linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, embed_dim)
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights
