"""Question 6: did my fix help? The one diff of two runs: a table of metrics with verdicts.

Every metric is read from the typed summary (:class:`mlaprof.analysis.run_summary.RunSummary`,
the numbers the report prints), so the terminal report, ``--json``, Markdown, the HTML report,
the diff figure and the TUI's compare screen all show the same values and the same verdicts.
:func:`diff` returns the typed :class:`SummaryDiff`; its ``to_json()`` is ``report --json
--compare``'s ``compare`` object.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture import CAPTURE_MEMORY_MEASURE
from mlaprof.analysis.capture_status import CaptureStatus
from mlaprof.analysis.headline import own_split as headline_own_split
from mlaprof.analysis.headline import split_provenance
from mlaprof.analysis.memory import memory_summed
from mlaprof.analysis.paths import route_label
from mlaprof.analysis.sections import Source
from mlaprof.analysis.timing import (
    CPU_TIMINGS,
    GPU_LAYER_TIME,
    MLA_LAYER_TIME,
    PER_RANK,
    cpu_spread,
    layer_span,
)
from mlaprof.analysis.typed_json import to_json
from mlaprof.rank_counts import counted
from mlaprof.store.liveness import RunStatus

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import SplitStep


class Verdict(StrEnum):
    """B's change from A's point of view."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    WITHIN_SPREAD = "within spread"  # a CPU reference timing inside the measured run spread
    NA = "n/a"  # one side has no value
    # the two runs ran different workloads: a workload-dependent change is no verdict on the code
    OTHER_WORKLOAD = "other workload"
    # a part of the workload one or both runs do not state: not known to be the same, so a
    # workload-dependent change is no verdict either (the workload line names the parts)
    UNKNOWN_WORKLOAD = "not judged"


COLUMNS = ("metric", "unit", "a", "b", "change", "change_pct", "ratio", "verdict", "provenance")
MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    lower_is_better: bool
    value: Callable[[RunSummary], float | None]
    timing: bool = False  # a time: CPU reference timings are judged against the run spread
    short: str = ""  # the name where columns are few (an 80-column terminal)
    # the value depends on the workload (batch, qlen, heads, device): compared only like with like
    workload: bool = True
    # where a side's value comes from, as its report says it (None: the row says nothing)
    said: Callable[[RunSummary], str | None] | None = None


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One metric of both runs: A, B, change and the verdict."""

    metric: str
    unit: str
    a: float | None
    b: float | None
    change: float | None
    change_pct: float | None
    ratio: float | None
    verdict: Verdict
    provenance: str


@dataclass(frozen=True, slots=True)
class Change:
    """What has no number, before and after (``None``: the run does not say)."""

    before: str | None
    after: str | None


@dataclass(frozen=True, slots=True)
class WorkloadField:
    """One part of the workload in both runs (``None``: the run does not say)."""

    name: str  # model | batch | kv | qlen | heads | device | kind
    before: str | None
    after: str | None

    @property
    def differs(self) -> bool:
        """Both runs say, and they say different things."""
        return self.before is not None and self.after is not None and self.before != self.after


@dataclass(frozen=True, slots=True)
class Workload:
    """Whether the two runs ran the same workload: ``same`` False where a field both runs state
    differs, None where no field differs but some is unknown on a side (not known to be the
    same), True where every field is known and equal. Only True lets a workload-dependent row
    carry a verdict (:func:`judged`)."""

    same: bool | None
    fields: list[WorkloadField]
    text: str  # the line every view prints
    # parts neither run's kind records (a trace holds no model preset or KV lengths): not
    # compared, and said in ``text``
    not_held: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TraceSplitChange:
    """S and batch rows of one (path, kernel variant) in two imported traces."""

    path: str
    variant: str
    S_before: str | None
    S_after: str | None
    rows_before: str | None
    rows_after: str | None
    source: str


@dataclass(frozen=True, slots=True)
class SummaryDiff:
    """What changed from run ``before`` to run ``after``."""

    before: str
    after: str
    state: Change  # each run's status (a run that did not finish is said, never passed over)
    capture: Change
    route: Change
    backend: Change
    workload: Workload
    trace_splits: list[TraceSplitChange]
    cpu_spread: float | None  # the CPU run-to-run spread timing changes are judged against
    table: list[DiffRow]

    def to_json(self) -> dict[str, Any]:
        return to_json(self)


def unfinished_note(d: SummaryDiff) -> str | None:
    """Which of the two runs did not finish, in the words every compare view prints (None:
    both finished): their numbers hold only the steps they committed."""
    out = [
        f"{side} {name} is {status}: its numbers hold only the steps it committed"
        for side, name, status in (("A", d.before, d.state.before), ("B", d.after, d.state.after))
        if status not in (None, RunStatus.FINISHED)
    ]
    return "; ".join(out) or None


def own_split(s: RunSummary) -> SplitStep | None:
    """The worst-step splits row of the run's own policy on the rank where it is worst: the
    headline's one rule (analysis.headline.own_split), as the typed row."""
    return headline_own_split(s.splits, s.scenario.policy)


