"""ampy — automatic mixed precision for Python, written in C.

    import ampy
    from ampy.amp import autocast, GradScaler

The C core (ampy._C) does every loop over elements: fp16/bf16 casts, GEMM with
fp32 accumulation, inf/nan checks and unscaling, loss-scale updates and fused
optimizer steps with fp32 master weights. This package gives them the API of
torch.amp users: tensors, autograd, nn, optim, autocast and GradScaler.
"""

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
# The modules are imported bottom-up, in their layer order (docs/ARCHITECTURE.md):
# the op forwards first, then autograd (which attaches the backward rules to
# them), nn (its fused ops with their rules), amp and optim, the one module
# that sets Tensor methods, and last the CUDA package.
from . import _dtype
from ._dtype import (bfloat16, bool, double, dtype, finfo, float, float16, float32, float64,
                     get_default_dtype, half, iinfo, int, int32, int64, long, promote_types,
                     set_default_dtype, uint8)
from ._tensor import Size, Tensor, device
from ._creation import (Generator, arange, as_tensor, default_generator, empty, empty_like, eye,
                        from_numpy, full, full_like, get_rng_state, initial_seed, linspace,
                        manual_seed, ones, ones_like, rand, rand_like, randint, randn, randn_like,
                        seed, set_rng_state, tensor, zeros, zeros_like)

_C._init(Tensor, _dtype._BY_CODE, tuple(d._np for d in _dtype._BY_CODE), Size)

from . import _math, _math_reduce, _gemm  # noqa: E402  (the op forwards)
from ._math import *  # noqa: E402,F401,F403
from ._math_reduce import *  # noqa: E402,F401,F403
from ._gemm import *  # noqa: E402,F401,F403
from . import _sorting, _scatter, _tril, _tiling, _einsum  # noqa: E402  (tensor ops)
from ._sorting import *  # noqa: E402,F401,F403
from ._scatter import *  # noqa: E402,F401,F403
from ._tril import *  # noqa: E402,F401,F403
from ._tiling import *  # noqa: E402,F401,F403
from ._einsum import *  # noqa: E402,F401,F403
from . import _scatter_reduce  # noqa: E402
from ._scatter_reduce import *  # noqa: E402,F401,F403
from . import autograd  # noqa: E402  (the backward rules and the recording hook)
from .autograd import (enable_grad, inference_mode, is_grad_enabled, no_grad,  # noqa: E402
                       set_grad_enabled)
from . import nn  # noqa: E402
from . import amp  # noqa: E402
from .amp import (autocast, clear_autocast_cache, get_autocast_dtype,  # noqa: E402
                  is_autocast_cache_enabled, is_autocast_enabled, set_autocast_cache_enabled,
                  set_autocast_dtype, set_autocast_enabled)
from . import optim, serialization, _memory  # noqa: E402
from .serialization import *  # noqa: E402,F401,F403
from ._memory import *  # noqa: E402,F401,F403
from ._dlpack import from_dlpack  # noqa: E402
from . import _methods  # noqa: E402,F401  (sets the Tensor methods)
from . import cuda  # noqa: E402
from . import _devices  # noqa: E402

_devices.register_cuda(cuda)

__version__ = "0.1.0"


def set_num_threads(n):
    """Threads used by ampy's large loops (casts, element-wise ops, GEMM)."""
    _C.set_num_threads(n)


def get_num_threads():
    return _C.get_num_threads()


def is_tensor(obj):
    return isinstance(obj, Tensor)


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
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
    "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
    "clear_autocast_cache", "from_dlpack",
] + _math.__all__ + _math_reduce.__all__ + _gemm.__all__ + serialization.__all__ + \
    _memory.__all__
from . import utils  # noqa: E402  (ampy.utils.data)
from .nn._ops_rnn import gru_cell, lstm_cell, rnn_relu_cell, rnn_tanh_cell  # noqa: E402

__all__ += ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]
__all__ += _sorting.__all__ + _scatter.__all__ + _tril.__all__ + _tiling.__all__ + \
    _einsum.__all__
__all__ += _scatter_reduce.__all__


# ---- the names torch users type: constants, the old amp spellings, backends ----
import math as _pymath  # noqa: E402

from . import accelerator, backends, cpu  # noqa: E402
from ._tensor_format import is_floating_point  # noqa: E402
from .amp import GradScaler  # noqa: E402
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402

inf = _pymath.inf
nan = _pymath.nan
pi = _pymath.pi
e = _pymath.e
newaxis = None

__all__ += ["GradScaler", "inf", "nan", "pi", "e", "newaxis", "set_float32_matmul_precision",
            "get_float32_matmul_precision"]

# ---- torch.flatten's spelling
from .nn._functional_cnn import flatten  # noqa: E402

__all__ += ["flatten"]

# ---- torch.lstm (the functional stacked LSTM)
from .nn.modules.rnn import lstm  # noqa: E402

__all__ += ["lstm"]

# ---- random fills and more Tensor methods: the top-level names
from ._random_fills import bernoulli, normal, poisson, randint_like  # noqa: E402
from ._tensor_methods_more import (index_add, index_copy, index_fill, masked_scatter,  # noqa: E402
                                   ravel, repeat_interleave)

__all__ += ["bernoulli", "normal", "poisson", "randint_like", "repeat_interleave", "ravel",
            "index_add", "index_copy", "index_fill", "masked_scatter"]

# ---- torch's top-level tensor functions (ampy/_tensor_fns.py)
from . import _tensor_fns  # noqa: E402
from ._tensor_fns import *  # noqa: E402,F401,F403
from ._tensor_fns import __all__ as _fns_all  # noqa: E402

__all__ += _fns_all
