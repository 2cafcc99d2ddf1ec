"""ampy.nn — torch.nn's Module, Parameter, layers, losses, init and functional.

The numerics of the layers are C kernels: layer_norm, cross_entropy,
nll_loss, embedding, dropout and mse_loss are fused kernels of csrc/nn.c with
their backward (ampy/nn/_ops.py registers them in the op table); linear uses
ampy's GEMM and the activations ampy's element-wise math.
"""
from . import _ops  # noqa: F401  (registers the fused ops and their backward rules)
from . import functional, init
from .modules import (GELU, CrossEntropyLoss, Hardswish, Dropout, Embedding, Flatten, Identity, LayerNorm,
                      Linear, LogSoftmax, Module, ModuleList, MSELoss, NLLLoss, ReLU, Sequential,
                      Sigmoid, SiLU, Softmax, Tanh)
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Linear", "Identity", "ReLU", "GELU", "SiLU", "Hardswish", "Tanh",
           "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "LayerNorm", "Embedding", "Flatten",
           "Sequential", "ModuleList", "CrossEntropyLoss", "NLLLoss", "MSELoss", "functional",
           "init"]

# ---- convolutional-network ops and layers
from . import _ops_cnn  # noqa: E402,F401  (registers the cnn ops and their backward rules)
from .modules import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d,  # noqa: E402
                      ConstantPad1d, ConstantPad2d, Dropout2d, GroupNorm, MaxPool2d,
                      ReflectionPad1d, ReflectionPad2d, ReplicationPad1d, ReplicationPad2d,
                      Upsample, ZeroPad2d)

__all__ += ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "MaxPool2d", "AvgPool2d",
            "AdaptiveAvgPool2d", "ConstantPad1d", "ConstantPad2d", "ZeroPad2d", "ReflectionPad1d",
            "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "Dropout2d", "Upsample"]
from .modules import (AdaptiveAvgPool1d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: E402
                      AdaptiveMaxPool2d, AvgPool1d, AvgPool3d, BatchNorm3d, Dropout1d,
                      Dropout3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, MaxPool1d,
                      MaxPool3d)
__all__ += ["MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d",
            "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "BatchNorm3d",
            "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Dropout1d", "Dropout3d"]
from .modules import (Conv1d, Conv2d, Conv3d, ConvTranspose1d,  # noqa: E402
                      ConvTranspose2d, ConvTranspose3d)

__all__ += ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
            "ConvTranspose3d"]
from . import _ops_rnn  # noqa: F401,E402  (registers the fused recurrent cells)
from .modules import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell,  # noqa: E402
                      RNNCellBase)

__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
from .modules import (MultiheadAttention, RMSNorm, Transformer, TransformerDecoder,  # noqa: E402
                      TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
__all__ += ["MultiheadAttention", "RMSNorm", "Transformer", "TransformerEncoder",
            "TransformerEncoderLayer", "TransformerDecoder", "TransformerDecoderLayer"]
# losses, dict and parameter containers, torch.nn.utils
from .modules import (BCELoss, BCEWithLogitsLoss, HuberLoss, KLDivLoss, L1Loss,  # noqa: E402
                      ModuleDict, ParameterDict, ParameterList, SmoothL1Loss)
from . import utils  # noqa: E402
__all__ += ["ModuleDict", "ParameterList", "ParameterDict", "BCELoss", "BCEWithLogitsLoss",
            "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "utils"]

# ---- more activations (_functional_act.py)
from .modules import (  # noqa: E402
    LeakyReLU, ELU, SELU, CELU, Softplus, Mish, LogSigmoid, Hardtanh, ReLU6, Hardsigmoid, Softsign,
    Tanhshrink, Threshold, GLU, PReLU, Softmin, Softmax2d, Softshrink, Hardshrink, RReLU,
    AlphaDropout, FeatureAlphaDropout)
__all__ += ["LeakyReLU", "ELU", "SELU", "CELU", "Softplus", "Mish", "LogSigmoid", "Hardtanh",
            "ReLU6", "Hardsigmoid", "Softsign", "Tanhshrink", "Threshold", "GLU", "PReLU",
            "Softmin", "Softmax2d", "Softshrink", "Hardshrink", "RReLU", "AlphaDropout",
            "FeatureAlphaDropout"]

# ---- misc layers (_functional_misc.py)
from .modules.misc_more import *  # noqa: E402,F401,F403
from .modules.misc_more import __all__ as _misc_all  # noqa: E402
__all__ += _misc_all

# ---- more losses (_functional_loss_more.py)
from .modules.loss_more import *  # noqa: E402,F401,F403
from .modules.loss_more import __all__ as _loss_more_all  # noqa: E402
__all__ += _loss_more_all