def _split(key: str, scale: float = 1.0) -> Callable[[RunSummary], float | None]:
    def get(s: RunSummary) -> float | None:
        r = own_split(s)
        v = None if r is None else getattr(r, key)
        return None if v is None else float(v) * scale

    return get


def _sites(s: RunSummary) -> float | None:
    """Distinct (op, source line) pairs that synced or allocated inside the watched region
    (an imported trace names no source lines: its API calls are counted instead)."""
    if s.trace is not None or not s.sync_counts.checked:
        return None  # no probe watched a step: not checked, never 0 (the sync count's rule)
    rows = [*s.syncs, *s.allocations]
    return float(len({(r.op, r.location) for r in rows}))


def _capture_fails(s: RunSummary) -> float | None:
    """1 where the capture failed or is predicted to, 0 where it held; None where no capture
    was asked for or nothing tells (an unwatched run is "unknown", never a 0 that reads as a
    capture that held)."""
    if s.capture.status in (CaptureStatus.UNKNOWN, CaptureStatus.NOT_ATTEMPTED):
        return None
    # the one rule (capture_status.no_full_graph): a downgrade that keeps FULL decode graphs
    # is no failure, as its finding says (information)
    return float(s.capture.no_full_graph)


def _graph_s(s: RunSummary) -> float | None:
    """The S the run's FULL graph replays (the summary's full_graph_splits: measured over
    modelled; the lowest measured): beside "S used", which a graph captured by vLLM's dummy run
    does not replay (a fix can raise S used and still replay S 1)."""
    g = s.full_graph_splits
    if g.source is Source.MEASURED and g.measured_min is not None:
        return float(g.measured_min)
    return None if g.modelled is None else float(g.modelled)


def _graph_s_said(s: RunSummary) -> str | None:
    g = s.full_graph_splits
    if g.source is None:
        return None
    if g.source is Source.MEASURED:
        return "measured graph replays"
    # the modelled S's conditions, as the run's own report says them (a policy vLLM does not
    # run here, a capture nothing decided)
    conds = [c for c in (g.modelled_what_if, g.modelled_if) if c]
    return "model (dummy-run capture" + "".join(f", {c}" for c in conds) + ")"


def _trace_s_said(s: RunSummary) -> str | None:
    """Where a trace's S comes from: its grids; a fleet's pools every rank's layer records, and
    where its ranks' S differ the one median hides that (said, never silent)."""
    if s.trace is None:
        return None
    ranks = s.fleet.per_rank
    if len(ranks) <= 1:
        return "the trace's kernel grids"
    vals = [v for r in ranks for v in (r.S_min, r.S_max) if v is not None]
    differ = (
        f"; its ranks' S differ ({min(vals)}-{max(vals)})"
        if vals and min(vals) != max(vals)
        else ""
    )
    return f"the kernel grids of {len(ranks)} ranks pooled{differ}"


def _trace_syncs(s: RunSummary) -> float | None:
    """Syncs an imported trace's API calls show in the region (None: the trace cannot tell)."""
    n = s.trace.syncs.count if s.trace is not None else None
    return None if n is None else float(n)


def _trace_s(s: RunSummary) -> float | None:
    """S per MLA layer as an imported trace's grids show it (median over layer records; live
    runs record split metadata per policy instead)."""
    if s.trace is None:
        return None
    known = sorted((r.splits, r.records) for r in s.layer_splits if r.splits)
    total = sum(n for _, n in known)
    seen = 0
    for v, n in known:
        seen += n
        if seen * 2 >= total:
            return float(v)
    return None


def _split_said(s: RunSummary) -> str | None:
    r = own_split(s)
    return None if r is None else _on_condition(r, split_provenance(r, str(s.device or "")))


def _model_said(s: RunSummary) -> str | None:
    r = own_split(s)
    return None if r is None else _on_condition(r, "model")


def _what_if_said(s: RunSummary) -> str | None:
    r = own_split(s)
    return None if r is None else r.what_if


def _on_condition(r: SplitStep, said: str) -> str:
    """Where a side's own-policy S or occupancy comes from, with the condition it holds on where
    vLLM does not run that policy (the row's ``what_if``, as its report's headline says it)."""
    return f"{said}; {r.what_if}" if r.what_if else said


def _memory_said(s: RunSummary) -> str | None:
    """Where the capture memory comes from, and that it adds several ranks' where it does."""
    cap = s.capture
    return None if cap.memory_bytes is None else str(cap.provenance) + memory_summed(cap)


def _memory_mib(s: RunSummary) -> float | None:
    b = s.capture.memory_bytes
    return None if b is None else b / MIB


def _opt(v: Any, scale: float = 1.0) -> float | None:
    return None if v is None else float(v) * scale


def _layer_said(s: RunSummary) -> str | None:
    """What the run's layer records span (the compare names the quantity it compares)."""
    if s.timing.layer_median_us is None:
        return None
    return layer_span(str(s.kind), _is_cpu(s) or str(s.device or "").startswith("cpu"))


def _gpu_layer(s: RunSummary) -> float | None:
    """The whole layer's GPU time inside graph replays (every kernel of the layer, attention
    and the rest): the median of the replay-time table's per-layer medians (an imported trace's;
    None where it has none)."""
    rows = [r.median_us for r in (s.trace.replay_time.layers if s.trace is not None else [])]
    return statistics.median(rows) if rows else None


def _gpu_layer_said(s: RunSummary) -> str | None:
    if _gpu_layer(s) is None:
        return None
    many = len(s.ranks) > 1
    return "the trace's kernels from one MLA layer to the next, inside graph replays" + (
        "; the median of the replay-time table's layer rows, every rank's pooled" if many else ""
    )


def _padding_waste(s: RunSummary) -> float | None:
    p = s.padding
    return _opt(p.padding_fraction, 100.0) if p.steps_padded or p.real_rows else None


METRICS: tuple[Metric, ...] = (
    Metric(
        "median step time",
        "µs",
        True,
        lambda s: _opt(s.timing.step_median_us),
        timing=True,
        short="step time",
    ),
    Metric(
        f"median {MLA_LAYER_TIME}",
        "µs",
        True,
        lambda s: _opt(s.timing.layer_median_us),
        timing=True,
        short="MLA time / layer",
        said=_layer_said,
    ),
    Metric(
        f"median {GPU_LAYER_TIME}",
        "µs",
        True,
        _gpu_layer,
        timing=True,
        short="GPU time / layer",
        said=_gpu_layer_said,
    ),
    Metric(
        "sync / allocation sites in the region",
        "count",
        True,
        _sites,
        short="sync/alloc sites",
        workload=False,
    ),
    Metric(
        "syncs in the region (imported trace)",
        "count",
        True,
        _trace_syncs,
        short="syncs (trace)",
        # a count over the trace's steps and layers: another workload's trace holds others
    ),
    Metric(
        "steps replayed as a graph",
        "%",
        False,
        lambda s: _opt(s.timing.full_share, 100.0),
        short="graph replays",  # FULL only where the evidence says (analysis.capture)
    ),
    Metric(
        "KV splits per MLA layer (trace grids, median)",
        "S",
        False,
        _trace_s,
        short="S (trace grids)",
        said=_trace_s_said,
    ),
    Metric(
        "capture fails (failed or predicted)",
        "yes=1",
        True,
        _capture_fails,
        short="capture fails",
        workload=False,
    ),
    Metric(
        "KV splits S used (run's policy, worst step)",
        "S",
        False,
        _split("used"),
        short="S used",
        said=_split_said,
    ),
    Metric(
        "S a FULL graph replays (measured, else modelled)",
        "S",
        False,
        _graph_s,
        short="S in the graph",
        said=_graph_s_said,
    ),
    Metric(
        "S deserved by the real rows",
        "S",
        False,
        _split("deserved"),
        short="S deserved",
        said=_model_said,
    ),
    Metric(
        "occupancy with S used (model)",
        "%",
        False,
        _split("occupancy", 100.0),
        short="occupancy (model)",
        said=_what_if_said,  # its name says "model": only the condition, where there is one
    ),
    Metric(
        "padding waste (share of verify tokens)",
        "%",
        True,
        _padding_waste,
        short="padding waste",
    ),
    Metric(
        f"capture memory ({CAPTURE_MEMORY_MEASURE})",
        "MiB",
        True,
        _memory_mib,
        short="capture memory",
        said=_memory_said,
    ),
    Metric(
        "critical findings",
        "count",
        True,
        lambda s: float(sum(f.severity == "critical" for f in s.findings)),
        short="critical findings",
        # a collapse of S is one, and it follows the batch: two workloads get no verdict
    ),
)


