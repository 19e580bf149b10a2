"""The speculative drafter: which graph each step of a kernel trace belongs to, from the trace
itself (the target model's verify passes, a drafter's passes, or other graphs), and drafted tokens
the target never accepted (a log's SpecDecoding metrics).

Where the import found each replay's graph (by graph id, or by kernel sequence:
:mod:`mlaprof.step_sources`), a replay's kind is its graph's: the graph with the most
MLA layers is the target's verify graph, graphs with fewer are the drafter's (its first pass
included, though it runs the target's kernel, rows and qlen in its own one-layer graph). Steps
without a graph (eager, PIECEWISE) and imports without graph identities fall back to the rule
below.

A speculative drafter (MTP ``deepseek_mtp``, EAGLE) runs its own small graphs between the verify
steps: one or a few MLA layers, decode kernels at qlen 1 after its first pass. The target's
verify graph holds every MLA layer of the model. Per rank, a step is the drafter's when it has
at most a quarter of the rank's deepest step's MLA layers (at least one), or qlen 1 and fewer
layers than that step; every other step is a verify step (a replay that lost a few dispatches
keeps most of its layers and its qlen, so it stays a verify step and the trust check judges it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import step_checks_by_rank, value_range
from mlaprof.analysis.sections import TraceDrafter
from mlaprof.analysis.starts import start_label
from mlaprof.analysis.step_stats import for_steps
from mlaprof.analysis.typed_json import over_ranks_how, over_ranks_label
from mlaprof.rank_counts import plural
from mlaprof.step_sources import unrle

if TYPE_CHECKING:
    from mlaprof.analysis.run_checks import RunChecks
    from mlaprof.analysis.sections import EngineStart

VERIFY, DRAFTER = "verify", "drafter"


def _by_identity(steps: pd.DataFrame, checks: RunChecks) -> pd.Series:
    """Per step, its graph's kind where the import identified the graph (else None)."""
    out = pd.Series(None, index=steps.index, dtype=object)
    for rank, sc in step_checks_by_rank(checks).items():
        kinds = {g.get("graph"): g.get("kind") for g in sc.get("graphs") or []}
        graph_of = unrle(sc.get("graph_by_step"))
        if not kinds or not graph_of:
            continue
        mine = steps[steps["rank"] == rank]
        got = []
        for st in mine["step"].tolist():
            g = graph_of[int(st)] if 0 <= int(st) < len(graph_of) else None
            got.append(kinds[g] if g is not None and kinds.get(g) in (VERIFY, DRAFTER) else None)
        # one assignment per rank (a Series item set per step cost most of this function)
        keep = [k is not None for k in got]
        out.loc[mine.index[keep]] = [k for k in got if k is not None]
    return out


def graph_kinds(
    steps: pd.DataFrame, stats: pd.DataFrame, checks: RunChecks | None = None
) -> pd.Series:
    """``verify`` or ``drafter`` per row of ``steps`` (indexed like it); ``stats``: the per-step
    aggregates of the layers (:mod:`mlaprof.analysis.step_stats`); ``checks``: the import's trace
    checks, which name each replay's graph."""
    if steps.empty:
        return pd.Series(dtype=object)
    per = for_steps(steps, stats, "n_layers").fillna(0)
    deepest = per.groupby(steps["rank"]).transform("max")
    few = per <= (deepest // 4).clip(lower=1)
    decode = steps["qlen"].eq(1) & (per < deepest)
    drafter = (few & (per < deepest)) | decode
    rule = drafter.map({True: DRAFTER, False: VERIFY})
    known = _by_identity(steps, checks) if checks else pd.Series(None, index=steps.index)
    return pd.Series(known.where(known.notna(), rule), index=steps.index)


def drafter_summary(steps: pd.DataFrame, stats: pd.DataFrame, origin: str) -> TraceDrafter | None:
    """The drafter's passes, their own table (decode: never counted as verify steps)."""
    if steps.empty:
        return None
    backend = steps["backend"].fillna("").astype(str)
    n = int(len(steps))
    n_graph = int((steps["graph_mode"] == "graph").sum())
    n_eager = int((steps["graph_mode"] == "eager").sum())
    variants = sorted({b.split(" ", 1)[-1] for b in backend if b})
    per_pass = value_range(for_steps(steps, stats, "n_layers"))
    s_range = value_range(for_steps(steps, stats, "S"))
    rows = value_range(steps["num_reqs"])
    qlen = value_range(steps["qlen"])
    # a pass without a duration has no median: None, never a default
    med = float(steps["duration_ns"].median()) / 1e3 if steps["duration_ns"].notna().any() else None
    ranks = int(steps["rank"].nunique()) if "rank" in steps else 1

    def pooled(field: str) -> str:  # a value of every rank's, said as its field's label says it
        return over_ranks_label(over_ranks_how(TraceDrafter, field), ranks)

    return TraceDrafter(
        steps=n,
        graph_steps=n_graph,
        eager_steps=n_eager,
        variants=variants,
        layers_per_pass=per_pass,
        pass_steps={
            int(r): sorted(int(x) for x in g) for r, g in steps.groupby("rank", sort=True)["step"]
        },
        S=s_range,
        rows=rows,
        qlen=qlen,
        step_median_us=med,
        provenance=f"{origin}; drafter passes told from verify steps by their graph (the "
        "target's has the most MLA layers) where the trace identifies graphs, else by their MLA "
        "layer count and qlen",
        text=f"drafter passes (the drafter's own graphs, not verify steps): {n}{pooled('steps')} "
        f"({n_graph} graph / {n_eager} eager), "
        f"{', '.join(variants) or 'unknown kernel'}, {per_pass or 'unknown'} "
        f"{plural('MLA layer(s)', per_pass)} per pass, S {s_range or 'unknown'}, rows "
        f"{rows or 'unknown'}, "
        f"qlen {qlen or 'unknown (not on the grid)'}, median pass "
        + ("unknown" if med is None else f"{med:.1f} us{pooled('step_median_us')}"),
    )


def acceptance_findings(st: EngineStart) -> list[Finding]:
    """Speculation that drafted tokens the target never accepted: every verify step paid for
    ``num_spec_tokens`` extra query rows for nothing."""
    sd = st.spec_decoding
    if not sd or not sd.drafted or sd.accepted:
        return []
    spec = st.speculative
    return [
        Finding(
            kind="spec-decode",
            severity="warning",
            title=f"{start_label(st)}: none of {sd.drafted} drafted tokens was accepted "
            f"({(spec and spec.method) or 'speculative'} x{(spec and spec.num_spec_tokens) or '?'})",
            evidence=f"'SpecDecoding metrics' lines: Accepted 0 of Drafted {sd.drafted}; "
            + sd.provenance,
            fix="the drafter does not match the target (random or mismatched MTP weights, a "
            "prompt with no n-gram repeats): fix the draft model, or turn speculation off",
            data={"start": st.start, "drafted": sd.drafted, "accepted": 0},
        )
    ]
