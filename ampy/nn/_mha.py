"""torch.nn.functional.multi_head_attention_forward, in torch's order of
operations (torch/nn/functional.py), composed of ampy ops:

- input projection with the packed in_proj_weight (one GEMM for
  self-attention) or the separate q/k/v projection weights;
- masks made additive floats (bool True = masked out, as torch's MHA reads
  it, the opposite of scaled_dot_product_attention's bool mask), the key
  padding mask merged into the attention mask per head;
- need_weights=True: the explicit softmax(q k^T / sqrt(d) + mask) weights
  (returned, averaged over heads by default), need_weights=False: the fused
  scaled_dot_product_attention kernel;
- the output projection.

Tensors are (L, N, E) here; nn.MultiheadAttention transposes batch_first
inputs as torch does.
"""
import math

from .. import _dtype as D
from .. import _gemm, _math
from .._tensor import Tensor
from . import functional as F

__all__ = ["multi_head_attention_forward", "canonical_mask"]


def canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """torch's F._canonical_mask: a bool mask as 0 / -inf floats of target_type."""
    if mask is None:
        return None
    if mask.dtype is D.bool:
        return _math.where(mask, float("-inf"), 0.0).to(target_type)
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
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


def _merged_mask(attn_mask, key_padding_mask, q, tgt_len, src_len, bsz, num_heads, is_causal,
                 need_weights):
    """(attn_mask (1 or N*H, L, S) float or None, is_causal) as torch merges them."""
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
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{key_padding_mask.shape}")
        kpm = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    return attn_mask, is_causal


def _weights_path(q, k, v, attn_mask, dropout_p, bsz, num_heads, tgt_len, src_len, average):
    """Explicit attention weights (need_weights=True), as torch computes them."""
    q_scaled = q * math.sqrt(1.0 / float(q.shape[-1]))
    if attn_mask is not None:
        w = _gemm.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
    else:
        w = _gemm.bmm(q_scaled, k.transpose(-2, -1))
    w = F.softmax(w, dim=-1)
    if dropout_p > 0.0:
        w = F.dropout(w, p=dropout_p)
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
    if bias_k is not None or bias_v is not None or add_zero_attn or static_k is not None or \
            static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: add_bias_kv, add_zero_attn and "
                                  "static_k/static_v are not supported by ampy")
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
    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask", None, "attn_mask",
                                      query.dtype)
    q, k, v = _in_projection(query, key, value, embed_dim,
                             None if use_separate_proj_weight else in_proj_weight, in_proj_bias,
                             q_proj_weight, k_proj_weight, v_proj_weight)
    attn_mask, is_causal = _merged_mask(attn_mask, key_padding_mask, q, tgt_len, src_len, bsz,
                                        num_heads, is_causal, need_weights)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(src_len, bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(src_len, bsz * num_heads, head_dim).transpose(0, 1)
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
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
        out = out.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    out = _gemm.linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, embed_dim)
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights
