"""parameters_to_vector / vector_to_parameters (torch.nn.utils')."""
from ..._math_reduce import cat
from ..._tensor import Tensor
from ...autograd import no_grad

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_param_device(param, old):
    """-1 for the CPU, else the CUDA index; TypeError on a second device."""
    dev = param.device.index if param.is_cuda else -1
    if old is not None and dev != old:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return dev


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor."""
    device = None
    vec = []
    for param in parameters:
        device = _check_param_device(param, device)
        vec.append(param.view(-1))
    return cat(vec)


def vector_to_parameters(vec, parameters):
    """Give each parameter the values of its slice of `vec`. torch re-points
    `param.data` at the slice; ampy has no `.data` assignment, so it copies
    the values in (the parameters stay the objects optimizers hold, and do
    not alias `vec` afterwards)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_param_device(param, device)
        n = param.numel()
        with no_grad():
            param.copy_(vec[pointer:pointer + n].view_as(param))
        pointer += n
