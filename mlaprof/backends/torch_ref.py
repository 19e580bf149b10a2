"""The torch reference of the 4-D MTP verify: exact, row by row, the oracle for every test.

It uses only host values the builder already has (no device->host sync), so it is also the
"native" path on the CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mlaprof.backends.base import VerifyInputs, check_shapes
from mlaprof.scenario import LATENT

if TYPE_CHECKING:
    from mlaprof.metadata import VerifyMetadata


def row_slots(meta: VerifyMetadata, row: int) -> torch.Tensor:
    """KV slot ids of ``row`` (length seq_lens[row]) from its pages."""
    start, end = meta.host_kv_indptr[row], meta.host_kv_indptr[row + 1]
    pages = meta.kv_indices[start:end].to(torch.int64)
    p = meta.page_size
    if p == 1:
        return pages
    offs = torch.arange(p, device=pages.device)
    return (pages[:, None] * p + offs[None, :]).reshape(-1)[: meta.host_seq_lens[row]]


def attend(
    q: torch.Tensor, kv: torch.Tensor, seq_len: int, n_q: int, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [n, H, 576], kv [L, 576] -> (o [n, H, 512], lse [n, H]) with the MTP causal bound."""
    n = q.shape[0]
    s = torch.einsum("qhd,kd->qhk", q.float(), kv.float()) * sm_scale
    j = torch.arange(seq_len, device=q.device)
    bound = seq_len - n_q + torch.arange(n, device=q.device) + 1  # keys visible per position
    s = s.masked_fill((j[None, :] >= bound[:, None])[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    o = torch.einsum("qhk,kd->qhd", p, kv[:, :LATENT].float())
    return o, lse


class TorchReference:
    name = "torch"
    capturable = True

    def forward(
        self,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None = None,
        num_splits: int = 1,  # the exact reference does not split
    ) -> None:
        check_shapes(inp, meta, out, lse)
        q = torch.cat([inp.q_nope, inp.q_pe], dim=-1)
        for b, (seq_len, n_q) in enumerate(zip(meta.host_seq_lens, meta.host_qo_lens, strict=True)):
            if n_q > 0:
                kv = inp.kv_c.index_select(0, row_slots(meta, b))
                o, l_ = attend(q[b, :n_q], kv, seq_len, n_q, inp.sm_scale)
                out[b, :n_q] = o.to(out.dtype)
                if lse is not None:
                    lse[b, :n_q] = l_
            if n_q < meta.qlen:
                out[b, n_q:] = 0
                if lse is not None:
                    lse[b, n_q:] = float("-inf")
