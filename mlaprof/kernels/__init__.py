"""Triton kernels (import lazily: triton is optional)."""