SHORT_NAMES = {m.name: m.short or m.name for m in METRICS}


def _sides(a: str | None, b: str | None) -> str:
    """Where both sides' values come from: one phrase where they agree, else each side's."""
    return (a or "") if a == b else f"A: {a or 'not stated'}, B: {b or 'not stated'}"


def _said(m: Metric, sa: RunSummary, sb: RunSummary) -> str:
    return "" if m.said is None else _sides(m.said(sa), m.said(sb))


def _provenance(m: Metric, sa: RunSummary, sb: RunSummary) -> str:
    """Where a row's values come from: a time's timing kinds, then what it spans."""
    said = _said(m, sa, sb)
    if not m.timing:
        return said
    return "; ".join(p for p in (_timing_provenance(sa, sb), said) if p)


def _timing_provenance(sa: RunSummary, sb: RunSummary) -> str:
    la, lb = sa.timing.timing_label, sb.timing.timing_label
    ta, tb = sa.timing.threads, sb.timing.threads
    if la == lb and _is_cpu(sa) and ta != tb:  # CPU times at two thread counts: say so
        out = f"A: {la} ({_n_threads(ta)}), B: {lb} ({_n_threads(tb)})"
    else:
        out = _sides(la, lb)
    pooled = [p for p in (_pooled(sa, "A"), _pooled(sb, "B")) if p]
    return "; ".join([out, *pooled])


def _pooled(s: RunSummary, side: str) -> str:
    """Where a side's median pools several ranks' steps, said with it (its report prints each
    rank's median where they differ: the compare's one number is an aggregate, never silent)."""
    n = len(s.timing.per_rank)
    if n <= 1:
        return ""
    differ = "" if s.timing.ranks_agree else ", their medians differ: see its report per rank"
    return f"{side}: the steps of {n} ranks pooled{differ}"


def _kinds(s: RunSummary) -> set[str | None]:
    """How the run's steps were timed: its ranks' one kind, or where they were timed
    differently (``PER_RANK``), each rank's."""
    if s.timing.timing == PER_RANK:
        return {r.timing for r in s.timing.per_rank}
    return {s.timing.timing}


def _is_cpu(s: RunSummary) -> bool:
    """Timed on the CPU: every rank's steps."""
    return all(k in CPU_TIMINGS for k in _kinds(s))


def _n_threads(n: int | None) -> str:
    return "threads not recorded" if n is None else counted(n, "thread(s)")


def run_spread(sa: RunSummary, sb: RunSummary) -> float | None:
    """The CPU run-to-run spread that applies to A vs B: the wider of the spreads measured at
    each CPU side's clock and thread count; None when neither side is timed on the CPU."""
    spreads = [cpu_spread(s.timing.threads, k) for s in (sa, sb) if _is_cpu(s) for k in _kinds(s)]
    return max(spreads) if spreads else None


