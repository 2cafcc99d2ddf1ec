"""Devices: the `device` type, and the CUDA package as the lower layers see
it without importing it.

ampy.cuda sits above everything else (it installs CUDA forwards into the op
table), so the tensor, creation and nn layers reach it through the registry
below: ampy/__init__.py registers the package once it has loaded it.
"""

__all__ = ["device", "register_cuda", "cuda"]


class device:
    """A device: device("cpu"), device("cuda"), device("cuda:1"), device("cuda", 0)."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002 (torch's name)
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, str) and ":" in type:
            if index is not None:
                raise ValueError(f"device(): type string {type!r} already has an index")
            type, _, idx = type.partition(":")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}:{idx}'")
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {type}")
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type, self.index = type, index

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not
                                                 None else ")")

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


_registered = {}


def register_cuda(module):
    """Make `module` (ampy.cuda) the one lower layers call."""
    _registered["cuda"] = module


def cuda():
    """The ampy.cuda package (RuntimeError while it has not been loaded)."""
    mod = _registered.get("cuda")
    if mod is None:
        raise RuntimeError("ampy: CUDA is not available: the ampy.cuda package is not loaded")
    return mod

