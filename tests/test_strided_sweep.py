"""Strided-layout sweep over the whole op table.

Every op in `ampy._dispatch.ops()` has a case in CASES (test_every_op_has_a_case
fails for a new op without one). Each case is run with its tensor inputs built
in a drawn layout — dims permuted (transposed), sliced with steps, reversed
(negative strides, through as_strided: ampy has no flip op and its slicing
refuses negative steps, as torch's does), expanded (zero strides), behind a
storage offset, and 0-size where the op allows it — and compared, forward and
backward, with the same op on contiguous copies (ampy) and with torch 2.13 on
the same values. The incoming gradient gets a drawn layout too, and ops that
write (in-place ops, setitem, copy_) get the written tensor in a strided layout.
"""
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import ampy
from ampy import _dispatch

from _helpers import requires_cuda
from strided_layouts import (FLOAT_NAMES, JUNK, KINDS, Layout, as_np, contiguous,
                             fixed_layout, input_dtype, layouts, strided, to_torch,
                             torch_strided, values)

DTYPES = ("float32", "float16", "bfloat16")
# (rtol, atol): strided vs contiguous ampy, then ampy vs torch
TOL_SELF = {"float32": (1e-5, 1e-6), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}
TOL_TORCH = {"float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}


def _fn(M, name):
    """M.name, or M.nn.functional.name (activations torch keeps there)."""
    f = getattr(M, name, None)
    return f if f is not None else getattr(M.nn.functional, name)


class Case:
    """fn(M, *tensors) with M = ampy or torch; specs: one (kind, shape) per tensor
    (kinds: f float, p positive, u in (-0.9, 0.9), i<n> int64 in [0, n), b bool,
    n an integer 0..9 as int64); write: the first tensor is written in place."""

    def __init__(self, fn, specs, grad=True, half=True, torch_ok=True, write=False,
                 zero=False, seed=False, tfn=None, torch_atol=None):
        self.fn, self.specs, self.grad, self.half = fn, specs, grad, half
        self.torch_ok, self.write, self.zero, self.seed = torch_ok, write, zero, seed
        self.tfn = tfn or fn
        self.torch_atol = torch_atol  # ill-conditioned cases (constant rows in layer_norm)


S = (3, 4)
F2 = [("f", S), ("f", S)]
CASES = {}


TORCH_INPLACE = {"silu": lambda M, x: M.nn.functional.silu(x, inplace=True)}  # no Tensor.silu_


def ew(name, kinds="ff", grad=True, half=True, inplace=True, kw=None, shapes=None):
    """An element-wise op `name` (and its in-place variant `name_`)."""
    kw = kw or {}
    specs = [(k, (shapes or [S] * len(kinds))[j]) for j, k in enumerate(kinds)]
    CASES[name] = Case(lambda M, *t: _fn(M, name)(*t, **kw), specs, grad=grad, half=half,
                       zero=True)
    CASES[name].kw = kw
    if inplace:
        CASES[name + "_"] = Case(lambda M, *t: getattr(t[0], name + "_")(*t[1:], **kw), specs,
                                 grad=grad, half=half, write=True, zero=True,
                                 tfn=TORCH_INPLACE.get(name))


for _n in ("abs", "atan", "ceil", "cos", "cosh", "erf", "exp", "exp2", "expm1", "floor", "frac",
           "neg", "sigmoid", "sign", "sin", "sinh", "square", "tanh", "trunc", "relu", "silu"):
    ew(_n, "f")
for _n in ("acos", "asin", "tan"):
    ew(_n, "u")
for _n in ("log", "log10", "log1p", "log2", "reciprocal", "rsqrt", "sqrt"):
    ew(_n, "p")
for _n in ("gelu", "elu", "mish", "softplus", "logsigmoid", "leaky_relu", "round"):
    ew(_n, "f", inplace=False)
for _n in ("add", "sub", "mul", "atan2", "fmod", "remainder", "maximum", "minimum", "fmax",
           "fmin"):
    ew(_n, "ff", inplace=_n not in ("maximum", "minimum", "fmax", "fmin"))
ew("div", "fp")
ew("pow", "pf")
ew("floor_divide", "fp", grad=False)
ew("lerp", "fff")
ew("addcmul", "fff", kw={"value": 0.5})
ew("addcdiv", "ffp", kw={"value": 0.5})
ew("clamp", "f", kw={"min": -0.5, "max": 0.7})
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    ew(_n, "ff", grad=False)
for _n in ("logical_and", "logical_or", "logical_xor"):
    ew(_n, "ff", grad=False)
ew("logical_not", "f", grad=False)
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    ew(_n, "nn", grad=False, half=False)
ew("bitwise_not", "n", grad=False, half=False)
for _n in ("isfinite", "isinf", "isnan"):
    ew(_n, "f", grad=False, inplace=False)
CASES["where"] = Case(lambda M, c, a, b: M.where(c, a, b), [("b", S), ("f", S), ("f", S)],
                      zero=True)
CASES["clone"] = Case(lambda M, x: x.clone(), [("f", S)], zero=True)
CASES["copy_"] = Case(lambda M, x, y: x.copy_(y), F2, write=True, zero=True)
CASES["setitem"] = Case(lambda M, x, v: _setitem(x, v), [("f", S), ("f", (2, 4))], write=True)
CASES["getitem"] = Case(lambda M, x: x[1:, [3, 0, 3]], [("f", S)])
# more layouts of the index ops (extra keys: variants of one op)
CASES["getitem[int-tensor]"] = Case(lambda M, x, i: x[i], [("f", S), ("i3", (2, 2))])
CASES["getitem[bool-mask]"] = Case(lambda M, x, m: x[m], [("f", S), ("b", S)])
CASES["getitem[tensor, slice]"] = Case(lambda M, x, i: x[1:, i], [("f", S), ("i4", (3,))])
CASES["setitem[bool-mask]"] = Case(lambda M, x, m: _setitem_at(x, m, 2.5), [("f", S), ("b", S)],
                                   write=True)
CASES["setitem[int-tensor]"] = Case(lambda M, x, i, v: _setitem_at(x, i, v),
                                    [("f", S), ("i1", (1,)), ("f", (1, 4))], write=True)
CASES["dropout[inplace]"] = Case(lambda M, x: M.nn.functional.dropout(x, 0.4, inplace=True),
                                 [("f", S)], torch_ok=False, seed=True, write=True, zero=True)
CASES["hardswish"] = Case(lambda M, x: M.nn.functional.hardswish(x), [("f", S)], zero=True)
CASES["hardswish_"] = Case(lambda M, x: M.nn.functional.hardswish(x, inplace=True), [("f", S)],
                           write=True, zero=True)
for _n in ("relu", "silu"):
    CASES[f"{_n}[inplace]"] = Case(lambda M, x, _n=_n: getattr(M.nn.functional, _n)(
        x, inplace=True), [("f", S)], write=True, zero=True)
CASES["to_dtype"] = Case(lambda M, x: x.to(M.float64), [("f", S)], zero=True)
CASES["to_device"] = None  # CUDA only: test_to_device_strided
CASES["dropout"] = Case(lambda M, x: M.nn.functional.dropout(x, 0.4), [("f", S)],
                        torch_ok=False, seed=True, zero=True)


def _setitem_at(x, key, v):
    x[key] = v
    return x


def _setitem(x, v):
    x[1:] = v
    return x


def red(name, kinds="f", zero=True, **kw):
    CASES[name] = Case(lambda M, *t: _fn(M, name)(*t, **kw), [(k, (3, 4, 5)) for k in kinds],
                       zero=zero)


for _n in ("sum", "mean", "prod", "amax", "amin", "logsumexp"):
    red(_n, dim=1)
red("std", dim=1)
red("var", dim=2)
red("norm", dim=1)
red("cumsum", dim=1)
red("cumprod", dim=2)
red("softmax", dim=1)
red("log_softmax", dim=2)
red("all", kinds="f", dim=1)
red("any", kinds="f", dim=2)
CASES["argmax"] = Case(lambda M, x: M.argmax(x, 1), [("f", (3, 4, 5))], zero=True)
CASES["argmin"] = Case(lambda M, x: M.argmin(x, 2), [("f", (3, 4, 5))], zero=True)
CASES["max_dim"] = Case(lambda M, x: M.max(x, 1), [("f", (3, 4, 5))])
CASES["min_dim"] = Case(lambda M, x: M.min(x, 2), [("f", (3, 4, 5))])
# the fused recurrent cells, through torch's functional cells
CASES["lstm_cell_fused"] = Case(lambda M, x, h, c, wi, wh: M.lstm_cell(x, (h, c), wi, wh)[1],
                                [("f", (3, 4)), ("u", (3, 5)), ("f", (3, 5)), ("u", (20, 4)),
                                 ("u", (20, 5))])
CASES["gru_cell_fused"] = Case(lambda M, x, h, wi, wh, b: M.gru_cell(x, h, wi, wh, b, b),
                               [("f", (3, 4)), ("u", (3, 5)), ("u", (15, 4)), ("u", (15, 5)),
                                ("u", (15,))])
CASES["rnn_cell_fused"] = Case(lambda M, x, h, wi, wh: M.rnn_relu_cell(x, h, wi, wh),
                               [("f", (3, 4)), ("u", (3, 5)), ("u", (5, 4)), ("u", (5, 5))])


def _lstm_layer(M, x, h, c, wi, wh):
    """nn.LSTM(4, 5, bias=False) with these weights and states (one rnn_layer op)."""
    mod = M.nn.LSTM(4, 5, bias=False)
    for n, v in (("weight_ih_l0", wi), ("weight_hh_l0", wh)):
        delattr(mod, n)
        setattr(mod, n, v)
    y, (hn, cn) = mod(x, (h, c))
    return y + cn


# torch's bfloat16 LSTM (oneDNN) keeps other intermediates in float32 than ampy's: a weight
# gradient element that cancels to ~0.1 out of O(10) terms differs by a few bfloat16 ulps
# of those terms (2^-8 * 10 = 0.04 each); both stay within tolerance of float64 math
CASES["rnn_layer"] = Case(_lstm_layer, [("f", (3, 2, 4)), ("u", (1, 2, 5)), ("u", (1, 2, 5)),
                                        ("u", (20, 4)), ("u", (20, 5))], torch_atol=0.12)

def _window(c):
    """A 2x3 window from c's second element on, rows 4 apart (offsets are absolute in the
    storage). Not self-overlapping: the sweep also writes into the output, which ampy refuses
    for overlapping views (test_write_checks.py); overlapping windows are in
    test_double_backward.py."""
    return c.as_strided((2, 3), (4, 1), c.storage_offset() + 1)


CASES.update({
    "expand": Case(lambda M, x: x.expand(2, 3, 4), [("f", (3, 1))]),
    "flatten": Case(lambda M, x: x.flatten(), [("f", (3, 4, 2))], zero=True),
    "reshape": Case(lambda M, x: x.reshape(4, -1), [("f", (3, 4, 2))], zero=True),
    "view": Case(lambda M, x: x.view(12, 2), [("f", (3, 4, 2))]),
    "narrow": Case(lambda M, x: x.narrow(1, 1, 2), [("f", S)], zero=True),
    # as_strided addresses the storage, not the view: on a strided input it means other
    # elements by definition, so the sweep reads it from a contiguous copy
    "as_strided": Case(lambda M, x: _window(x.contiguous()), [("f", S)]),
    "select": Case(lambda M, x: x.select(1, 2), [("f", S)], zero=True),
    "permute": Case(lambda M, x: x.permute(2, 0, 1), [("f", (3, 4, 2))], zero=True),
    "transpose": Case(lambda M, x: x.transpose(0, 2), [("f", (3, 4, 2))], zero=True),
    "squeeze": Case(lambda M, x: x.squeeze(1), [("f", (3, 1, 4))], zero=True),
    "unsqueeze": Case(lambda M, x: x.unsqueeze(1), [("f", S)], zero=True),
    "cat": Case(lambda M, a, b: M.cat([a, b], 1), [("f", S), ("f", (3, 2))], zero=True),
    "stack": Case(lambda M, a, b: M.stack([a, b], 1), F2, zero=True),
    "mm": Case(lambda M, a, b: M.mm(a, b), [("f", S), ("f", (4, 5))], zero=True),
    "matmul": Case(lambda M, a, b: M.matmul(a, b), [("f", (2, 3, 4)), ("f", (4, 5))]),
    "bmm": Case(lambda M, a, b: M.bmm(a, b), [("f", (2, 3, 4)), ("f", (2, 4, 5))], zero=True),
    "addmm": Case(lambda M, c, a, b: M.addmm(c, a, b), [("f", (3, 5)), ("f", S), ("f", (4, 5))]),
    "baddbmm": Case(lambda M, c, a, b: M.baddbmm(c, a, b),
                    [("f", (2, 3, 5)), ("f", (2, 3, 4)), ("f", (2, 4, 5))]),
    "linear": Case(lambda M, x, w, b: M.nn.functional.linear(x, w, b),
                   [("f", (2, 3, 4)), ("f", (5, 4)), ("f", (5,))], zero=True),
    "layer_norm": Case(lambda M, x, w, b: M.nn.functional.layer_norm(x, (4,), w, b),
                       [("f", (2, 3, 4)), ("f", (4,)), ("f", (4,))], zero=True,
                       torch_atol=1e-3),
    "embedding": Case(lambda M, i, w: M.nn.functional.embedding(i, w),
                      [("i6", (3, 4)), ("f", (6, 5))], zero=True),
    "cross_entropy": Case(lambda M, x, t: M.nn.functional.cross_entropy(x, t),
                          [("f", (4, 5)), ("i5", (4,))]),
    "nll_loss": Case(lambda M, x, t: M.nn.functional.nll_loss(x, t, reduction="sum"),
                     [("f", (4, 5)), ("i5", (4,))]),
    "mse_loss": Case(lambda M, x, y: M.nn.functional.mse_loss(x, y), [("f", S), ("f", S)]),
})
CASES.update({
    "conv1d": Case(lambda M, x, w, b: M.nn.functional.conv1d(x, w, b, stride=2, padding=1),
                   [("f", (2, 3, 7)), ("f", (4, 3, 3)), ("f", (4,))], zero=True),
    "conv2d": Case(lambda M, x, w, b: M.nn.functional.conv2d(x, w, b, padding=1, groups=2),
                   [("f", (2, 4, 5, 4)), ("f", (6, 2, 3, 3)), ("f", (6,))], zero=True),
    "conv_transpose2d": Case(lambda M, x, w, b: M.nn.functional.conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1),
        [("f", (2, 3, 3, 4)), ("f", (3, 4, 3, 3)), ("f", (4,))], zero=True),
    "conv_transpose1d": Case(lambda M, x, w, b: M.nn.functional.conv_transpose1d(
        x, w, b, stride=2, padding=1, output_padding=1),
        [("f", (2, 3, 5)), ("f", (3, 4, 3)), ("f", (4,))], zero=True),
    "conv3d": Case(lambda M, x, w, b: M.nn.functional.conv3d(x, w, b, padding=1, groups=2),
                   [("f", (2, 4, 3, 4, 3)), ("f", (6, 2, 3, 2, 3)), ("f", (6,))], zero=True),
    "conv_transpose3d": Case(lambda M, x, w, b: M.nn.functional.conv_transpose3d(
        x, w, b, stride=2, padding=1, output_padding=1),
        [("f", (2, 3, 2, 3, 2)), ("f", (3, 4, 3, 3, 2)), ("f", (4,))], zero=True),
})
del _n