def _range(values: list[str | None]) -> str | None:
    known = sorted({v for v in values if v is not None})
    return ", ".join(known) if known else None


def workload_fields(s: RunSummary) -> dict[str, str | None]:
    """The run's workload as a diff compares it: the scenario's model preset, batch (real rows
    per step; a trace's grid rows), KV lengths, qlen, heads per rank, MLA layers per step,
    device, run kind and ranks, and what a trace itself shows (its verify kernel family, the
    heads its kernel names or stage-2 grids show); None where the run does not say. Only the
    parts the run's kind can record (:data:`HELD_BY`) are returned."""
    from mlaprof.scenario import MODELS

    sc = s.scenario
    trace = s.trace
    trace_paths = trace.paths if trace is not None else []
    engine = s.engine
    preset = MODELS.get(str(sc.model)) if sc.model else None
    # a trace's heads: its kernels' names (ASM qh16) or stage-2 grids, per path (trace checks)
    trace_heads = _range(
        [h for per_path in ((trace.checks.heads or {}) if trace else {}).values() for h in per_path]
    )
    heads = (
        str(preset.heads)
        if preset is not None
        else str(engine.heads)
        if engine is not None and engine.heads is not None
        else trace_heads
    )
    batch = str(len(sc.kv_lens)) if sc.kv_lens else _range([p.rows for p in trace_paths])
    qlen = str(sc.qlen) if sc.qlen is not None else _range([p.qlen for p in trace_paths])
    kv = sorted(sc.kv_lens or [])
    layers = (
        str(sc.layers)
        if sc.layers is not None
        else _range([str(t.layers) if t.layers else None for t in (trace.steps if trace else [])])
    )
    # a server log's starts say the model and the speculation (qlen: 1 + the drafted tokens)
    starts = s.engine_starts or []
    model = sc.model or _range([st.model for st in starts])
    if qlen is None:
        qlen = _range(
            [
                str(1 + st.speculative.num_spec_tokens)
                if st.speculative is not None and st.speculative.num_spec_tokens is not None
                else None
                for st in starts
            ]
        )
    spec = _range(
        [
            f"{st.speculative.method} x{st.speculative.num_spec_tokens}"
            if st.speculative is not None and st.speculative.method
            else None
            for st in starts
        ]
    )
    out = {
        # the scenario's workload (its name is a label: a fixed run may carry another)
        "model": model,
        "batch": batch,
        "kv": (str(kv[0]) if kv[0] == kv[-1] else f"{kv[0]}-{kv[-1]}") if kv else None,
        "qlen": qlen,
        "heads": heads,
        "layers": layers,
        # the verify kernel family a trace shows (aiter-asm, aiter-gluon): S, rows and times of
        # two families are not one kernel's before and after
        "kernel": _range([p.path for p in trace_paths]),
        "device": _device(str(s.device or ""), sc.target),
        "kind": str(s.kind),
        # ranks share the work: a step of 2 ranks is not one of 1
        "ranks": str(s.fleet.ranks) if s.fleet.ranks else None,
        # a server's speculative decoding (method and drafted tokens), where its log says
        "speculation": spec,
    }
    held = _held(s)
    return {k: v for k, v in out.items() if k in held or v is not None}


# The workload parts each kind of run can record: a part neither run's kind records is not
# compared (said in the workload line); a part a kind records but a run of it does not state is
# unknown, and no workload-dependent change of that compare is judged. A scenario states its
# workload; an imported trace only what its kernels show (no model preset, no KV lengths: the
# S a KV length gives is the trace's result, not its input); a server log its start lines.
_ALWAYS = frozenset(("device", "kind", "ranks"))
# the parts a kind of run may not record (said where neither run's kind does)
GAPS = ("model", "batch", "kv", "qlen", "heads", "layers")
HELD_BY: dict[str, frozenset[str]] = {
    "scenario": _ALWAYS | {"model", "batch", "kv", "qlen", "heads", "layers"},
    "trace": _ALWAYS | {"batch", "qlen", "heads", "layers", "kernel"},
    "log": _ALWAYS | {"model", "qlen", "speculation"},
    "engine": _ALWAYS | {"model", "qlen", "heads"},
}


