"""The statement pairs one report must never make together (the run's claims,
:mod:`mlaprof.analysis.claims`, read back from its typed summary): the property every shipped
run, trace, log and recorded engine run is held to (tests/unit/test_no_contradictions.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mlaprof.analysis.capture_status import asked_mode
from mlaprof.analysis.claims import Claims, full_graph_serves, recorded_paths
from mlaprof.analysis.evidence.engine import PLUGIN_DEVICE
from mlaprof.analysis.headline import own_split
from mlaprof.analysis.padding import NOT_RECORDED, size_text
from mlaprof.analysis.paths import NOT_THIS_RUN, PATH_CHECK
from mlaprof.analysis.sections import REFERENCE_TEXT, WHAT_IF
from mlaprof.analysis.splits import frozen_condition, off_route
from mlaprof.rank_counts import plural, rank_list
from mlaprof.scenario import UNSET

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import Route


# how an over-split finding says its S came from a FULL graph (mlaprof.analysis.splits._ran_with)
FULL_GRAPH_WORDS = ("frozen into the FULL graph", "replayed by the FULL graph")


def contradictions(s: RunSummary) -> list[str]:
    """Pairs of statements one summary must never make together (each a line saying which);
    empty for a consistent report. The property test holds every shipped run to it."""
    out: list[str] = []
    kinds = {f.kind for f in s.findings}
    status = str(s.capture.status)
    # the one rule (Capture.no_full_graph): a downgrade that keeps FULL decode graphs still has
    # them; a per-rank capture has none where one rank's own verdict has none
    no_full = s.capture.no_full_graph
    graph_mode = asked_mode(s.scenario.graph_mode, s.capture.mode)  # as the claims read it
    serves = full_graph_serves(graph_mode, status, s.capture.served_mode, s.capture.per_rank or ())
    frozen_said = any(
        f.kind == "split-frozen"
        or (f.kind == "split-over" and any(w in f.title for w in FULL_GRAPH_WORDS))
        for f in s.findings
    )
    if no_full and frozen_said:
        out.append(f"capture {status} + an S frozen into a FULL graph")
    if s.full_graph_splits.modelled is not None and not serves:
        out.append(f"capture {status} / {graph_mode} + a modelled frozen S in full_graph_splits")
    out += _frozen_cells(s, serves, f"{status} / {graph_mode}")
    out += _what_if_frozen(s)
    if (
        no_full
        and any(f.kind == "memory" and "capture fewer sizes" in f.fix for f in s.findings)
        and not s.engine_starts
    ):
        out.append(f"capture {status} + advice to trim the capture's memory")
    n = s.sync_counts
    sync_found = [f for f in s.findings if f.kind == "sync" and not f.title.startswith("host sync")]
    if not n.checked and sync_found:
        out.append("syncs 'not checked' + a sync finding from the probe")
    if n.checked and n.total == 0 and any(f.kind == "sync" for f in s.findings):
        out.append("'0 syncs' + a sync finding")
    out += _other_paths(s)
    if status.startswith("predicted") and not n.checked:
        out.append(f"capture {status} (predicted from syncs) + sync count 'not checked'")
    t = s.trace.syncs if s.trace is not None else None
    if t is not None and t.count is not None and not n.checked:
        out.append(f"trace syncs {t.count} in MLA layers + sync count 'not checked'")
    if t is not None and t.count is not None and n.checked and n.total != t.count:
        out.append(f"trace syncs {t.count} + sync count {n.total}")
    if (
        s.route is not None
        and s.route.verified
        and s.engine is not None
        and s.scenario.model is None
    ):
        took = recorded_paths(s.engine.backend)
        if took != (s.route.path,):
            out.append(
                f"route {s.route.path} verified + the engine recorded {s.engine.backend} "
                f"({'/'.join(took) or 'no path'})"
            )
    if s.route is not None and str(s.route.version) == "as recorded":
        out.append("a modelled route read 'as recorded'")
    cpu = "cpu-attention" in kinds or str(s.device) == "cpu"
    out += _route_said(s, cpu)
    if cpu and any("--patterns" in f.fix for f in s.findings):
        out.append("a CPU op + advice to describe its kernel grid (--patterns)")
    if s.scenario.recorded and s.route is not None and s.backend:
        c = Claims(graph_mode or "", status, str(s.device), backend=str(s.backend))
        mismatch = c.backend_mismatch(s.route)
        if mismatch and not any(
            f.kind == "route" and "does not run" in f.title for f in s.findings
        ):
            out.append(f"route {s.route.path} shown as the run's + no mismatch finding: {mismatch}")
    out += _unknown_read_as_value(s)
    out += _two_counts(s)
    return out


def _other_paths(s: RunSummary) -> list[str]:
    """What another verify path would do (the path check) read as this run's: a sync or
    allocation finding that names a path the run did not take, or a path check's finding that
    does not say it is not the run's region."""
    out: list[str] = []
    for f in s.findings:
        path = f.data.get("path")
        if f.kind in ("sync", "alloc") and path and path != s.backend:
            out.append(f"a {f.kind} finding of path {path} + the run's backend {s.backend}")
        if f.kind == PATH_CHECK and NOT_THIS_RUN not in f.title:
            out.append(f"a path check of {path} not said to be outside this run")
    return out


