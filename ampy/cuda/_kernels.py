"""CUDA forwards of the ops (filled in below)."""