# element-wise losses: the probabilities of binary_cross_entropy are u * 0.5 + 0.5 in
# (0.05, 0.95); the weights p
CASES.update({
    "binary_cross_entropy": Case(lambda M, x, t, w: M.nn.functional.binary_cross_entropy(
        x * 0.5 + 0.5, t * 0.5 + 0.5, w.detach()), [("u", S), ("u", S), ("p", (4,))],
        zero=True),
    "binary_cross_entropy_with_logits": Case(
        lambda M, x, t, w: M.nn.functional.binary_cross_entropy_with_logits(
            x, t * 0.5 + 0.5, pos_weight=w.detach()), [("f", S), ("u", S), ("p", (4,))],
        zero=True),
    "l1_loss": Case(lambda M, x, y: M.nn.functional.l1_loss(x, y, reduction="sum"), F2,
                    zero=True),
    "smooth_l1_loss": Case(lambda M, x, y: M.nn.functional.smooth_l1_loss(x, y, beta=0.5), F2,
                           zero=True),
    "huber_loss": Case(lambda M, x, y: M.nn.functional.huber_loss(x, y, reduction="none",
                                                                  delta=0.5), F2, zero=True),
    "kl_div": Case(lambda M, x, t: M.nn.functional.kl_div(x, t, reduction="batchmean"),
                   [("f", S), ("p", S)], zero=True),
})


