"""The one module that sets methods on ampy.Tensor beyond its class body.

ampy/_tensor.py defines the class itself (attributes, conversions, views,
indexing); every other method and operator is assigned below, one line per
name, from the module that defines it: element-wise math (ampy/_math.py),
reductions (ampy/_math_reduce.py), GEMM (ampy/_gemm.py), creation
(ampy/_creation.py), autograd (ampy/autograd) and DLPack (ampy/_dlpack.py).
ampy/__init__.py imports this module after all of them. Operators go through
the same op-table entries as the functions, so autograd and autocast see them.
tests/test_op_table.py checks these lines against the ops' declared names.
"""
import numpy as _np

from . import _C
from . import _creation
from . import _dlpack
from . import _gemm
from . import _math
from . import _math_reduce
from . import _scatter, _sorting, _tiling, _tril
from . import autograd as _autograd
from ._convert import as_tensor_like
from ._dispatch import dispatch, get_op
from ._tensor import Tensor

_OPERAND = (Tensor, int, float, _np.generic)


def _binop(op, reflected=False):
    """A Python binary operator for op (NotImplemented for a foreign operand)."""
    def f(self, other):
        if not isinstance(other, _OPERAND):
            other = _math._as_operand(other)
            if other is None:
                return NotImplemented
        return dispatch(op, other, self) if reflected else dispatch(op, self, other)

    return f


def _rdiv(self, other):
    """other / self as torch computes it: self.reciprocal() * other (two roundings, so
    `1.0 / x` gives torch's bits, not a correctly rounded quotient)."""
    if not isinstance(other, _OPERAND):
        other = _math._as_operand(other)
        if other is None:
            return NotImplemented
    return dispatch(get_op("mul"), dispatch(get_op("reciprocal"), self), other)


def _inplace(op):
    """A Python augmented assignment (+= ...) for in-place op."""
    def f(self, other):
        if not isinstance(other, _OPERAND):
            other = _math._as_operand(other)
            if other is None:
                return NotImplemented
        return dispatch(op, self, other)

    return f


def _unary(op):
    def f(self):
        return dispatch(op, self)

    return f


def _tensor_where(self, condition, y):
    return _math.where(condition, self, y)


def _positive(self):
    return self


def _clamp_min_(self, min):  # noqa: A002 (torch's name)
    return _math._clamp_(self, min=min)


def _clamp_max_(self, max):  # noqa: A002 (torch's name)
    return _math._clamp_(self, max=max)


def _lerp_(self, end, weight):
    return dispatch(_math._LERP_, self, end, weight)


def _addcmul_(self, tensor1, tensor2, *, value=1):
    return dispatch(_math._ADDCMUL_, self, tensor1, tensor2, value)


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    return dispatch(_math._ADDCDIV_, self, tensor1, tensor2, value)


def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    return _gemm.addmm(self, mat1, mat2, beta=beta, alpha=alpha)


def _baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    return _gemm.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)


def _rmatmul(self, other):
    return _gemm.matmul(other, self)


def _new_zeros(self, *size, dtype=None):
    return _creation.zeros(*size, dtype=dtype or self.dtype)


def _new_ones(self, *size, dtype=None):
    return _creation.ones(*size, dtype=dtype or self.dtype)


def _new_empty(self, *size, dtype=None):
    return _creation.empty(*size, dtype=dtype or self.dtype)


def _new_full(self, size, fill_value, dtype=None):
    return _creation.full(size, fill_value, dtype=dtype or self.dtype)


def _fill_(self, value):
    if self._requires_grad:
        _fill_grad_check(self)
    _C.copy_(self, as_tensor_like(value, self, fill=True), False)  # one value: overlap is harmless
    return self


def _fill_grad_check(t):
    """fill_/zero_ write outside autograd: refuse them on a tensor that
    requires grad while grad mode is on (torch raises for a leaf; a non-leaf
    would keep a history its new values no longer have)."""
    if not _autograd.is_grad_enabled():
        return
    if t.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    raise NotImplementedError("fill_/zero_ on a tensor that requires grad is not recorded by "
                              "ampy's autograd; fill a clone() or a detach()ed tensor instead")


