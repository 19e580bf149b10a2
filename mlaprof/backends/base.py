"""The verify-backend contract shared by every implementation (torch reference, legacy-flat,
triton, aiter).

Inputs (the 4-D MTP layout of ``mla_gluon``): ``q_nope [B, qlen, H, 512]``, ``q_pe [B, qlen, H, 64]``,
a flat latent KV pool ``kv_c [pages * page_size, 576]`` (latent 512 + rope 64; the value is the
latent part), and :class:`~mlaprof.metadata.VerifyMetadata`. A backend writes
``out [B, qlen, H, 512]`` and, when given, ``lse [B, qlen, H]`` (fp32, natural log).

Semantics: for row b with KV length L = seq_lens[b] and query length n = qo_lens[b], query position
i < n attends to KV positions j < L - n + i + 1 (the causal bound applied in-kernel by aiter).
Positions i >= n (padding rows have n = 0) produce ``out = 0`` and ``lse = -inf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from mlaprof.errors import MlaprofError
from mlaprof.scenario import KV_DIM, LATENT, ROPE

if TYPE_CHECKING:
    from mlaprof.metadata import VerifyMetadata


@dataclass
class VerifyInputs:
    q_nope: torch.Tensor
    q_pe: torch.Tensor
    kv_c: torch.Tensor
    sm_scale: float


class VerifyBackend(Protocol):
    name: str
    # whether the backend is meant to be graph-capturable (the checker verifies the claim)
    capturable: bool

    def forward(
        self,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None = None,
        num_splits: int = 1,
    ) -> None: ...


def check_shapes(
    inp: VerifyInputs, meta: VerifyMetadata, out: torch.Tensor, lse: torch.Tensor | None
) -> None:
    """Shape and dtype checks every backend runs first (raise, never assert)."""
    qn, qp, kv = inp.q_nope, inp.q_pe, inp.kv_c
    if qn.dim() != 4 or qn.shape[-1] != LATENT:
        raise MlaprofError(f"q_nope must be [B, qlen, H, {LATENT}], got {tuple(qn.shape)}")
    b, qlen, h, _ = qn.shape
    if tuple(qp.shape) != (b, qlen, h, ROPE):
        raise MlaprofError(f"q_pe must be [{b}, {qlen}, {h}, {ROPE}], got {tuple(qp.shape)}")
    if kv.dim() != 2 or kv.shape[1] != KV_DIM:
        raise MlaprofError(f"kv_c must be [N, {KV_DIM}], got {tuple(kv.shape)}")
    if b != meta.num_reqs or qlen != meta.qlen:
        raise MlaprofError(
            f"q has {b} rows x qlen {qlen} but metadata has {meta.num_reqs} rows x qlen {meta.qlen}"
        )
    if tuple(out.shape) != (b, qlen, h, LATENT):
        raise MlaprofError(f"out must be [{b}, {qlen}, {h}, {LATENT}], got {tuple(out.shape)}")
    if lse is not None and tuple(lse.shape) != (b, qlen, h):
        raise MlaprofError(f"lse must be [{b}, {qlen}, {h}], got {tuple(lse.shape)}")
    if kv.shape[0] < meta.page_size:
        raise MlaprofError(f"kv_c holds {kv.shape[0]} slots, less than one page")


def make_inputs(
    meta: VerifyMetadata,
    heads: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    seed: int = 0,
    extra_pages: int = 0,
) -> VerifyInputs:
    """Random inputs for ``meta`` (scaled like real activations: unit-variance q, small kv)."""
    from mlaprof.metadata import kv_pool_pages

    g = torch.Generator(device="cpu").manual_seed(seed)
    b, qlen = meta.num_reqs, meta.qlen
    q = torch.randn(b, qlen, heads, KV_DIM, generator=g)
    slots = (kv_pool_pages(meta) + extra_pages) * meta.page_size
    kv = torch.randn(slots, KV_DIM, generator=g) * 0.5
    return VerifyInputs(
        q_nope=q[..., :LATENT].contiguous().to(device=device, dtype=dtype),
        q_pe=q[..., LATENT:].contiguous().to(device=device, dtype=dtype),
        kv_c=kv.to(device=device, dtype=dtype),
        sm_scale=KV_DIM**-0.5,
    )


class InputPool:
    """Random inputs for many steps, drawn once: each step's q and KV pool are slices of tensors
    drawn for the largest step seen so far (drawn again, bigger, only when a step outgrows them).

    A CPU run needs inputs of the right shapes for its syncs, splits and timing, not new values
    every step; drawing a KV pool per step cost a CPU step more than its attention did."""

    def __init__(self, heads: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> None:
        self.heads, self.dtype, self.seed = heads, dtype, seed
        self._q: torch.Tensor | None = None  # [rows, qlen, heads, KV_DIM]
        self._kv: torch.Tensor | None = None  # [slots, KV_DIM]

    def inputs(self, meta: VerifyMetadata) -> VerifyInputs:
        from mlaprof.metadata import kv_pool_pages

        b, qlen = meta.num_reqs, meta.qlen
        slots = kv_pool_pages(meta) * meta.page_size
        q, kv = self._q, self._kv
        if q is None or kv is None or q.shape[0] < b or q.shape[1] != qlen or kv.shape[0] < slots:
            g = torch.Generator(device="cpu").manual_seed(self.seed)
            rows = max(b, q.shape[0] if q is not None and q.shape[1] == qlen else 0)
            # half again as many slots: a decode's KV grows every step, and must not redraw
            slots_drawn = max(slots + slots // 2, kv.shape[0] if kv is not None else 0)
            q = torch.randn(rows, qlen, self.heads, KV_DIM, generator=g).to(self.dtype)
            # scaled in place: the same values without a second pool-sized tensor
            kv = torch.randn(slots_drawn, KV_DIM, generator=g).mul_(0.5).to(self.dtype)
            self._q, self._kv = q, kv
        return VerifyInputs(
            q_nope=q[:b, ..., :LATENT].contiguous(),
            q_pe=q[:b, ..., LATENT:].contiguous(),
            kv_c=kv[:slots],
            sm_scale=KV_DIM**-0.5,
        )
