"""Sample inputs for tests/test_double_backward.py: one entry per op of the op
table (`ampy._dispatch.ops()`).

A case is written once for both libraries: `fn(m, *xs)` gets the module
(`ampy` or `torch`) and the inputs converted to that library's tensors, and
must call the op under test (the test checks that the op was dispatched).
`ins` are NumPy arrays (floating ones are float64 unless the case says
otherwise; integer ones are index/target tensors that never require grad);
`diff` lists the positions of the inputs that require grad (default: every
floating input).

Kinds: `Case` (double backward checked against torch), `Raises` (ampy raises
a clear RuntimeError when create_graph=True needs the op's second derivative)
and `NonDiff` (the output never requires grad).
"""
import zlib

import numpy as np

__all__ = ["CASES", "Case", "Raises", "NonDiff", "F"]


class Case:
    def __init__(self, fn, *ins, diff=None, dtype="float64", rtol=1e-7, atol=1e-9,
                 nan_is_zero=False):
        self.fn, self.ins, self.diff, self.dtype = fn, ins, diff, dtype
        self.rtol, self.atol = rtol, atol
        # where torch's second-order grad is NaN only from its 0/0 on storage
        # positions the input cannot see (as_strided of an expanded input),
        # ampy's is the exact 0
        self.nan_is_zero = nan_is_zero


class Raises:
    """ampy raises RuntimeError matching `match` in the create_graph=True
    backward (order 1: the first-order grad already raises, in torch too) or
    in the second-order grad (order 2)."""

    def __init__(self, fn, *ins, match, order=2, dtype="float64"):
        self.fn, self.ins, self.match, self.order, self.dtype = fn, ins, match, order, dtype
        self.diff = None


class NonDiff:
    def __init__(self, fn, *ins):
        self.fn, self.ins = fn, ins


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def r(*shape, lo=-1.5, hi=1.5, key=0):
    """Uniform values in [lo, hi], kept 0.05 away from 0 (kinks of abs, relu,
    sign...) and from integers for rounding-like ops when lo/hi ask for it."""
    a = _rng(shape, lo, hi, key).uniform(lo, hi, size=shape)
    return np.where(np.abs(a) < 0.05, a + 0.1, a)


def pos(*shape, key=0):
    return r(*shape, lo=0.3, hi=1.7, key=key)


def unit(*shape, key=0):
    return r(*shape, lo=-0.8, hi=0.8, key=key)


def idx(*values):
    return np.asarray(values, dtype=np.int64)


def imat(*shape, high=5, key=0):
    return _rng(shape, high, key).integers(0, high, size=shape).astype(np.int64)


def F(m, name):
    """The activation `name` of m: m.nn.functional's, else m's own."""
    fn = getattr(m.nn.functional, name, None)
    return fn if fn is not None else getattr(m, name)


CASES = {}

# ------------------------------------------------------------- unary math
_UNARY_DOMAIN = {
    "abs": r, "neg": r, "reciprocal": pos, "square": r, "exp": r, "expm1": r, "exp2": r,
    "log": pos, "log1p": pos, "log2": pos, "log10": pos, "sqrt": pos, "rsqrt": pos, "sin": r,
    "cos": r, "tan": unit, "tanh": r, "atan": r, "asin": unit, "acos": unit, "sinh": r,
    "cosh": r, "sigmoid": r, "relu": r, "erf": r, "silu": r, "mish": r, "logsigmoid": r,
    "frac": r, "floor": r, "ceil": r, "trunc": r, "round": r, "sign": r,
}
for _n, _dom in _UNARY_DOMAIN.items():
    CASES[_n] = Case(lambda m, x, _n=_n: F(m, _n)(x), _dom(3, 4))
    if _n not in ("mish", "logsigmoid", "round"):
        CASES[_n + "_"] = Case(lambda m, x, _n=_n: _inplace(m, _n, x * 1), _dom(3, 4))

def _inplace(m, name, x):
    if name == "silu":  # no Tensor.silu_ in either library; ampy has the op
        if m.__name__ == "torch":
            return m.nn.functional.silu(x, inplace=True)
        from ampy._dispatch import dispatch, get_op
        return dispatch(get_op("silu_"), x)
    return getattr(x, name + "_")()


CASES.update({
    # 4 * r(3, 4) spans both kinks of hardswish, at -3 and 3
    "hardswish": Case(lambda m, x: m.nn.functional.hardswish(x * 4), r(3, 4)),
    "hardswish_": Case(lambda m, x: m.nn.functional.hardswish(x * 4, inplace=True), r(3, 4)),
    "gelu": Case(lambda m, x: m.nn.functional.gelu(x), r(3, 4)),
    "softplus": Case(lambda m, x: F(m, "softplus")(x, beta=2.0, threshold=2.0), r(3, 4)),
    "leaky_relu": Case(lambda m, x: F(m, "leaky_relu")(x, 0.2), r(3, 4)),
    "elu": Case(lambda m, x: F(m, "elu")(x, 0.7), r(3, 4)),
})