# ------------------------------------ sorting, gather/scatter, masked_fill, triangles
_S3 = (3, 4, 5)
CASES.update({
    "sort": Case(lambda M, x: M.sort(x, dim=1, stable=True), [("f", _S3)], zero=True),
    # torch leaves the order of equal values open (expanded layouts make them): ampy's is
    # stable sort's, so its reference is torch's stable descending sort cut to k
    "topk": Case(lambda M, x: M.topk(x, 2, -1), [("f", _S3)], zero=True,
                 tfn=lambda M, x: tuple(t.narrow(-1, 0, 2) for t in
                                        M.sort(x, dim=-1, descending=True, stable=True))),
    "gather": Case(lambda M, x, i: M.gather(x, 1, i), [("f", _S3), ("i4", (3, 6, 5))],
                   zero=True),
    # (no 0-size case: for an empty input torch's src gradient gathers from the empty
    # gradient and raises or not depending on its layout; ampy's is zeros)
    "scatter": Case(lambda M, x, s, i: M.scatter(x, 0, i, s),
                    [("f", S), ("f", (2, 4)), ("i3", (2, 4))]),
    "scatter_": Case(lambda M, x, i: x.scatter_(1, i, 1.5), [("f", S), ("i4", (3, 2))],
                     write=True, zero=True),
    "scatter_add": Case(lambda M, x, s, i: M.scatter_add(x, 1, i, s),
                        [("f", S), ("f", (3, 6)), ("i4", (3, 6))], zero=True),
    "scatter_add_": Case(lambda M, x, s, i: x.scatter_add_(1, i, s),
                         [("f", S), ("f", (3, 6)), ("i4", (3, 6))], write=True, zero=True),
    "masked_fill": Case(lambda M, x, m: M.masked_fill(x, m, -1.25), [("f", S), ("b", S)],
                        zero=True),
    "masked_fill_": Case(lambda M, x, m: x.masked_fill_(m, 0.75), [("f", S), ("b", S)],
                         write=True, zero=True),
    "tril": Case(lambda M, x: M.tril(x, 1), [("f", _S3)], zero=True),
    "triu": Case(lambda M, x: M.triu(x, -1), [("f", _S3)], zero=True),
    "tril_": Case(lambda M, x: x.tril_(), [("f", _S3)], write=True, zero=True),
    "triu_": Case(lambda M, x: x.triu_(2), [("f", _S3)], write=True, zero=True),
    "multinomial": Case(lambda M, p: M.multinomial(p.abs() + 0.1, 1), [("f", S)], grad=False,
                        torch_ok=False, seed=True),
})
# ------------------------------------------------------------------ cnn ops
_IMG = ("f", (2, 3, 5, 6))
_VOL = ("f", (2, 3, 4, 5, 6))
_CNN_F = "nn.functional"
CASES.update({
    "batch_norm": Case(lambda M, x, w, b: M.nn.functional.batch_norm(x, None, None, w, b, True),
                       [_IMG, ("f", (3,)), ("f", (3,))], torch_atol=1e-3),
    "group_norm": Case(lambda M, x, w, b: M.nn.functional.group_norm(x, 3, w, b),
                       [_IMG, ("f", (3,)), ("f", (3,))], torch_atol=1e-3),
    "max_pool2d": Case(lambda M, x: M.nn.functional.max_pool2d(x, 2, 1), [_IMG]),
    "avg_pool2d": Case(lambda M, x: M.nn.functional.avg_pool2d(x, 3, 2, 1), [_IMG], zero=True),
    "adaptive_avg_pool2d": Case(lambda M, x: M.nn.functional.adaptive_avg_pool2d(x, (2, 4)),
                                [_IMG], zero=True),
    "constant_pad_nd": Case(lambda M, x: M.nn.functional.pad(x, (1, 2, -1, 1)), [_IMG],
                            zero=True),
    "max_pool3d": Case(lambda M, x: M.nn.functional.max_pool3d(x, 2, 1), [_VOL]),
    "max_pool3d_with_indices": Case(lambda M, x: M.nn.functional.max_pool3d(
        x, (1, 2, 2), 1, 0, 1, True, True)[0], [_VOL]),
    # (torch's CPU avg_pool3d has no half kernel; ampy raises as it does)
    "avg_pool3d": Case(lambda M, x: M.nn.functional.avg_pool3d(x, 3, 2, 1), [_VOL], zero=True,
                       half=False),
    "adaptive_avg_pool3d": Case(lambda M, x: M.nn.functional.adaptive_avg_pool3d(x, (2, 1, 4)),
                                [_VOL], zero=True),
    "adaptive_max_pool2d": Case(lambda M, x: M.nn.functional.adaptive_max_pool2d(x, (2, 4)),
                                [_IMG]),
    "adaptive_max_pool3d": Case(lambda M, x: M.nn.functional.adaptive_max_pool3d(x, (2, 1, 4)),
                                [_VOL]),
    "_pad_circular": Case(lambda M, x: M.nn.functional.pad(x, (1, 2), mode="circular"),
                          [("f", (2, 3, 5))]),
    "upsample_nearest2d": Case(lambda M, x: M.nn.functional.interpolate(x, scale_factor=2),
                               [_IMG], zero=True),
    "upsample_bilinear2d": Case(lambda M, x: M.nn.functional.interpolate(
        x, size=(7, 4), mode="bilinear"), [_IMG], zero=True),
})
for _k in (1, 2, 3):
    for _mode, _op in (("reflect", "reflection"), ("replicate", "replication")):
        CASES[f"{_op}_pad{_k}d"] = Case(
            lambda M, x, _k=_k, _mode=_mode: M.nn.functional.pad(x, (1, 2) + (1, 0) * (_k - 1),
                                                                 mode=_mode),
            [("f", (2,) + (4,) * _k)])


