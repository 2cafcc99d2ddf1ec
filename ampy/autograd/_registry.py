"""Autograd's tables keyed by op name: the ops whose outputs are never
differentiable, and torch's grad_fn class names where they are not
CamelCase(op) + "Backward0". Backward rules themselves are attached to their
op by `ampy._dispatch.backward`. `check_names()` (run when ampy.autograd
loads, after every op it names is declared) raises for a name that is not an
op.
"""
from .._dispatch import ops

__all__ = ["NON_DIFFERENTIABLE", "NAMES", "check_names"]

# ops whose outputs are never differentiable (integer or bool results), so
# they need no rule: the hook records nothing for them
NON_DIFFERENTIABLE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "isnan", "isinf", "isfinite",
    "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_not", "bitwise_xor", "all", "any",
    "floor_divide",  # torch: "derivative for floor_divide is not implemented"
    "multinomial",
})

# torch's grad_fn names where they are not CamelCase(op) + "Backward0"
NAMES = {
    "to_dtype": "ToCopyBackward0", "to_device": "ToCopyBackward0", "copy_": "CopyBackwards",
    "reshape": "ViewBackward0", "flatten": "ViewBackward0", "getitem": "IndexBackward0",
    "setitem": "IndexPutBackward0", "matmul": "MmBackward0", "linear": "AddmmBackward0",
    "amax": "AmaxBackward0", "max_dim": "MaxBackward0", "min_dim": "MinBackward0",
}


def check_names():
    """LookupError naming the entries of the tables above that are not ops."""
    table = ops()
    unknown = sorted((NON_DIFFERENTIABLE | set(NAMES)) - set(table))
    if unknown:
        raise LookupError(f"ampy.autograd names ops that do not exist: {unknown}")