def _device(device: str, target: str | None) -> str | None:
    """The device a run's numbers stand for (a scenario's modelled target beside it); None where
    the run does not name one (an "unknown (why)" or the plugin's placeholder "engine")."""
    known = None if not device or device == "engine" or device.startswith("unknown") else device
    if target:
        return f"{known or 'unknown'} (target {target})"
    return known


_FIELD_WORDS = {"kv": "KV lengths", "layers": "MLA layers per step", "kernel": "verify kernel"}
# what a workload-dependent row reads where the workloads are not known to be the same
NO_VERDICT = "workload-dependent changes get no verdict"


def _words(names: list[str]) -> str:
    return ", ".join(_FIELD_WORDS.get(n, n) for n in names)


def workload(sa: RunSummary, sb: RunSummary) -> Workload:
    """Whether A and B ran the same workload (:class:`Workload`): the same only where every part
    either run's kind records (:data:`HELD_BY`) and one of them states is stated by both and
    equal; the parts neither states are named as not compared."""
    a, b = workload_fields(sa), workload_fields(sb)
    held = _held(sa) | _held(sb)
    fields = [WorkloadField(k, a.get(k), b.get(k)) for k in dict.fromkeys([*a, *b])]
    not_held = [k for k in GAPS if k not in held]
    differ = [f for f in fields if f.differs]
    # a part neither run states cannot differ between them: said as not compared (never read
    # as checked); a part only one states is unknown on the other, and no verdict is given
    neither = [f.name for f in fields if f.before is None and f.after is None]
    unknown = [
        f"only A states {_words([f.name])} ({f.before})"
        if f.after is None
        else f"only B states {_words([f.name])} ({f.after})"
        for f in fields
        if (f.before is None) != (f.after is None)
    ]
    if differ:
        same: bool | None = False
        text = (
            "different workloads ("
            + "; ".join(f"{_words([f.name])} {f.before} vs {f.after}" for f in differ)
            + f"): {NO_VERDICT}"
        )
    elif unknown:
        same = None
        text = f"workload unknown ({'; '.join(unknown)}): {NO_VERDICT}"
    else:
        stated = [f.name for f in fields if f.name not in neither]
        same, text = True, f"same workload ({_words(stated)})"
    if neither:
        text += f"; not compared: neither run states {_words(neither)}"
    if not_held:  # what neither kind of record holds: never read as checked
        kinds = " or a ".join(dict.fromkeys([str(sa.kind), str(sb.kind)]))
        text += f"; not compared: a {kinds} records no {_words(not_held)}"
    return Workload(same, fields, text, not_held)


def _held(s: RunSummary) -> frozenset[str]:
    return HELD_BY.get(str(s.kind), frozenset(GAPS) | _ALWAYS)


def diff_rows(sa: RunSummary, sb: RunSummary, load: Workload | None = None) -> list[DiffRow]:
    """One row per metric either run has: A, B, change and the verdict from B's point of view;
    a workload-dependent metric is judged only where the workload is known to be the same
    (different: :attr:`Verdict.OTHER_WORKLOAD`; not known: :attr:`Verdict.UNKNOWN_WORKLOAD`)."""
    rows = []
    spread = run_spread(sa, sb)
    same_workload = (load or workload(sa, sb)).same
    for m in METRICS:
        va, vb = m.value(sa), m.value(sb)
        if va is None and vb is None:
            continue
        change = vb - va if va is not None and vb is not None else None
        ratio = vb / va if change is not None and va else None
        if change is None:
            verdict = Verdict.NA
        elif m.workload and same_workload is not True:
            verdict = Verdict.OTHER_WORKLOAD if same_workload is False else Verdict.UNKNOWN_WORKLOAD
        elif abs(change) <= 1e-9 * max(1.0, abs(va or 0.0)):
            verdict = Verdict.SAME
        elif m.timing and spread is not None and ratio is not None and 1 / spread < ratio < spread:
            verdict = Verdict.WITHIN_SPREAD
        else:
            verdict = Verdict.BETTER if (change < 0) == m.lower_is_better else Verdict.WORSE
        rows.append(
            DiffRow(
                metric=m.name,
                unit=m.unit,
                a=va,
                b=vb,
                change=change,
                change_pct=100.0 * change / abs(va) if change is not None and va else None,
                ratio=ratio,
                verdict=verdict,
                provenance=_provenance(m, sa, sb),
            )
        )
    return rows


