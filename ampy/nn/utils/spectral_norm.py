"""ampy.nn.utils.spectral_norm / remove_spectral_norm — torch's older, hook-based spectral
normalization: module.<name> = <name>_orig / sigma before each forward, sigma estimated by
power iteration on the buffers <name>_u, <name>_v (v from u, then u from v; only in training
mode). The state_dict keys are torch's: <name>_orig, <name>_u, <name>_v."""
from ...autograd import no_grad
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..parameter import Parameter
from .parametrizations import as_matrix, normalize0, random_unit, remove_hook

__all__ = ["spectral_norm", "remove_spectral_norm", "SpectralNorm"]


class SpectralNorm:
    """The forward pre-hook that recomputes module.<name> from <name>_orig."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        w = as_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize0(w.t().mv(u), self.eps))
                    u.copy_(normalize0(w.mv(v), self.eps))
            u, v = u.clone(), v.clone()
        return weight / u.dot(w.mv(v))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        if name not in module._parameters:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter '{name}'")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            w = as_matrix(weight, dim)
            u, v = random_unit(w.shape[0], w, eps), random_unit(w.shape[1], w, eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Normalize module.<name> by its largest singular value (torch's hook API); dim defaults
    to 1 for ConvTranspose modules, else 0. Returns module."""
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo spectral_norm: module.<name> becomes one Parameter (the normalized weight)."""
    return remove_hook(module, SpectralNorm, name, "spectral_norm")