# ---- element-wise families (ampy/_math.py: _UNARY, _BINARY) -------------------
Tensor.abs = _math.abs
Tensor.abs_ = _math.abs_
Tensor.neg = _math.neg
Tensor.neg_ = _math.neg_
Tensor.reciprocal = _math.reciprocal
Tensor.reciprocal_ = _math.reciprocal_
Tensor.square = _math.square
Tensor.square_ = _math.square_
Tensor.sign = _math.sign
Tensor.sign_ = _math.sign_
Tensor.exp = _math.exp
Tensor.exp_ = _math.exp_
Tensor.expm1 = _math.expm1
Tensor.expm1_ = _math.expm1_
Tensor.exp2 = _math.exp2
Tensor.exp2_ = _math.exp2_
Tensor.log = _math.log
Tensor.log_ = _math.log_
Tensor.log1p = _math.log1p
Tensor.log1p_ = _math.log1p_
Tensor.log2 = _math.log2
Tensor.log2_ = _math.log2_
Tensor.log10 = _math.log10
Tensor.log10_ = _math.log10_
Tensor.sqrt = _math.sqrt
Tensor.sqrt_ = _math.sqrt_
Tensor.rsqrt = _math.rsqrt
Tensor.rsqrt_ = _math.rsqrt_
Tensor.sin = _math.sin
Tensor.sin_ = _math.sin_
Tensor.cos = _math.cos
Tensor.cos_ = _math.cos_
Tensor.tan = _math.tan
Tensor.tan_ = _math.tan_
Tensor.tanh = _math.tanh
Tensor.tanh_ = _math.tanh_
Tensor.atan = _math.atan
Tensor.atan_ = _math.atan_
Tensor.asin = _math.asin
Tensor.asin_ = _math.asin_
Tensor.acos = _math.acos
Tensor.acos_ = _math.acos_
Tensor.sinh = _math.sinh
Tensor.sinh_ = _math.sinh_
Tensor.cosh = _math.cosh
Tensor.cosh_ = _math.cosh_
Tensor.sigmoid = _math.sigmoid
Tensor.sigmoid_ = _math.sigmoid_
Tensor.relu = _math.relu
Tensor.relu_ = _math.relu_
Tensor.erf = _math.erf
Tensor.erf_ = _math.erf_
Tensor.silu = _math.silu
Tensor.silu_ = _math.silu_
Tensor.mish = _math.mish
Tensor.logsigmoid = _math.logsigmoid
Tensor.floor = _math.floor
Tensor.floor_ = _math.floor_
Tensor.ceil = _math.ceil
Tensor.ceil_ = _math.ceil_
Tensor.trunc = _math.trunc
Tensor.trunc_ = _math.trunc_
Tensor.frac = _math.frac
Tensor.frac_ = _math.frac_
Tensor.isnan = _math.isnan
Tensor.isinf = _math.isinf
Tensor.isfinite = _math.isfinite
Tensor.logical_not = _math.logical_not
Tensor.logical_not_ = _math.logical_not_
Tensor.bitwise_not = _math.bitwise_not
Tensor.bitwise_not_ = _math.bitwise_not_
Tensor.mul = _math.mul
Tensor.mul_ = _math.mul_
Tensor.maximum = _math.maximum
Tensor.minimum = _math.minimum
Tensor.fmax = _math.fmax
Tensor.fmin = _math.fmin
Tensor.fmod = _math.fmod
Tensor.fmod_ = _math.fmod_
Tensor.remainder = _math.remainder
Tensor.remainder_ = _math.remainder_
Tensor.floor_divide = _math.floor_divide
Tensor.floor_divide_ = _math.floor_divide_
Tensor.atan2 = _math.atan2
Tensor.atan2_ = _math.atan2_
Tensor.eq = _math.eq
Tensor.eq_ = _math.eq_
Tensor.ne = _math.ne
Tensor.ne_ = _math.ne_
Tensor.lt = _math.lt
Tensor.lt_ = _math.lt_
Tensor.le = _math.le
Tensor.le_ = _math.le_
Tensor.gt = _math.gt
Tensor.gt_ = _math.gt_
Tensor.ge = _math.ge
Tensor.ge_ = _math.ge_
Tensor.logical_and = _math.logical_and
Tensor.logical_and_ = _math.logical_and_
Tensor.logical_or = _math.logical_or
Tensor.logical_or_ = _math.logical_or_
Tensor.logical_xor = _math.logical_xor
Tensor.logical_xor_ = _math.logical_xor_
Tensor.bitwise_and = _math.bitwise_and
Tensor.bitwise_and_ = _math.bitwise_and_
Tensor.bitwise_or = _math.bitwise_or
Tensor.bitwise_or_ = _math.bitwise_or_
Tensor.bitwise_xor = _math.bitwise_xor
Tensor.bitwise_xor_ = _math.bitwise_xor_