# ----------------------------------------------------------- binary math
_BINARY = {
    "add": lambda m, a, b: m.add(a, b, alpha=0.5), "sub": lambda m, a, b: m.sub(a, b, alpha=2),
    "mul": lambda m, a, b: m.mul(a, b), "div": lambda m, a, b: m.div(a, b),
    "pow": lambda m, a, b: m.pow(a, b), "atan2": lambda m, a, b: m.atan2(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b), "remainder": lambda m, a, b: m.remainder(a, b),
    "maximum": lambda m, a, b: m.maximum(a, b), "minimum": lambda m, a, b: m.minimum(a, b),
    "fmax": lambda m, a, b: m.fmax(a, b), "fmin": lambda m, a, b: m.fmin(a, b),
}
for _n, _f in _BINARY.items():
    _a = pos(3, 4, key=1) if _n == "pow" else r(3, 4, key=1)
    CASES[_n] = Case(_f, _a, r(4, key=2))  # (broadcast: b's gradient is summed down)
    if _n not in ("maximum", "minimum", "fmax", "fmin"):
        CASES[_n + "_"] = Case(
            lambda m, a, b, _f=_f, _n=_n: getattr(a * 1, _n + "_")(b), _a, r(4, key=2))

CASES.update({
    "lerp": Case(lambda m, a, b, w: m.lerp(a, b, w), r(3, 4), r(3, 4, key=1), unit(4, key=2)),
    "lerp_": Case(lambda m, a, b, w: (a * 1).lerp_(b, w), r(3, 4), r(3, 4, key=1),
                  unit(3, 4, key=2)),
    "addcmul": Case(lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), r(3, 4), r(3, 4, key=1),
                    r(4, key=2)),
    "addcmul_": Case(lambda m, a, b, c: (a * 1).addcmul_(b, c, value=2), r(3, 4),
                     r(3, 4, key=1), r(3, 4, key=2)),
    "addcdiv": Case(lambda m, a, b, c: m.addcdiv(a, b, c, value=0.5), r(3, 4), r(3, 4, key=1),
                    pos(4, key=2)),
    "addcdiv_": Case(lambda m, a, b, c: (a * 1).addcdiv_(b, c, value=2), r(3, 4),
                     r(3, 4, key=1), pos(3, 4, key=2)),
    "clamp": Case(lambda m, x, lo, hi: m.clamp(x, lo, hi), r(3, 4), r(3, 4, key=1, lo=-1, hi=0),
                  r(3, 4, key=2, lo=0, hi=1)),
    "clamp_": Case(lambda m, x: (x * 1).clamp_(-0.5, 0.7), r(3, 4)),
    "where": Case(lambda m, c, a, b: m.where(c > 0, a, b), r(3, 4), r(3, 4, key=1),
                  r(4, key=2), diff=(1, 2)),
    "setitem": Case(lambda m, x, v: _setitem(x * 1, v), r(3, 4), r(4, key=1)),
    "copy_": Case(lambda m, x, v: (x * 1).copy_(v), r(3, 4), r(3, 4, key=1)),
    "clone": Case(lambda m, x: x.clone() * x, r(3, 4)),
    "to_dtype": Case(lambda m, x: x.to(m.float32) * x.to(m.float32), r(3, 4), rtol=1e-6,
                     atol=1e-6),
    "to_device": Case(lambda m, x: _to_device(m, x) * x, r(3, 4)),
})


def _setitem(x, v):
    x[1] = v * v
    return x


def _to_device(m, x):
    """The to_device op itself (cpu -> cpu here: Tensor.to skips it for the
    same device; torch's x.to("cpu") is the identity with the same grads)."""
    if m.__name__ == "torch":
        return x.to("cpu")
    from ampy._dispatch import dispatch, get_op
    return dispatch(get_op("to_device"), x, m.device("cpu"))


# ------------------------------------------------------------ reductions
CASES.update({
    "sum": Case(lambda m, x: m.sum(x * x, 1), r(3, 4)),
    "mean": Case(lambda m, x: m.mean(x * x, (0,), keepdim=True), r(3, 4)),
    "amax": Case(lambda m, x: m.amax(x * x, 1), r(3, 4)),
    "amin": Case(lambda m, x: m.amin(x * x, 0), r(3, 4)),
    "max_dim": Case(lambda m, x: m.max(x * x, 1)[0], r(3, 4)),
    "min_dim": Case(lambda m, x: m.min(x * x, 0, keepdim=True)[0], r(3, 4)),
    "var": Case(lambda m, x: m.var(x, 1), r(3, 4)),
    "std": Case(lambda m, x: m.std(x, 0, keepdim=True), r(3, 4)),
    "prod": Case(lambda m, x: m.prod(x, 1), r(3, 4)),
    "norm": Case(lambda m, x: m.norm(x, 2, 1), r(3, 4)),
    "logsumexp": Case(lambda m, x: m.logsumexp(x, 1), r(3, 4)),
    "cumsum": Case(lambda m, x: m.cumsum(x * x, 1), r(3, 4)),
    "cumprod": Case(lambda m, x: m.cumprod(x, 1), r(3, 4)),
    "softmax": Case(lambda m, x: m.softmax(x, 1), r(3, 4)),
    "log_softmax": Case(lambda m, x: m.log_softmax(x, 0), r(3, 4)),
    "cat": Case(lambda m, a, b: m.cat([a * a, b], 1), r(3, 4), r(3, 2, key=1)),
    "stack": Case(lambda m, a, b: m.stack([a * a, b], 1), r(3, 4), r(3, 4, key=1)),
})