def _conditional_frozen(s: RunSummary, status: str) -> list[str]:
    """A modelled frozen S said as a fact beside a warning that says it holds only if the FULL
    graph captures (the run does not say): every place that shows that S says the condition."""
    cond = frozen_condition(status)
    if cond is None:
        return []
    bare = [r.policy for r in s.splits if r.frozen is not None and r.frozen_if != cond]
    if bare:
        return [f"capture {status} + a frozen S in the splits table said as a fact ({bare[0]})"]
    g = s.full_graph_splits
    if g.modelled is not None and g.modelled_if != cond:
        return [f"capture {status} + a modelled frozen S in full_graph_splits said as a fact"]
    ranks = s.series.ranks if s.series is not None else ()
    if any(r.frozen_if != cond for r in ranks if any(p.frozen is not None for p in r.splits)):
        return [f"capture {status} + a frozen S in the split series said as a fact"]
    if any(f.kind == "split-frozen" and cond not in f.title for f in s.findings):
        return [f"capture {status} + a split-frozen finding said as a fact"]
    return []


def _two_counts(s: RunSummary) -> list[str]:
    """One number told two ways: the capture's sizes beside the memory finding's count; a trust
    finding that pools a reliable rank with an unreliable one; a downgrade called information
    while the capture verdict counts it as no FULL graph (or the other way round)."""
    out = _conditional_frozen(s, str(s.capture.status))
    sized = [
        int(m.group(1))
        for f in s.findings
        if f.kind == "memory" and (m := re.search(r"over (\d+) capture size\(s\)", f.title))
    ]
    if sized and s.capture.sizes is not None and sized[0] != s.capture.sizes:
        out.append(f"capture sizes {s.capture.sizes} + a memory finding over {sized[0]}")
    out += _capture_sizes(s)
    verdicts = s.trace.trust_by_rank if s.trace is not None else {}
    reliable = {r for r, v in verdicts.items() if v == "reliable"}
    for f in s.findings:
        if f.kind != "trust" or not reliable:
            continue
        named = set(f.data.get("ranks") or [])
        if not named or named & reliable:
            out.append(f"a trust finding over {sorted(named) or 'every rank'} + "
                       f"{plural('rank(s)', len(reliable))} {sorted(reliable)} reliable on their "
                       "own checks")  # fmt: skip
    last = s.engine_starts[-1].start if s.engine_starts else None
    if str(s.capture.status) == "downgraded":
        for f in s.findings:
            if f.kind != "capture-downgrade" or f.data.get("start") != last:
                continue
            if (f.severity == "info") == s.capture.no_full_graph:
                out.append(
                    f"a {f.severity} downgrade to {f.data.get('setting')} + capture "
                    + ("with no FULL graph" if s.capture.no_full_graph else "keeping FULL graphs")
                )
    return out


def _route_said(s: RunSummary, cpu: bool) -> list[str]:
    """A route every view prints without where it comes from, or a CPU run's route not said
    to be modelled (it reads as the AMD/ROCm path the run took)."""
    r = s.route
    if r is None:
        return []
    if not r.provenance or not r.text or r.provenance not in r.text:
        return [f"route {r.path} said without where it comes from"]
    if cpu and "modelled" not in r.provenance:
        return [f"a CPU run + route {r.path} not said to be modelled ({r.provenance})"]
    return []


def _capture_sizes(s: RunSummary) -> list[str]:
    """The capture section's sizes beside the padding section's: a count of 0 where nothing was
    captured (it reads as measured), a sizes line that names another padded size than the
    padding section, or a count its own line does not say."""
    cap, padded = s.capture, s.padding.capture_sizes
    if cap.sizes == 0:
        return ["capture sizes 0 (a count where no capture was recorded)"]
    said = cap.sizes_text
    if said is None:
        return []
    if padded and size_text(padded) not in said:
        return [f"capture sizes '{said}' + padding '{size_text(padded)}'"]
    counts = ("captured: none (",) if cap.sizes is None else (
        f"captured: {cap.sizes} (", f"attempted: {cap.sizes} (")  # fmt: skip
    if not any(c in said for c in counts):
        return [f"capture sizes {cap.sizes} + its sizes line '{said}'"]
    return []


def _frozen_cells(s: RunSummary, full_graph: bool, context: str) -> list[str]:
    """A frozen S in the splits rows or the figures' split series where none stands: a run no
    FULL graph serves, or the run's own policy where its graph's replays were measured."""
    own = s.scenario.policy or ""
    series = [p for r in (s.series.ranks if s.series is not None else ()) for p in r.splits]
    for where, rows in (("the splits table", s.splits), ("the split series", series)):
        frozen = [r.policy for r in rows if r.frozen is not None]
        if frozen and not full_graph:
            return [f"capture {context} + a frozen S in {where} ({frozen[0]})"]
        if s.replayed_splits is not None and (own in frozen or (frozen and not own)):
            return [f"measured replays + a modelled frozen S on the run's policy in {where}"]
    return []


