"""ampy.cpu — torch.cpu's device-module names for the CPU (is_available,
device_count, current_device, synchronize) and the old ``ampy.cpu.amp``
autocast names."""
from . import amp

__all__ = ["amp", "is_available", "device_count", "current_device", "synchronize",
           "is_initialized"]


def is_available():
    """Always True: the CPU is always there."""
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def is_initialized():
    return True


def synchronize(device=None):
    """A no-op: CPU work is done when ampy's call returns."""