def capture_label(s: RunSummary) -> str:
    """The capture verdict as the report words it (an imported trace's own label)."""
    return str(s.capture.label or s.capture.status)


def backend_text(s: RunSummary) -> str:
    """The run's backend as every view names it; an imported trace records none (it names
    kernels): said, with the verify paths its kernels show, never "None"."""
    if s.backend:
        return str(s.backend)
    paths = list(dict.fromkeys(p.path for p in (s.trace.paths if s.trace else [])))
    return "not recorded" + (f" (the trace's kernels: {', '.join(paths)})" if paths else "")


def _trace_splits(sa: RunSummary, sb: RunSummary) -> list[TraceSplitChange]:
    """S and batch rows per (path, kernel variant) of two imported traces, as read from them."""
    pa = {(p.path, p.variant): p for p in (sa.trace.paths if sa.trace else [])}
    pb = {(p.path, p.variant): p for p in (sb.trace.paths if sb.trace else [])}
    out = []
    for key in dict.fromkeys([*pa, *pb]):
        x, y = pa.get(key), pb.get(key)
        out.append(
            TraceSplitChange(
                path=key[0],
                variant=key[1],
                S_before=None if x is None else x.S,
                S_after=None if y is None else y.S,
                rows_before=None if x is None else x.rows,
                rows_after=None if y is None else y.rows,
                source="imported traces (S from the kernels' grids)",
            )
        )
    return out


def diff(sa: RunSummary, sb: RunSummary) -> SummaryDiff:
    """The typed diff of two summaries: the metric table with verdicts, then what has no
    number (capture verdict, vLLM route, backend, whether the workloads match, S per kernel
    variant of imported traces)."""
    load = workload(sa, sb)
    return SummaryDiff(
        before=sa.run,
        after=sb.run,
        state=Change(str(sa.state.status), str(sb.state.status)),
        capture=Change(capture_label(sa), capture_label(sb)),
        route=Change(*(route_label(r) if r else None for r in (sa.route, sb.route))),
        backend=Change(backend_text(sa), backend_text(sb)),
        workload=load,
        trace_splits=_trace_splits(sa, sb),
        cpu_spread=run_spread(sa, sb),
        table=diff_rows(sa, sb, load),
    )


def _typed(s: Any) -> RunSummary:
    from mlaprof.analysis.run_summary import RunSummary

    return s if isinstance(s, RunSummary) else RunSummary.from_json(s)


def diff_summaries(sa: Any, sb: Any) -> dict[str, Any]:
    """The diff as ``report --json --compare`` writes it, of two summaries (typed, or the
    ``report --json`` documents of older callers)."""
    return diff(_typed(sa), _typed(sb)).to_json()


def diff_table(sa: Any, sb: Any) -> list[dict[str, Any]]:
    """The diff's metric rows as JSON objects (see :func:`diff_summaries`)."""
    return [to_json(r) for r in diff_rows(_typed(sa), _typed(sb))]


def diff_runs(a: Any, b: Any) -> dict[str, Any]:
    """What changed from run ``a`` (before) to run ``b`` (after), and by how much (builds both
    summaries: a caller that holds them passes them to :func:`diff`)."""
    from mlaprof.analysis.run_summary import build_summary

    return diff(build_summary(a), build_summary(b)).to_json()


def fmt_value(v: float | None) -> str:
    """A diff value as every view prints it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.3g}"


def fmt_change(r: Any) -> str:
    """The change column: percent where A is non-zero, else the absolute change (a typed
    :class:`DiffRow` or its JSON object)."""
    pct = r["change_pct"] if isinstance(r, dict) else r.change_pct
    change = r["change"] if isinstance(r, dict) else r.change
    if pct is not None:
        return f"{pct:+.0f}%"
    return "-" if change is None else "+" * (change > 0) + fmt_value(change)
