"""The metadata builder: from one scenario step, the real decode metadata of an MTP verify batch.

Everything data-dependent is computed here, on the host, *outside* any captured region: this is
the lesson of vLLM PR #51171 (syncs belong in the builder). As vLLM's AITER builder
(``AiterMLAMetadataBuilder._build_decode``, 0.32.0) does under uniform MTP padding (qlen > 1):
padding requests (query length 0 in ``query_start_loc``) have their KV length pinned to qlen
(``seq_lens_for_kernel``) and the kernel's ``qo_indptr`` is uniform, so padding rows count qlen
query tokens. A minimum over all rows therefore returns qlen: ``min_kv_seq_len`` is given in both
modes. With qlen 1 vLLM does not pad uniformly: padding rows keep KV length 0 and 0 query tokens.
``tests/e2e/test_vllm_differential.py`` compares every field with vLLM's own builder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from mlaprof.capture_sizes import DEFAULT_MODE, CapturePlan, piecewise_plan, plan_of_sizes
from mlaprof.errors import MlaprofError

if TYPE_CHECKING:
    from mlaprof.scenario import Scenario

NULL_PAGE = 0  # page 0 is reserved (vLLM's null block); padding rows point at it


@dataclass
class BatchShape:
    """What the engine decided for one step, before any tensor exists (host only)."""

    kv_lens: list[int]  # real requests' KV lengths (verify tokens included)
    qlen: int
    num_reqs: int  # rows the kernel sees (real + padding)
    capture_size: int | None  # padded token count, None when no graph size fits
    graph_mode: str

    @property
    def num_real(self) -> int:
        return len(self.kv_lens)

    @property
    def num_padding(self) -> int:
        return self.num_reqs - self.num_real

    @property
    def real_tokens(self) -> int:
        return self.num_real * self.qlen

    @property
    def padded_tokens(self) -> int:
        return self.num_reqs * self.qlen


def batch_shape(
    kv_lens: list[int],
    qlen: int,
    graph_mode: str,
    sizes: list[int] | CapturePlan,
    max_num_seqs: int | None = None,
) -> BatchShape:
    """The engine's dispatch of one uniform batch (:meth:`mlaprof.capture_sizes.CapturePlan.dispatch`)
    in the scenario's ``graph_mode``. FULL (vLLM's FULL_AND_PIECEWISE): a FULL decode graph pads
    the rows to its request count; a batch no FULL decode graph takes runs PIECEWISE on its real
    rows, one above the largest size eagerly. PIECEWISE: the smallest size holding the batch's
    tokens, on its real rows, and eagerly above the largest (:func:`piecewise_plan`, the same
    rule as whatif's). NONE: eagerly. ``sizes``: a token list (vLLM 0.32's V1 dispatcher) or a
    version's :class:`CapturePlan` of that mode."""
    real = len(kv_lens)
    if graph_mode == "NONE":
        return BatchShape(list(kv_lens), qlen, real, None, graph_mode)
    if graph_mode == "PIECEWISE":
        plan = _piecewise(sizes, qlen, max_num_seqs)
    else:
        plan = sizes if isinstance(sizes, CapturePlan) else plan_of_sizes(sizes, qlen, max_num_seqs)
    d = plan.dispatch(real)
    return BatchShape(list(kv_lens), qlen, d.rows, d.size, d.mode)


def _piecewise(sizes: list[int] | CapturePlan, qlen: int, max_num_seqs: int | None) -> CapturePlan:
    """The PIECEWISE-only plan ``sizes`` stands for; a FULL_AND_PIECEWISE plan is refused (its
    FULL decode graphs do not exist under cudagraph_mode PIECEWISE)."""
    if isinstance(sizes, CapturePlan):
        if sizes.mode == DEFAULT_MODE:
            raise MlaprofError(
                f"a {DEFAULT_MODE} capture plan cannot dispatch a PIECEWISE batch: give "
                "capture_sizes.piecewise_plan's"
            )
        return sizes
    if not sizes:  # no size: every batch eager
        return CapturePlan("vllm-0.32", qlen, max_num_seqs or 0, [], [], [], [], "V1", "NONE")
    return piecewise_plan("vllm-0.32", max_num_seqs or 1, qlen - 1, list(sizes), device="cpu")


