"""Persistent verify buffers the AITER MLA builder reserves per rank (the third finding of vLLM PR #51171).

- 4-D path (vLLM 0.32.0 ``AiterMLAMetadataBuilder.__init__``, read here and checked by the
  differential test): ``paged_kv_indices`` int32 of ``max_num_seqs * max_model_len`` entries (the
  kernel's flat view has one page per token), plus ``[max_num_seqs + 1]`` indptrs.
- Legacy flat path (before vLLM PR #51171): on top of that, ``flat_kv_indptr`` int32
  ``[max_num_seqs * qlen + 1]`` and ``flat_kv_indices``, one int32 per (verify token, KV token) it
  may attend. Sized from ``max_model_len`` (``max_num_seqs * qlen * max_model_len``) because
  workers lacked ``kv_cache_size_tokens``; sized by the KV cache it needs at most
  ``qlen * kv_cache_tokens`` (each cached token is attended by at most qlen verify rows).

The seed reports 295.3 MiB reserved vs 46.6 MiB needed but not the configuration behind them, so
the flat-buffer formula is this model's (UNVERIFIED): at qlen 4 the PR's figures correspond to
``max_num_seqs * max_model_len`` = 19.35M token slots and a KV cache of 3.05M tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

INT32 = 4
MIB = 1 << 20
SOURCE_4D = "vLLM 0.32.0 AiterMLAMetadataBuilder.__init__ (verified by the differential test)"
# 0.33.0 and 0.34.0 (read from their wheels) size paged_kv_indices as 0.32 does, and add
# max_num_seqs * num_speculative_tokens entries under adaptive verification (off by default)
SOURCE_4D_READ = (
    "vLLM {v} AiterMLAMetadataBuilder.__init__ (read from its wheel: paged_kv_indices sized as "
    "0.32.0's; speculative_config.enable_adaptive_verification, off by default, adds "
    "max_num_seqs * num_speculative_tokens entries: not modelled)"
)
SOURCE_FLAT = "vLLM pre-#51171 flat verify buffers (formula modelled from vLLM PR #51171's figures: UNVERIFIED)"


def source_4d(version: str | None) -> str:
    """Where the 4-D row's formula was read for the route's vLLM ``version`` (None: no route
    modelled, or the release before the fix: the 0.32.0 differential test's)."""
    if version in ("0.33.0", "0.34.0"):
        return SOURCE_4D_READ.format(v=version)
    return SOURCE_4D


def paged_kv_indices_bytes(max_num_seqs: int, max_model_len: int) -> int:
    """vLLM's persistent ``paged_kv_indices``: max_num_seqs * max_model_len int32 entries."""
    return max_num_seqs * max_model_len * INT32


def flat_buffers_bytes(max_num_seqs: int, qlen: int, capacity_tokens: int) -> int:
    """Legacy ``flat_kv_indptr`` + ``flat_kv_indices`` for ``capacity_tokens`` KV slots."""
    return (max_num_seqs * qlen + 1) * INT32 + qlen * capacity_tokens * INT32


@dataclass(frozen=True)
class Reservation:
    path: str  # "4-D" | "legacy-flat"
    sized_by: str  # "max_model_len" | "kv-cache"
    bytes: int | None  # None: the input it needs is unknown
    source: str
    provenance: str  # "modelled for <scenario>" + what it needs

    def to_dict(self) -> dict:
        return asdict(self)


def reservations(
    max_num_seqs: int,
    max_model_len: int,
    qlen: int,
    kv_cache_tokens: int | None,
    scenario: str,
    version: str | None = None,
) -> list[Reservation]:
    """Per configuration: the 4-D path, and the legacy path sized by max_model_len and by the
    KV cache (unknown without ``kv_cache_tokens``); ``version``: the route's vLLM release, which
    the 4-D row's source names (:func:`source_4d`)."""
    common = paged_kv_indices_bytes(max_num_seqs, max_model_len) + 2 * (max_num_seqs + 1) * INT32
    prov = f"modelled for scenario {scenario!r}"
    by_kv = (
        None
        if not kv_cache_tokens
        else common + flat_buffers_bytes(max_num_seqs, qlen, kv_cache_tokens)
    )
    out = [
        Reservation("4-D", "max_model_len", common, source_4d(version), prov),
        Reservation(
            "legacy-flat",
            "max_model_len",
            common + flat_buffers_bytes(max_num_seqs, qlen, max_num_seqs * max_model_len),
            SOURCE_FLAT,
            prov,
        ),
        Reservation(
            "legacy-flat",
            "kv-cache",
            by_kv,
            SOURCE_FLAT,
            prov if by_kv is not None else f"{prov}: unknown without kv_cache_tokens",
        ),
    ]
    return out
