"""The third finding of vLLM PR #51171: persistent verify buffers per configuration (modelled), shown beside
capture memory. The model lives in mlaprof.splits.reservation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.capture import human_bytes
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import Reservation
from mlaprof.analysis.typed_json import to_json
from mlaprof.splits.reservation import reservations
from mlaprof.splits.routing import OFF_AITER_PATHS

if TYPE_CHECKING:
    from mlaprof.analysis.sections import Route, Scenario


def reservation_summary(scenario: Scenario, route: Route | None = None) -> list[Reservation]:
    """Per path and sizing rule, the bytes vLLM's AITER MLA builder reserves; [] without a
    scenario, and where the run's ``route`` is one vLLM's CUDA platform takes (the AITER
    backend, and its buffers, are not there: the route line says which backend runs)."""
    n, mml = scenario.max_num_seqs, scenario.max_model_len
    if n is None or mml is None or scenario.qlen is None:
        return []
    if route is not None and route.path in OFF_AITER_PATHS:
        return []
    kv = scenario.kv_cache_tokens or None
    name = "?" if scenario.name is None else scenario.name
    version = None if route is None else route.version
    rows = reservations(int(n), int(mml), scenario.qlen, kv, name, version)
    return [Reservation(**r.to_dict()) for r in rows]


def reservation_findings(rows: list[Reservation]) -> list[Finding]:
    by = {(r.path, r.sized_by): r for r in rows}
    legacy, need = by.get(("legacy-flat", "max_model_len")), by.get(("legacy-flat", "kv-cache"))
    four_d = by.get(("4-D", "max_model_len"))
    if not legacy or not four_d:
        return []
    needed = (
        f"{human_bytes(need.bytes)} sized by the KV cache"
        if need and need.bytes is not None
        else "sized by the KV cache: unknown (set kv_cache_tokens)"
    )
    return [
        Finding(
            kind="reservation",
            severity="info",
            title=(
                f"verify buffers per rank (modelled): legacy flat path {human_bytes(legacy.bytes)}"
                f" sized by max_model_len vs {needed}; 4-D path {human_bytes(four_d.bytes)}"
            ),
            evidence=(
                "the pre-fix flat verify buffers were sized from max_model_len because workers "
                f"lacked kv_cache_size_tokens (vLLM PR #51171: 295.3 MiB vs 46.6 MiB). {legacy.source}; "
                f"{four_d.source}"
            ),
            fix="keep the native 4-D verify path (no flat buffers); size what remains by the KV "
            "cache, not max_num_seqs * max_model_len",
            data={"reservations": to_json(rows)},
        )
    ]