# ------------------------------------------------------------------ runner
def _shapes(case, zero):
    shapes = [s for _, s in case.specs]
    if zero:
        d0, nd0 = shapes[0][0], len(shapes[0])
        shapes = [(0,) + s[1:] if len(s) == nd0 and s[0] == d0 else s for s in shapes]
    return shapes


def _run(case, mode, vals, adts, lays, gmask, gout, exact=None):
    """(forward outputs, input grads) as ndarrays for one mode (strided /
    contig ampy, torch, or "torch64": torch in float64 on the same values,
    the inputs and incoming grads of dtype `exact` widened exactly);
    gout(j, shape, dtype, strided) -> incoming grad."""
    if mode == "torch":
        M, ts = torch, [to_torch(v, a) for v, a in zip(vals, adts)]
    elif mode == "torch64":
        M, ts = torch, [to_torch(v, a).double() if a == exact else to_torch(v, a)
                        for v, a in zip(vals, adts)]
    elif mode == "contig":
        M, ts = ampy, [contiguous(v, a) for v, a in zip(vals, adts)]
    else:
        M, ts = ampy, [strided(v, a, l) for v, a, l in zip(vals, adts, lays)]
    for t, m in zip(ts, gmask):
        if m:
            t.requires_grad_(True)
    if case.seed:
        ampy.manual_seed(0)
    out = (case.tfn if mode in ("torch", "torch64") else case.fn)(M, *ts)
    outs = list(out) if isinstance(out, tuple) else [out]
    if case.write:
        assert out is ts[0], "an in-place op must return the tensor it wrote"
    fwd = [as_np(o) for o in outs]
    diff = [o for o in outs if o.requires_grad]
    if not diff:
        return fwd, None
    if mode == "torch64":
        gs = [gout(j, tuple(o.shape), exact, False, M).double() for j, o in enumerate(diff)]
    else:
        gs = [gout(j, tuple(o.shape), str(o.dtype).split(".")[-1], mode == "strided", M)
              for j, o in enumerate(diff)]
    M.autograd.backward(diff, gs)
    return fwd, [as_np(t.grad) if t.grad is not None else None
                 for t, m in zip(ts, gmask) if m]


