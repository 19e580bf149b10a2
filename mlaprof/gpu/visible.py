"""Is a CUDA (or ROCm) GPU there at all? Asked before ``run --device cuda`` creates a run folder.

Importing torch takes seconds; the device files the drivers create answer in microseconds. Only
a certain "no" is answered from them (Linux without a device node, or the visibility variables
emptied); anything else falls through to ``torch.cuda.is_available()``, still before the run."""

from __future__ import annotations

import glob
import os
import sys

from mlaprof.errors import MlaprofError

NO_GPU = "--device cuda needs a CUDA (or ROCm) GPU; none is visible"
# nodes the kernel drivers create: NVIDIA's per-GPU /dev/nvidiaN, AMD's /dev/kfd (ROCm compute),
# WSL's /dev/dxg (a GPU paravirtualised for CUDA/ROCm under Windows)
DEVICE_NODES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")
# an empty value or "-1" hides every GPU from the CUDA/HIP runtimes (torch then sees none)
HIDING = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def no_gpu_reason(root: str = "") -> str | None:
    """Why no GPU can be visible, when that is certain without a driver call; else None (look
    further). ``root`` prefixes the device paths (tests)."""
    for var in HIDING:
        v = os.environ.get(var)
        if v is not None and v.strip() in ("", "-1"):
            return f"{NO_GPU} ({var}={v!r} hides every GPU)"
    if not sys.platform.startswith("linux"):
        return None  # no device files to look at: the runtime answers
    if not any(glob.glob(root + pattern) for pattern in DEVICE_NODES):
        return f"{NO_GPU} (no GPU device node: /dev/nvidia*, /dev/kfd or /dev/dxg)"
    return None


def check_cuda_visible() -> None:
    """Raise the one-line error when no GPU is visible: from the device files when they tell,
    else from torch (which the GPU run imports next anyway)."""
    reason = no_gpu_reason()
    if reason:
        raise MlaprofError(reason)
    import torch

    if not torch.cuda.is_available():
        raise MlaprofError(NO_GPU)
