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
from .modules import Conv1d, Conv2d, ConvTranspose2d  # noqa: E402

__all__ += ["Conv1d", "Conv2d", "ConvTranspose2d"]
