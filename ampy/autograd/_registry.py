"""Backward rules by op name, and their installation into the op table.

Rule modules declare `@rule("mul", save=(0, 1))`: the function becomes
`get_op("mul").backward`. `save` lists the positional arguments whose values
the rule reads (they are kept and version-checked; the others are reduced to
their shape and dtype), `save_out=True` keeps the outputs. An op that is not
in the table yet (its engineer's module has not been imported) is installed
the first time it is recorded, so rules work whatever the import order. An
in-place op `name_` uses the rule of `name`.
"""
from .._dispatch import ops

__all__ = ["rule", "RULES", "NON_DIFFERENTIABLE", "install_all", "install_one"]

RULES = {}

# ops whose outputs are never differentiable (integer or bool results), so
# they need no rule: the hook records nothing for them
NON_DIFFERENTIABLE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "isnan", "isinf", "isfinite",
    "logical_and", "logical_or", "logical_not", "logical_xor", "nonzero", "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor",
    "all", "any", "equal", "allclose", "isclose", "randint", "rand", "randn", "arange",
    "floor_divide",  # torch: "derivative for floor_divide is not implemented"
})

# torch's grad_fn names where they are not CamelCase(op) + "Backward0"
NAMES = {
    "to_dtype": "ToCopyBackward0", "to_device": "ToCopyBackward0", "copy_": "CopyBackwards",
    "reshape": "ViewBackward0", "flatten": "ViewBackward0", "getitem": "IndexBackward0",
    "setitem": "IndexPutBackward0", "matmul": "MmBackward0", "linear": "AddmmBackward0",
    "max": "MaxBackward1", "min": "MinBackward1", "true_divide": "DivBackward0",
    "amax": "AmaxBackward0", "max_dim": "MaxBackward0", "min_dim": "MinBackward0",
}


def rule(*names, save=None, save_out=False, is_view=False, inplace=False):
    def wrap(fn):
        fn.save = save
        fn.save_out = save_out
        fn.is_view = is_view
        fn.inplace = inplace
        for n in names:
            RULES[n] = fn
        return fn

    return wrap


def _inplace_variant(base):
    def rule_(ctx, *grads):
        return base(ctx, *grads)

    rule_.save = base.save
    rule_.save_out = base.save_out
    rule_.is_view = False
    rule_.inplace = True
    rule_.base = base
    return rule_


_VARIANTS = {}


def _rule_for(name):
    r = RULES.get(name)
    if r is not None:
        return r
    if name.endswith("_") and not name.startswith("_"):
        base = RULES.get(name[:-1])
        if base is not None:
            r = _VARIANTS.get(name)
            if r is None:
                r = _VARIANTS[name] = _inplace_variant(base)
            return r
    return None


def install_one(op):
    """Give `op` its rule if it has none; returns the rule (or None)."""
    if op.backward is None:
        r = _rule_for(op.name)
        if r is not None:
            op.backward = r
    return op.backward


def install_all():
    for op in ops().values():
        install_one(op)