# ----------------------------------------------------------------- GEMM
CASES.update({
    "matmul": Case(lambda m, a, b: m.matmul(a, b), r(2, 3, 4), r(4, 5, key=1)),
    "mm": Case(lambda m, a, b: m.mm(a, b), r(3, 4), r(4, 5, key=1)),
    "bmm": Case(lambda m, a, b: m.bmm(a, b), r(2, 3, 4), r(2, 4, 5, key=1)),
    "addmm": Case(lambda m, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2.0), r(3, 5),
                  r(3, 4, key=1), r(4, 5, key=2)),
    "baddbmm": Case(lambda m, c, a, b: m.baddbmm(c, a, b, beta=0.5, alpha=2.0), r(2, 3, 5),
                    r(2, 3, 4, key=1), r(2, 4, 5, key=2)),
    "linear": Case(lambda m, x, w, b: m.nn.functional.linear(x, w, b), r(2, 3, 4),
                   r(5, 4, key=1), r(5, key=2)),
})

# ----------------------------------------------------------------- views
CASES.update({
    "view": Case(lambda m, x: (x * x).view(4, 3), r(3, 4)),
    "reshape": Case(lambda m, x: (x * x).t().reshape(12), r(3, 4)),
    "flatten": Case(lambda m, x: (x * x).flatten(), r(3, 4)),
    "unsqueeze": Case(lambda m, x: (x * x).unsqueeze(1), r(3, 4)),
    "squeeze": Case(lambda m, x: (x * x).squeeze(0), r(1, 3, 4)),
    "transpose": Case(lambda m, x: (x * x).transpose(0, 1), r(3, 4)),
    "permute": Case(lambda m, x: (x * x).permute(2, 0, 1), r(2, 3, 4)),
    "expand": Case(lambda m, x: (x * x).expand(2, 3, 4), r(3, 1)),
    "narrow": Case(lambda m, x: (x * x).narrow(1, 1, 2), r(3, 4)),
    "select": Case(lambda m, x: (x * x).select(0, 1), r(3, 4)),
    "getitem": Case(lambda m, x: (x * x)[1:, ::2], r(3, 4)),
    "as_strided": [
        Case(lambda m, x: (x * x).as_strided((3, 3), (3, 1)), r(12)),
        Case(lambda m, x: (x * x).as_strided((3, 3), (1, 1), 2), r(12)),  # overlapping view
        Case(lambda m, x: (x * x)[2:].as_strided((2, 2), (2, 1)), r(12)),  # offset kept
        Case(lambda m, x: (x * x).t().as_strided((2, 2), (1, 2), 1), r(3, 2)),
        Case(lambda m, x: (x * x).as_strided((2, 2, 2), (0, 1, 2)), r(6)),
        Case(lambda m, x: (x * 1)[:1].expand(4).as_strided((3,), (1,)), r(3),
             nan_is_zero=True),  # overlapping input
        Case(lambda m, x: (x * x).expand(2, 3).as_strided((2, 2), (0, 1)), r(3)),
        Case(lambda m, x: (x * x).as_strided((0, 3), (1, 1)), r(4)),
        Case(lambda m, x: (x * x).as_strided((), (), 5), r(6)),
    ],
})

# -------------------------------------------------------------- nn ops
CASES.update({
    "layer_norm": Case(lambda m, x, w, b: m.nn.functional.layer_norm(x, (4,), w, b),
                       r(3, 4), r(4, key=1), r(4, key=2), dtype="float32", rtol=2e-4,
                       atol=2e-5),
    "cross_entropy": Case(lambda m, x, t, w: m.nn.functional.cross_entropy(
        x, t, w, label_smoothing=0.1), r(4, 5), idx(0, 3, 1, 4), pos(5, key=1), diff=(0,),
        dtype="float32", rtol=2e-4, atol=2e-5),
    "nll_loss": Case(lambda m, x, t, w: m.nn.functional.nll_loss(x * x, t, w), r(4, 5),
                     idx(0, 3, 1, 4), pos(5, key=1), diff=(0,), dtype="float32", rtol=2e-4,
                     atol=2e-5),
    "embedding": Case(lambda m, w, i: m.nn.functional.embedding(i, w * w), r(5, 3),
                      imat(2, 3), dtype="float32", rtol=2e-5, atol=2e-6),
    "mse_loss": Case(lambda m, x, y: m.nn.functional.mse_loss(x, y), r(3, 4), r(3, 4, key=1),
                     dtype="float32", rtol=2e-5, atol=2e-6),
    # dropout: p=0 and p=1 draw no random numbers, so both libraries agree;
    # the masked case is tests/test_double_backward.py::test_dropout_double_backward
    "dropout": Case(lambda m, x: m.nn.functional.dropout(x * x, 1.0), r(3, 4),
                    dtype="float32"),
})