def _close(got, ref, tol, what):
    assert len(got) == len(ref), what
    for j, (g, r) in enumerate(zip(got, ref)):
        assert (g is None) == (r is None), f"{what} {j}: {g} vs {r}"
        if g is None:
            continue
        assert g.shape == r.shape, f"{what} {j}: shape {g.shape} vs {r.shape}"
        if g.dtype.kind in "biu" or r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r, err_msg=f"{what} {j}")
        else:
            np.testing.assert_allclose(g, r, rtol=tol[0], atol=tol[1], equal_nan=True,
                                       err_msg=f"{what} {j}")


def check(name, dtype, lays, glay, seed, zero):
    """Run op `name` with inputs in lays (and the incoming gradient in
    glay(ndim)) and compare with contiguous ampy and with torch."""
    case = CASES[name]
    rng = np.random.default_rng(seed)
    shapes = _shapes(case, zero)
    vals = [values(k, s, dtype, rng, lay) for (k, _), s, lay in zip(case.specs, shapes, lays)]
    adts = [input_dtype(k, dtype) for k, _ in case.specs]
    gmask = [case.grad and a == dtype and not (case.write and j == 0)
             for j, a in enumerate(adts)]

    glays = {}

    def gout(j, shape, gdt, is_strided, M):
        if j not in glays:  # one drawn layout per output, its values the same in every mode
            glays[j] = glay(len(shape))
        lay = glays[j]
        v = values("f", shape, gdt, np.random.default_rng([seed, j]), lay)
        if M is torch:
            return to_torch(v, gdt)
        return strided(v, gdt, lay) if is_strided else contiguous(v, gdt)

    ref = _run(case, "contig", vals, adts, lays, gmask, gout)
    try:
        got = _run(case, "strided", vals, adts, lays, gmask, gout)
    except RuntimeError as e:
        if name != "view" or "view size is not compatible" not in str(e):
            raise
        t = torch_strided(vals[0], dtype, lays[0])
        if t is not None:  # torch refuses this layout too
            with pytest.raises(RuntimeError, match="view size is not compatible"):
                case.fn(torch, t)
        return
    _close(got[0], ref[0], TOL_SELF[dtype], "forward output")
    assert (got[1] is None) == (ref[1] is None)
    if ref[1] is not None:
        _close(got[1], ref[1], TOL_SELF[dtype], "gradient of input")
    if case.torch_ok:
        tr = _run(case, "torch", vals, adts, lays, gmask, gout)
        tol = TOL_TORCH[dtype]
        tol = (tol[0], max(tol[1], case.torch_atol or 0))
        _close(got[0], tr[0], tol, "forward output vs torch")
        assert (got[1] is None) == (tr[1] is None)
        if tr[1] is not None:
            try:
                _close(got[1], tr[1], tol, "gradient of input vs torch")
            except AssertionError:
                # torch's kernel can be the one that is off (layer_norm's half
                # backward with a constant incoming grad, group_norm's float32
                # weight gradient over an input that is constant within a
                # group: the exact gradient is 0, torch's is rounding noise
                # amplified by 1/sqrt(eps)): then the referee is float64 math
                # on the same values, which ampy must match and torch must miss
                ex = _run(case, "torch64", vals, adts, lays, gmask, gout, exact=dtype)
                _close(got[1], ex[1], tol, "gradient of input vs float64")
                with pytest.raises(AssertionError):
                    _close(tr[1], ex[1], tol, "torch's gradient vs float64")


# ------------------------------------------------------------------ tests
PARAMS = [(n, d) for n in sorted(CASES) if CASES[n] is not None
          for d in DTYPES if d == "float32" or CASES[n].half]
