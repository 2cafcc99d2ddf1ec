from .activation import GELU, Hardswish, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .container import ModuleList, Sequential
from .layers import Dropout, Embedding, Flatten, LayerNorm
from .linear import Identity, Linear
from .loss import CrossEntropyLoss, MSELoss, NLLLoss
from .module import Module

__all__ = ["Module", "Linear", "Identity", "ReLU", "GELU", "SiLU", "Hardswish", "Tanh", "Sigmoid", "Softmax",
           "LogSoftmax", "Dropout", "LayerNorm", "Embedding", "Flatten", "Sequential",
           "ModuleList", "CrossEntropyLoss", "NLLLoss", "MSELoss"]
from .attention import MultiheadAttention  # noqa: E402
from .normalization import RMSNorm  # noqa: E402
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: E402
                          TransformerEncoder, TransformerEncoderLayer)
__all__ += ["MultiheadAttention", "RMSNorm", "Transformer", "TransformerEncoder",
            "TransformerEncoderLayer", "TransformerDecoder", "TransformerDecoderLayer"]