_F32 = dict(dtype="float32", rtol=2e-4, atol=2e-5)
_NN_VARIANTS = {
    "layer_norm": [
        Case(lambda m, x: m.nn.functional.layer_norm(x, (3, 4)), r(2, 3, 4), **_F32),
        Case(lambda m, x, w: m.nn.functional.layer_norm(x * x, (2,), w, eps=0.1),
             r(3, 2), r(2, key=1), **_F32),
    ],
    "cross_entropy": [
        Case(lambda m, x, t: m.nn.functional.cross_entropy(x, t), r(4, 5), idx(0, 3, 1, 4),
             **_F32),
        Case(lambda m, x, t: m.nn.functional.cross_entropy(x, t, ignore_index=1,
                                                           reduction="sum"),
             r(4, 5), idx(0, 3, 1, 1), **_F32),
        Case(lambda m, x, t, w: m.nn.functional.cross_entropy(
            x, t, w, ignore_index=3, reduction="none", label_smoothing=0.2),
            r(4, 5), idx(0, 3, 1, 4), pos(5, key=1), diff=(0,), **_F32),
        Case(lambda m, x, t, w: m.nn.functional.cross_entropy(x, t, w, ignore_index=2),
             r(2, 3, 4), imat(2, 4, high=3), pos(3, key=1), diff=(0,), **_F32),
        Case(lambda m, x, t: m.nn.functional.cross_entropy(x, t, label_smoothing=0.3,
                                                           ignore_index=0),
             r(4, 5), idx(0, 3, 1, 4), **_F32),
    ],
    "nll_loss": [
        Case(lambda m, x, t: m.nn.functional.nll_loss(m.log_softmax(x, 1), t,
                                                      reduction="none", ignore_index=1),
             r(4, 5), idx(0, 3, 1, 4), **_F32),
        Case(lambda m, x, t: m.nn.functional.nll_loss(x * x, t, reduction="sum"), r(4, 5),
             idx(0, 3, 1, 4), **_F32),
    ],
    "embedding": [
        Case(lambda m, w, i: m.nn.functional.embedding(i, w * w, padding_idx=1), r(5, 3),
             idx(1, 0, 1, 4, 4), **_F32),
    ],
    "mse_loss": [
        Case(lambda m, x, y: m.nn.functional.mse_loss(x * x, y, reduction="sum"), r(3, 4),
             r(3, 4, key=1), **_F32),
        Case(lambda m, x, y: m.nn.functional.mse_loss(x, y * y, reduction="none"), r(3, 4),
             r(3, 4, key=1), **_F32),
    ],
    "getitem": [
        Case(lambda m, x: (x * x)[idx(2, 0, 2)], r(3, 4)),
        Case(lambda m, x: (x * x)[:, idx(1, 1, 3)], r(3, 4)),
        Case(lambda m, x: (x * x)[(x > 0)], r(3, 4)),
    ],
    "setitem": [
        Case(lambda m, x, v: _setitem_adv(x * 1, v, m), r(3, 4), r(2, 4, key=1)),
    ],
}
_NN_VARIANTS.update({
    "pow": [Case(lambda m, x: m.pow(x, 3), r(3, 4)), Case(lambda m, x: m.pow(2.0, x), r(3, 4)),
            Case(lambda m, x: m.pow(x, 0.5), pos(3, 4))],
    "div": [Case(lambda m, a, b: m.div(a, b, rounding_mode="floor") * a, r(3, 4),
                 r(3, 4, key=1)),
            Case(lambda m, a: m.div(a, 3.0), r(3, 4))],
    "gelu": [Case(lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), r(3, 4))],
    "norm": [Case(lambda m, x: m.norm(x, 1, 1), r(3, 4)),
             Case(lambda m, x: m.norm(x, float("inf"), 0), r(3, 4)),
             Case(lambda m, x: m.norm(x, 3, 1, keepdim=True), r(3, 4)),
             Case(lambda m, x: m.norm(x), r(3, 4))],
    "var": [Case(lambda m, x: m.var(x, 0, correction=0), r(3, 4)),
            Case(lambda m, x: m.var(x), r(3, 4))],
    "std": [Case(lambda m, x: m.std(x), r(3, 4))],
    "softmax": [Case(lambda m, x: m.softmax(x, 0), r(3, 4)),
                Case(lambda m, x: m.softmax(x, -1), r(2, 3, 4), dtype="float32", rtol=1e-5,
                     atol=1e-6)],
    "log_softmax": [Case(lambda m, x: m.log_softmax(x, -1), r(2, 3, 4)),
                    # cross_entropy with class-probability targets is composed of it
                    Case(lambda m, x, p: m.nn.functional.cross_entropy(
                        x, m.softmax(p, 1), label_smoothing=0.1), r(4, 5), r(4, 5, key=1),
                        diff=(0,))],
    "prod": [Case(lambda m, x: m.prod(x * _zero_at(m, x, 1)), r(3, 4)),
             Case(lambda m, x: m.prod(x * _zero_at(m, x, 1), 1), r(3, 4)),
             Case(lambda m, x: m.prod(x * _zero_at(m, x, 1, 3), 1), r(3, 4)),  # two zeros
             Case(lambda m, x: m.prod(x * _zero_at(m, x, 0, 5), 0, keepdim=True), r(3, 4))],
    "matmul": [Case(lambda m, a, b: m.matmul(a, b), r(4), r(4, key=1)),
               Case(lambda m, a, b: m.matmul(a, b), r(4), r(2, 4, 3, key=1)),
               Case(lambda m, a, b: m.matmul(a, b), r(2, 1, 3, 4), r(3, 4, 2, key=1))],
    "linear": [Case(lambda m, x, w: m.nn.functional.linear(x, w), r(3, 4), r(5, 4, key=1)),
               Case(lambda m, x, w, b: m.nn.functional.linear(x, w, b), r(3, 4),
                    r(5, 4, key=1), r(5, key=2), dtype="float32", rtol=1e-5, atol=1e-6)],
    "relu": [Case(lambda m, x: m.relu(x * x - 1), r(3, 4), dtype="float32", rtol=1e-6,
                  atol=1e-7)],
    "sum": [Case(lambda m, x: m.sum(x * x), r(3, 4))],
    "mean": [Case(lambda m, x: m.mean(x * x), r(3, 4))],
    "clamp": [Case(lambda m, x: m.clamp(x * x, min=0.5), r(3, 4))],
    "where": [Case(lambda m, c, a: m.where(c > 0, a * a, 0.0), r(3, 4), r(3, 4, key=1),
                   diff=(1,))],
    "cat": [Case(lambda m, a, b: m.cat([a, b * b], -1), r(3, 4), r(3, 1, key=1))],
    "cumsum": [Case(lambda m, x: m.cumsum(x * x, 0), r(3, 4))],
    "cumprod": [Case(lambda m, x: m.cumprod(x * _zero_at(m, x, 1), 1), r(3, 4)),
                Case(lambda m, x: m.cumprod(x * _zero_at(m, x, 0, 4, 9), 0), r(3, 4))],
    "select": [Case(lambda m, x: (x * x).select(-1, -1), r(3, 4))],
    "narrow": [Case(lambda m, x: (x * x).narrow(0, -2, 2), r(3, 4))],
})
for _n, _more in _NN_VARIANTS.items():
    CASES[_n] = [CASES[_n]] + _more


