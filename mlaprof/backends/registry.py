"""The backends by name (apart from the contract in :mod:`mlaprof.backends.base`, which every
backend imports: the registry imports the backends, so it cannot live there)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.errors import MlaprofError

if TYPE_CHECKING:
    import torch

    from mlaprof.backends.base import VerifyBackend


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


# backends whose kernel decides S on the device, and the policy that describes that kernel
DEVICE_SPLIT_POLICY = {"triton": "mlaprof-triton"}


def device_decides_splits(backend_name: str, policy: str) -> bool:
    """Whether ``backend_name`` run under ``policy`` picks S per row on the device (so the S a
    graph holds is only the grid's cap): the backend's own policy, marked ``on_device``."""
    from mlaprof.splits.policies import POLICIES

    p = POLICIES.get(policy)
    return bool(p and p.on_device and DEVICE_SPLIT_POLICY.get(backend_name) == policy)


def use_device_splits(backend: object, backend_name: str, policy: str) -> bool:
    """Have the backend's kernel decide S per row on the device where the run's split policy
    says it does (:func:`device_decides_splits`); returns whether it now does."""
    on = device_decides_splits(backend_name, policy) and hasattr(backend, "device_splits")
    if on:
        backend.device_splits = True  # type: ignore[attr-defined]
    return on


def split_arch(backend_name: str, device: torch.device) -> str | None:
    """The GPU architecture the split policy is told for a run of ``backend_name`` on
    ``device``: only the triton backend's kernel changes shape with it (decode on sm_90 runs
    its 64-row Gluon kernel: ``policies.wide_programs``); None for the others, so they are never
    given the S of a 64-row kernel they do not run (and Gluon is never imported for them)."""
    if backend_name != "triton":
        return None
    from mlaprof.backends.triton_backend import split_arch as triton_arch

    return triton_arch(device)
