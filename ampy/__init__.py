"""ampy — automatic mixed precision for Python, written in C.

    import ampy
    from ampy.amp import autocast, GradScaler

The C core (ampy._C) does every loop over elements: fp16/bf16 casts, GEMM with
fp32 accumulation, inf/nan checks and unscaling, loss-scale updates and fused
optimizer steps with fp32 master weights. This package gives them the API of
torch.amp users: tensors, autograd, nn, optim, autocast and GradScaler.
"""
import importlib as _importlib


def _missing_extension(err):
    """ImportError that says why ampy._C is missing (None: it is not missing,
    the original error is the one to show)."""
    import os
    from importlib.machinery import EXTENSION_SUFFIXES
    here = os.path.dirname(os.path.abspath(__file__))
    if any(os.path.exists(os.path.join(here, "_C" + suf)) for suf in EXTENSION_SUFFIXES):
        return None
    other = sorted(f for f in os.listdir(here) if f.startswith("_C.") and f.endswith((".so",
                                                                                      ".pyd")))
    built = f" (only {', '.join(other)}, built for another Python, is there)" if other else ""
    root = os.path.dirname(here)
    if os.path.isfile(os.path.join(root, "setup.py")) and os.path.isdir(os.path.join(root, "csrc")):
        return ImportError(
            f"ampy is being imported from its source tree ({root}), where its C extension "
            f"(ampy._C) has not been built for this Python{built}; an installed ampy, if any, "
            f"is hidden because this directory comes first on sys.path. Either build in place "
            f"(`make build`, or `python setup.py build_ext --inplace` in {root}), or run "
            f"Python from another directory to use the installed ampy.", name="ampy._C",
            path=here)
    return ImportError(f"ampy's C extension (ampy._C) is missing from {here}{built}: the "
                       f"install is incomplete or for another Python; reinstall ampy (`pip "
                       f"install --force-reinstall ampy`). ({err})", name="ampy._C", path=here)


try:
    from . import _C
except ImportError as _err:
    _why = _missing_extension(_err)
    if _why is None:
        raise
    raise _why from None
from . import _dtype
from ._dtype import (bfloat16, bool, double, dtype, finfo, float, float16, float32, float64,
                     get_default_dtype, half, iinfo, int, int32, int64, long, promote_types,
                     set_default_dtype, uint8)
from ._tensor import Size, Tensor, device
from ._creation import (Generator, arange, as_tensor, default_generator, empty, empty_like, eye,
                        from_numpy, full, full_like, get_rng_state, initial_seed, linspace,
                        manual_seed, ones, ones_like, rand, rand_like, randint, randn, randn_like,
                        seed, set_rng_state, tensor, zeros, zeros_like)
from ._dispatch import ops as _ops_table

__version__ = "0.1.0"

_C._init(Tensor, _dtype._BY_CODE, tuple(d._np for d in _dtype._BY_CODE), Size)


def set_num_threads(n):
    """Threads used by ampy's large loops (casts, element-wise ops, GEMM)."""
    _C.set_num_threads(n)


def get_num_threads():
    return _C.get_num_threads()


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(t):
    return t.dtype.is_floating_point


def numel(t):
    return t.numel()


__all__ = [
    "Tensor", "Size", "device", "dtype", "float32", "float16", "bfloat16", "float64", "int64",
    "int32", "uint8", "bool", "half", "float", "double", "long", "int", "finfo", "iinfo",
    "promote_types", "get_default_dtype", "set_default_dtype",
    "tensor", "as_tensor", "from_numpy", "empty", "zeros", "ones", "full", "arange", "linspace",
    "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand", "randn", "randint",
    "rand_like", "randn_like", "manual_seed", "seed", "initial_seed", "get_rng_state",
    "set_rng_state", "Generator", "default_generator", "set_num_threads", "get_num_threads",
    "is_tensor", "is_floating_point", "numel",
]


def _reexport(modname):
    """Import ampy.<modname> and re-export its __all__ (skipped while the
    module does not exist yet in this checkout)."""
    try:
        mod = _importlib.import_module("." + modname, __name__)
    except ModuleNotFoundError as e:
        if e.name == f"{__name__}.{modname}":
            return None
        raise
    for name in getattr(mod, "__all__", ()):
        globals()[name] = getattr(mod, name)
        __all__.append(name)
    return mod


# math (element-wise, reductions, cat/stack), GEMM, and the subpackages
for _m in ("_math", "_gemm", "serialization", "_memory"):
    _reexport(_m)
for _m in ("autograd", "amp", "nn", "optim", "cuda"):
    try:
        globals()[_m] = _importlib.import_module("." + _m, __name__)
    except ModuleNotFoundError as _e:
        if _e.name != f"{__name__}.{_m}":
            raise
del _m

if "autograd" in globals():
    from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
    __all__ += ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]
