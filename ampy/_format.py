"""torch-style repr of tensors: tensor([[1., 2.], ...], dtype=ampy.float16).

A port of torch/_tensor_str.py's rules (default print options: precision 4,
threshold 1000, edgeitems 3, linewidth 80) over a NumPy copy of the values:
one formatter for the whole tensor picks int mode (every finite value is an
integer: "1."), fixed "1.2345" or scientific "1.2345e+05" notation, and
right-aligns every element to the widest one, so positives get a leading
space when negatives are present. Suffixes: size= for empty tensors that are
not (0,), dtype= for dtypes other than float32/int64/bool, then
grad_fn=<Name> or requires_grad=True.
"""
import math

import numpy as np

from . import _dtype as D

PRECISION, THRESHOLD, EDGEITEMS, LINEWIDTH = 4, 1000, 3, 80


class _Formatter:
    def __init__(self, vals, floating):
        """vals: the (summarized) values, a flat NumPy array."""
        self.floating = floating
        self.int_mode, self.sci_mode, self.max_width = True, False, 1
        if not floating:
            for v in vals.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        v = vals.astype(np.float64)
        nz = v[np.isfinite(v) & (v != 0)]
        if nz.size == 0:
            return
        a = np.abs(nz)
        amin, amax = a.min(), a.max()
        self.int_mode = bool(np.all(nz == np.ceil(nz)))
        self.sci_mode = bool(amax / amin > 1000.0 or amax > 1.0e8 or amin < 1.0e-4)
        for x in nz.tolist():
            if self.sci_mode:
                w = len(f"{x:.{PRECISION}e}")
            elif self.int_mode:
                w = len(f"{x:.0f}") + 1
            else:
                w = len(f"{x:.{PRECISION}f}")
            self.max_width = max(self.max_width, w)

    def format(self, x):
        if self.floating:
            if self.sci_mode:
                s = f"{x:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                s = f"{x:.0f}" + ("" if math.isinf(x) or math.isnan(x) else ".")
            else:
                s = f"{x:.{PRECISION}f}"
        else:
            s = str(x)
        return " " * (self.max_width - len(s)) + s


def _summarized(a):
    """torch's get_summarized_data: the first and last EDGEITEMS along every dim."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]])
    if a.ndim == 1:
        return a
    return np.stack([_summarized(x) for x in a])


def _vector_str(a, indent, summarize, f):
    per_line = max(1, math.floor((LINEWIDTH - indent) / (f.max_width + 2)))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        data = ([f.format(v) for v in a[:EDGEITEMS].tolist()] + [" ..."] +
                [f.format(v) for v in a[-EDGEITEMS:].tolist()])
    else:
        data = [f.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a, indent, summarize, f):
    if a.ndim == 0:
        return f.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, f)
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        slices = ([_tensor_str(a[i], indent + 1, summarize, f) for i in range(EDGEITEMS)] +
                  ["..."] +
                  [_tensor_str(a[i], indent + 1, summarize, f)
                   for i in range(a.shape[0] - EDGEITEMS, a.shape[0])])
    else:
        slices = [_tensor_str(a[i], indent + 1, summarize, f) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _add_suffixes(s, suffixes, indent):
    parts = [s]
    last = len(s) - s.rfind("\n") + 1
    for suf in suffixes:
        if last + len(suf) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suf)
            last = indent + len(suf)
        else:
            parts.append(", " + suf)
            last += len(suf) + 2
    return "".join(parts) + ")"


def _values(t):
    """A NumPy array of t's values: half types widened exactly to float32."""
    if t.dtype in (D.float16, D.bfloat16):
        t = t.to(D.float32)
    return np.asarray(t._numpy())


def format_tensor(t):
    grad_fn, requires_grad = t.grad_fn, t.requires_grad
    t = t.detach()
    if t.is_cuda:
        t = t.cpu()
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    default = t.dtype in (D.get_default_dtype(), D.int64, D.bool)
    if t.numel() == 0:
        if t.ndim != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not D.get_default_dtype():
            suffixes.append(f"dtype=ampy.{t.dtype.name}")
        body = "[]"
    else:
        if not default:
            suffixes.append(f"dtype=ampy.{t.dtype.name}")
        a = _values(t)
        summarize = a.size > THRESHOLD
        f = _Formatter((_summarized(a) if summarize else a).reshape(-1),
                       t.dtype.is_floating_point)
        body = _tensor_str(a, indent, summarize, f)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{type(grad_fn).__name__}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
