"""Element-wise math: torch's functions and the op declarations behind them
(and behind the Tensor methods and operators ampy/_methods.py sets).

Every op here is declared once with `_ewise_op("<torch name>")` (its
forward, devices and Python names; ampy/_dispatch.py `defop`) and every
public function calls `dispatch(op, ...)`, so autocast and autograd hook
them. The forwards are thin: `_C.ewise(op, out, alpha, beta, *inputs)` does
torch's type promotion (result_type with its dim / zero-dim / wrapped-number
categories), broadcasting, allocation, the in-place castability check, the
CUDA routing and the loop (csrc/ewise.c). Reductions, softmax, cat and
stack live in ampy/_math_reduce.py.
"""
import builtins as _b
import math as _pymath
import warnings as _warnings

import numpy as _np

from . import _C
from . import _dtype as D
from ._convert import as_tensor, check_fill
from ._dispatch import CPU_CUDA, defop, dispatch, get_op
from ._tensor import Tensor

_C._math_init(D._default_dtype)
_ew = _C.ewise
_CODE = _C.EWISE_OPS

_UNARY = ["abs", "neg", "reciprocal", "square", "sign", "exp", "expm1", "exp2", "log", "log1p",
          "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "atan", "asin", "acos",
          "sinh", "cosh", "sigmoid", "relu", "erf", "silu", "mish", "logsigmoid", "floor", "ceil",
          "trunc", "frac", "isnan", "isinf", "isfinite", "logical_not", "bitwise_not"]
_NO_INPLACE = {"isnan", "isinf", "isfinite", "logsigmoid", "mish"}
_BINARY = ["mul", "maximum", "minimum", "fmax", "fmin", "fmod", "remainder", "floor_divide",
           "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
           "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"]
_NO_INPLACE_BIN = {"maximum", "minimum", "fmax", "fmin"}

__all__ = (list(_UNARY) + list(_BINARY) +
           ["add", "sub", "div", "pow", "where", "lerp", "addcmul", "addcdiv", "clamp", "clip",
            "clamp_min", "clamp_max", "gelu", "softplus", "leaky_relu", "elu", "round",
            "negative", "absolute", "multiply", "subtract", "divide", "true_divide",
            "square_", "result_type", "can_cast", "greater", "greater_equal", "less",
            "less_equal", "not_equal", "arctan", "arctan2", "arcsin", "arccos", "fix",
            "float_power", "hardtanh"])

_NUMBER = (int, float, _np.generic)


def _as_operand(x):
    """A Tensor or Python number as-is; an ndarray as a Tensor; else None."""
    if isinstance(x, (Tensor, int, float, _np.generic)):
        return x
    if isinstance(x, _np.ndarray):
        return as_tensor(x)
    return None


# ---- generated unary / binary families ---------------------------------------
def _square_in(x):
    """torch: the square of a bool tensor is int64 (pow(x, 2) promotes bools)."""
    return x.to(D.int64) if isinstance(x, Tensor) and x.dtype is D.bool else x


# the Python operators of ampy.Tensor (ampy/_methods.py) that run an op
_OPERATOR_NAMES = {
    "add": ("__add__", "__radd__"), "add_": ("__iadd__",), "sub": ("__sub__", "__rsub__"),
    "sub_": ("__isub__",), "mul": ("__mul__", "__rmul__"), "mul_": ("__imul__",),
    "div": ("__truediv__", "__rtruediv__"), "div_": ("__itruediv__",),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "floor_divide_": ("__ifloordiv__",),
    "remainder": ("__mod__", "__rmod__"), "remainder_": ("__imod__",),
    "pow": ("__pow__", "__rpow__"), "pow_": ("__ipow__",),
    "bitwise_and": ("__and__", "__rand__"), "bitwise_and_": ("__iand__",),
    "bitwise_or": ("__or__", "__ror__"), "bitwise_or_": ("__ior__",),
    "bitwise_xor": ("__xor__", "__rxor__"), "bitwise_xor_": ("__ixor__",),
    "eq": ("__eq__",), "ne": ("__ne__",), "lt": ("__lt__",), "le": ("__le__",),
    "gt": ("__gt__",), "ge": ("__ge__",), "neg": ("__neg__",), "abs": ("__abs__",),
    "bitwise_not": ("__invert__",),
}