def _what_if_frozen(s: RunSummary) -> list[str]:
    """A frozen S of a policy vLLM's route does not run (the split findings' rule,
    :func:`mlaprof.analysis.splits.off_route`, against the route the run models) said as the
    S the run's graph froze: the splits table, full_graph_splits, the split series and the
    headline say it on its "if vLLM ran <policy>" condition."""
    route = route_summary_of(s)
    if route is None:
        return []
    bare = [r.policy for r in s.splits if r.frozen is not None and off_route(r.policy, route)
            and (r.on_route is not False or not r.frozen_what_if)]  # fmt: skip
    if bare:
        return [f"route {route.path} + a what-if frozen S in the splits table said as a fact "
                f"({bare[0]})"]  # fmt: skip
    own = own_split(s.splits, s.scenario.policy)
    what_if = own is not None and off_route(own.policy, route)
    g = s.full_graph_splits
    if what_if and g.modelled is not None and not g.modelled_what_if:
        return [f"route {route.path} + a what-if frozen S in full_graph_splits said as a fact"]
    pts = [p for r in (s.series.ranks if s.series is not None else ()) for p in r.splits]
    if any(p.frozen is not None and off_route(p.policy, route) and not p.frozen_what_if
           for p in pts):  # fmt: skip
        return [f"route {route.path} + a what-if frozen S in the split series said as a fact"]
    said = [h.value for h in s.headline if "would replay S" in h.value]
    if what_if and own is not None and any(str(own.frozen_what_if) not in v for v in said):
        return [f"route {route.path} + a what-if frozen S in the headline said as a fact"]
    # the headline's S and occupancy of a policy off the route: marked and said on its condition
    named = [h for h in s.headline
             if h.label.startswith((f"KV splits ({own.policy}", "occupancy ("))] if own else []  # fmt: skip
    if (
        what_if
        and own is not None
        and any(WHAT_IF not in h.label or str(own.what_if) not in h.value for h in named)
    ):
        return [f"route {route.path} + the headline names {own.policy}'s S as the run's"]
    return []


def route_summary_of(s: RunSummary) -> Route | None:
    """The route the split findings judge a run's policies by (a scenario's; an engine's
    shadow route judges none), read back from its summary."""
    return s.route if s.route is not None and s.scenario.model else None


def _unknown_read_as_value(s: RunSummary) -> list[str]:
    """A value the evidence does not hold, shown as if measured: a 0 beside "not checked" or
    "not recorded", a setting's "not set" default, a replay the trace cannot call FULL, the
    plugin's "engine" placeholder as the device."""
    out: list[str] = []
    n = s.sync_counts
    if not n.checked and n.total == 0:
        out.append("syncs 'not checked' + a sync total of 0")
    checked = {r.rank for r in n.per_rank or []} if n.checked else set()
    rate = {(r.rank, r.layer): r.syncs for r in n.per_layer or []}
    for row in s.layers:
        if row.rank in checked and row.syncs != rate.get((row.rank, row.layer), 0):
            out.append(
                f"sync count on rank {row.rank} layer {row.layer}: "
                f"{rate.get((row.rank, row.layer), 0)} + layer table {row.syncs}"
            )
            break
    unjudged = REFERENCE_TEXT["unknown"]  # no S to judge a collapse against
    bad = [r for r in s.layers if r.reference == unjudged and r.collapsed is not None]
    if bad:
        out.append(f"layer {bad[0].layer} (rank {bad[0].rank}) 'collapsed {bad[0].collapsed}' "
                   "+ no S to judge it against")  # fmt: skip
    judged = {r.rank for r in s.layers if r.collapsed is not None}
    lost = [r for r in s.fleet.ranks_not_collapsed or [] if r not in judged]  # None: none judged
    if lost:
        out.append(f"{rank_list(lost)} 'not collapsed' + none of their layers judged")
    cov = s.trace.coverage if s.trace is not None else None
    if cov is not None and not cov.api_calls and cov.host_syncs == 0:
        out.append("no API call read + 'host syncs: 0' among them")
    p = s.padding
    if p.text == NOT_RECORDED and any(
        v is not None for v in (p.steps, p.real_rows, p.padding_rows, p.padding_fraction)
    ):
        out.append("padding 'not recorded' + padding counts")
    for name, unset in UNSET.items():
        if getattr(s.scenario, name) == unset and s.scenario.recorded:
            out.append(f"scenario {name} {unset!r} (not set) shown as the run's value")
    if str(s.device) == PLUGIN_DEVICE:
        out.append("device 'engine' (no device) + numbers 'measured on' it")
    cap = s.trace.capture if s.trace is not None else None
    if cap is not None and not cap.graph_launches:
        full = [t.step for t in s.trace.steps if t.capture == "FULL"]  # type: ignore[union-attr]
        if full:
            out.append(
                f"trace steps {full[:3]} read FULL + the capture verdict holds no graph-launch "
                "call to tell FULL from PIECEWISE"
            )
    return out