# ---- arithmetic with options, ternary ops, parametrised activations, aliases
Tensor.add = _math.add
Tensor.add_ = _math._add_
Tensor.sub = _math.sub
Tensor.sub_ = _math._sub_
Tensor.div = _math.div
Tensor.div_ = _math._div_
Tensor.pow = _math.pow
Tensor.pow_ = _math._pow_
Tensor.where = _tensor_where
Tensor.clamp = _math.clamp
Tensor.clamp_ = _math._clamp_
Tensor.clip = _math.clamp
Tensor.clip_ = _math._clamp_
Tensor.clamp_min = _math.clamp_min
Tensor.clamp_max = _math.clamp_max
Tensor.clamp_min_ = _clamp_min_
Tensor.clamp_max_ = _clamp_max_
Tensor.lerp = _math.lerp
Tensor.lerp_ = _lerp_
Tensor.addcmul = _math.addcmul
Tensor.addcdiv = _math.addcdiv
Tensor.addcmul_ = _addcmul_
Tensor.addcdiv_ = _addcdiv_
Tensor.round = _math.round
Tensor.round_ = _math._round_
Tensor.float_power = _math.float_power
Tensor.negative = _math.neg
Tensor.absolute = _math.abs
Tensor.multiply = _math.mul
Tensor.subtract = _math.sub
Tensor.divide = _math.div
Tensor.true_divide = _math.div
Tensor.greater = _math.gt
Tensor.greater_equal = _math.ge
Tensor.less = _math.lt
Tensor.less_equal = _math.le
Tensor.not_equal = _math.ne
Tensor.arctan = _math.atan
Tensor.arctan2 = _math.atan2
Tensor.arcsin = _math.asin
Tensor.arccos = _math.acos
Tensor.fix = _math.trunc
Tensor.gelu = _math.gelu
Tensor.softplus = _math.softplus
Tensor.leaky_relu = _math.leaky_relu
Tensor.positive = _positive

# ---- reductions, softmax, scans (ampy/_math_reduce.py) -------------------------
Tensor.sum = _math_reduce.sum
Tensor.mean = _math_reduce.mean
Tensor.prod = _math_reduce.prod
Tensor.max = _math_reduce.max
Tensor.min = _math_reduce.min
Tensor.amax = _math_reduce.amax
Tensor.amin = _math_reduce.amin
Tensor.argmax = _math_reduce.argmax
Tensor.argmin = _math_reduce.argmin
Tensor.var = _math_reduce.var
Tensor.std = _math_reduce.std
Tensor.var_mean = _math_reduce.var_mean
Tensor.std_mean = _math_reduce.std_mean
Tensor.norm = _math_reduce.norm
Tensor.logsumexp = _math_reduce.logsumexp
Tensor.all = _math_reduce.all
Tensor.any = _math_reduce.any
Tensor.softmax = _math_reduce.softmax
Tensor.log_softmax = _math_reduce.log_softmax
Tensor.cumsum = _math_reduce.cumsum
Tensor.cumprod = _math_reduce.cumprod
Tensor.count_nonzero = _math_reduce.count_nonzero
Tensor.nansum = _math_reduce.nansum

# ---- GEMM (ampy/_gemm.py) -------------------------------------------------------
Tensor.matmul = _gemm.matmul
Tensor.mm = _gemm.mm
Tensor.bmm = _gemm.bmm
Tensor.dot = _gemm.dot
Tensor.mv = _gemm.mv
Tensor.addmm = _addmm
Tensor.baddbmm = _baddbmm
Tensor.__matmul__ = _gemm.matmul
Tensor.__rmatmul__ = _rmatmul