def _ewise_op(name, also=(), method=True):
    """defop for an element-wise op: routed to CUDA by _C.ewise, exposed as
    ampy.<name> and Tensor.<name> (an in-place op: Tensor.<name> only), its
    Python operators and the aliases `also`."""
    if name.endswith("_"):
        base = ("Tensor." + name,)
    else:
        base = ("ampy." + name,) + (("Tensor." + name,) if method else ())
    ops = tuple("Tensor." + o for o in _OPERATOR_NAMES.get(name, ()))
    return defop(name, devices=CPU_CUDA, names=base + ops + tuple(also))


def _make_unary(name):
    code = _CODE[name]
    if name == "square":
        _ewise_op(name)(lambda input, out=None: _ew(code, out, None, None, _square_in(input)))
    else:
        _ewise_op(name)(lambda input, out=None: _ew(code, out, None, None, input))
    op = get_op(name)

    def fn(input, *, out=None):
        return dispatch(op, input) if out is None else dispatch(op, input, out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input, *, out=None) -> Tensor (element-wise, like torch.{name})"
    fns = [fn]
    if name not in _NO_INPLACE:
        _ewise_op(name + "_")(lambda self: _ew(code, self, None, None, self))
        iop = get_op(name + "_")

        def ifn(self):
            return dispatch(iop, self)

        ifn.__name__ = ifn.__qualname__ = name + "_"
        fns.append(ifn)
    return fns


def _make_binary(name):
    code = _CODE[name]
    _ewise_op(name)(lambda input, other, out=None: _ew(code, out, None, None, input, other))
    op = get_op(name)

    def fn(input, other, *, out=None):
        return dispatch(op, input, other) if out is None else dispatch(op, input, other, out=out)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input, other, *, out=None) -> Tensor (broadcasting, like torch.{name})"
    fns = [fn]
    if name not in _NO_INPLACE_BIN:
        _ewise_op(name + "_")(lambda self, other: _ew(code, self, None, None, self, other))
        iop = get_op(name + "_")

        def ifn(self, other):
            return dispatch(iop, self, other)

        ifn.__name__ = ifn.__qualname__ = name + "_"
        fns.append(ifn)
    return fns


# the functions of each family, with their in-place forms (Tensor methods
# only, set by ampy/_methods.py), as module attributes
for _n in _UNARY:
    for _f in _make_unary(_n):
        globals()[_f.__name__] = _f
for _n in _BINARY:
    for _f in _make_binary(_n):
        globals()[_f.__name__] = _f
del _n, _f


# ---- add / sub / div / pow -----------------------------------------------------
def _check_alpha(name, input, other, alpha):
    if isinstance(alpha, float) and not _C.result_type(input, other).is_floating_point:
        raise TypeError(f"{name}: for integral input tensors, argument alpha must not be a "
                        f"floating point number")


@_ewise_op("add")
def _add_fwd(input, other, alpha=1, out=None):
    if alpha != 1:
        _check_alpha("add", input, other, alpha)
    return _ew(_CODE["add"], out, None if alpha == 1 else alpha, None, input, other)


@_ewise_op("sub")
def _sub_fwd(input, other, alpha=1, out=None):
    if alpha != 1:
        _check_alpha("sub", input, other, alpha)
    return _ew(_CODE["sub"], out, None if alpha == 1 else alpha, None, input, other)


@_ewise_op("add_")
def _add_ifwd(self, other, alpha=1):
    return _add_fwd(self, other, alpha, self)


@_ewise_op("sub_")
def _sub_ifwd(self, other, alpha=1):
    return _sub_fwd(self, other, alpha, self)


_ADD, _SUB, _ADD_, _SUB_ = (get_op(n) for n in ("add", "sub", "add_", "sub_"))


def add(input, other, *, alpha=1, out=None):
    """input + alpha * other, broadcasting, with torch's type promotion."""
    if alpha == 1 and out is None:
        return dispatch(_ADD, input, other)
    return dispatch(_ADD, input, other, alpha=alpha, out=out)


def sub(input, other, *, alpha=1, out=None):
    """input - alpha * other."""
    if alpha == 1 and out is None:
        return dispatch(_SUB, input, other)
    return dispatch(_SUB, input, other, alpha=alpha, out=out)


def _add_(self, other, *, alpha=1):
    return dispatch(_ADD_, self, other) if alpha == 1 else dispatch(_ADD_, self, other,
                                                                    alpha=alpha)