FIXED = [(n, d, k) for n, d in PARAMS for k in KINDS if k != "zero" or CASES[n].zero]


def test_every_op_has_a_case():
    missing = sorted(set(_dispatch.ops()) - set(CASES))
    assert not missing, f"ops without a strided-sweep case: {missing}"


@pytest.mark.parametrize("name,dtype,kind", FIXED)
def test_fixed_layout(name, dtype, kind):
    case = CASES[name]
    lays = [fixed_layout(kind, len(s), written=case.write and j == 0)
            for j, (_, s) in enumerate(case.specs)]
    check(name, dtype, lays, lambda nd: fixed_layout(kind, nd, grad_out=True), 1234,
          kind == "zero")


@pytest.mark.parametrize("name,dtype", PARAMS)
@settings(max_examples=2 if os.environ.get("AMPY_TEST_SHORT") else 5, deadline=None)
@given(data=st.data())
def test_drawn_layouts(name, dtype, data):
    case = CASES[name]
    lays = [data.draw(layouts(len(s), written=case.write and j == 0), label=f"input {j}")
            for j, (_, s) in enumerate(case.specs)]
    zero = case.zero and data.draw(st.booleans(), label="zero")
    check(name, dtype, lays, lambda nd: data.draw(layouts(nd), label="grad layout"),
          data.draw(st.integers(0, 2**31), label="seed"), zero)


def test_layer_norm_half_constant_grad_is_refereed_by_float64():
    """The case hypothesis found: float16 layer_norm over rows of an expanded
    input, with an expanded (constant) weight and a constant incoming grad. The
    exact input gradient is 0; ampy gives ~1e-7, torch's half kernel 0.03-0.06,
    so float64 math decides (see check)."""
    check("layer_norm", "float16", [Layout(3, expand=(0,)), Layout(1, expand=(0,)),
                                    Layout(1, expand=(0,))],
          lambda nd: Layout(nd, expand=tuple(range(nd))), 263, False)


def test_group_norm_constant_group_is_refereed_by_float64():
    """The case hypothesis found: float32 group_norm of an input expanded over
    the batch and spatial dims (constant within each group). The exact weight
    gradient is 0; ampy gives 0 to 1e-11, torch's kernel up to 1e-3, so float64
    math decides (see check)."""
    check("group_norm", "float32", [Layout(4, expand=(0, 2, 3)), Layout(1), Layout(1)],
          lambda nd: Layout(nd, expand=(0, 3) if nd == 4 else ()), 0, False)


# ------------------------------------------------------ double backward
def _run_double(case, is_strided, vals, adts, lays, gmask, gout):
    """Second-order gradients: d/d(inputs) of sum_j <first-order grad_j, w_j>,
    the first-order grads taken with create_graph=True (ampy only)."""
    M = ampy
    ts = [strided(v, a, l) if is_strided else contiguous(v, a)
          for v, a, l in zip(vals, adts, lays)]
    for t, m in zip(ts, gmask):
        if m:
            t.requires_grad_(True)
    if case.seed:
        ampy.manual_seed(0)
    out = case.fn(M, *ts)
    outs = [o for o in (list(out) if isinstance(out, tuple) else [out]) if o.requires_grad]
    want = [t for t, m in zip(ts, gmask) if m]
    gs = [gout(j, tuple(o.shape), str(o.dtype).split(".")[-1], is_strided, M)
          for j, o in enumerate(outs)]
    first = M.autograd.grad(outs, want, gs, create_graph=True, allow_unused=True)
    rng = np.random.default_rng(11)
    terms = [(f * contiguous(values("f", tuple(f.shape), adts[0], rng), adts[0]).to(f.dtype))
             .sum() for f in first if f is not None and f.requires_grad]
    if not terms:
        return None
    second = M.autograd.grad(sum(terms), want, allow_unused=True)
    return [None if g is None else as_np(g) for g in second]


DOUBLE = [(n, k) for n, d in PARAMS if d == "float32" and CASES[n].grad
          and not CASES[n].write and n != "view"  # (view refuses some layouts: test_fixed_layout)
          for k in ("transposed", "flipped", "expanded")]