# ---- Python operators -----------------------------------------------------------
Tensor.__add__ = _binop(get_op("add"))
Tensor.__radd__ = _binop(get_op("add"), reflected=True)
Tensor.__iadd__ = _inplace(get_op("add_"))
Tensor.__sub__ = _binop(get_op("sub"))
Tensor.__rsub__ = _binop(get_op("sub"), reflected=True)
Tensor.__isub__ = _inplace(get_op("sub_"))
Tensor.__mul__ = _binop(get_op("mul"))
Tensor.__rmul__ = _binop(get_op("mul"), reflected=True)
Tensor.__imul__ = _inplace(get_op("mul_"))
Tensor.__truediv__ = _binop(get_op("div"))
Tensor.__rtruediv__ = _rdiv
Tensor.__itruediv__ = _inplace(get_op("div_"))
Tensor.__floordiv__ = _binop(get_op("floor_divide"))
Tensor.__rfloordiv__ = _binop(get_op("floor_divide"), reflected=True)
Tensor.__ifloordiv__ = _inplace(get_op("floor_divide_"))
Tensor.__mod__ = _binop(get_op("remainder"))
Tensor.__rmod__ = _binop(get_op("remainder"), reflected=True)
Tensor.__imod__ = _inplace(get_op("remainder_"))
Tensor.__pow__ = _binop(get_op("pow"))
Tensor.__rpow__ = _binop(get_op("pow"), reflected=True)
Tensor.__ipow__ = _inplace(get_op("pow_"))
Tensor.__and__ = _binop(get_op("bitwise_and"))
Tensor.__rand__ = _binop(get_op("bitwise_and"), reflected=True)
Tensor.__iand__ = _inplace(get_op("bitwise_and_"))
Tensor.__or__ = _binop(get_op("bitwise_or"))
Tensor.__ror__ = _binop(get_op("bitwise_or"), reflected=True)
Tensor.__ior__ = _inplace(get_op("bitwise_or_"))
Tensor.__xor__ = _binop(get_op("bitwise_xor"))
Tensor.__rxor__ = _binop(get_op("bitwise_xor"), reflected=True)
Tensor.__ixor__ = _inplace(get_op("bitwise_xor_"))
Tensor.__eq__ = _binop(get_op("eq"))
Tensor.__ne__ = _binop(get_op("ne"))
Tensor.__lt__ = _binop(get_op("lt"))
Tensor.__le__ = _binop(get_op("le"))
Tensor.__gt__ = _binop(get_op("gt"))
Tensor.__ge__ = _binop(get_op("ge"))
Tensor.__neg__ = _unary(get_op("neg"))
Tensor.__abs__ = _unary(get_op("abs"))
Tensor.__invert__ = _unary(get_op("bitwise_not"))
Tensor.__pos__ = _positive

# ---- creation and filling (ampy/_creation.py, ampy/_convert.py) ----------------
Tensor.new_zeros = _new_zeros
Tensor.new_ones = _new_ones
Tensor.new_empty = _new_empty
Tensor.new_full = _new_full
Tensor.fill_ = _fill_

# ---- autograd (ampy/autograd/__init__.py) --------------------------------------
Tensor.backward = _autograd._tensor_backward
Tensor.register_hook = _autograd._register_hook
Tensor.retain_grad = _autograd._retain_grad
Tensor.retains_grad = property(_autograd._retains_grad)
Tensor.register_post_accumulate_grad_hook = _autograd._register_post_accumulate_grad_hook
Tensor.output_nr = property(_autograd._output_nr)

# ---- DLPack and the CUDA array interface (ampy/_dlpack.py) ---------------------
Tensor.__dlpack__ = _dlpack._dlpack
Tensor.__dlpack_device__ = _dlpack._dlpack_device
Tensor.__cuda_array_interface__ = property(_dlpack._cuda_array_interface)


# ---- sorting, scatter/gather, triangles, tiling (ampy/_sorting.py, _scatter.py,
# _tril.py, _tiling.py) -------------------------------------------------------------
def _tile(self, *dims):
    return _tiling.tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int)
                        else dims)