@dataclass
class VerifyMetadata:
    """Decode metadata of one verify batch (tensors on one device) plus the host values the builder
    already holds. Shapes: B = num_reqs rows (padding included)."""

    qo_lens: torch.Tensor  # [B] int32: qlen for real rows, 0 for padding rows
    qo_indptr: torch.Tensor  # [B+1] int32, the kernel's: uniform under padding (rows * qlen)
    seq_lens: torch.Tensor  # [B] int32: KV length per row, padding pinned to qlen
    kv_indptr: torch.Tensor  # [B+1] int32: pages per row, cumulative
    kv_indices: torch.Tensor  # [total_pages] int32: page ids
    last_page_len: torch.Tensor  # [B] int32
    qlen: int
    page_size: int
    num_real_reqs: int
    min_kv_seq_len_all: int  # over every row: the bug (padding rows give qlen)
    min_kv_seq_len_active: int  # over rows with qo_len > 0: the fix
    min_kv_mode: str = "all-rows"
    host_seq_lens: list[int] = field(default_factory=list)
    host_qo_lens: list[int] = field(default_factory=list)
    host_kv_indptr: list[int] = field(default_factory=list)
    host_qo_indptr: list[int] = field(default_factory=list)
    host_query_start_loc: list[int] = field(default_factory=list)  # padding rows: 0 tokens

    @property
    def padded_uniform(self) -> bool:
        """vLLM's ``pad_uniform_mtp``: padding rows exist and qlen > 1."""
        return self.qlen > 1 and self.num_padding > 0

    def kernel_min_kv_seq_len(self, on_gluon_verify: bool) -> int:
        """What vLLM 0.32 puts in ``AiterMLADecodeMetadata.min_kv_seq_len``: on the gluon verify
        path the minimum over active rows (all rows when unpadded); elsewhere its default 1."""
        if not on_gluon_verify:
            return 1
        return self.min_kv_seq_len_active if self.padded_uniform else self.min_kv_seq_len_all

    @property
    def num_reqs(self) -> int:
        return len(self.host_seq_lens)

    @property
    def num_padding(self) -> int:
        return self.num_reqs - self.num_real_reqs

    @property
    def min_kv_seq_len(self) -> int:
        """The value the run passes to the kernel (depends on the scenario's min_kv_mode)."""
        if self.min_kv_mode == "active-rows":
            return self.min_kv_seq_len_active
        return self.min_kv_seq_len_all

    @property
    def max_seq_len(self) -> int:
        return max(self.host_seq_lens)

    @property
    def total_kv_real(self) -> int:
        return sum(s for s, q in zip(self.host_seq_lens, self.host_qo_lens, strict=True) if q > 0)

    @property
    def device(self) -> torch.device:
        return self.kv_indices.device

    def to(self, device: torch.device | str) -> VerifyMetadata:
        names = ("qo_lens", "qo_indptr", "seq_lens", "kv_indptr", "kv_indices", "last_page_len")
        out = VerifyMetadata(**{**self.__dict__})
        for n in names:
            setattr(out, n, getattr(self, n).to(device))
        return out


def pages_for(seq_len: int, page_size: int) -> int:
    return -(-seq_len // page_size)


def build_metadata(
    shape: BatchShape,
    page_size: int = 1,
    min_kv_mode: str = "all-rows",
    device: torch.device | str = "cpu",
    seed: int = 0,
    shuffle_pages: bool = True,
) -> VerifyMetadata:
    """Build the metadata of one verify batch. KV pages of real rows are drawn from a pool
    (shuffled, so kernels must really follow ``kv_indices``); page 0 is the null page."""
    if page_size < 1:
        raise MlaprofError(f"page size must be >= 1, got {page_size}")
    qlen = shape.qlen
    for n in shape.kv_lens:
        if n < qlen:
            raise MlaprofError(f"KV length {n} is shorter than the {qlen} verify tokens it holds")
    # vLLM pins padding rows to max_qo_len only under uniform MTP padding (qlen > 1); with qlen 1
    # they keep the engine's KV length 0
    pad_len = qlen if qlen > 1 else 0
    seq = list(shape.kv_lens) + [pad_len] * shape.num_padding
    qo = [qlen] * shape.num_real + [0] * shape.num_padding
    real_pages = sum(pages_for(s, page_size) for s in shape.kv_lens)
    g = torch.Generator().manual_seed(seed)
    pool = torch.arange(1, real_pages + 1, dtype=torch.int32)
    if shuffle_pages and real_pages > 1:
        pool = pool[torch.randperm(real_pages, generator=g)]
    indices: list[torch.Tensor] = []
    indptr = [0]
    used = 0
    for s, q in zip(seq, qo, strict=True):
        n = pages_for(s, page_size)
        if q > 0:
            indices.append(pool[used : used + n])
            used += n
        else:
            indices.append(torch.full((n,), NULL_PAGE, dtype=torch.int32))
        indptr.append(indptr[-1] + n)
    last = [s - (pages_for(s, page_size) - 1) * page_size for s in seq]
    query_start_loc = [0]
    for q in qo:
        query_start_loc.append(query_start_loc[-1] + q)
    uniform = qlen > 1 and shape.num_padding > 0
    qo_indptr = [i * qlen for i in range(len(qo) + 1)] if uniform else query_start_loc
    active = [s for s, q in zip(seq, qo, strict=True) if q > 0]

    def t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.int32, device=device)

    return VerifyMetadata(
        qo_lens=t(qo),
        qo_indptr=t(qo_indptr),
        seq_lens=t(seq),
        kv_indptr=t(indptr),
        kv_indices=torch.cat(indices).to(device),
        last_page_len=t(last),
        qlen=qlen,
        page_size=page_size,
        num_real_reqs=shape.num_real,
        min_kv_seq_len_all=min(seq),
        min_kv_seq_len_active=min(active) if active else qlen,
        min_kv_mode=min_kv_mode,
        host_seq_lens=seq,
        host_qo_lens=qo,
        host_kv_indptr=indptr,
        host_qo_indptr=qo_indptr,
        host_query_start_loc=query_start_loc,
    )


def kv_pool_pages(meta: VerifyMetadata) -> int:
    """Pages a KV pool needs to hold this batch (null page included)."""
    real = [i for i, q in enumerate(meta.host_qo_lens) if q > 0]
    return 1 + sum(meta.host_kv_indptr[i + 1] - meta.host_kv_indptr[i] for i in real)


def step_metadata(sc: Scenario, step: int, device: torch.device | str = "cpu") -> VerifyMetadata:
    shape = step_shape(sc, step)
    return build_metadata(shape, sc.page_size, sc.min_kv_mode, device, seed=sc.seed + step)


def step_shape(sc: Scenario, step: int) -> BatchShape:
    # under PIECEWISE the scenario's token list (Scenario.capture_sizes) is its PIECEWISE graphs
    plan = sc.capture_plan() if sc.graph_mode == "FULL" else sc.capture_sizes()
    return batch_shape(sc.step_kv_lens(step), sc.qlen, sc.graph_mode, plan, sc.max_num_seqs)
