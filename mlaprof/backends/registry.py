"""The backends by name (apart from the contract in :mod:`mlaprof.backends.base`, which every
backend imports: the registry imports the backends, so it cannot live there)."""

from __future__ import annotations

from mlaprof.backends.base import VerifyBackend
from mlaprof.errors import MlaprofError


def get_backend(name: str) -> VerifyBackend:
    """Backends by name; heavy ones import lazily and explain what is missing."""
    if name == "torch":
        from mlaprof.backends.torch_ref import TorchReference

        return TorchReference()
    if name == "legacy-flat":
        from mlaprof.backends.legacy_flat import LegacyFlat

        return LegacyFlat()
    if name == "triton":
        from mlaprof.backends.triton_backend import TritonBackend

        return TritonBackend()
    if name == "aiter":
        from mlaprof.backends.aiter_backend import AiterBackend

        return AiterBackend()
    raise MlaprofError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")


BACKENDS = ("torch", "legacy-flat", "triton", "aiter")