def _sub_(self, other, *, alpha=1):
    return dispatch(_SUB_, self, other) if alpha == 1 else dispatch(_SUB_, self, other,
                                                                    alpha=alpha)


_DIV_MODES = (None, "trunc", "floor")


@_ewise_op("div", also=("ampy.divide", "ampy.true_divide", "Tensor.divide", "Tensor.true_divide"))
def _div_fwd(input, other, rounding_mode=None, out=None):
    if rounding_mode is None:
        return _ew(_CODE["div"], out, None, None, input, other)
    if rounding_mode == "floor":
        return _ew(_CODE["floor_divide"], out, None, None, input, other)
    if rounding_mode == "trunc":
        rt = _C.result_type(input, other)
        if rt.is_floating_point:
            q = _ew(_CODE["div"], None, None, None, input, other)
            return _ew(_CODE["trunc"], out, None, None, q)
        # exact integer truncation: (a - fmod(a, b)) is a multiple of b
        m = _ew(_CODE["fmod"], None, None, None, input, other)
        d = _ew(_CODE["sub"], None, None, None, input, m)
        return _ew(_CODE["floor_divide"], out, None, None, d, other)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                     f"found {rounding_mode!r}")


@_ewise_op("div_")
def _div_ifwd(self, other, rounding_mode=None):
    return _div_fwd(self, other, rounding_mode, self)


_DIV, _DIV_ = get_op("div"), get_op("div_")


def div(input, other, *, rounding_mode=None, out=None):
    """True division (rounding_mode None), or 'trunc' / 'floor' rounded."""
    if rounding_mode is None and out is None:
        return dispatch(_DIV, input, other)
    return dispatch(_DIV, input, other, rounding_mode=rounding_mode, out=out)


def _div_(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return dispatch(_DIV_, self, other)
    return dispatch(_DIV_, self, other, rounding_mode=rounding_mode)


def _is_int_like(x):
    if isinstance(x, Tensor):
        return not x.dtype.is_floating_point
    return isinstance(x, (int, _np.integer))


def _scalar_in_dtype(x, v):
    """A Python number v that torch converts to the dtype of tensor x (pow's
    exponent, clamp's bounds) when it does not promote the result: checked as
    fill_ checks it, and a negative int for uint8 wrapped (two's complement)."""
    if (not isinstance(x, Tensor) or isinstance(v, (bool, Tensor)) or
            not isinstance(v, (int, float, _np.integer, _np.floating)) or
            x.dtype is D.bool or (not x.dtype.is_floating_point and
                                  isinstance(v, (float, _np.floating)))):
        return v
    check_fill(v, x.dtype)
    return int(v) & 0xFF if x.dtype is D.uint8 and v < 0 else v


@_ewise_op("pow")
def _pow_fwd(input, exponent, out=None):
    if (isinstance(exponent, (int, _np.integer)) and not isinstance(exponent, bool)
            and exponent < 0 and _is_int_like(input)):
        raise RuntimeError("pow: Integers to negative integer powers are not allowed.")
    if not (isinstance(input, Tensor) and input.dtype in (D.float32, D.float64)):
        exponent = _scalar_in_dtype(input, exponent)  # torch: float32 takes it as a double
    if (isinstance(input, Tensor) and out is None and
            ((type(exponent) is int and exponent == 2) or
             (type(exponent) is float and exponent == 2.0 and input.dtype.is_floating_point))):
        return _ew(_CODE["square"], None, None, None, _square_in(input))
    return _ew(_CODE["pow"], out, None, None, input, exponent)


@_ewise_op("pow_")
def _pow_ifwd(self, exponent):
    return _pow_fwd(self, exponent, self)


_POW, _POW_ = get_op("pow"), get_op("pow_")


def pow(input, exponent, *, out=None):  # noqa: A001 (torch's name)
    """input ** exponent (either may be a Python number)."""
    return dispatch(_POW, input, exponent) if out is None else dispatch(_POW, input, exponent,
                                                                        out=out)


def float_power(input, exponent):
    """pow computed and returned in float64."""
    a = input.double() if isinstance(input, Tensor) else float(input)
    e = exponent.double() if isinstance(exponent, Tensor) else float(exponent)
    return pow(a, e)


def _pow_(self, exponent):
    return dispatch(_POW_, self, exponent)


# ---- ternary: where, lerp, addcmul, addcdiv, clamp -----------------------------
@_ewise_op("where")
def _where_fwd(condition, input, other):
    return _ew(_CODE["where"], None, None, None, condition, input, other)


_WHERE = get_op("where")


def where(condition, input=None, other=None):
    """condition ? input : other, broadcasting all three."""
    if input is None or other is None:
        raise TypeError("where(condition) without input and other is not supported; use "
                        "nonzero(condition, as_tuple=True)")
    if isinstance(condition, Tensor) and condition.dtype is not D.bool:
        if condition.dtype is not D.uint8:
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a "
                               f"tensor with dtype {_SCALAR_NAMES[condition.dtype.name]}")
        _warnings.warn("where received a uint8 condition tensor. This behavior is deprecated "
                       "and will be removed in a future version of PyTorch. Use a boolean "
                       "condition instead.", UserWarning, stacklevel=2)
    return dispatch(_WHERE, condition, input, other)