def _zero_at(m, x, *flat):
    """ones like x with exact zeros at these flat positions (prod's backward
    has zero branches)."""
    z = np.ones(tuple(x.shape))
    z.flat[list(flat)] = 0
    return m.tensor(z, dtype=x.dtype)


def _setitem_adv(x, v, m):
    x[m.tensor(idx(2, 0))] = v * v
    return x


# ------------------------------------------------- not differentiable ops
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    CASES[_n] = NonDiff(lambda m, a, b, _n=_n: getattr(m, _n)(a, b), r(3, 4), r(4, key=1))
    # in place on a floating tensor: torch's derivative is zero
    CASES[_n + "_"] = Case(lambda m, a, b, _n=_n: getattr(a * 1, _n + "_")(b), r(3, 4),
                           r(4, key=1))
for _n in ("isnan", "isinf", "isfinite"):
    CASES[_n] = NonDiff(lambda m, a, _n=_n: getattr(m, _n)(a), r(3, 4))
for _n in ("logical_and", "logical_or", "logical_xor"):
    CASES[_n] = NonDiff(lambda m, a, b, _n=_n: getattr(m, _n)(a, b), r(3, 4), r(4, key=1))
    # in place on a floating tensor torch keeps the history the tensor had
    CASES[_n + "_"] = Case(lambda m, a, b, _n=_n: getattr(a * 1, _n + "_")(b), r(3, 4),
                           r(4, key=1), diff=(0,))
CASES["logical_not"] = NonDiff(lambda m, a: m.logical_not(a), r(3, 4))
CASES["logical_not_"] = Case(lambda m, a: (a * 1).logical_not_(), r(3, 4))
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    CASES[_n] = NonDiff(lambda m, a, b, _n=_n: getattr(m, _n)(a, b), imat(3, 4),
                        imat(4, key=1))
    CASES[_n + "_"] = NonDiff(lambda m, a, b, _n=_n: getattr(a * 1, _n + "_")(b), imat(3, 4),
                              imat(4, key=1))
CASES["bitwise_not"] = NonDiff(lambda m, a: m.bitwise_not(a), imat(3, 4))
CASES["bitwise_not_"] = NonDiff(lambda m, a: (a * 1).bitwise_not_(), imat(3, 4))
CASES.update({
    "argmax": NonDiff(lambda m, a: m.argmax(a, 1), r(3, 4)),
    "argmin": NonDiff(lambda m, a: m.argmin(a), r(3, 4)),
    "all": NonDiff(lambda m, a: m.all(a > 0), r(3, 4)),
    "any": NonDiff(lambda m, a: m.any(a > 0, 1), r(3, 4)),
    # torch: floor_divide's output requires grad, and its backward raises
    "floor_divide": Raises(lambda m, a, b: m.floor_divide(a, b), r(3, 4), r(4, key=1),
                           match="derivative for .*floor_divide.* not implemented", order=1),
    "floor_divide_": Raises(lambda m, a, b: (a * 1).floor_divide_(b), r(3, 4), r(4, key=1),
                            match="derivative for .*floor_divide.* not implemented", order=1),
})

