"""The records a live vLLM engine's plugin writes (``mlaprof.integrations.vllm_recorder``), typed
as the analysis reads them: the worker's per-step rows (``step_rows``, event ``engine-step``) and
the scheduler's acceptance counters (``_finish_accept``, event ``spec-accept``). Only the fields
an analyzer reads are kept; a field the writer always writes is required (a record without it is
not the plugin's), one that older recordings or other step kinds leave out is ``None``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlaprof.errors import MlaprofError


def _need(d: dict[str, Any], key: str, what: str) -> Any:
    if key not in d:
        raise MlaprofError(f"an engine {what} record without {key!r}: not the vLLM plugin's")
    return d[key]


@dataclass(frozen=True, slots=True)
class EngineStep:
    """One engine step of one rank, as the worker recorded it (``vllm_recorder.step_rows``)."""

    rank: int
    step: int
    kind: str  # verify | decode | prefill | mixed
    backend: str
    builder: str
    heads: int
    graph_mode: str | None
    num_tokens: int
    padded_tokens: int | None
    verify_rows: int
    verify_draft_tokens: int
    verify_rows_as_prefill: int
    drafter_builds: int
    qo_lens: list[int] | None  # query rows per request (cut at the writer's MAX_LISTED_ROWS)
    draft_tokens: list[int] | None  # per request (cut at the writer's MAX_LISTED_ROWS)
    seq_lens_upper_bound: list[int] | None
    drafter_graphs: list[list[Any]]  # (mode, ...) per drafter step
    max_num_seqs: int | None
    max_model_len: int | None
    num_speculative_tokens: int | None
    spec_method: str | None

    @classmethod
    def of(cls, d: dict[str, Any]) -> EngineStep:
        """The step of one ``engine-step`` record (its ``data`` JSON, with the event's rank)."""
        need = {k: _need(d, k, "step") for k in (
            "rank", "step", "kind", "backend", "builder", "heads", "num_tokens", "verify_rows",
            "verify_draft_tokens", "verify_rows_as_prefill", "drafter_builds")}  # fmt: skip
        return cls(
            **need,
            graph_mode=d.get("graph_mode"),
            padded_tokens=d.get("padded_tokens"),
            qo_lens=d.get("qo_lens"),
            draft_tokens=d.get("draft_tokens"),
            seq_lens_upper_bound=d.get("seq_lens_upper_bound"),
            drafter_graphs=d.get("drafter_graphs") or [],
            max_num_seqs=d.get("max_num_seqs"),
            max_model_len=d.get("max_model_len"),
            num_speculative_tokens=d.get("num_speculative_tokens"),
            spec_method=d.get("spec_method"),
        )


@dataclass(frozen=True, slots=True)
class Acceptance:
    """One scheduler step's acceptance counters (``vllm_recorder._finish_accept``)."""

    rank: int
    verify_rows: int
    draft_tokens: int
    accepted_tokens: int

    @classmethod
    def of(cls, d: dict[str, Any]) -> Acceptance:
        return cls(**{k: _need(d, k, "acceptance") for k in (
            "rank", "verify_rows", "draft_tokens", "accepted_tokens")})  # fmt: skip
