"""ampy.nn.utils.weight_norm / remove_weight_norm — torch's older, hook-based weight
normalization (deprecated in torch in favour of nn.utils.parametrizations.weight_norm, and
warning the same way): module.<name> is recomputed as g * v / ||v|| before each forward from
the parameters <name>_g and <name>_v."""
import warnings

from ..parameter import Parameter
from .parametrizations import norm_except_dim, remove_hook, weight_norm_product

__all__ = ["weight_norm", "remove_weight_norm", "WeightNorm"]


class WeightNorm:
    """The forward pre-hook that recomputes module.<name> from <name>_g and <name>_v."""

    def __init__(self, name, dim):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        return weight_norm_product(getattr(module, self.name + "_v"),
                                   getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        if name not in module._parameters:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
        fn = WeightNorm(name, dim)
        weight = module._parameters[name]
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Split module.<name> into a magnitude <name>_g and a direction <name>_v (torch's
    deprecated hook API). Returns module."""
    warnings.warn("`ampy.nn.utils.weight_norm` is deprecated in favor of "
                  "`ampy.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo weight_norm: module.<name> becomes one Parameter again. Returns module."""
    return remove_hook(module, WeightNorm, name, "weight_norm")