# ------------------------------------------------------------ cnn ops
# The linear ones (pools, padding, interpolation) differentiate twice through
# their adjoint; batch_norm and group_norm through their composite gradient.
CASES.update({
    "batch_norm": [
        Case(lambda m, x, w, b: m.nn.functional.batch_norm(x * 2, None, None, w, b, True),
             r(4, 3, 5), r(3, key=1), r(3, key=2)),
        Case(lambda m, x, w, b, rm, rv: m.nn.functional.batch_norm(x * x, rm, rv, w, b, False),
             r(4, 3), r(3, key=1), r(3, key=2), r(3, key=3), pos(3, key=4), diff=(0, 1, 2)),
    ],
    "group_norm": Case(lambda m, x, w, b: m.nn.functional.group_norm(x * x, 3, w, b),
                       r(2, 6, 5), r(6, key=1), r(6, key=2)),
    "max_pool2d": Case(lambda m, x: m.nn.functional.max_pool2d(x * x, 2), r(1, 2, 4, 6)),
    "avg_pool2d": Case(lambda m, x: m.nn.functional.avg_pool2d(x * x, 2, 1, 1), r(1, 2, 4, 6)),
    "adaptive_avg_pool2d": Case(lambda m, x: m.nn.functional.adaptive_avg_pool2d(x * x, (2, 3)),
                                r(1, 2, 5, 7)),
    "max_pool3d": Case(lambda m, x: m.nn.functional.max_pool3d(x * x, 2, 1, 1), r(1, 2, 3, 4, 5)),
    "max_pool3d_with_indices": Case(lambda m, x: m.nn.functional.max_pool3d(
        x * x, (2, 3, 2), 2, return_indices=True)[0], r(2, 1, 4, 5, 4)),
    # (torch's CPU avg_pool3d has no half kernel: half inputs are pooled in float32)
    "avg_pool3d": Case(lambda m, x: m.nn.functional.avg_pool3d(
        x * x if x.dtype in (m.float32, m.float64) else (x * x).float(), 3, 2, 1, False, False),
        r(1, 2, 4, 5, 6)),
    "adaptive_avg_pool3d": Case(lambda m, x: m.nn.functional.adaptive_avg_pool3d(
        x * x, (2, 3, 2)), r(1, 2, 3, 5, 4)),
    "adaptive_max_pool2d": Case(lambda m, x: m.nn.functional.adaptive_max_pool2d(x * x, (2, 3)),
                                r(1, 2, 5, 7)),
    "adaptive_max_pool3d": Case(lambda m, x: m.nn.functional.adaptive_max_pool3d(x * x, (2, 3, 2)),
                                r(1, 2, 3, 5, 4)),
    "constant_pad_nd": Case(lambda m, x: m.nn.functional.pad(x * x, (1, 2, -1, 1), value=0.5),
                            r(2, 4, 5)),
    "upsample_nearest2d": Case(lambda m, x: m.nn.functional.interpolate(x * x, scale_factor=2),
                               r(1, 2, 3, 4)),
    "upsample_bilinear2d": Case(lambda m, x: m.nn.functional.interpolate(
        x * x, size=(5, 7), mode="bilinear"), r(1, 2, 3, 4)),
    "_pad_circular": Case(lambda m, x: m.nn.functional.pad(x * x, (1, 2), mode="circular"),
                          r(2, 3, 5)),
})
for _k in (1, 2, 3):
    for _mode, _op in (("reflect", "reflection"), ("replicate", "replication")):
        CASES[f"{_op}_pad{_k}d"] = Case(
            lambda m, x, _k=_k, _mode=_mode: m.nn.functional.pad(x * x, (1, 2) + (1, 0) * (_k - 1),
                                                                 mode=_mode),
            r(*((2,) + (3,) * _k)))