@pytest.mark.parametrize("name,kind", DOUBLE)
def test_double_backward_layout(name, kind):
    """Where ampy supports double backward, a strided layout of the inputs
    and of the incoming gradient gives the contiguous answer; where it raises,
    it raises the same way for every layout. (Checking the second-order values
    against torch is the double-backward suite's job.)"""
    case = CASES[name]
    rng = np.random.default_rng(21)
    lays = [fixed_layout(kind, len(s)) for _, s in case.specs]
    vals = [values(k, s, "float32", rng, lay) for (k, s), lay in zip(case.specs, lays)]
    adts = [input_dtype(k, "float32") for k, _ in case.specs]
    gmask = [a == "float32" for a in adts]
    glay = {}

    def gout(j, shape, gdt, is_strided, M):
        lay = glay.setdefault(j, fixed_layout(kind, len(shape), grad_out=True))
        v = values("f", shape, gdt, np.random.default_rng([21, j]), lay)
        return strided(v, gdt, lay) if is_strided else contiguous(v, gdt)

    try:
        ref = _run_double(case, False, vals, adts, lays, gmask, gout)
    except (RuntimeError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            _run_double(case, True, vals, adts, lays, gmask, gout)
        return
    got = _run_double(case, True, vals, adts, lays, gmask, gout)
    assert (ref is None) == (got is None)
    if ref is not None:
        _close(got, ref, TOL_SELF["float32"], "second-order gradient")


# ------------------------------------------------------------ nn modules
def _modules(M):
    """name -> (module, input specs): every module class of ampy.nn over the fused ops."""
    nn = M.nn
    M.manual_seed(0)
    lin, ln, emb = nn.Linear(4, 5), nn.LayerNorm(4), nn.Embedding(6, 4)
    with M.no_grad():  # the same parameters in both libraries
        for p, seed in ((lin.weight, 1), (lin.bias, 2), (ln.weight, 3), (ln.bias, 4),
                        (emb.weight, 5)):
            p.copy_(M.tensor(np.random.default_rng(seed).normal(size=tuple(p.shape))
                             .astype(np.float32)))
    return {
        "Linear": (lin, [("f", (3, 4))]), "LayerNorm": (ln, [("f", (2, 3, 4))]),
        "Embedding": (emb, [("i6", (3, 4))]), "ReLU": (nn.ReLU(), [("f", S)]),
        "GELU": (nn.GELU(), [("f", S)]), "SiLU": (nn.SiLU(), [("f", S)]),
        "Tanh": (nn.Tanh(), [("f", S)]), "Sigmoid": (nn.Sigmoid(), [("f", S)]),
        "Softmax": (nn.Softmax(1), [("f", S)]), "LogSoftmax": (nn.LogSoftmax(1), [("f", S)]),
        "Flatten": (nn.Flatten(), [("f", (2, 3, 4))]), "Identity": (nn.Identity(), [("f", S)]),
        "Dropout-eval": (nn.Dropout(0.3).eval(), [("f", S)]),
        "CrossEntropyLoss": (nn.CrossEntropyLoss(), [("f", (4, 5)), ("i5", (4,))]),
        "NLLLoss": (nn.NLLLoss(), [("f", (4, 5)), ("i5", (4,))]),
        "MSELoss": (nn.MSELoss(), [("f", S), ("f", S)]),
        "Sequential": (nn.Sequential(lin, nn.ReLU(), nn.LayerNorm(5)), [("f", (3, 4))]),
    }


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "zero"])
@pytest.mark.parametrize("name", sorted(_modules(ampy)))
def test_module_strided_input(name, kind):
    """Each module on inputs in a strided layout, forward and backward
    (parameters' gradients too), against torch's module with the same
    parameters on the same values."""
    res = []
    for M in (ampy, torch):
        mod, specs = _modules(M)[name]
        rng = np.random.default_rng(7)
        lays = [fixed_layout(kind, len(s)) for _, s in specs]
        vals = [values(k, s, "float32", rng, lay) for (k, s), lay in zip(specs, lays)]
        adts = [input_dtype(k, "float32") for k, _ in specs]
        if M is ampy:
            xs = [strided(v, a, lay) for v, a, lay in zip(vals, adts, lays)]
        else:
            xs = [to_torch(v, a) for v, a in zip(vals, adts)]
        if adts[0] == "float32":
            xs[0].requires_grad_(True)
        out = mod(*xs)
        g = values("f", tuple(out.shape), "float32", rng)
        out.backward(M.tensor(g) if M is ampy else torch.tensor(g))
        grads = [as_np(p.grad) for p in mod.parameters()]
        res.append([as_np(out)] + grads + ([as_np(xs[0].grad)] if xs[0].requires_grad else []))
    _close(res[0], res[1], TOL_TORCH["float32"], f"{name} vs torch")


# --------------------------------------------- the issue's examples, as written
def test_issue_examples_non_contiguous_nn_inputs():
    """These raised 'Boolean value of Tensor with more than
    one value is ambiguous'; each must give torch's answer, forward and backward."""
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(5, 4)).astype(np.float32)
    wv = rng.normal(size=(4, 6)).astype(np.float32)
    tv = np.array([[1, 0, 3, 2], [2, 3, 0, 1]], dtype=np.int64)
    out = []
    for M in (ampy, torch):
        F = M.nn.functional
        x, w = M.tensor(xv).requires_grad_(True), M.tensor(wv).requires_grad_(True)
        t = M.tensor(tv)
        res = [F.layer_norm(x.T, (5,)), F.cross_entropy(x.T, t[0]), F.mse_loss(x.T, x.T * 0.5),
               F.embedding(t.T, w.T), F.embedding(t[:, ::2], w.T[:, 1:]),
               F.cross_entropy(x[:, ::2].T, t[1, :2]), F.nll_loss(x[1:].T, t[0])]
        sum(r.sum() for r in res).backward()
        out.append([as_np(r) for r in res] + [as_np(x.grad), as_np(w.grad)])
    _close(out[0], out[1], TOL_TORCH["float32"], "issue examples vs torch")


@pytest.mark.parametrize("layout", ["plain", "transposed", "sliced"])
def test_dropout_backward_of_sum(layout):
    """F.dropout(x, 0.5).sum().backward(): sum's gradient is an expanded tensor."""
    base = ampy.tensor(np.random.default_rng(1).normal(size=(6, 8)).astype(np.float32))
    x = {"plain": base, "transposed": base.T, "sliced": base[::2, 1:]}[layout]
    x = x.detach().requires_grad_(True)
    y = ampy.nn.functional.dropout(x, 0.5)
    y.sum().backward()
    keep = y.detach().numpy() != 0
    np.testing.assert_array_equal(y.detach().numpy(), np.where(keep, x.detach().numpy() * 2, 0))
    np.testing.assert_array_equal(x.grad.numpy(), keep * 2.0)


@requires_cuda
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "zero"] + ["zero"])
def test_to_device_strided(kind):
    """to_device (the op behind .to('cuda') / .cpu()) on every layout, both ways."""
    case_vals = values("f", (3, 4), "float32", np.random.default_rng(3),
                       fixed_layout(kind, 2))
    if kind == "zero":
        case_vals = case_vals[:0]
    lay = fixed_layout(kind, 2)
    x = strided(case_vals, "float32", lay).requires_grad_(True)
    y = x.to("cuda")
    back = y.cpu()
    np.testing.assert_array_equal(back.detach().numpy(), case_vals)
    g = strided(values("f", tuple(back.shape), "float32", np.random.default_rng(4),
                       fixed_layout(kind, 2, grad_out=True)), "float32",
                fixed_layout(kind, 2, grad_out=True))
    back.backward(g)
    np.testing.assert_array_equal(x.grad.numpy(), g.numpy())


