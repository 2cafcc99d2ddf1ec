"""ampy.nn.utils.parametrizations — torch's weight_norm and spectral_norm as
parametrizations (ampy.nn.utils.parametrize), with torch's state_dict keys:
`parametrizations.weight.original0` (g) and `original1` (v) for weight_norm;
`parametrizations.weight.original` and the power-iteration vectors
`parametrizations.weight.0._u`, `._v` for spectral_norm.

The shared math (norm_except_dim, the weight-norm product, the matrix view and power
iteration of spectral norm) is here too; the older hook-based `nn.utils.weight_norm` and
`nn.utils.spectral_norm` use it.
"""
from ... import _creation
from ..._tensor import Tensor
from ...autograd import no_grad
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from .parametrize import register_parametrization

__all__ = ["weight_norm", "spectral_norm"]


def norm_except_dim(v, pow=2, dim=0):
    """The p-norm of v over every dim but dim, kept as size-1 dims (torch.norm_except_dim);
    dim == -1 means the norm of the whole tensor (0-d), as in torch."""
    if dim == -1:
        return v.norm(pow)
    if dim == 0:
        return v.reshape(v.shape[0], -1).norm(pow, dim=1).reshape((v.shape[0],) + (1,) * (v.dim() - 1))
    if dim == v.dim() - 1:
        return v.reshape(-1, v.shape[-1]).norm(pow, dim=0).reshape((1,) * (v.dim() - 1) + (v.shape[-1],))
    return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)


def weight_norm_product(v, g, dim):
    """v * (g / ||v||), the norm taken over every dim but dim (torch._weight_norm)."""
    return v * (g / norm_except_dim(v, 2, dim))


def normalize0(x, eps):
    """x / max(||x||_2, eps) for a vector (F.normalize(x, dim=0, eps=eps))."""
    return x / x.norm(2, dim=0, keepdim=True).clamp_min(eps)


def as_matrix(weight, dim):
    """weight with dim moved first and the rest flattened: (size(dim), -1)."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.dim()) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def remove_hook(module, cls, name, label):
    """Undo a hook-based reparametrization: the forward pre-hook of type cls for name
    removes itself (hook.remove(module)) and leaves the hook table. Returns module."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, cls) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"{label} of '{name}' not found in {module}")


def random_unit(n, like, eps):
    """A random unit vector of n entries, like's dtype (drawn from ampy's generator)."""
    return normalize0(_creation.randn(n, dtype=like.dtype), eps)


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_norm_product(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize module.<name> as g * v / ||v|| (g: original0, v: original1); dim is the
    dim kept by the norm (None: the norm of the whole tensor). Returns module."""
    register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                w = as_matrix(weight, self.dim)
                self.register_buffer("_u", random_unit(w.shape[0], w, eps))
                self.register_buffer("_v", random_unit(w.shape[1], w, eps))
            self._power_method(w, 15)

    def _power_method(self, w, n):
        """n power iterations, u from v then v from u, written into the buffers in place."""
        with no_grad():
            for _ in range(n):
                self._u.copy_(normalize0(w.mv(self._v), self.eps))
                self._v.copy_(normalize0(w.t().mv(self._u), self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return normalize0(weight, self.eps)
        w = as_matrix(weight, self.dim)
        if self.training:
            self._power_method(w, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        return weight / u.dot(w.mv(v))

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrize module.<name> as W / sigma(W), sigma estimated by power iteration
    (n_power_iterations per training forward; 15 at registration). dim defaults to 1 for
    ConvTranspose modules and 0 otherwise. Returns module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