# ------------------------------------------------------------ convolutions
# Linear in input and in weight: the second derivative is the cross term
# (d2/dx dw), which the composite rules of ampy/nn/_ops_conv.py must give.
CASES.update({
    "conv1d": [Case(lambda m, x, w, b: m.nn.functional.conv1d(x, w, b, stride=2, padding=1,
                                                              groups=2),
                    r(2, 4, 7), r(6, 2, 3, key=1), r(6, key=2)),
               Case(lambda m, x, w: m.nn.functional.conv1d(x, w, padding="same", dilation=2),
                    r(2, 3, 6), r(2, 3, 2, key=1))],
    "conv2d": [Case(lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, stride=(2, 1),
                                                              padding=1, dilation=(1, 2),
                                                              groups=2),
                    r(2, 4, 6, 5), r(6, 2, 3, 2, key=1), r(6, key=2)),
               Case(lambda m, x, w: m.nn.functional.conv2d(x, w, padding="same"),
                    r(1, 2, 4, 5), r(3, 2, 2, 3, key=1))],
    "conv_transpose2d": Case(lambda m, x, w, b: m.nn.functional.conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=(1, 2)),
        r(2, 4, 3, 3), r(4, 3, 3, 2, key=1), r(6, key=2)),
    "conv_transpose1d": Case(lambda m, x, w, b: m.nn.functional.conv_transpose1d(
        x, w, b, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
        r(2, 4, 4), r(4, 3, 3, key=1), r(6, key=2)),
    "conv3d": Case(lambda m, x, w, b: m.nn.functional.conv3d(x, w, b, stride=(2, 1, 1),
                                                             padding=1, dilation=(1, 1, 2),
                                                             groups=2),
                   r(2, 4, 4, 3, 4), r(6, 2, 2, 2, 2, key=1), r(6, key=2)),
    "conv_transpose3d": Case(lambda m, x, w, b: m.nn.functional.conv_transpose3d(
        x, w, b, stride=(2, 1, 2), padding=1, output_padding=(1, 0, 0), groups=2),
        r(2, 4, 2, 3, 2), r(4, 3, 3, 2, 2, key=1), r(6, key=2)),
})

# the fused recurrent cells, through torch's functional cells (their rules
# switch to the composite under create_graph=True)
CASES.update({
    "lstm_cell_fused": Case(lambda m, x, h, c, wi, wh, bi, bh: (lambda o: o[0] + 2 * o[1])(
        m.lstm_cell(x, (h, c), wi, wh, bi, bh)), r(2, 3), r(2, 4, key=1), r(2, 4, key=2),
        r(16, 3, key=3), r(16, 4, key=4), r(16, key=5), r(16, key=6)),
    "gru_cell_fused": Case(lambda m, x, h, wi, wh, bi, bh: m.gru_cell(x, h, wi, wh, bi, bh),
                           r(2, 3), r(2, 4, key=1), r(12, 3, key=3), r(12, 4, key=4),
                           r(12, key=5), r(12, key=6)),
    "rnn_cell_fused": Case(lambda m, x, h, wi, wh, bi, bh: m.rnn_tanh_cell(x, h, wi, wh, bi, bh),
                           r(2, 3), r(2, 4, key=1), r(4, 3, key=3), r(4, 4, key=4),
                           r(4, key=5), r(4, key=6)),
})

