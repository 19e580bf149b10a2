"""Ready-made gate targets: one verify layer of mlaprof's backends, to show (and test) the gate
on the pre-fix flattened path and the native 4-D path.

    mlaprof check mlaprof.gate.verify_case:legacy_flat --setup mlaprof.gate.verify_case:setup \\
        --shapes q=3x4x16          # 3 requests, qlen 4, 16 heads: exit 1, 4 syncs + 1 allocation
    mlaprof check mlaprof.gate.verify_case:native --setup mlaprof.gate.verify_case:setup \\
        --shapes q=3x4x16          # exit 0

``setup`` is the builder side (it runs outside the region, like vLLM's metadata builder): it pads
the batch to a FULL capture size and builds the metadata and inputs.
"""

from __future__ import annotations

from typing import Any

import torch

from mlaprof.backends.base import make_inputs
from mlaprof.backends.registry import get_backend
from mlaprof.capture_sizes import DEFAULT_RULE, capture_plan
from mlaprof.errors import MlaprofError
from mlaprof.metadata import VerifyMetadata, batch_shape, build_metadata
from mlaprof.scenario import LATENT


def setup(q: torch.Tensor, min_kv_mode: str = "active-rows") -> dict[str, Any]:
    """Metadata and inputs of a verify batch shaped like ``q`` [requests, qlen, heads, ...]."""
    if q.dim() < 3:
        raise MlaprofError(f"q must be [requests, qlen, heads, ...], got {tuple(q.shape)}")
    b, qlen, heads = (int(n) for n in q.shape[:3])
    kv = [64 + 61 * i + qlen for i in range(b)]
    shape = batch_shape(kv, qlen, "FULL", capture_plan(DEFAULT_RULE, 256, qlen - 1))
    meta = build_metadata(shape, page_size=16, min_kv_mode=min_kv_mode, device=q.device)
    inp = make_inputs(meta, heads, device=q.device)
    out = torch.empty(meta.num_reqs, qlen, heads, LATENT, device=q.device)
    return {"inp": inp, "meta": meta, "out": out}


def legacy_flat(inp: Any, meta: VerifyMetadata, out: torch.Tensor) -> None:
    """The pre-fix path (vLLM PR #51171): 4 syncs and an allocation per layer."""
    get_backend("legacy-flat").forward(inp, meta, out)


def native(inp: Any, meta: VerifyMetadata, out: torch.Tensor) -> None:
    """The native 4-D entry (the torch reference backend): nothing data-dependent."""
    get_backend("torch").forward(inp, meta, out)


def builder(min_kv_mode: str) -> Any:
    """mlaprof's metadata builder as a split-gate builder (``kv_lens, qlen, num_reqs``)."""
    from mlaprof.metadata import BatchShape

    def build(kv_lens: list[int], qlen: int, num_reqs: int) -> VerifyMetadata:
        shape = BatchShape(list(kv_lens), qlen, num_reqs, num_reqs * qlen, "FULL")
        return build_metadata(shape, page_size=4096, min_kv_mode=min_kv_mode, shuffle_pages=False)

    return build
