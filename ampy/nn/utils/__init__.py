"""ampy.nn.utils — torch.nn.utils' gradient clipping and parameter/vector
conversion (`from ampy.nn.utils import clip_grad_norm_`), and
nn.utils.rnn.pad_sequence; weight_norm / spectral_norm (the hook API) and
parametrize / parametrizations (the parametrization API)."""
from . import clip_grad, convert_parameters, rnn
from .clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,
                        get_total_norm)
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters"]

from . import parametrizations, parametrize  # noqa: E402
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402
from .weight_norm import remove_weight_norm, weight_norm  # noqa: E402

__all__ += ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
            "parametrize", "parametrizations"]