# ------------------------------------------------------------- out= writes
def _has_out(name):
    import inspect
    f = getattr(ampy, name, None)
    try:
        return f is not None and "out" in inspect.signature(f).parameters
    except (TypeError, ValueError):
        return False


OUT = [(n, d, k) for n, d in PARAMS if n in CASES and _has_out(n) and not CASES[n].write
       for k in ("transposed", "stepped", "flipped", "offset")]


@pytest.mark.parametrize("name,dtype,kind", OUT)
def test_out_strided(name, dtype, kind):
    """op(..., out=o) with o in a strided layout: writes exactly o's elements
    (the storage around them keeps its junk), returns o, and holds the
    result of the op on contiguous inputs (itself checked against torch above)."""
    case = CASES[name]
    rng = np.random.default_rng(31)
    vals = [values(k, s, dtype, rng) for k, s in case.specs]
    adts = [input_dtype(k, dtype) for k, _ in case.specs]
    ref = case.fn(ampy, *[contiguous(v, a) for v, a in zip(vals, adts)])
    odt = str(ref.dtype).split(".")[-1]
    lay = fixed_layout(kind, ref.ndim)
    o = strided(np.zeros(tuple(ref.shape), dtype=np.float32 if odt in ("float16", "bfloat16")
                         else as_np(ref).dtype), odt, lay)
    kw = case.kw
    got = getattr(ampy, name)(*[strided(v, a, fixed_layout(kind, v.ndim))
                                for v, a in zip(vals, adts)], out=o, **kw)
    assert got is o
    _close([as_np(o)], [as_np(ref)], TOL_SELF[dtype], f"{name}(out=strided)")
    pos = np.full(tuple(o.shape), o.storage_offset(), dtype=np.int64)
    for d in range(o.ndim):
        pos += np.indices(tuple(o.shape))[d] * o.stride()[d]
    base = o.as_strided((int(pos.max()) + 1,), (1,), 0)
    touched = np.zeros(base.shape[0], dtype=bool)
    touched[np.ravel(pos)] = True
    rest = as_np(base)[~touched]
    assert (rest == (JUNK if odt in FLOAT_NAMES else 1)).all(), "out= wrote outside its view"


# ------------------------------------------- version checks over the op table
VIEWS = {"expand", "flatten", "reshape", "view", "narrow", "select", "permute", "transpose",
         "squeeze", "unsqueeze", "getitem", "getitem[tensor, slice]", "to_dtype"}
VERSION = [(n, j) for n, d in PARAMS if d == "float32" and CASES[n].grad and CASES[n].torch_ok
           and not CASES[n].write
           for j in range(len(CASES[n].specs) + (0 if n in VIEWS else 1))]


def _modified_run(case, vals, adts, target, M):
    """Run the op on leaves, change input `target` (or the output, for
    target == len(inputs)) in place under no_grad, then backward. Returns
    'ok' or the error's first words."""
    ts = [to_torch(v, a) if M is torch else contiguous(v, a) for v, a in zip(vals, adts)]
    for t, a in zip(ts, adts):
        if a == "float32":
            t.requires_grad_(True)
    out = case.fn(M, *ts)
    outs = [o for o in (list(out) if isinstance(out, tuple) else [out]) if o.requires_grad]
    if not outs:
        return "no graph"
    with M.no_grad():
        if target < len(ts):  # (indices and masks keep their values: only the version moves)
            ts[target].copy_(ts[target] + 1 if adts[target] == "float32" else ts[target].clone())
        else:
            outs[0].add_(0.5)
    try:
        M.autograd.backward(outs, [M.ones_like(o) for o in outs])
    except RuntimeError as e:
        return str(e).split(":")[0]
    return "ok"


# Where ampy is knowingly stricter than torch (a clear error instead of a result): the fused
# cross_entropy keeps the logits and the per-row logsumexp for its backward, torch's
# log_softmax + nll_loss keeps log_softmax's output, so changing the logits in place after
# the forward raises in ampy only.
STRICTER = {("cross_entropy", 0)}


@pytest.mark.parametrize("name,target", VERSION)
def test_version_check_like_torch(name, target):
    """Changing an input (or the output) in place after the forward makes
    backward raise exactly when torch's does: ampy keeps and checks what
    torch saves (over every op)."""
    case = CASES[name]
    rng = np.random.default_rng(41)
    vals = [values(k, s, "float32", rng) for k, s in case.specs]
    adts = [input_dtype(k, "float32") for k, _ in case.specs]
    got = _modified_run(case, vals, adts, target, ampy)
    if (name, target) in STRICTER:
        assert _modified_run(case, vals, adts, target, torch) == "ok"
        assert got.startswith("one of the variables needed for gradient computation")
        return
    assert got == _modified_run(case, vals, adts, target, torch)


CASES["scaled_dot_product_attention"] = Case(
    lambda M, q, k, v: M.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
    [("f", (2, 3, 4)), ("f", (2, 5, 4)), ("f", (2, 5, 3))])

CASES.update({
    "scatter_reduce": Case(lambda M, x, s, i: M.scatter_reduce(x, 1, i, s, "amax",
                                                               include_self=False),
                           [("f", S), ("f", (3, 6)), ("i4", (3, 6))], zero=True),
    "scatter_reduce_": Case(lambda M, x, s, i: x.scatter_reduce_(1, i, s, "mean"),
                            [("f", S), ("f", (3, 6)), ("i4", (3, 6))], write=True, zero=True),
})
