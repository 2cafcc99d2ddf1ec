"""ampy.backends.mkldnn: oneDNN is not used by ampy (its CPU kernels are its
own), so is_available() is False; `enabled` is kept for scripts that set it."""

__all__ = ["is_available", "enabled"]

enabled = True


def is_available():
    return False
