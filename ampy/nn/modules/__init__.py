from .activation import GELU, Hardswish, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .container import ModuleList, Sequential
from .layers import Dropout, Embedding, Flatten, LayerNorm
from .linear import Identity, Linear
from .loss import CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module

__all__ = ["Module", "Linear", "Identity", "ReLU", "GELU", "SiLU", "Hardswish", "Tanh", "Sigmoid", "Softmax",
           "LogSoftmax", "Dropout", "LayerNorm", "Embedding", "Flatten", "Sequential",
           "ModuleList", "CrossEntropyLoss", "NLLLoss", "MSELoss"]

# ---- convolutional-network layers
from .batchnorm import BatchNorm1d, BatchNorm2d, GroupNorm  # noqa: E402
from .padding import (ConstantPad1d, ConstantPad2d, ReflectionPad1d,  # noqa: E402
                      ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, ZeroPad2d)
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: E402
from .upsampling import Dropout2d, Upsample  # noqa: E402

__all__ += ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "MaxPool2d", "AvgPool2d",
            "AdaptiveAvgPool2d", "ConstantPad1d", "ConstantPad2d", "ZeroPad2d", "ReflectionPad1d",
            "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "Dropout2d", "Upsample"]
from .batchnorm import BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: E402
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: E402
                      AdaptiveMaxPool2d, AvgPool1d, AvgPool3d, MaxPool1d, MaxPool3d)
from .upsampling import Dropout1d, Dropout3d  # noqa: E402
__all__ += ["MaxPool1d", "MaxPool3d", "AvgPool1d", "AvgPool3d", "AdaptiveAvgPool1d",
            "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "BatchNorm3d",
            "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Dropout1d", "Dropout3d"]
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d,  # noqa: E402
                      ConvTranspose2d, ConvTranspose3d)

__all__ += ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
            "ConvTranspose3d"]
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: E402

__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
from .attention import MultiheadAttention  # noqa: E402
from .normalization import RMSNorm  # noqa: E402
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: E402
                          TransformerEncoder, TransformerEncoderLayer)
__all__ += ["MultiheadAttention", "RMSNorm", "Transformer", "TransformerEncoder",
            "TransformerEncoderLayer", "TransformerDecoder", "TransformerDecoderLayer"]
# losses, dict and parameter containers
from .container_dict import ModuleDict, ParameterDict, ParameterList  # noqa: E402
from .loss import (BCELoss, BCEWithLogitsLoss, HuberLoss, KLDivLoss, L1Loss,  # noqa: E402
                   SmoothL1Loss)
__all__ += ["ModuleDict", "ParameterList", "ParameterDict", "BCELoss", "BCEWithLogitsLoss",
            "L1Loss", "SmoothL1Loss", "HuberLoss", "KLDivLoss"]

# ---- more activations (_functional_act.py)
from .activation import (  # noqa: E402
    LeakyReLU, ELU, SELU, CELU, Softplus, Mish, LogSigmoid, Hardtanh, ReLU6, Hardsigmoid, Softsign,
    Tanhshrink, Threshold, GLU, PReLU, Softmin, Softmax2d, Softshrink, Hardshrink, RReLU,
    AlphaDropout, FeatureAlphaDropout)
__all__ += ["LeakyReLU", "ELU", "SELU", "CELU", "Softplus", "Mish", "LogSigmoid", "Hardtanh",
            "ReLU6", "Hardsigmoid", "Softsign", "Tanhshrink", "Threshold", "GLU", "PReLU",
            "Softmin", "Softmax2d", "Softshrink", "Hardshrink", "RReLU", "AlphaDropout",
            "FeatureAlphaDropout"]

# ---- misc layers (_functional_misc.py)
from .misc_more import *  # noqa: E402,F401,F403
from .misc_more import __all__ as _misc_all  # noqa: E402
__all__ += _misc_all

# ---- more losses (_functional_loss_more.py)
from .loss_more import *  # noqa: E402,F401,F403
from .loss_more import __all__ as _loss_more_all  # noqa: E402
__all__ += _loss_more_all