# torch's ScalarType names, as its dtype messages spell them
_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                 "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "uint8": "Byte",
                 "bool": "Bool"}


@_ewise_op("lerp")
def _lerp_fwd(input, end, weight, out=None):
    for name, x in (("end", end), ("weight", weight)):
        if isinstance(x, Tensor) and x.dtype is not input.dtype:
            raise TypeError(f"lerp: expected dtype {input.dtype} for `{name}` but got dtype "
                            f"{x.dtype}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"lerp: expected a floating point input, got {input.dtype}")
    return _ew(_CODE["lerp"], out, None, None, input, end, weight)


@_ewise_op("lerp_")
def _lerp_ifwd(self, end, weight):
    return _lerp_fwd(self, end, weight, self)


def _addc(name):
    code = _CODE[name]

    def fwd(input, tensor1, tensor2, value=1, out=None):
        if isinstance(value, float) and not _b.any(
                isinstance(t, Tensor) and t.dtype.is_floating_point
                for t in (input, tensor1, tensor2)):
            raise TypeError(f"{name}: for integral input tensors, argument value must not be a "
                            f"floating point number")
        return _ew(code, out, value, None, input, tensor1, tensor2)

    _ewise_op(name)(fwd)
    _ewise_op(name + "_")(lambda self, tensor1, tensor2, value=1: fwd(self, tensor1, tensor2,
                                                                      value, self))
    return get_op(name), get_op(name + "_")


_LERP, _LERP_ = get_op("lerp"), get_op("lerp_")
_ADDCMUL, _ADDCMUL_ = _addc("addcmul")
_ADDCDIV, _ADDCDIV_ = _addc("addcdiv")


def lerp(input, end, weight, *, out=None):
    """input + weight * (end - input)."""
    return dispatch(_LERP, input, end, weight) if out is None else dispatch(
        _LERP, input, end, weight, out=out)


def addcmul(input, tensor1, tensor2, *, value=1, out=None):
    """input + value * tensor1 * tensor2."""
    if value == 1 and out is None:
        return dispatch(_ADDCMUL, input, tensor1, tensor2)
    return dispatch(_ADDCMUL, input, tensor1, tensor2, value=value, out=out)


def addcdiv(input, tensor1, tensor2, *, value=1, out=None):
    """input + value * tensor1 / tensor2."""
    if value == 1 and out is None:
        return dispatch(_ADDCDIV, input, tensor1, tensor2)
    return dispatch(_ADDCDIV, input, tensor1, tensor2, value=value, out=out)


def _is_floaty(x):
    if isinstance(x, Tensor):
        return x.dtype.is_floating_point
    return isinstance(x, (float, _np.floating))


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


@_ewise_op("clamp", also=("ampy.clip", "Tensor.clip", "ampy.clamp_min", "ampy.clamp_max",
                         "Tensor.clamp_min", "Tensor.clamp_max", "ampy.hardtanh"))
def _clamp_fwd(input, min=None, max=None, out=None):  # noqa: A002 (torch's names)
    if min is None and max is None:
        raise RuntimeError("clamp: At least one of 'min' or 'max' must not be None")
    flt = _is_floaty(input) or _is_floaty(min) or _is_floaty(max)
    min, max = _scalar_in_dtype(input, min), _scalar_in_dtype(input, max)  # noqa: A001
    lo = min if min is not None else (-_pymath.inf if flt else _I64_MIN)
    hi = max if max is not None else (_pymath.inf if flt else _I64_MAX)
    return _ew(_CODE["clamp"], out, None, None, input, lo, hi)


@_ewise_op("clamp_", also=("Tensor.clip_", "Tensor.clamp_min_", "Tensor.clamp_max_"))
def _clamp_ifwd(self, min=None, max=None):  # noqa: A002
    return _clamp_fwd(self, min, max, self)


_CLAMP, _CLAMP_ = get_op("clamp"), get_op("clamp_")


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002
    """min(max(input, min), max); min/max are numbers, Tensors or None."""
    if out is None:
        return dispatch(_CLAMP, input, min, max)
    return dispatch(_CLAMP, input, min, max, out=out)


clip = clamp


def clamp_min(input, min):  # noqa: A002
    return clamp(input, min=min)


def clamp_max(input, max):  # noqa: A002
    return clamp(input, max=max)


def hardtanh(input, min_val=-1.0, max_val=1.0):
    return clamp(input, min_val, max_val)


def _clamp_(self, min=None, max=None):  # noqa: A002
    return dispatch(_CLAMP_, self, min, max)


# ---- activations with parameters ----------------------------------------------
@_ewise_op("gelu")
def _gelu_fwd(input, approximate="none"):
    if approximate == "none":
        return _ew(_CODE["gelu"], None, None, None, input)
    if approximate == "tanh":
        return _ew(_CODE["gelu_tanh"], None, None, None, input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


_GELU = get_op("gelu")


def gelu(input, approximate="none"):
    """Gaussian error linear unit: exact (erf) or approximate='tanh'."""
    return dispatch(_GELU, input) if approximate == "none" else dispatch(
        _GELU, input, approximate=approximate)


def _param_op(name, pnames, defaults, method=True):
    code = _CODE[name]

    def fwd(input, *params):
        vals = list(defaults)
        vals[:len(params)] = params
        return _ew(code, None, *(list(vals) + [None] * (2 - len(vals))), input)

    _ewise_op(name, method=method)(fwd)
    return get_op(name)


_SOFTPLUS = _param_op("softplus", ("beta", "threshold"), (1.0, 20.0))
_LEAKY = _param_op("leaky_relu", ("negative_slope",), (0.01,))
_ELU = _param_op("elu", ("alpha",), (1.0,), method=False)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold."""
    return dispatch(_SOFTPLUS, input, beta, threshold)


def _inplace_src(input, inplace):
    """What an in-place activation computes from: a clone when autograd records it, so the
    backward keeps the input it saved while the result is copied over the input."""
    if inplace and input.requires_grad:
        return input.clone()
    return input


def leaky_relu(input, negative_slope=0.01, inplace=False):
    r = dispatch(_LEAKY, _inplace_src(input, inplace), negative_slope)
    return input.copy_(r) if inplace else r


def elu(input, alpha=1.0, inplace=False):
    r = dispatch(_ELU, _inplace_src(input, inplace), alpha)
    return input.copy_(r) if inplace else r


@_ewise_op("round")
def _round_fwd(input, decimals=0):
    if decimals == 0:
        return _ew(_CODE["round"], None, None, None, input)
    s = 10.0 ** decimals
    return div(_ew(_CODE["round"], None, None, None, mul(input, s)), s)


_ROUND = get_op("round")


def round(input, *, decimals=0):  # noqa: A001 (torch's name)
    """Round half to even (torch.round), optionally to `decimals` digits."""
    return dispatch(_ROUND, input) if decimals == 0 else dispatch(_ROUND, input,
                                                                  decimals=decimals)


def _round_(self, *, decimals=0):
    return self.copy_(round(self, decimals=decimals))


# ---- promotion queries ---------------------------------------------------------
def result_type(tensor1, tensor2):
    """torch.result_type: the dtype an op on these operands computes in."""
    return _C.result_type(tensor1, tensor2)


def can_cast(from_, to):
    """torch.can_cast: no float -> integer and no non-bool -> bool casts (the C
    library's rule, ampy_can_cast, that in-place ops check)."""
    return _C.can_cast(D.to_dtype(from_), D.to_dtype(to))


# ---- aliases ---------------------------------------------------------------------
negative, absolute, multiply, subtract, divide, true_divide = neg, abs, mul, sub, div, div  # noqa
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne  # noqa: F821
arctan, arctan2, arcsin, arccos, fix = atan, atan2, asin, acos, trunc  # noqa: F821
