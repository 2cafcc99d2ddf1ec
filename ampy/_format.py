"""torch-style repr of tensors: tensor([[1., 2.], ...], dtype=ampy.float16)."""
import numpy as np

from . import _dtype as D

_DEFAULT_SHOWN = (D.float32, D.int64, D.bool)


def _fmt_floats(vals):
    finite = vals[np.isfinite(vals)]
    if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: (f"{v:.0f}." if np.isfinite(v) else str(v))
    big = finite.size and (np.abs(finite).max() >= 1e8 or
                           (np.abs(finite[finite != 0]).min() < 1e-4 if np.any(finite != 0)
                            else False))
    if big:
        return lambda v: f"{v:.4e}"
    return lambda v: f"{v:.4f}"


def format_tensor(t):
    t = t.detach()
    if t.is_cuda:
        t = t.cpu()
    arr = np.asarray(t.to(D.float32)._numpy() if t.dtype in (D.float16, D.bfloat16) else t._numpy())
    summarize = arr.size > 1000
    if t.dtype.is_floating_point:
        sample = arr if not summarize else np.concatenate([arr.reshape(-1)[:3],
                                                            arr.reshape(-1)[-3:]])
        f = _fmt_floats(sample.astype(np.float64).reshape(-1))
        fmt = {"float_kind": lambda v: f(float(v))}
    elif t.dtype is D.bool:
        fmt = {"bool": lambda v: "True" if v else "False"}
    else:
        fmt = {"int": lambda v: str(int(v))}
    body = np.array2string(arr, separator=", ", formatter=fmt, threshold=1000, edgeitems=3,
                           prefix="tensor(", max_line_width=80)
    extras = []
    if t.numel() == 0 and tuple(t.shape) != (0,):
        extras.append(f"size={tuple(t.shape)}")
    if t.dtype not in _DEFAULT_SHOWN:
        extras.append(f"dtype=ampy.{t.dtype.name}")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
