"""Question 4: does the step capture (measured where a capture was attempted, else predicted
from the syncs seen), and from a kernel trace, how each step ran (its MLA kernels in a graph
replay, between graph pieces, or eager). What capture costs: :mod:`mlaprof.analysis.memory`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.capture_status import NO_FULL_GRAPH, CaptureStatus, over_ranks
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import _origin
from mlaprof.analysis.memory import (  # noqa: F401 - the memory measure's home, re-exported
    CAPTURE_MEMORY_MEASURE,
    attempted_memory,
    capture_memory_bytes,
    capture_sizes,
    captured_sizes,
    human_bytes,
    serving_memory,
)
from mlaprof.analysis.padding import padded_sizes, size_text
from mlaprof.analysis.run_checks import RunChecks, no_launch_evidence
from mlaprof.analysis.sections import RankCapture
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.rank_counts import counted, per_rank_count, plural, rank_list, ranks_of
from mlaprof.step_sources import SOURCE_TEXT
from mlaprof.sync_kinds import PREDICTS_FAILURE

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta
    from mlaprof.analysis.sections import Capture

# statuses that mean "no FULL graph" (the one rule: mlaprof.analysis.capture_status)
FAILED_CAPTURE = tuple(sorted(NO_FULL_GRAPH))


# why a FULL run that attempted no capture and whose syncs were not checked has no verdict
NOT_PREDICTED = "no capture attempted and no step watched for syncs: nothing predicts it"


def trace_capture_text(cap: Capture) -> str:
    """An imported trace's capture verdict as every view says it: its label, then its evidence
    (an unknown verdict's label already holds why: said once)."""
    if cap.status == CaptureStatus.UNKNOWN or not cap.evidence:
        return cap.label
    return f"{cap.label} ({cap.evidence})"


def capture_summary(
    run_meta: RunMeta,
    syncs: pd.DataFrame,
    layers: pd.DataFrame,
    captures: pd.DataFrame,
    memory: pd.DataFrame,
    origin: str = "unknown",
    padding: pd.DataFrame | None = None,
    steps: pd.DataFrame | None = None,
) -> Capture:
    """A scenario run's capture verdict: measured where a capture was attempted (``origin``:
    where the run's numbers were measured), else predicted from the syncs seen, where the sync
    probe watched a step (``layers``: its per-layer counts; :func:`syncs.probe_watched`, the
    sync count's own rule): a run that checked none predicts nothing (unknown). ``padding``:
    the run's padding records, whose capture sizes the section's sizes line names
    (:func:`sizes_text`). ``steps``: the run's step records, whose modes say what ran where no
    capture was attempted (:func:`_ran`). A run of several ranks is judged rank by rank
    (``per_rank``: each rank's verdict from its own records and the mode it then ran); its
    status is the ranks' own where they agree, else "per-rank" (:func:`capture_status.
    over_ranks`), never a verdict over their records pooled; whether a FULL graph serves its
    steps is Capture.no_full_graph's."""
    from mlaprof.analysis.evidence.common import capture

    mode = run_meta.scenario.graph_mode or "FULL"
    st_all = steps if steps is not None else pd.DataFrame()
    status, effective, predicted = _verdict(mode, syncs, layers, captures, st_all)
    sizes = capture_sizes(memory)  # the memory finding's count too
    pad = padding if padding is not None else pd.DataFrame()
    frames = (syncs, layers, captures, memory)
    ranks = sorted({int(r) for f in frames if "rank" in f for r in f["rank"].dropna().unique()})
    # several ranks: each rank's own verdict and capture memory (the section's memory adds
    # theirs, said so where several ranks measured some)
    per = []
    for r in ranks if len(ranks) > 1 else []:
        st, ran, pred = _verdict(mode, *(_of_rank(f, r) for f in (*frames[:3], st_all)))
        per.append(RankCapture(rank=r, status=CaptureStatus(st), effective_mode=ran,
                               memory_bytes=capture_memory_bytes(_of_rank(memory, r)),
                               **({"predicted_mode": pred} if pred else {})))  # fmt: skip
    if per:
        status = over_ranks(p.status for p in per)
        said = {p.effective_mode for p in per}
        effective = said.pop() if len(said) == 1 else None  # else each rank's own
        guessed = {p.predicted_mode for p in per}
        predicted = guessed.pop() if len(guessed) == 1 else None
    origin = _provenance(origin, status, per)
    return capture(
        CaptureStatus(status),
        origin,
        NOT_PREDICTED,  # the why of an unknown verdict (the only one here)
        mode=mode,
        effective_mode=effective,
        **({"predicted_mode": predicted} if predicted else {}),
        memory_bytes=capture_memory_bytes(memory),
        memory_measure=CAPTURE_MEMORY_MEASURE,
        # no capture recorded: no count at all (its why is in sizes_text), never a 0
        **({} if sizes is None else {"sizes": sizes}),
        sizes_text=sizes_text(
            memory, padded_sizes(pad), _why_none(run_meta, mode), run_meta.scenario.vllm_version
        ),
        **({"per_rank": per} if per else {}),
    )


def _provenance(measured: str, status: str, per: list[RankCapture]) -> str:
    """Where a scenario run's verdict comes from: ``measured`` (where a capture was attempted),
    "predicted from syncs", or "not checked"; a per-rank verdict's, each rank's where the
    ranks' differ."""

    def of(st: str) -> str:
        if st.startswith("predicted"):
            return "predicted from syncs"
        return "not checked" if st == CaptureStatus.UNKNOWN else measured

    if status != CaptureStatus.PER_RANK:
        return of(status)
    by: dict[str, list[int]] = {}
    for p in per:
        by.setdefault(of(p.status), []).append(p.rank)
    if len(by) == 1:
        return next(iter(by))
    return "; ".join(f"{rank_list(rs)}: {how}" for how, rs in by.items())


def _verdict(
    mode: str,
    syncs: pd.DataFrame,
    layers: pd.DataFrame,
    captures: pd.DataFrame,
    steps: pd.DataFrame,
) -> tuple[str, str | None, str | None]:
    """``(status, the mode that ran, the mode a GPU would run: predicted)`` of a scenario run's
    records (every rank's, or one's). A capture attempted says what ran (measured); where none
    was, the steps say it (:func:`_ran`) and the syncs seen only predict: a prediction is never
    given as the mode that ran."""
    from mlaprof.analysis.syncs import probe_watched, watched_steps

    failed = captures[captures["status"] == "failed"] if not captures.empty else captures
    captured = captures[captures["status"] == "captured"] if not captures.empty else captures
    blocking = syncs[syncs["kind"].isin(PREDICTS_FAILURE)] if not syncs.empty else syncs
    if not failed.empty:
        fell = failed["fallback"].dropna()
        return "failed", (str(fell.iloc[0]) if not fell.empty else "PIECEWISE"), None
    if not captured.empty:
        return "captured", mode, None
    ran = _ran(steps)
    if mode == "FULL" and not blocking.empty:
        return "predicted-fail", ran, "PIECEWISE"
    if mode == "FULL" and not probe_watched(watched_steps(layers, syncs), syncs):
        return "unknown", ran, None  # nothing watched predicts nothing
    if mode == "FULL":
        return "predicted-ok", ran, mode
    return "not-attempted", ran, None


def _ran(steps: pd.DataFrame) -> str | None:
    """What a scenario run's steps ran where no capture was attempted, by the timing's one rule
    (:func:`mlaprof.analysis.timing.step_modes`: a CPU step ran eagerly in its mode's shape,
    "FULL shape on cpu"); None where no step was recorded (the evidence does not say)."""
    from mlaprof.analysis.timing import step_modes

    if steps.empty or "graph_mode" not in steps:
        return None
    modes = sorted(set(step_modes(steps)) - {"?"})
    return ", ".join(modes) or None


def _why_none(meta: RunMeta, mode: str) -> str:
    """Why a scenario run recorded no capture (the capture section's sizes line says it)."""
    if str(meta.device or "").startswith("cpu"):
        return "CPU engine: graph capture needs a GPU, not attempted"
    if mode != "FULL":
        return f"graph mode {mode}: no FULL capture attempted"
    return "no capture recorded"


def sizes_text(
    memory: pd.DataFrame, padded: list[int], why_none: str, vllm: str | None = None
) -> str:
    """The capture sizes as every view says them, the two facts apart: the configured sizes the
    steps were padded to (the padding section's words, :func:`mlaprof.analysis.padding.
    size_text`; ``vllm``: the version whose capture sizes they are) and what a capture covered
    (the memory records: graphs kept, else FULL attempts that failed) or, where none was
    captured, ``why_none``; never a count of 0 beside the padding's size."""
    said = ", ".join
    of = f"of the scenario's vLLM {vllm} capture sizes" if vllm else "configured"
    configured = f"steps padded to {size_text(padded)} ({of})"
    if not padded:
        configured = "no padded capture size recorded"
    kept = serving_memory(memory)
    if not kept.empty:
        got = captured_sizes(kept)
        captured = f"captured: {len(got)} ({said(map(str, got))})"
    elif not attempted_memory(memory).empty:
        got = captured_sizes(memory)
        captured = (
            f"captured: none; attempted: {len(got)} ({said(map(str, got))}), FULL capture failed"
        )
    else:
        captured = f"captured: none ({why_none})"
    return f"{configured}; {captured}"


def capture_findings(summary: Capture, captures: pd.DataFrame) -> list[Finding]:
    """A FULL capture that failed (measured) or would fail (predicted from the syncs seen); of
    a per-rank verdict, the ranks whose own verdict says so, named (each status once)."""
    if summary.status != CaptureStatus.PER_RANK:
        if summary.status not in FAILING:
            return []
        return [_capture_finding(str(summary.status), summary.served_mode, captures)]
    per = summary.per_rank or []
    out = []
    for st in FAILING:
        ranks = [r.rank for r in per if r.status == st]
        if not ranks:
            continue
        ran = "/".join(sorted({str(r.served_mode) for r in per if r.rank in ranks}))
        own = captures[captures["rank"].isin(ranks)] if "rank" in captures else captures
        out.append(_capture_finding(st, ran, own, ranks_of(ranks, len(per)), ranks))
    return out


# the verdicts the capture finding states: measured to fail, or predicted to from the syncs
FAILING = (CaptureStatus.FAILED, CaptureStatus.PREDICTED_FAIL)


def _capture_finding(
    status: str,
    ran: str | None,
    captures: pd.DataFrame,
    on: str = "",
    ranks: list[int] | None = None,
) -> Finding:
    """The capture finding of ``status`` (failed or predicted-fail), ``on`` the ranks it holds
    for where the verdict is per rank (``ranks`` in its data)."""
    first = captures[captures["status"] == "failed"].head(1) if not captures.empty else captures
    where = ""
    if not first.empty:
        r = first.iloc[0]
        where = f": first offender {r.op} on layer {r.layer} at {r.location}"
    verb = "failed" if status == CaptureStatus.FAILED else "would fail"
    # a prediction says the fallback as one (what the engine would run), never as what ran
    run = "runs" if status == CaptureStatus.FAILED else "would run"
    runs = f" on {on}; the engine {run} {ran} there" if on else f"; the engine {run} {ran}"
    # a step runs on every rank: one rank without a FULL graph keeps the step out of them
    group = "; a step runs on every rank, so no FULL graph serves the group's steps" if on else ""
    return Finding(
        kind="capture",
        severity="critical",
        title=f"FULL graph capture {verb}{runs} instead{where}",
        evidence=(
            "a device->host sync or data-dependent allocation inside the captured region "
            f"invalidates the capture (see the sync findings){group}"
        ),
        fix="move every sync into the metadata builder; then FULL graphs capture",
        location=None if first.empty else str(first.iloc[0].location),
        data={"ranks": ranks} if ranks is not None else {},
    )


# -- the capture verdict from how each step's MLA kernels ran (kernel-level steps) --------------
# (what a trace without an API trace cannot know: mlaprof.analysis.run_checks)
def step_mode_evidence(
    meta: RunMeta, steps: pd.DataFrame, checks: RunChecks | None = None
) -> Capture:
    """The capture verdict the trace supports, from each step's mode: FULL (its MLA layers in a
    graph replay), PIECEWISE (eager attention between graph pieces), eager, or a mix; "unknown"
    where the kernels carry no correlation id (a replay and an eager launch look alike).
    ``checks``: the import's trace checks, each rank's. A trace of several ranks is judged rank
    by rank from each rank's own steps and checks (``per_rank``; its evidence says each rank's,
    ranks that read the same said once): the section's counts add them, its verdict is the
    ranks' own (:func:`capture_status.over_ranks`: theirs where they agree, else "per-rank"),
    never one over their steps pooled; an older import's summed checks are judged pooled."""
    from mlaprof.analysis.evidence.common import capture

    checks = checks if checks is not None else RunChecks()
    st = steps[steps["backend"].notna()] if not steps.empty else steps
    own = checks.ranks()
    with_steps = {int(r) for r in st["rank"].dropna().unique()} if "rank" in st else set()
    ranks = sorted(with_steps | set(own))
    # an older import kept only its ranks' checks summed: no rank's own launches to judge by
    summed_only = bool(checks) and not own
    status, ev, fields = _step_modes(meta, steps, checks, len(ranks))
    if len(ranks) > 1 and not summed_only:
        per = {r: _step_modes(meta, _of_rank(steps, r), checks.only(r), 1) for r in ranks}
        ev = said_per_rank({r: e for r, (_, e, _) in per.items()})
        fields["per_rank"] = [_rank_capture(r, s, f) for r, (s, _, f) in per.items()]
        status = over_ranks(CaptureStatus(s) for s, _, _ in per.values())
        said = {p.effective_mode for p in fields["per_rank"]}
        fields["effective_mode"] = said.pop() if len(said) == 1 else None  # else each rank's
    # the one label table (capture_status.CAPTURE_LABELS): capture() labels the status; the
    # evidence names what a mix mixed, and FULL only where a graph-launch call confirms it
    return capture(CaptureStatus(status), _origin(meta), why=ev, evidence=ev, **fields)


def _of_rank(frame: pd.DataFrame, rank: int) -> pd.DataFrame:
    return frame[frame["rank"] == rank] if not frame.empty and "rank" in frame else frame


def _rank_capture(rank: int, status: str, fields: dict[str, Any]) -> RankCapture:
    keep = ("graph_steps", "piecewise_steps", "eager_steps", "graph_launches",
            "launches_without_kernels", "step_source", "effective_mode")  # fmt: skip
    return RankCapture(rank=rank, status=CaptureStatus(status),
                       **{k: fields.get(k) for k in keep})  # fmt: skip


def said_per_rank(texts: dict[int, str]) -> str:
    """Each rank's text, ranks whose texts are the same said once ("Ranks 0-7 (each): ...")."""
    by: dict[str, list[int]] = {}
    for r, t in sorted(texts.items()):
        by.setdefault(t, []).append(r)
    parts = []
    for t, rs in by.items():
        who = rank_list(rs)
        parts.append(f"{who[0].upper()}{who[1:]}{' (each)' if len(rs) > 1 else ''}: {t}")
    return ". ".join(parts)


def _step_modes(
    meta: RunMeta, steps: pd.DataFrame, checks: RunChecks, n_ranks: int
) -> tuple[str, str, dict[str, Any]]:
    """``(status, evidence, the capture's fields)`` of ``steps`` judged with ``checks`` (one
    rank's; or, where ``n_ranks`` > 1, an older import's ranks pooled with their summed
    checks: counts said per rank, sums said so)."""
    launches = checks.group("launches")
    st = steps[steps["backend"].notna()] if not steps.empty else steps
    mode = st["graph_mode"] if not st.empty else pd.Series(dtype=object)
    n_graph = int((mode == "graph").sum())
    n_piece = int((mode == "piecewise").sum())
    n_eager = int((mode == "eager").sum())
    summed = over_ranks_label("sum", n_ranks)

    def steps_of(m: str | None, unit: str) -> str:
        rows = st if m is None else st[mode == m]
        if n_ranks <= 1 or "rank" not in rows:
            return counted(len(rows), unit)
        return per_rank_count({int(r): int(n) for r, n in rows.groupby("rank").size().items()},
                               unit)  # fmt: skip

    n_launch = int(launches.get("graph_launches", 0))
    # a CPU run launches no graph at all: its 0 is known
    launch_why = None if meta.device == "cpu" else no_launch_evidence(launches)
    with_launch = launches.get("mla_replays_with_launch")
    if st.empty:
        status, ev = "unknown", "no MLA kernels recognised, so no step to judge"
    elif meta.device == "cpu":
        status = "eager"
        ev = (
            f"{steps_of(None, 'step(s)')} of a CPU run with its MLA op: a CPU run has no graphs (vLLM's CPU "
            "attention backends support cudagraph NEVER), every op runs one by one"
        )
    elif n_graph + n_piece + n_eager == 0:
        status, ev = (
            "unknown",
            (
                f"{steps_of(None, 'MLA step(s)')} whose kernels carry no correlation id: graph replays and "
                "eager launches cannot be told apart"
                + (
                    f" ({n_launch}{summed} {plural('graph launch(es)', n_launch)} in the API "
                    "trace: FULL or PIECEWISE, "
                    "the trace cannot tell)"
                    if n_launch
                    else ""
                )
            ),
        )
    else:
        how = (
            (
                f"{with_launch} of {n_graph}{summed}"
                if (with_launch or 0) <= n_graph
                else f"{with_launch}{summed} MLA replays (drafter passes included)"
            )
            + " carry the correlation id of a graph-launch call in the API trace"
            if n_launch
            else "their kernels share one correlation id (no graph-launch call in the trace to "
            "confirm)"
        )
        parts = []
        if n_graph:
            # FULL is said where a graph-launch call confirms the replays
            parts.append(
                f"{steps_of('graph', 'MLA step(s)')} replayed in a graph that holds their attention "
                + (f"(FULL; {how})" if n_launch else f"({how})")
            )
        if n_piece:
            parts.append(
                f"{steps_of('piecewise', 'PIECEWISE step(s)')}: attention launched eagerly between graph pieces "
                "that hold no MLA kernel"
            )
        if n_eager:
            parts.append(
                f"{steps_of('eager', 'eager step(s)')}: MLA kernels launched one by one, no graph launch "
                "inside the step"
            )
        kinds = sum(1 for n in (n_graph, n_piece, n_eager) if n)
        status = (
            "mixed" if kinds > 1 else "replayed" if n_graph else "piecewise" if n_piece else "eager"
        )
        ev = "; ".join(parts)
        if status == "eager" and n_launch:
            launches = plural("graph launch(es)", n_launch)
            ev += f"; {n_launch}{summed} {launches} elsewhere hold no MLA kernel"
    step_src = checks.group("steps").get("source")
    if step_src:
        ev += f". Steps told apart by {SOURCE_TEXT.get(step_src, step_src)}"
    fields: dict[str, Any] = {
        # what ran, where the trace says it: FULL only where a graph-launch call confirms the
        # replays (the evidence's own rule above), eager attention as vLLM names it (NONE)
        "effective_mode": _trace_ran(n_graph, n_piece, n_eager, bool(n_launch)),
        "graph_steps": n_graph,
        "piecewise_steps": n_piece,
        "eager_steps": n_eager,
        # None where the import holds no API trace: a count there would read as "none launched"
        "graph_launches": None if launch_why else n_launch,
        **({"graph_launches_why": launch_why} if launch_why else {}),
        "launches_without_kernels": None
        if launch_why
        else launches.get("launches_without_kernels"),
        "step_source": step_src,
        "cpu": meta.device == "cpu",  # no graphs to capture: no capture finding
    }
    return status, ev, fields


def _trace_ran(n_graph: int, n_piece: int, n_eager: int, confirmed: bool) -> str | None:
    """The mode a trace's MLA steps ran, from their counts: FULL for graph replays only where
    ``confirmed`` (a graph-launch call correlates with them: else a replay could be FULL or a
    piece, unknown), PIECEWISE, NONE (eager); a mix names each with its steps; None where a
    part is unknown or no step was judged."""
    said = [(n, m) for n, m in ((n_graph, "FULL" if confirmed else None), (n_piece, "PIECEWISE"),
                                (n_eager, "NONE")) if n]  # fmt: skip
    if not said or any(m is None for _, m in said):
        return None
    if len(said) == 1:
        return said[0][1]
    return ", ".join(f"{m} in {counted(n, 'step(s)')}" for n, m in said)


def step_mode_findings(cap: Capture | None, ranks: int = 1) -> list[Finding]:
    """Attention outside graphs in some or all steps (eager or PIECEWISE), with the count of
    each; FULL replays alone give none. ``cap``: :func:`step_mode_evidence` (None: the run's
    steps carry no kernel-level mode); ``ranks``: the run's. Each count is said per rank,
    naming the ranks it holds on (``cap.per_rank``); an older import's, which kept no rank's
    own, as the sum it is."""
    if cap is None:
        return []
    n_eager, n_piece = cap.eager_steps, _written(cap, "piecewise_steps")
    outside_graphs = (CaptureStatus.EAGER, CaptureStatus.MIXED, CaptureStatus.PIECEWISE,
                      CaptureStatus.PER_RANK)  # fmt: skip
    if cap.status not in outside_graphs or not (n_eager or n_piece):
        return []
    if cap.cpu:
        return []
    per = cap.per_rank or []

    def on(key: str, unit: str) -> str:
        if not per:  # one rank's, or an older import's sum over its ranks
            n = _written(cap, key)
            return f"{n} {plural(unit, n)}" + over_ranks_label("sum", ranks)
        counts = {r.rank: n for r in per if (n := getattr(r, key))}
        text = per_rank_count(counts, unit)
        return text + (f" on {ranks_of(counts, len(per))}" if len(counts) < len(per) else "")

    ran = " and ".join(
        t
        for n, t in ((n_piece, f"between graph pieces (PIECEWISE) in {on('piecewise_steps', 'step(s)')}"),
                     (n_eager, f"eagerly in {on('eager_steps', 'step(s)')}"))
        if n
    )  # fmt: skip
    outside = sorted(r.rank for r in per if r.eager_steps or r.piecewise_steps)
    return [
        Finding(
            kind="capture",
            severity="warning",
            title=(
                f"attention ran {ran}"
                + (f" beside {on('graph_steps', 'FULL graph replays')}" if cap.graph_steps else "")
            ),
            evidence=f"{cap.evidence} ({cap.provenance})",
            fix=(
                "capture a FULL graph for these batch sizes (cudagraph capture sizes; steps too "
                "big for any capture size, such as chunked prefill mixed into decode, run "
                "PIECEWISE or eager by design) or make the attention path capturable"
            ),
            data={
                **{
                    k: _written(cap, k)
                    for k in ("graph_steps", "piecewise_steps", "eager_steps", "graph_launches")
                },
                # the ranks whose attention ran outside graphs (the counts add theirs)
                **({"ranks": outside} if per else {}),
            },  # fmt: skip
        )
    ]


def _written(cap: Capture, key: str) -> int | None:
    """An optional count as its producer wrote it: 0 where it left the key out, None where it
    wrote null (graph_launches without an API trace)."""
    v = getattr(cap, key)
    return v if v is not None or key in cap.null_keys else 0
