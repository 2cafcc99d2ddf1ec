"""ampy.backends.cudnn: torch's flag names with torch's defaults. ampy calls
no cuDNN, so none of these changes the math (float32 CUDA GEMMs follow
ampy.backends.cuda.matmul.allow_tf32); they exist so that scripts setting
them run unchanged."""

__all__ = ["is_available", "version", "enabled", "benchmark", "deterministic", "allow_tf32",
           "benchmark_limit"]

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    """False: ampy uses no cuDNN."""
    return False


def version():
    """None: no cuDNN is loaded."""
    return None