Tensor.sort = _sorting.sort
Tensor.argsort = _sorting.argsort
Tensor.topk = _sorting.topk
Tensor.multinomial = _sorting.multinomial
Tensor.gather = _scatter.gather
Tensor.scatter = _scatter.scatter
Tensor.scatter_ = _scatter.scatter_
Tensor.scatter_add = _scatter.scatter_add
Tensor.scatter_add_ = _scatter.scatter_add_
Tensor.masked_fill = _scatter.masked_fill
Tensor.masked_fill_ = _scatter.masked_fill_
Tensor.index_select = _scatter.index_select
Tensor.masked_select = _scatter.masked_select
Tensor.tril = _tril.tril
Tensor.triu = _tril.triu
Tensor.tril_ = _tril.tril_
Tensor.triu_ = _tril.triu_
Tensor.repeat = _tiling.repeat
Tensor.tile = _tile
Tensor.type_as = _tiling.type_as
# ---- format() and is_floating_point (ampy/_tensor_format.py) -------------------
from . import _tensor_format  # noqa: E402
Tensor.__format__ = _tensor_format.tensor_format
Tensor.is_floating_point = _tensor_format.is_floating_point
# ---- scatter_reduce (ampy/_scatter_reduce.py) -----------------------------------
from . import _scatter_reduce  # noqa: E402
Tensor.scatter_reduce = _scatter_reduce.scatter_reduce
Tensor.scatter_reduce_ = _scatter_reduce.scatter_reduce_
# ---- random fills and more Tensor methods (ampy/_random_fills.py, _tensor_methods_more.py)
from . import _random_fills  # noqa: E402
Tensor.uniform_ = _random_fills.uniform_
Tensor.normal_ = _random_fills.normal_
Tensor.random_ = _random_fills.random_
Tensor.bernoulli_ = _random_fills.bernoulli_
Tensor.bernoulli = _random_fills._tensor_bernoulli
Tensor.exponential_ = _random_fills.exponential_
Tensor.geometric_ = _random_fills.geometric_
Tensor.log_normal_ = _random_fills.log_normal_
Tensor.cauchy_ = _random_fills.cauchy_
from . import _tensor_methods_more as _more  # noqa: E402
Tensor.repeat_interleave = _more.repeat_interleave
Tensor.ravel = _more.ravel
Tensor.unfold = _more.unfold
Tensor.sum_to_size = _more.sum_to_size
Tensor.nelement = _more.nelement
Tensor.ndimension = _more.ndimension
Tensor.nbytes = property(_more._nbytes)
Tensor.itemsize = property(_more._itemsize)
Tensor.is_signed = _more.is_signed
Tensor.is_complex = _more.is_complex
Tensor.is_nonzero = _more.is_nonzero
Tensor.is_same_size = _more.is_same_size
Tensor.squeeze_ = _more.squeeze_
Tensor.unsqueeze_ = _more.unsqueeze_
Tensor.t_ = _more.t_
Tensor.transpose_ = _more.transpose_
Tensor.swapaxes_ = _more.transpose_
Tensor.swapdims_ = _more.transpose_
Tensor.fill_diagonal_ = _more.fill_diagonal_
Tensor.index_add = _more.index_add
Tensor.index_add_ = _more.index_add_
Tensor.index_copy = _more.index_copy
Tensor.index_copy_ = _more.index_copy_
Tensor.index_fill = _more.index_fill
Tensor.index_fill_ = _more.index_fill_
Tensor.masked_scatter = _more.masked_scatter
Tensor.masked_scatter_ = _more.masked_scatter_
Tensor.cumsum_ = _more.cumsum_
Tensor.cumprod_ = _more.cumprod_
Tensor.apply_ = _more.apply_
Tensor.new = _more.new

# ---- torch top-level tensor functions (ampy/_tensor_fns.py)
from . import _tensor_fns  # noqa: E402

Tensor.flip = _tensor_fns.flip
Tensor.fliplr = _tensor_fns.fliplr
Tensor.flipud = _tensor_fns.flipud
Tensor.roll = _tensor_fns.roll
Tensor.outer = _tensor_fns.outer
Tensor.movedim = Tensor.moveaxis = _tensor_fns.movedim
Tensor.broadcast_to = _tensor_fns.broadcast_to
Tensor.isclose = _tensor_fns.isclose
Tensor.allclose = _tensor_fns.allclose
Tensor.equal = _tensor_fns.equal
Tensor.nonzero = _tensor_fns.nonzero
Tensor.argwhere = _tensor_fns.argwhere