def _rnn_layers(m, kind, x, wi, wh, bi, bh, **kw):
    """nn.<kind>(3, 4) over x with these weights: each layer and direction
    runs as one rnn_layer op on the CPU."""
    mod = getattr(m.nn, kind)(3, 4, **kw)
    names = [n for n in mod._flat_weights_names]
    for n, v in zip(names, (wi, wh, bi, bh) * (len(names) // 4)):
        delattr(mod, n)
        setattr(mod, n, v)
    y, s = mod(x)
    return y.sum((0, 2)).unsqueeze(1) + 2 * (s[0] + 3 * s[1] if kind == "LSTM" else s).sum(0)


# whole recurrent layers (their rule switches to the composite BPTT under create_graph)
CASES.update({
    "rnn_layer": [Case(lambda m, *t: _rnn_layers(m, "LSTM", *t), r(2, 2, 3),
                       r(16, 3, lo=-0.5, hi=0.5, key=1), r(16, 4, lo=-0.5, hi=0.5, key=2),
                       r(16, key=3), r(16, key=4)),
                  Case(lambda m, *t: _rnn_layers(m, "GRU", *t, bidirectional=True), r(2, 2, 3),
                       r(12, 3, lo=-0.5, hi=0.5, key=1), r(12, 4, lo=-0.5, hi=0.5, key=2),
                       r(12, key=3), r(12, key=4))],
})

# -------------------------------------- sorting, gather/scatter, masked_fill, triangles
_PERM2 = idx(0, 2, 3, 1, 1, 0).reshape(3, 2)  # distinct per row: scatter writes once each
CASES.update({
    "sort": [Case(lambda m, x: m.sort(x * x, dim=1, stable=True)[0], r(3, 4)),
             Case(lambda m, x: m.sort(x * x, dim=0, descending=True, stable=True)[0], r(3, 4))],
    "topk": [Case(lambda m, x: m.topk(x * x, 2, 0)[0], r(3, 4)),
             Case(lambda m, x: m.topk(x * x, 3, -1, largest=False)[0], r(3, 4))],
    "gather": Case(lambda m, x, i: m.gather(x * x, 1, i), r(3, 4), imat(3, 5, high=4)),
    "scatter": [Case(lambda m, x, s, i: m.scatter(x * x, 1, i, s * s), r(3, 4), r(3, 2, key=1),
                     _PERM2),
                Case(lambda m, x, i: m.scatter(x * x, 1, i, 0.5), r(3, 4), _PERM2)],
    "scatter_": Case(lambda m, x, s, i: (x * 1).scatter_(1, i, s * s), r(3, 4), r(3, 2, key=1),
                     _PERM2),
    "scatter_add": Case(lambda m, x, s, i: m.scatter_add(x * x, 1, i, s * s), r(3, 4),
                        r(3, 5, key=1), imat(3, 5, high=4)),
    "scatter_add_": Case(lambda m, x, s, i: (x * 1).scatter_add_(0, i, s * s), r(3, 4),
                         r(2, 4, key=1), imat(2, 4, high=3)),
    "masked_fill": [Case(lambda m, x, c: m.masked_fill(x * x, c > 0, 0.5), r(3, 4),
                         r(4, key=1), diff=(0,)),
                    Case(lambda m, x, c, v: (x * x).masked_fill(c > 0, (v * v).sum()), r(3, 4),
                         r(3, 4, key=1), r(1, key=2), diff=(0, 2))],
    "masked_fill_": Case(lambda m, x, c: (x * 1).masked_fill_(c > 0, -2.0), r(3, 4),
                         r(3, 1, key=1), diff=(0,)),
    "tril": [Case(lambda m, x: m.tril(x * x, -1), r(2, 3, 4)),
             Case(lambda m, x: (x * x).tril(2), r(3, 4))],
    "triu": Case(lambda m, x: m.triu(x * x, 1), r(3, 4)),
    "tril_": Case(lambda m, x: (x * x).tril_(), r(3, 4)),
    "triu_": Case(lambda m, x: (x * x).triu_(-1), r(4, 3)),
    "multinomial": NonDiff(lambda m, p: m.multinomial(p * p + 0.1, 2), r(3, 4)),
})
# scaled_dot_product_attention: its create_graph rule is the composite of ampy ops
CASES["scaled_dot_product_attention"] = Case(
    lambda m, q, k, v: m.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
    r(1, 2, 3, 4), r(1, 2, 5, 4, key=1), r(1, 2, 5, 3, key=2))
# ---------------------------------------------------- element-wise losses
_LF = dict(dtype="float64", rtol=1e-9, atol=1e-11)
CASES.update({
    "binary_cross_entropy": Case(lambda m, x, t: m.nn.functional.binary_cross_entropy(
        m.sigmoid(x), t * 0.5, reduction="sum"), r(3, 4), pos(3, 4, key=1), **_LF),
    "binary_cross_entropy_with_logits": Case(
        lambda m, x, t, w, pw: m.nn.functional.binary_cross_entropy_with_logits(
            x * 3, t * 0.5, w, pos_weight=pw), r(3, 4), pos(3, 4, key=1), pos(4, key=2),
        pos(4, key=3), diff=(0, 1), **_LF),
    "l1_loss": Case(lambda m, x, y: m.nn.functional.l1_loss(x * x, y), r(3, 4), r(3, 4, key=1),
                    **_LF),
    # 2 * r spans both sides of beta / delta
    "smooth_l1_loss": Case(lambda m, x, y: m.nn.functional.smooth_l1_loss(
        x * x * 2, y, beta=0.7), r(3, 4), r(3, 4, key=1), **_LF),
    "huber_loss": Case(lambda m, x, y: m.nn.functional.huber_loss(
        x * x * 2, y, reduction="sum", delta=0.6), r(3, 4), r(3, 4, key=1), **_LF),
    "kl_div": Case(lambda m, x, t: m.nn.functional.kl_div(x * x, t, reduction="batchmean"),
                   r(3, 4), pos(3, 4, key=1), **_LF),
})
_LOSS_VARIANTS = {
    "binary_cross_entropy": [
        Case(lambda m, x, t, w: m.nn.functional.binary_cross_entropy(m.sigmoid(x), t * 0.5, w),
             r(3, 4), pos(3, 4, key=1), pos(4, key=2), diff=(0,), **_LF),
    ],
    "binary_cross_entropy_with_logits": [
        Case(lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(
            x * x, t * 0.5, reduction="none"), r(3, 4), pos(3, 4, key=1), **_LF),
    ],
    "kl_div": [
        Case(lambda m, x, t: m.nn.functional.kl_div(x * x, t, reduction="sum", log_target=True),
             r(3, 4), r(3, 4, key=1), **_LF),
    ],
    "l1_loss": [
        Case(lambda m, x, y: m.nn.functional.l1_loss(x, y * y, reduction="none"), r(3, 4),
             r(3, 4, key=1), **_LF),
    ],
}
for _n, _more in _LOSS_VARIANTS.items():
    CASES[_n] = [CASES[_n]] + _more

# ------------------------------------------------------------------- scatter_reduce
def _scatter_reduce_case(reduce, include_self):
    return Case(lambda m, x, s, i: m.scatter_reduce(x * x, 1, i, s * s, reduce,
                                                    include_self=include_self),
                r(3, 4), r(3, 5, key=1), imat(3, 5, high=4))


CASES.update({
    "scatter_reduce": [_scatter_reduce_case(red, inc) for red in
                       ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)],
    "scatter_reduce_": Case(lambda m, x, s, i: (x * 1).scatter_reduce_(0, i, s * s, "amin"),
                            r(3, 4), r(2, 4, key=1), imat(2, 4, high=3)),
})
