"""The speculator's own graphs under vLLM's model runner V2 (vLLM 0.34, ``vllm/v1/worker/gpu/``),
kept apart from the target's: a drafter graph capture that failed, and engine steps whose draft
decode ran outside a FULL graph (eagerly, e.g. a ``num_speculative_tokens_per_batch_size`` tier
whose graph was never captured, ``SpeculatorCudaGraphManager.specialize_spec_tokens``; or
PIECEWISE). Each is a finding with its cost: the engine steps it touched and, where the plugin
timed the steps, their median duration beside the steps whose drafter replayed a FULL graph.

Read from the vLLM plugin's events (``cudagraph-capture``, ``drafter-graph-eager`` and each
``engine-step``'s ``drafter_graphs``), per rank."""

from __future__ import annotations

import json
from statistics import median
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.integrations.vllm_names import DRAFT_EAGER_EVENT, GRAPH_CAPTURE_EVENT

if TYPE_CHECKING:
    from mlaprof.analysis.step_records import EngineStep


def _rows(events: pd.DataFrame, kind: str) -> list[dict[str, Any]]:
    if events.empty:
        return []
    ev = events[events["kind"] == kind]
    out = []
    for rank, data in zip(ev["rank"].tolist(), ev["data"].tolist(), strict=True):
        try:
            out.append({**json.loads(data), "rank": int(rank)})
        except (TypeError, ValueError):
            continue
    return out


def drafter_graph_summary(events: pd.DataFrame, steps: list[EngineStep],
                          durations: dict[tuple[int, int], int]) -> dict[str, Any]:  # fmt: skip
    """Per rank: the drafter's failed captures, and its draft-decode graph modes over the engine
    steps (``durations``: (rank, step) -> ns where the plugin timed the step)."""
    failed = [c for c in _rows(events, GRAPH_CAPTURE_EVENT) if c.get("role") == "drafter"
              and c.get("error")]  # fmt: skip
    eager_kinds = _rows(events, DRAFT_EAGER_EVENT)
    ranks: dict[int, dict[str, Any]] = {}
    for s in steps:
        graphs = s.drafter_graphs
        if not graphs:
            continue
        r = ranks.setdefault(s.rank, {"full": [], "outside": [], "modes": {}})
        modes = [str(g[0]) for g in graphs]
        for m in modes:
            r["modes"][m] = r["modes"].get(m, 0) + 1
        key = "full" if all(m == "FULL" for m in modes) else "outside"
        r[key].append(durations.get((s.rank, s.step)))
    return {"failed": failed, "eager_kinds": eager_kinds, "ranks": ranks}


def drafter_graph_findings(summary: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    for c in summary["failed"]:
        out.append(
            Finding(
                kind="capture",
                severity="critical",
                title=f"rank {c['rank']}: the drafter's graph capture failed ({c.get('progress') or c.get('manager')}): "
                f"{c['error']}",
                evidence=f"vLLM plugin, model runner V2 {c.get('manager')}.capture raised; "
                f"{c.get('captured', 0)} of the planned {c.get('planned')} drafter graphs were "
                "captured (measured: recorded by the engine)",
                fix="the drafter's draft steps need their FULL graphs: run without "
                "num_speculative_tokens_per_batch_size tiers or with a vLLM whose speculator "
                "captures them; forcing the drafter PIECEWISE or eager costs its host launches "
                "every draft step",
                data=c,
            )
        )
    for rank, r in sorted(summary["ranks"].items()):
        n_out = len(r["outside"])
        if not n_out:
            continue
        timed_out = [d for d in r["outside"] if d is not None]
        timed_full = [d for d in r["full"] if d is not None]
        cost = "step durations not recorded"
        data: dict[str, Any] = {"rank": rank, "steps_outside": n_out, "steps_full": len(r["full"]),
                                "modes": r["modes"]}  # fmt: skip
        if timed_out and timed_full:
            a, b = median(timed_out), median(timed_full)
            cost = (f"median step {a / 1e6:.2f} ms beside {b / 1e6:.2f} ms where the drafter "
                    f"replayed FULL graphs ({a / b:.2f}x)")  # fmt: skip
            data.update(median_outside_ns=a, median_full_ns=b)
        kinds = ", ".join(f"{k['num_reqs']} requests at k={k['num_speculative_tokens']}"
                          for k in summary["eager_kinds"] if k["rank"] == rank)  # fmt: skip
        out.append(
            Finding(
                kind="capture",
                severity="warning",
                title=f"rank {rank}: the drafter's draft decode ran outside a FULL graph in "
                f"{n_out} of {n_out + len(r['full'])} engine steps",
                evidence=f"drafter graph modes {r['modes']}; {cost}"
                + (f"; no FULL draft graph for {kinds}" if kinds else "")
                + " (measured: recorded by the engine, model runner V2)",
                fix="capture the drafter's draft-decode graphs for these batch sizes and "
                "speculative-token counts (vLLM 0.34 draft-decode request sizes; "
                "num_speculative_tokens_per_batch_size tiers need their own graphs)",
                data=data,
            )
        )
    return out
