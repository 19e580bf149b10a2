"""``legacy-flat``: the pre-fix small-head verify path of vLLM PR #51171, kept as a specimen.

It flattens every verify token into its own decode row on every layer and, like the original,
does four device->host syncs per layer plus an allocation sized by a value read back:

1. ``qo_indptr[-1].item()``                      total verify tokens
2. ``repeat_interleave(arange(B), qo_lens)``      request of each token (tensor repeats)
3. ``repeat_interleave(seq_lens, qo_lens)``       KV length of each token's request
4. ``int(row_len.min())``                         min KV length fed to the split heuristic
+  ``torch.empty(total + 1)``                     flat indptr sized by (1)

Every one of them aborts CUDA/HIP graph capture. The numbers equal the torch reference: each token
row attends to its causal prefix, ``row_len = seq_len - qo_len + pos + 1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mlaprof.backends.base import VerifyInputs, check_shapes
from mlaprof.backends.torch_ref import row_slots
from mlaprof.scenario import LATENT

if TYPE_CHECKING:
    from mlaprof.metadata import VerifyMetadata


class LegacyFlat:
    name = "legacy-flat"
    capturable = False

    def __init__(self) -> None:
        self.last_min_row_len: int | None = None  # what the old code fed to the split heuristic

    def forward(
        self,
        inp: VerifyInputs,
        meta: VerifyMetadata,
        out: torch.Tensor,
        lse: torch.Tensor | None = None,
        num_splits: int = 1,
    ) -> None:
        check_shapes(inp, meta, out, lse)
        dev = inp.q_nope.device
        b, qlen, h, _ = inp.q_nope.shape
        qo_lens = meta.qo_lens.to(torch.int64)

        # token offsets as query_start_loc has them (padding rows hold 0 tokens; the kernel
        # qo_indptr is uniform under padding)
        starts = torch.cumsum(qo_lens, 0) - qo_lens
        total = int(qo_lens.sum().item())  # sync 1
        req_of_tok = torch.repeat_interleave(torch.arange(b, device=dev), qo_lens)  # sync 2
        seq_of_tok = torch.repeat_interleave(meta.seq_lens.to(torch.int64), qo_lens)  # sync 3
        pos = torch.arange(total, device=dev) - starts.index_select(0, req_of_tok)
        qo_of_tok = qo_lens.index_select(0, req_of_tok)
        row_len = seq_of_tok - qo_of_tok + pos + 1
        self.last_min_row_len = int(row_len.min()) if total else 0  # sync 4
        flat_indptr = torch.empty(total + 1, dtype=torch.int64, device=dev)  # sized by sync 1
        flat_indptr[0] = 0
        flat_indptr[1:] = torch.cumsum(row_len, 0)

        q = torch.cat([inp.q_nope, inp.q_pe], dim=-1).reshape(b * qlen, h, -1)
        tok_rows = req_of_tok * qlen + pos  # row of each flat token in the [B*qlen] view
        q_flat = q.index_select(0, tok_rows)  # [total, H, 576]
        o_flat = torch.empty(total, h, LATENT, dtype=torch.float32, device=dev)
        lse_flat = torch.empty(total, h, dtype=torch.float32, device=dev)
        # each flat token is its own decode row over its causal prefix; tokens of one request are
        # contiguous, so the host loop walks requests (host values the builder holds: no new sync)
        first = 0
        for r, (seq_len, n_q) in enumerate(zip(meta.host_seq_lens, meta.host_qo_lens, strict=True)):
            if n_q == 0:
                continue
            kv = inp.kv_c.index_select(0, row_slots(meta, r)).float()
            toks = slice(first, first + n_q)
            s = torch.einsum("thd,kd->thk", q_flat[toks].float(), kv) * inp.sm_scale
            j = torch.arange(seq_len, device=dev)
            s = s.masked_fill((j[None, :] >= row_len[toks, None])[:, None, :], float("-inf"))
            lse_flat[toks] = torch.logsumexp(s, dim=-1)
            o_flat[toks] = torch.einsum(
                "thk,kd->thd", torch.exp(s - lse_flat[toks, :, None]), kv[:, :LATENT]
            )
            first += n_q

        out.zero_()
        out.view(b * qlen, h, LATENT).index_copy_(0, tok_rows, o_flat.to(out.dtype))
        if lse is not None:
            lse.fill_(float("-inf"))
            lse.view(b * qlen, h).index_copy_(0, tok_rows, lse_flat)
        del flat_indptr  # the original handed it to the kernel; here it only shows the pattern
