"""A toy attention decode for `mlaprof check` (run from the repository's root):

    mlaprof check examples.toy_attn:decode --shapes q=8x4x16x576       # exit 0: graph-safe
    mlaprof check examples.toy_attn:decode_host_len --shapes q=8x4x16x576   # exit 1: a sync

Your own function goes where ``examples.toy_attn:decode`` is (``mypkg.attn:decode``): mlaprof
imports it from the current folder, builds the tensors ``--shapes`` names and runs it with the
sync checker watching, as a CUDA/HIP graph capture would.
"""

from __future__ import annotations

import torch


def decode(q: torch.Tensor, kv: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax attention of q over kv (or over q itself): device work only, no host read."""
    keys = q.flatten(0, -2) if kv is None else kv
    scores = q @ keys.transpose(-1, -2) * q.shape[-1] ** -0.5
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ keys


def decode_host_len(q: torch.Tensor, kv: torch.Tensor | None = None) -> torch.Tensor:
    """The same, after reading a length on the host (``.item()``): a device->host sync, which
    breaks graph capture."""
    n = int((q.abs().sum(-1) > 0).sum().item())
    return decode(q[..., :n, :] if n else q, kv)
