"""ampy.nn.utils.parametrize — torch.nn.utils.parametrize: a parameter or buffer of a module
is replaced by a function of "original" tensors.

`register_parametrization(module, "weight", P)` moves `module.weight` into
`module.parametrizations.weight.original` (the same Parameter object when P's
`right_inverse` keeps its shape and dtype), swaps the module's class for a subclass
`Parametrized<Name>` that has a `weight` property computing `P(original)`, and assigning
`module.weight = X` writes `P.right_inverse(X)` into the originals. A `right_inverse` that
returns a tuple gives `original0, original1, ...`. The state_dict keys are torch's
(`parametrizations.weight.original`, `parametrizations.weight.0.<P's buffers>`), so
checkpoints load both ways.
"""
import contextlib

from ..._tensor import Tensor
from ...autograd import no_grad
from ..modules.container import ModuleList
from ..modules.container_dict import ModuleDict
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized", "cached",
           "type_before_parametrizations", "ParametrizationList"]

_cache_depth = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Within this context each parametrized tensor is computed once, on first use, and
    reused (the cache is dropped on exit)."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _store(module, name, value):
    """Register value under name as a parameter (a Parameter) or a buffer (anything else)."""
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_into(original, new):
    """original takes new's value: in place when shape and dtype agree (the Parameter object,
    and so an optimizer's reference to it, survives); otherwise a fresh tensor of the same
    kind is returned."""
    if original.shape == new.shape and original.dtype == new.dtype:
        with no_grad():
            original.copy_(new)
        return original
    t = new.detach().clone()
    return Parameter(t, original.requires_grad) if isinstance(original, Parameter) else t


def _check_same(what, before, after, unsafe):
    if unsafe:
        return
    if not isinstance(after, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(after).__name__}.")
    if after.dtype != before.dtype:
        raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, "
                         f"unless `unsafe` flag is enabled.\n{what} dtype: {before.dtype}\n"
                         f"parametrized dtype: {after.dtype}")
    if after.shape != before.shape:
        raise ValueError(f"Registering a parametrization may not change the shape of the tensor, "
                         f"unless `unsafe` flag is enabled.\n{what} shape: {before.shape}\n"
                         f"parametrized shape: {after.shape}")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to the originals, and the
    originals themselves (`original`, or `original0`, `original1`, ...)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the "
                                 f"dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            _store(self, "original", _set_into(original, new))
        else:
            if not isinstance(new, (tuple, list)) or not all(isinstance(t, Tensor) for t in new):
                raise ValueError(f"'right_inverse' must return a Tensor or a Sequence of tensors "
                                 f"(list, tuple...). Got {type(new).__name__}")
            for i, t in enumerate(new):
                t = t.detach().clone()
                if isinstance(original, Parameter):
                    t = Parameter(t, original.requires_grad)
                _store(self, f"original{i}", t)
        if not unsafe:
            _check_same("unparametrized", original, self(), unsafe)

    def _originals(self):
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def forward(self):
        mods = list(self)
        x = mods[0](*self._originals())
        for m in mods[1:]:
            x = m(x)
        return x

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor equals value."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement "
                                       f"right_inverse.")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                if value.shape != self.original.shape:
                    raise ValueError(f"The tensor returned by `right_inverse` has shape "
                                     f"{tuple(value.shape)} while `original` has shape "
                                     f"{tuple(self.original.shape)}")
                self.original.copy_(value)
            else:
                if not isinstance(value, (tuple, list)) or len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of tensors of "
                                     f"length {self.ntensors}. Got {type(value).__name__}")
                for t, v in zip(self._originals(), value):
                    t.copy_(v)


def is_parametrized(module, tensor_name=None):
    """True if module has a parametrization (on tensor_name, when given)."""
    ps = getattr(module, "parametrizations", None)
    if ps is None or not isinstance(ps, ModuleDict):
        return False
    return len(ps) > 0 if tensor_name is None else tensor_name in ps


def type_before_parametrizations(module):
    """The module's class before any parametrization swapped it."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def _inject_class(module):
    cls = type(module)

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict().")

    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__getstate__": getstate})


def _inject_property(module, name):
    def get(self):
        plist = self.parametrizations[name]
        if not _cache_depth:
            return plist()
        key = (id(self), name)
        if key not in _cache:
            _cache[key] = plist()
        return _cache[key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrize module.<tensor_name> by the Module parametrization (see the module
    docstring); a second call on the same name appends to its list. Returns module."""
    if not isinstance(parametrization, Module):
        raise TypeError(f"parametrization must be a Module, got {type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_same("unparametrized", y, x, unsafe)
            if hasattr(parametrization, "right_inverse"):
                z = parametrization.right_inverse(x)
                if not isinstance(z, Tensor):
                    raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                                     f"{type(z).__name__}")
                _check_same("right_inverse", y, z, unsafe)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._parameters or tensor_name in module._buffers:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo register_parametrization on tensor_name: the tensor becomes a parameter (or
    buffer) again, holding its parametrized value (leave_parametrized=True) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                original = _set_into(original, getattr(module, tensor_name))
    elif leave_parametrized:
        t = getattr(module, tensor_name)
        original = Parameter(t.detach(), t.requires_grad) if t.requires_grad else t.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that "
                         "is parametrized in terms of a sequence of tensors.")
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _store(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module
