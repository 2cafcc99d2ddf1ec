"""Installs the math of ampy/_math.py and ampy/_math_reduce.py on ampy.Tensor:
methods (x.exp(), x.sum(1), x.add_(y), ...) and Python operators (+ - * / // %
** unary - abs ~ & | ^ and comparisons). ampy/_tensor.py holds the rest of the
class; `@` belongs to the GEMM module. Operators go through the same op-table
entries as the functions, so autograd and autocast see them by name.
"""
import numpy as _np

from . import _math as M
from . import _math_reduce as R
from ._dispatch import dispatch, get_op
from ._tensor import Tensor

_OPERAND = (Tensor, int, float, _np.generic)


def _coerce(other):
    """The other operand of a Python operator, or None (-> NotImplemented)."""
    if isinstance(other, _OPERAND):
        return other
    return M._as_operand(other)


def _binop(op, reflected=False):
    def f(self, other):
        if not isinstance(other, _OPERAND):
            other = _coerce(other)
            if other is None:
                return NotImplemented
        return dispatch(op, other, self) if reflected else dispatch(op, self, other)

    return f


def _inplace(op):
    def f(self, other):
        if not isinstance(other, _OPERAND):
            other = _coerce(other)
            if other is None:
                return NotImplemented
        return dispatch(op, self, other)

    return f


def _op(name):
    return get_op(name)


_OPERATORS = {
    "__add__": _binop(_op("add")), "__radd__": _binop(_op("add"), True),
    "__iadd__": _inplace(_op("add_")),
    "__sub__": _binop(_op("sub")), "__rsub__": _binop(_op("sub"), True),
    "__isub__": _inplace(_op("sub_")),
    "__mul__": _binop(_op("mul")), "__rmul__": _binop(_op("mul"), True),
    "__imul__": _inplace(_op("mul_")),
    "__truediv__": _binop(_op("div")), "__rtruediv__": _binop(_op("div"), True),
    "__itruediv__": _inplace(_op("div_")),
    "__floordiv__": _binop(_op("floor_divide")),
    "__rfloordiv__": _binop(_op("floor_divide"), True),
    "__ifloordiv__": _inplace(_op("floor_divide_")),
    "__mod__": _binop(_op("remainder")), "__rmod__": _binop(_op("remainder"), True),
    "__imod__": _inplace(_op("remainder_")),
    "__pow__": _binop(_op("pow")), "__rpow__": _binop(_op("pow"), True),
    "__ipow__": _inplace(_op("pow_")),
    "__and__": _binop(_op("bitwise_and")), "__rand__": _binop(_op("bitwise_and"), True),
    "__iand__": _inplace(_op("bitwise_and_")),
    "__or__": _binop(_op("bitwise_or")), "__ror__": _binop(_op("bitwise_or"), True),
    "__ior__": _inplace(_op("bitwise_or_")),
    "__xor__": _binop(_op("bitwise_xor")), "__rxor__": _binop(_op("bitwise_xor"), True),
    "__ixor__": _inplace(_op("bitwise_xor_")),
    "__eq__": _binop(_op("eq")), "__ne__": _binop(_op("ne")),
    "__lt__": _binop(_op("lt")), "__le__": _binop(_op("le")),
    "__gt__": _binop(_op("gt")), "__ge__": _binop(_op("ge")),
}

_NEG, _ABS, _NOT = _op("neg"), _op("abs"), _op("bitwise_not")


def _tensor_where(self, condition, y):
    return M.where(condition, self, y)


def _positive(self):
    return self


_EXTRA = {
    "__neg__": lambda self: dispatch(_NEG, self),
    "__abs__": lambda self: dispatch(_ABS, self),
    "__invert__": lambda self: dispatch(_NOT, self),
    "__pos__": _positive, "positive": _positive,
    "add": M.add, "add_": M._add_, "sub": M.sub, "sub_": M._sub_, "div": M.div,
    "div_": M._div_, "pow": M.pow, "pow_": M._pow_, "where": _tensor_where,
    "clamp": M.clamp, "clamp_": M._clamp_, "clip": M.clamp, "clip_": M._clamp_,
    "clamp_min": M.clamp_min, "clamp_max": M.clamp_max,
    "clamp_min_": lambda self, min: M._clamp_(self, min=min),  # noqa: A006
    "clamp_max_": lambda self, max: M._clamp_(self, max=max),  # noqa: A006
    "lerp": M.lerp, "lerp_": lambda self, end, weight: dispatch(M._LERP_, self, end, weight),
    "addcmul": M.addcmul, "addcdiv": M.addcdiv,
    "addcmul_": lambda self, t1, t2, *, value=1: dispatch(M._ADDCMUL_, self, t1, t2, value),
    "addcdiv_": lambda self, t1, t2, *, value=1: dispatch(M._ADDCDIV_, self, t1, t2, value),
    "round": M.round, "round_": M._round_, "float_power": M.float_power,
    "negative": M.neg, "absolute": M.abs, "multiply": M.mul, "subtract": M.sub,
    "divide": M.div, "true_divide": M.div, "greater": M.gt, "greater_equal": M.ge,
    "less": M.lt, "less_equal": M.le, "not_equal": M.ne, "arctan": M.atan,
    "arctan2": M.atan2, "arcsin": M.asin, "arccos": M.acos, "fix": M.trunc,
    "gelu": M.gelu, "softplus": M.softplus, "leaky_relu": M.leaky_relu,
}
for _name in R.__all__:
    if _name not in ("cat", "concat", "concatenate", "stack"):
        _EXTRA[_name] = getattr(R, _name)

for _name, _fn in list(M._METHODS.items()) + list(_EXTRA.items()) + list(_OPERATORS.items()):
    setattr(Tensor, _name, _fn)
