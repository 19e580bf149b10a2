"""The typed sections of a run's summary (:class:`mlaprof.analysis.run_summary.RunSummary`):
frozen dataclasses, enums where the data is a vocabulary, ``X | None`` where the evidence may not
hold a value. Every view reads these attributes; ``RunSummary.to_json()`` writes them back as the
``report --json`` document (:mod:`mlaprof.analysis.typed_json`), key for key what the
analyzers returned. A field made with ``opt()`` is a key only some producers write (left out of
the document when ``None``)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from mlaprof.analysis.capture_status import (
    CaptureStatus,
    no_full_graph,
    per_rank_modes,
    served_mode,
)
from mlaprof.analysis.section_base import Section, section
from mlaprof.analysis.typed_json import (
    counted_by,
    each_rank_of,
    holds_words,
    nulls,
    opt,
    over_ranks,
    reads_when_none,
    says,
    words_of,
)
from mlaprof.splits.policies import NOT_RUNNABLE
from mlaprof.store.liveness import RunStatus  # noqa: F401, TC001 - the one status vocabulary, a field type

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# which S a layer's collapse is judged against, and how every view words it (the typed row's
# ``reference_source`` maps the words back: LayerRow below; mlaprof.analysis.layers uses them)
REFERENCE_TEXT = {
    "deserved": "deserved by the real rows",
    "fix": "the fix's S for the same rows (the grid counts padding rows)",
    "unknown": "unknown (no deserved S and no modelled fix for this path)",
}
REFERENCE_SOURCE = {text: source for source, text in REFERENCE_TEXT.items()}
# what a collapse verdict over ranks reads where no rank's layer had an S to judge it against
# (never "none": that is a verdict)
NOT_JUDGED = "not judged: no layer has an S reference to judge a collapse by"


@section
class RankCommitted(Section):
    """One rank's committed steps (analysis.run_state)."""

    rank: int
    steps_committed: int
    last_step: int | None  # None: the rank committed no step


def closed_record(status: str, reason: str | None) -> bool:
    """The run finished and its writer closed its record (no reason recorded): the one rule
    by which :func:`mlaprof.analysis.run_state.run_state` words ``RunState.text`` and the
    views put that line above a report only where it does not hold."""
    return status == RunStatus.FINISHED and not reason


@section
class RunState(Section):
    """Where the run stands (analysis.run_state): its status and how far its committed records
    reach, and for a run that did not finish why (``text``: the line every view prints, a
    finished run's too: "finished; 32 steps committed, ...", never empty)."""

    status: RunStatus
    # why it ended early, where its writer recorded it (Run.reason); None: none recorded
    reason: str | None = reads_when_none("none recorded")
    # the steps each rank committed where every rank committed as many (never a sum, never the
    # fewest rank's shown as the run's); None where the ranks differ (``per_rank``)
    steps_committed: int | None
    # the last step committed, where every rank's is the same; None: ranks differ or no step
    last_step: int | None
    # each rank's count and last step in words
    committed: str = says("steps_committed", "last_step")
    per_rank: list[RankCommitted]
    text: str = says("status", "reason", "committed")  # the line every view prints

    def none_reads(self, name: str) -> str | None:
        """A count or last step the ranks differ on reads so (each rank's in ``committed``),
        never "unknown"; a run with no step committed says that."""
        if name not in ("steps_committed", "last_step"):
            return None
        if not any(r.steps_committed for r in self.per_rank):
            return "no step committed"
        return "differs per rank: see state"

    @property
    def closed(self) -> bool:
        """The run finished and closed its record (:func:`closed_record`): a view flags
        ``text`` above its report only where this is False."""
        return closed_record(self.status, self.reason)


@section
class Imported(Section):
    """Where an imported trace or log came from (None for a recorded run)."""

    imported_from: str
    format: str | None
    # the trace's records the device was read from (rocprofv3's agent records); None: the
    # trace names no device, or the importer records no source for it
    device_source: str | None = opt()
    # the files of the imported folder passed over (kinds mlaprof does not read), relative to it
    not_read: list[str] | None = opt()

    @property
    def text(self) -> str:
        """Where it came from as every view says it after "imported from": the file, then its
        format (``tests/data/aiter/fleet (csv)``), then the records its device was read from,
        then the files of it that were not read."""
        said = self.imported_from + (f" ({self.format})" if self.format else "")
        said += f"; device read from {self.device_source}" if self.device_source else ""
        if self.not_read:
            more = len(self.not_read) - 3
            names = ", ".join(self.not_read[:3]) + (f" and {more} more" if more > 0 else "")
            said += f"; not read: {names} (kinds mlaprof does not read)"
        return said


# what a layer record's S reads where the run's kernel decides S on the device at each step
# (backends.registry.device_decides_splits): the record holds the launch grid's split axis,
# the most splits a row may take, never an S a row ran with
DEVICE_S_CAP = "cap {cap} (S decided on the device)"
DEVICE_NOT_JUDGED = "not judged (S decided on the device)"


def device_cap_text(cap: int) -> str:
    """A grid cap said where an S would stand: "cap 128 (S decided on the device)"."""
    return DEVICE_S_CAP.format(cap=cap)


class GridCapped(Section):
    """Mixed into the sections made of layer records (their S fields), so that where the run's
    kernel decides S on the device their S is None and reads as the grid's cap
    (``S_grid_cap``), and their collapse as not judged, in every view."""

    __slots__ = ()
    CAPPED = ("S_min", "S_max", "S_used", "splits")  # the S fields (those a class has)
    NOT_JUDGED = ("collapsed", "collapsed_layers", "collapsed_steps")

    def none_reads(self, name: str) -> str | None:
        cap = getattr(self, "S_grid_cap", None)
        if cap is None:
            return None
        if name in self.CAPPED:
            return device_cap_text(cap)
        return DEVICE_NOT_JUDGED if name in self.NOT_JUDGED else None


class Source(StrEnum):
    """Where a number comes from, where a view must say it."""

    MEASURED = "measured"
    MODELLED = "modelled"


@section
class DpGroup(GridCapped):
    """One data-parallel group of a fleet (analysis.ranks.dp_group_rows): its ranks side by
    side, S as the range its ranks used, never one merged value."""

    dp_group: int | None  # None: the ranks whose group is unknown
    ranks: list[int]
    hosts: list[str] | None  # None: no rank of the group has a recorded host
    S_min: int | None
    S_max: int | None
    # the judged ranks that collapsed; None: no rank of the group was judged
    ranks_collapsed: list[int] | None = reads_when_none("not judged")
    engine: int | None = opt()  # its engine, where the trace shows several
    ranks_not_judged: list[int] | None = opt()  # ranks no layer of which was judged
    S_grid_cap: int | None = opt()  # S decided on the device: the records' grid cap


@section
class FullGraphSplits(Section):
    """The S a FULL graph replays beside the S modelled: ``measured`` from the run's graph
    replays, ``modelled`` the S vLLM's capture-time dummy run would freeze (the run's own
    policy, worst step; FULL runs only); ``source`` says which a view shows: measured over
    modelled where both exist, None where neither does."""

    used: int | None  # S the run's policy used per step
    measured_min: int | None
    measured_max: int | None
    modelled: int | None
    source: Source | None
    # the condition ``modelled`` holds on (the splits rows' ``frozen_if``; None: none)
    modelled_if: str | None = opt()
    # the run's policy off its route: ``modelled`` is a what-if (its splits row's
    # ``frozen_what_if``), never the S the run's graph replays
    modelled_what_if: str | None = opt()


@section
class RankCapture(Section):
    """One rank's own capture evidence (analysis.capture: its verdict from its own records
    alone), a row of :attr:`Capture.per_rank`; a count its producer does not write is left out."""

    rank: int
    status: CaptureStatus
    memory_bytes: int | None = opt()
    graph_steps: int | None = opt()
    piecewise_steps: int | None = opt()
    eager_steps: int | None = opt()
    graph_launches: int | None = opt()
    launches_without_kernels: int | None = opt()
    step_source: str | None = opt()
    # the mode the rank ran (an engine rank's most steps', a scenario rank's after its capture,
    # or the shape its CPU steps ran eagerly in)
    effective_mode: str | None = opt()
    modes: dict[str, int] | None = opt()  # an engine rank's steps per graph mode
    # the mode a GPU would run, predicted from the rank's syncs (None: no prediction)
    predicted_mode: str | None = opt()

    @property
    def served_mode(self) -> str | None:
        """The graph mode the FULL-graph claims judge (capture_status.served_mode)."""
        return served_mode(self.effective_mode, self.predicted_mode)


@section
class Capture(Section):
    """The capture verdict in the one vocabulary (mlaprof.analysis.evidence.common.capture):
    ``status`` with its ``label``, the ``text`` every view prints and where it comes from; the
    producer's own evidence in the optional fields. A run of several ranks keeps each rank's
    evidence in ``per_rank``; the counts here add them (said so only where several ranks'
    values are not 0)."""

    # the mode the steps ran: a graph mode, or the shape a CPU ran them in eagerly ("FULL shape
    # on cpu", the timing's step_modes rule); None: the evidence does not say
    effective_mode: str | None
    # the status in words (capture_status.CAPTURE_LABELS; for several ranks, each rank's): said
    # once where the words are the status itself (a capture that succeeded or failed), in the
    # status row every view names
    label: str = words_of("status", keep_value=True)
    memory_bytes: int | None = over_ranks()  # each rank's: per_rank
    mode: str | None  # the graph mode asked for
    provenance: str
    status: CaptureStatus
    # the label where nothing more is known: said once; it says the modes asked for and run
    text: str = words_of("label", says=("mode", "effective_mode"))
    why: str | None = opt()  # for an unknown status: which evidence is missing
    # the mode a GPU would run, predicted from the syncs seen (a scenario run that captured
    # nothing); None: the verdict is no prediction. Never the mode that ran (effective_mode)
    predicted_mode: str | None = opt()
    modes: dict[str, int] | None = opt("sum")  # an engine's steps per graph mode, over ranks
    cpu: bool | None = opt()
    eager_steps: int | None = opt("sum")  # over ranks
    evidence: str | None = opt()
    graph_launches: int | None = opt("sum")  # over ranks
    graph_launches_why: str | None = opt()  # why graph_launches is null (no API trace)
    graph_steps: int | None = opt("sum")  # over ranks
    launches_without_kernels: int | None = opt("sum")  # over ranks
    piecewise_steps: int | None = opt("sum")  # over ranks
    step_source: str | None = opt()
    memory_measure: str | None = opt()
    # how many capture sizes a capture covered (graphs kept, else failed FULL attempts); left
    # out where none was recorded (a CPU engine captures nothing): never a 0 read as a count
    sizes: int | None = opt()
    # the capture sizes in words, the line every view prints (analysis.capture.sizes_text): the
    # size the steps were padded to (the padding section's) and what a capture covered, or why
    # none was
    sizes_text: str | None = opt()
    start: int | None = opt()
    # each rank's own evidence where the run has several ranks (left out for one rank: the
    # section is that rank's)
    per_rank: list[RankCapture] | None = opt()
    null_keys: frozenset[str] = nulls()

    @property
    def no_full_graph(self) -> bool:
        """No FULL graph serves these steps (the one rule, capture_status.no_full_graph: a
        downgrade to a mode that keeps FULL decode graphs still has them; a per-rank status
        has none where any rank's own verdict has none). Every check reads this."""
        return no_full_graph(self.status, self.effective_mode, self.per_rank or ())

    @property
    def served_mode(self) -> str | None:
        """The graph mode the FULL-graph claims judge: the predicted one where the verdict is a
        prediction, else the mode that ran where it is a graph mode (capture_status.served_mode)."""
        return served_mode(self.effective_mode, self.predicted_mode)

    @property
    def modes_by_rank(self) -> str | None:
        """The mode that ran where the ranks ran modes of their own (no one ``effective_mode``;
        each rank's in ``per_rank``), naming each rank's: "differs by rank: rank 0 FULL; rank 1
        NONE"; None where there is one mode, or no rank's is said."""
        if self.effective_mode is not None or not self.per_rank:
            return None
        modes = {r.rank: r.effective_mode for r in self.per_rank}
        return per_rank_modes(modes) if len(set(modes.values())) > 1 else None

    def none_reads(self, name: str) -> str | None:
        """A per-rank capture's mode that ran reads each rank's (:attr:`modes_by_rank`), never
        "unknown" where every rank's is known."""
        return self.modes_by_rank if name == "effective_mode" else None

    @property
    def ran_text(self) -> str:
        """The mode that ran in one line (each rank's where they differ); where the evidence
        does not say it, "unknown" naming the mode asked for as only that, never as the mode
        that ran."""
        ran = self.effective_mode or self.modes_by_rank
        if ran:
            return ran
        return f"unknown (asked for {self.mode})" if self.mode else "unknown"

    @property
    def measured(self) -> bool:
        """The verdict is the run's own record, not a prediction from syncs or missing."""
        return self.status not in (
            CaptureStatus.PREDICTED_FAIL,
            CaptureStatus.PREDICTED_OK,
            CaptureStatus.UNKNOWN,
        )


@section
class Stage2Check(Section):
    """One kernel variant's split layers with and without a stage-2 (reduce) kernel (the trace
    section's: summed over ranks, analysis.run_checks.RunChecks.section)."""

    layers: int = over_ranks()
    s1_with_stage2: int = over_ranks()
    s1_without_stage2: int = over_ranks()
    s_unknown_without_stage2: int = over_ranks()
    split_with_stage2: int = over_ranks()
    split_without_stage2: int = over_ranks()


@section
class ProfiledGraphs(Section):
    """A vLLM log's profiled CUDA graphs of one mode."""

    graphs: int
    largest: int


@section
class AttentionLike(Section):
    """An attention-like kernel the trace holds that mlaprof did not recognise, on the ranks
    without a recognised MLA kernel (analysis.coverage.read_counts): its launches add
    ``ranks``'."""

    name: str
    launches: int = over_ranks()
    ranks: list[int]  # the ranks whose launches ``launches`` adds


@section
class CountedKernel(Section):
    """A kernel that hardware counters were sampled on, on a rank that holds no kernel record
    (rocprofv3 ``--pmc`` without ``--kernel-trace``; analysis.coverage.read_counts): its
    counter values add ``ranks``'."""

    name: str
    values: int = over_ranks()
    ranks: list[int]  # the ranks whose counter values ``values`` adds
    mla: bool  # the name matches the MLA kernel table


@section
class TraceTrustCounts(Section):
    """The trust checks' counts: the whole trace's, summed over its ranks (each rank's own
    verdict: the trace section's ``trust_by_rank``; its reasons name the ranks)."""

    eager_steps_between_replays: int | None = opt("sum")
    edge_partial_steps: int | None = opt("sum")
    expected_kernels: int | None = opt("sum")
    launches_without_kernels: int | None = opt("sum")
    missing_kernels: int | None = opt("sum")
    nameless_dispatches: int | None = opt("sum")
    repeated_dispatches: int | None = opt("sum")
    replays: int | None = opt("sum")
    short_replays: int | None = opt("sum")
    split_layers_without_stage2: int | None = opt("sum")
    steps_missing_layers: int | None = opt("sum")
    steps_layers_aligned: int | None = opt("sum")
    steps_layers_unknown: int | None = opt("sum")
    eager_steps_missing_layers: int | None = opt("sum")
    eager_steps_layers_aligned: int | None = opt("sum")
    eager_steps_layers_unknown: int | None = opt("sum")


@section
class TraceTrust(Section):
    counts: TraceTrustCounts
    reasons: list[str]
    reliable: bool | None
    verdict: str
    notes: list[str] | None = opt()
    provenance: str | None = opt()


@section
class TraceSync(Section):
    duration_ns: int
    layer: int
    op: str
    rank: int
    step: int
    t_ns: int


@section
class TraceSyncs(Section):
    count: int | None = over_ranks()  # every rank's host calls in MLA layers (analysis.syncs)
    evidence: str
    provenance: str
    status: str
    syncs: list[TraceSync] = counted_by("count")
    # the ranks whose host calls were checked (placed in their eager MLA layers, or all their
    # MLA steps graph replays); None: every rank's (a section made before ranks were told apart)
    ranks_checked: list[int] | None = opt()
    # the trace's ranks whose host syncs are unknown (no API or memory-copy trace of theirs, or
    # no eager MLA layer and not all graph replays): "not checked", never a 0 (``evidence``: why)
    ranks_not_checked: list[int] | None = opt()


@section
class TraceStep(Section):
    S: int | None
    capture: str
    duration_us: float
    graph_mode: str | None
    layers: int | None
    path: str
    qlen: int | None
    rank: int
    rows: int | None
    step: int
    variant: str


@section
class ReplayLayer(Section):
    S: int | None
    attention_median_us: float
    attention_share: float
    layer: int
    median_us: float
    ranks: list[int]
    ranks_text: str
    steps: int = over_ranks()  # of the row's ranks


@section
class ReplayRank(Section):
    """One rank's own replay-time figures (analysis.replay_time): its steps, the mean GPU time
    of its steps after their last layer, its attention share."""

    attention_share: float | None
    outside_layers_us: float
    rank: int
    steps: int


@section
class ReplayKernel(Section):
    attention: bool
    launches: int
    median_us: float
    name: str
    share: float
    total_us: float


@section
class TraceReplayTime(Section):
    attention_share: float | None
    kernels: list[ReplayKernel] = counted_by("replays")  # the kernels inside the replays
    layers: list[ReplayLayer] = counted_by("replays")
    provenance: str
    replays: int = over_ranks()
    # the mean over every rank's steps (each rank's: per_rank; outside_layers_text says both)
    outside_layers_us: float | None = opt("mean of the steps pooled")
    # groups of ranks whose layer rows read the same (a row each per layer); ranks never merged
    rank_groups: list[str] | None = opt()
    outside_layers_text: str | None = opt(words="outside_layers_us")
    per_rank: list[ReplayRank] | None = opt()
    # every kernel inside the replays is an MLA kernel: what the shares are of (a graph of
    # attention alone, or a trace filtered to its MLA kernels); None: other kernels too
    attention_only: str | None = opt()


@section
class TracePath(Section):
    """One verify path and kernel variant of an imported trace: its step counts are summed
    over the row's ``ranks`` (a view says so where they are several)."""

    S: str
    S_source: str
    eager_steps: int = over_ranks()
    graph_steps: int = over_ranks()
    layer_median_us: float | None
    path: str
    piecewise_steps: int = over_ranks()
    provenance: str
    qlen: str | None
    qlen_source: str
    ranks: list[int]
    rows: str | None
    rows_source: str
    steps: int = over_ranks()
    variant: str
    engine: int | None = opt()  # its engine, where the trace shows several (analysis.engines)


@section
class TraceDrafter(Section):
    """The drafter's passes (analysis.drafter.drafter_summary): a range or value the trace does
    not hold is None (a pass without a duration has no median), never a default."""

    S: str | None
    eager_steps: int = over_ranks()
    graph_steps: int = over_ranks()
    layers_per_pass: str | None
    # per rank, the step ids of its drafter passes (analysis.drafter.graph_kinds): every view
    # that counts or times steps leaves these out, as the report's verify steps do
    pass_steps: dict[int, list[int]]
    provenance: str
    qlen: str | None
    rows: str | None
    step_median_us: float | None = over_ranks("median of the passes pooled")
    steps: int = over_ranks()
    text: str
    variants: list[str]


@section
class CpuRank(Section):
    attention_share: float | None  # None: the rank's steps took no time
    attention_us: float
    backend_ops: dict[str, int]
    layers_per_step: list[int]
    mla_ops: int
    mla_ops_outside_steps: int
    op: str | None  # None: no MLA op recognised
    rank: int
    step_annotations: int
    step_us: float
    steps: int
    vllm_version: str | None
    # annotations with nothing scheduled (execute_context_0(0)_generation_0(0)): not steps
    empty_annotations: int | None = opt()


@section
class TraceCpu(Section):
    device: str
    limits: str
    provenance: str
    ranks: list[CpuRank]

    @property
    def lines(self) -> list[str]:
        """The report's lines for a CPU trace (one per rank, then the limits once)."""
        out = []
        for r in self.ranks:
            share = "-" if r.attention_share is None else f"{100 * r.attention_share:.0f}%"
            per = "/".join(map(str, r.layers_per_step)) or "0"
            out.append(
                f"rank {r.rank}: {r.steps} steps (vLLM step annotations"
                + (
                    f"; {r.empty_annotations} empty ones, execute_context_0(0)_generation_0(0) "
                    "with nothing scheduled, are not steps"
                    if r.empty_annotations
                    else ""
                )
                + f"), {r.mla_ops} MLA ops "
                f"{r.op or '(none recognised)'} ({per} per step that ran the model), attention {share} of step time"
                + (
                    "; in the whole trace "
                    + ", ".join(f"{n} x {op}" for op, n in sorted(r.backend_ops.items()))
                    if r.backend_ops
                    else ""
                )
                + (
                    f"; {r.mla_ops_outside_steps} MLA ops outside the step annotations, not "
                    "counted (a drafter's passes: vLLM 0.32 proposes drafts in sample_tokens, after "
                    "the annotated execute_model)"
                    if r.mla_ops_outside_steps
                    else ""
                )
            )
        out.append(self.limits)
        return out


@section
class RankRecognition(Section):
    kernels: int
    mla_layers: int
    rank: int


@section
class Recognition(Section):
    per_rank: list[RankRecognition]
    without_mla: list[int]  # ranks whose trace shows no MLA layer


@section
class CollapseCheck(Section):
    """Whether the split collapse was checked on one verify path and kernel variant (its
    :class:`TracePath` row): ``steps`` add the row's ``ranks``' (each rank's in
    ``steps_per_rank``), said so in every view where they are several."""

    S: str
    path: str
    status: str
    steps: int = over_ranks()
    variant: str
    why: str
    ranks: list[int]  # the ranks whose steps ``steps`` adds
    steps_per_rank: dict[int, int]
    warn: bool | None = opt()


@section
class ApiFunction(Section):
    calls: int = over_ranks()
    function: str


@section
class TraceCoverage(Section):
    api: str
    api_calls: int = over_ranks()
    api_functions: list[ApiFunction]
    attention_like: list[AttentionLike]
    attention_like_names: int
    collapse_checks: list[CollapseCheck]
    host_syncs: int | None = over_ranks()  # None: no API call read (no API trace in the import)
    kernels: int = over_ranks()  # each rank's: kernels_by_rank
    kernels_by_rank: dict[int, int] = each_rank_of("kernels")
    provenance: str
    recognition: Recognition
    # kernel names that are roctx range messages (rocprofv3 --kernel-rename); only looked for
    # when a rank has no MLA kernel
    renamed: list[AttentionLike] | None = opt()
    # the kernels hardware counters were sampled on, on the ranks with no kernel record (a
    # counter collection with no kernel trace); only looked for when such a rank exists
    counters_only: list[CountedKernel] | None = opt()
    # each rank's API calls read, for the ranks with an API trace (a rank left out has none)
    api_calls_by_rank: dict[int, int] | None = opt(each_rank="api_calls")


@section
class TraceGraph(Section):
    graph: int
    kernels: int
    kind: str
    mla_layers: int
    replays: int


# what a step-checks row's ``ranks`` read where an older import kept only its ranks' sum
SUMMED_STEP_CHECKS = (
    "no rank's own: an older import kept only its ranks' sum (its texts one rank's)"
)


@section
class TraceChecksSteps(Section):
    """How the import told one rank's steps apart and which graph each step replayed: each
    value is every one of ``ranks``' own, never a sum (ranks whose step checks are the same
    share a row: analysis.run_checks.RunChecks.section)."""

    ranks: list[int] | None = reads_when_none(SUMMED_STEP_CHECKS)
    edge_partial: dict[str, int]  # steps cut at the trace's edges (first/last)
    gap_breaks: int
    graph_by_step: list[list[int | None]] | None  # run-length coded; None past the cap
    graph_by_step_runs: int
    graph_identity: str
    graphs: list[TraceGraph]
    other_graphs: int
    source: str
    source_text: str


# The trace section's check counts are every rank's added up (analysis.run_checks.RunChecks
# .section): each says so where the run has several ranks; the step checks are each rank's
@section
class TraceChecksReplays(Section):
    edge_partial_steps: int = over_ranks()
    expected_kernels: int = over_ranks()
    missing_kernels: int = over_ranks()
    replays: int = over_ranks()
    replays_without_mla: int = over_ranks()
    short_replays: int = over_ranks()
    steps_missing_layers: int = over_ranks()
    # how the steps short of layers were numbered (written where there are some): by aligning
    # their kernels to their graph's complete replays, or not (which layer went is unknown)
    steps_layers_aligned: int | None = opt("sum")
    steps_layers_unknown: int | None = opt("sum")
    layers_unknown: int | None = opt("sum")  # stage-1 kernels left without a layer
    # eager steps short of layers against eager steps running their kernels, and how they were
    # numbered (written where there are some; mlaprof.importers.annotate._align_short_eager)
    eager_steps_missing_layers: int | None = opt("sum")
    eager_steps_layers_aligned: int | None = opt("sum")
    eager_steps_layers_unknown: int | None = opt("sum")


@section
class TraceChecksQlen(Section):
    from_stage1: int = over_ranks()
    from_stage2: int = over_ranks()
    stage1_disagrees: int = over_ranks()


@section
class TraceChecksLaunches(Section):
    # None where the import holds no API trace (capture.known_launch_checks)
    graph_launches: int | None = over_ranks()
    launches_without_kernels: int | None = over_ranks()
    mla_replays_with_launch: int | None = over_ranks()
    runtime_api_calls: int = over_ranks()
    launches_past_window_end: int | None = opt("sum")


@section
class TraceChecks(Section):
    heads: dict[str, dict[str, int]] | None = opt("sum")
    launches: TraceChecksLaunches | None = opt()
    qlen: TraceChecksQlen | None = opt()
    replays: TraceChecksReplays | None = opt()
    stage2: dict[str, Stage2Check] | None = opt()
    steps: list[TraceChecksSteps] | None = opt()  # per rank, never summed


@section
class CapturePhaseRank(Section):
    """One rank's capture phase in a whole-process trace (analysis.capture_phase)."""

    rank: int
    graphs_captured: int  # stream captures begun
    instantiated: int  # graph instantiations
    warmup_steps: int  # eager forwards before the last capture (one per FULL decode size)
    warmup_rows: list[int]  # their batch rows, in trace order
    # their step ids, in trace order: left out of the run's steps in every view (the dashboard
    # leaves them out of its counts and step times by these, as the report does)
    warmup_step_ids: list[int]
    start_ns: int
    end_ns: int
    duration_ms: float
    allocations: int | None  # None: no memory-allocation trace in the import
    allocated_bytes: int | None


@section
class CapturePhase(Section):
    """The start-up capture phase of a trace, apart from the served steps (which exclude it)."""

    ranks: list[CapturePhaseRank]
    text: str
    provenance: str


# what an imported trace's CPU and drafter sections read where the trace holds neither
TRACE_NO_CPU = "no CPU-only rank recorded"
TRACE_NO_DRAFTER = "no drafter pass recorded"


@section
class TraceSection(Section):
    capture: Capture
    checks: TraceChecks
    coverage: TraceCoverage
    # None: the import recorded no rank that ran its attention on the CPU alone (a device
    # trace), never "unknown" beside the capture's "cpu: no"
    cpu: TraceCpu | None = reads_when_none(TRACE_NO_CPU)
    drafter: TraceDrafter | None = reads_when_none(TRACE_NO_DRAFTER)  # no drafter pass in it
    format: str
    paths: list[TracePath]
    replay_time: TraceReplayTime
    source: str
    steps: list[TraceStep]
    syncs: TraceSyncs
    trust: TraceTrust
    # each rank's verdict from its own checks; none for one rank (the run's verdict is its own)
    trust_by_rank: dict[int, str] = each_rank_of("trust.verdict")
    # a whole-process trace's start-up: warm-ups, stream captures, instantiation (None: none)
    capture_phase: CapturePhase | None = opt()


@section
class RankTiming(Section):
    rank: int
    step_median_us: float
    steps: int
    timing: str | None  # how this rank's steps were timed (analysis.timing.timing_kind)
    by_mode: dict[str, float] | None = opt()  # this rank's median step per graph mode
    layer_median_us: float | None = opt()  # over this rank's layer records


@section
class Timing(Section):
    # over every rank's steps (each rank's: per_rank), as step_median_us
    by_mode: dict[str, float] = counted_by("steps", over="median of the steps pooled")
    full_share: float | None
    layer_median_us: float | None = over_ranks("pooled")  # every rank's layer records
    per_rank: list[RankTiming] = counted_by("steps")  # the ranks with timed steps
    ranks_agree: bool | None  # None: no step recorded (nothing to agree on)
    step_median_text: str | None = words_of("step_median_us")
    step_median_us: float | None = over_ranks("median of the steps pooled")
    steps: int | None = over_ranks()  # None: no step recorded (never a 0 that reads as a count)
    threads: int | None  # torch's CPU threads (None: not recorded)
    # how the steps were timed, each rank's decided on its own steps (per_rank); where ranks
    # were timed differently, "per-rank" (analysis.timing.PER_RANK), the label naming each
    timing: str | None
    timing_label: str

    def none_reads(self, name: str) -> str | None:
        """A run with no step recorded says that for its count, medians, agreement and kind
        (:data:`NO_STEPS`), never "unknown" beside a count of 0 or "ranks agree: yes"."""
        if self.steps is None and name in _NO_STEP_FIELDS:
            return NO_STEPS
        return None


# what a timing with no step recorded says of its count, medians, agreement and kind
NO_STEPS = "no steps recorded"
# what a rank's (or the shown ranks') step time reads where steps were recorded but none of
# theirs timed (Timing.per_rank lists the ranks with timed steps only)
NO_TIMED_STEP = "no timed step recorded"
_NO_STEP_FIELDS = frozenset(
    ("steps", "ranks_agree", "timing", "full_share", "step_median_us", "step_median_text")
) | {"layer_median_us"}


@section
class RankSyncs(Section):
    layers: int
    rank: int
    total: int
    watched_steps: int


@section
class LayerSyncs(Section):
    layer: int
    rank: int
    syncs: float


@section
class SyncCounts(Section):
    """Device->host syncs in the watched region (analysis.syncs.sync_counts)."""

    # the counts are None where no step was watched and nothing recorded (``checked`` False)
    by_kind: dict[str, int] | None
    checked: bool
    layers: int | None
    per_layer: list[LayerSyncs] | None = counted_by("layers")  # the layers with a sync
    per_rank: list[RankSyncs] | None
    text: str
    total: int | None  # over every rank (per_rank holds each rank's)
    watched_steps: int  # the (rank, step) pairs watched, over every rank (per_rank: each rank's)
    # ranks with records that nothing checked (no step watched, no host-call trace of theirs):
    # out of ``per_rank`` and the totals, "not checked" in ``text``, never a 0
    ranks_not_checked: list[int] | None = opt()

    @property
    def count(self) -> int | None:
        """The syncs seen: 0 only when checked and none was seen; None when not checked."""
        return self.total if self.checked else None


# what a frozen cell reads where no modelled frozen S stands (mlaprof.analysis.splits.frozen_stands)
FROZEN_NONE = "-"
# the condition a modelled frozen S holds on where a FULL graph was asked for and nothing decided
# whether it captures (mlaprof.analysis.splits.frozen_condition): said with that S everywhere
FROZEN_IF_CAPTURES = "if it captures"
# what a splits table's "frozen" cell holds, and what its "-" means (mlaprof.analysis.splits.frozen_stands)
FROZEN_LEGEND = (
    "frozen: S a FULL graph captured with vLLM's dummy run keeps (modelled; - where no FULL "
    "graph serves the steps, and on the run's policy where its graph's replays were measured; "
    f"'{FROZEN_IF_CAPTURES}' where the run does not say whether its FULL graph captures)"
)


# what marks a value of a policy vLLM does not run here (a frozen S cell, a headline label)
WHAT_IF = "what-if"


def what_if_words(policy: str, route_said: str) -> str:
    """The condition a frozen S of a policy vLLM does not run here holds on (the splits rows'
    ``frozen_what_if``, mlaprof.analysis.splits.frozen_what_if): "if vLLM ran <policy>
    (<route_said>)", ``route_said`` naming the route the configuration takes instead."""
    return f"if vLLM ran {policy} ({route_said})"


def what_if_route_said(policy: str, words: str) -> str:
    """The route part of :func:`what_if_words`' ``words`` for ``policy`` (what rows of one
    route share: a view says it once for them all)."""
    return words.removeprefix(f"if vLLM ran {policy} (").removesuffix(")")


def not_runnable_reason(note: object) -> str | None:
    """Why a split record's policy cannot run its configuration, from the record's note
    ("not runnable: <why>", as mlaprof.step_splits writes it); None for a runnable record."""
    text = note if isinstance(note, str) else ""
    if not text.startswith(NOT_RUNNABLE):
        return None
    return text.removeprefix(NOT_RUNNABLE).removeprefix(":").strip() or "no reason recorded"


def not_runnable_text(reason: str | None) -> str | None:
    """A not-runnable reason in the one wording every view prints (the splits rows' and the
    split figures' ``not_runnable``); None for a runnable policy."""
    return None if reason is None else f"{NOT_RUNNABLE}: {reason}"


# what a policy row says that holds no S and whose record gives no reason (never "unknown" in
# one view and "-" in another: every view says this, from no_s_text)
NO_S = "no S recorded (the record gives no reason)"


class SplitLike(Protocol):
    """A policy's S as a splits row (SplitStep) or a figure's split point (SplitPoint) holds it."""

    policy: str
    used: float | None
    deserved: float | None
    on_device: bool | None
    not_runnable: str | None


def no_s_text(r: SplitLike) -> str | None:
    """Why a policy row holds no S, decided here and said alike by every view (the line under the
    splits table, the split figure's note in the policy's column): the section's not-runnable
    words (:func:`not_runnable_text`), else :data:`NO_S` where it
    holds neither S used nor S deserved and the device does not decide it; None: it holds one."""
    said = not_runnable_text(r.not_runnable)
    if said is not None:
        return said
    if r.used is None and r.deserved is None and not r.on_device:
        return NO_S
    return None


@section
class SplitStep(Section):
    """The worst step per rank and policy, modelled (analysis.splits.split_rows); ``None`` where
    the policy is not one mlaprof models or the record does not hold the value."""

    rank: int | None
    ranks: list[int | None]  # the ranks this row stands for (rows that agree are one row)
    policy: str
    source: str | None
    verified: bool | None
    on_device: bool | None  # S decided on the device at replay (never frozen)
    used: int | None
    deserved: int | None
    # the S a FULL graph captured by vLLM's dummy run would replay (modelled), where that stands
    frozen: int | None = reads_when_none(FROZEN_NONE)
    all_rows: int | None
    active_rows: int | None
    min_kv_used: int | None
    min_kv_deserved: int | None
    occupancy: float | None
    occupancy_deserved: float | None
    occupancy_source: str
    step: int | None
    # the condition ``frozen`` holds on (FROZEN_IF_CAPTURES: the run does not say whether its
    # FULL graph captures; None: it stands as it is), said beside it in every view
    frozen_if: str | None = opt()
    # why the policy's kernel cannot run this row's configuration (its S used and deserved are
    # None for that reason, not unknown): every view says :attr:`not_runnable_text`
    not_runnable: str | None = opt()
    # whether the policy models the kernel the run's verify route launches (analysis.splits.
    # off_route); None: the run models no route
    on_route: bool | None = opt()
    # a policy off the route: the condition its ``frozen`` holds on ("if vLLM ran <policy>
    # (a what-if: ...)", analysis.splits.frozen_what_if), said beside it in every view; None:
    # the route runs it (or no route is modelled, or no frozen S)
    frozen_what_if: str | None = opt()
    # a policy off the route: the condition every S and occupancy of the row holds on (the same
    # words, analysis.splits.frozen_what_if, whether or not a frozen S stands), said with them
    # wherever they are named as the run's (the headline, the compare); None: the route runs it
    # (or no route is modelled)
    what_if: str | None = opt()

    @property
    def not_runnable_text(self) -> str | None:
        """The row's not-runnable reason in the one wording every view prints."""
        return not_runnable_text(self.not_runnable)

    def none_reads(self, name: str) -> str | None:
        """mlaprof's own kernel is on no route of vLLM's: its ``on_route`` (None) says whose
        kernel it is (mlaprof.splits.routing.own_kernel), never "unknown" or "yes"."""
        if name == "on_route":
            from mlaprof.splits.routing import own_kernel

            return own_kernel(self.policy)
        return None

    def on_condition(self, label: str, value: str) -> tuple[str, str]:
        """A (label, value) naming this row's S or occupancy as the run's, on the row's
        condition where vLLM does not run its policy (:attr:`what_if`): the label marked
        ``what-if``, the value led by the condition; as they are where the route runs it."""
        if not self.what_if:
            return label, value
        marked = f"{label[:-1]}, {WHAT_IF})" if label.endswith(")") else f"{label} ({WHAT_IF})"
        return marked, f"{self.what_if}: {value}"

    @property
    def collapsed(self) -> bool:
        """S used below the S the real rows deserve (the one rule, analysis.splits.is_collapsed)."""
        from mlaprof.splits.policies import collapsed_known

        return collapsed_known(self.used, self.deserved)


@section
class Scenario(Section):
    accepted_per_step: int | None = opt()
    graph_mode: str | None = opt()
    kv_cache_dtype: str | None = opt()
    kv_cache_tokens: int | None = opt()
    kv_lens: list[int] | None = opt()
    layers: int | None = opt()
    max_model_len: int | None = opt()
    max_num_seqs: int | None = opt()
    min_kv_mode: str | None = opt()
    model: str | None = opt()
    name: str | None = opt()
    num_speculative_tokens: int | None = opt()
    page_size: int | None = opt()
    policy: str | None = opt()
    seed: int | None = opt()
    steps: int | None = opt()
    target: str | None = opt()
    vllm_version: str | None = opt()
    max_num_batched_tokens: int | None = opt()
    aiter_version: str | None = opt()

    @property
    def recorded(self) -> bool:
        """The run recorded a scenario (an import has none: every field None)."""
        return self.model is not None or self.name is not None

    @property
    def qlen(self) -> int | None:
        """Query tokens per verify row: 1 + the speculative tokens (None: no scenario)."""
        n = self.num_speculative_tokens
        return None if n is None else 1 + int(n)


@section
class Route(Section):
    """The verify path vLLM takes (mlaprof.splits.routing.Route, or an engine's modelled one)."""

    kernel: str
    path: str
    reason: str
    source: str
    verified: bool
    version: str
    splits_on_device: bool | None = opt()  # S decided on the device at replay: never frozen
    not_modelled: list[str] | None = opt()  # paths of this version the configuration could meet
    aiter_rule: AiterRuleSection | None = opt()  # the AITER release the run named (--aiter)
    # where the route comes from beside what the run itself ran (analysis.paths.run_route): a
    # route is modelled for the scenario's target, never what a CPU engine ran
    provenance: str | None = opt()
    # the line every view prints (analysis.paths.route_text), made of the fields above
    text: str | None = opt(says=("path", "kernel", "reason", "version", "provenance"))

    @property
    def line(self) -> str:
        """The route as every view prints it: ``text``; a route that reached a view without it
        (run.json's, as recorded) still says that nothing says where it comes from."""
        return (
            self.text
            or f"{self.path} ({self.kernel}) [vLLM {self.version}] (provenance not recorded)"
        )

    @classmethod
    def recorded(cls, d: Mapping[str, Any]) -> Route:
        """The route a run recorded (run.json's ``route``, mlaprof.splits.routing.Route.to_dict
        plus the AITER rule the run named) as its section."""
        rule = d.get("aiter_rule")
        not_modelled = d.get("not_modelled")
        return cls(
            **{
                **d,
                "aiter_rule": None if rule is None else AiterRuleSection(**rule),
                "not_modelled": None if not_modelled is None else list(not_modelled),
            }
        )


@section
class Reservation(Section):
    bytes: int | None
    path: str
    provenance: str
    sized_by: str
    source: str


# what a replayed graph's S reads where its kernel decides S on the device at each replay (the
# layer records hold the launch grid's split axis: the cap, not an S any row ran with)
DEVICE_S_UNRECORDED = "not recorded (S decided on the device per replay; the grid holds its cap)"


@section
class ReplayedSplits(Section):
    """The S a captured FULL graph replayed, from the layer records of its replays
    (analysis.splits.replayed_splits). Where the run's kernel decides S on the device at each
    replay, a record holds the launch grid's split axis, the most splits a row may take: then
    ``min`` and ``max`` are None (:data:`DEVICE_S_UNRECORDED`) and ``grid_cap`` holds it."""

    max: int | None
    min: int | None
    provenance: str
    steps: int
    grid_cap: int | None = opt()  # the largest split axis of the replays' grids (device S)

    @property
    def holds_s(self) -> bool:
        """Whether the records hold the S the replays ran with (a host S the grid carries)."""
        return self.min is not None and self.max is not None

    def none_reads(self, name: str) -> str | None:
        if name in ("min", "max") and self.grid_cap is not None and not self.holds_s:
            return DEVICE_S_UNRECORDED if name == "max" else "not recorded"
        return None


@section
class RankPadding(Section):
    """One rank's padding (analysis.padding.padding_summary)."""

    rank: int
    steps: int
    real_rows: int
    padding_rows: int


@section
class Padding(Section):
    """The run's padding: the counts are summed over ranks (``ranks`` of them; ``per_rank``
    keeps each rank's), and ``text`` says them per rank or as sums (analysis.padding.amounts)."""

    # every count None where the run recorded no padding (text: "not recorded")
    capture_size: int | None
    capture_sizes: list[int] | None
    kv_bytes_padding: int | None = over_ranks()
    padding_fraction: float | None
    padding_rows: int | None = over_ranks()
    padding_rows_per_step: list[int] | None
    padding_tokens: int | None = over_ranks()
    real_rows: int | None = over_ranks()
    real_tokens: int | None = over_ranks()
    steps: int | None = over_ranks()
    steps_padded: int | None = over_ranks()
    text: str
    ranks: int | None = opt()  # the ranks the counts sum over
    per_rank: list[RankPadding] | None = opt()


# what a layer's collapse count and sync count read where they were not decided, in every view
LAYER_NOT_JUDGED = "not judged"
LAYER_NOT_CHECKED = "not checked"


@section
class LayerRow(GridCapped):
    S_min: int | None
    S_reference: int | None
    S_used: int | None  # the S of the layer's last record (None: not recorded there)
    S_steps: int  # steps whose record holds an S (fewer than ``steps``: S known on those only)
    # steps collapsed (None: no step has an S to judge against, never 0)
    collapsed: int | None = reads_when_none(LAYER_NOT_JUDGED)
    layer: int
    rank: int
    reference: str
    steps: int
    # syncs per watched step (None: no step of the layer was watched, never 0)
    syncs: float | None = reads_when_none(LAYER_NOT_CHECKED)
    time_us: float | None
    # S decided on the device (backends.registry.device_decides_splits): S_used and S_min are
    # None and read as this cap, the launch grid's split axis the records hold
    S_grid_cap: int | None = opt()

    @property
    def reference_source(self) -> str:
        """Which S the collapse is judged against: ``deserved``, ``fix`` or ``unknown``."""
        return REFERENCE_SOURCE[self.reference]


@section
class LayerSplitCount(GridCapped):
    records: int = over_ranks()  # every rank's layer records
    splits: int | None
    S_grid_cap: int | None = opt()  # the records hold this grid cap, not an S (device S)


@section
class HeadlineRow(Section):
    label: str
    provenance: str
    value: str

    @property
    def provenance_after(self) -> str:
        """The provenance a line prints after the value, "" where the value's words already
        end in it or hold it (a predicted capture: "... predicted from syncs; ...", then
        "(predicted from syncs)" again); a table keeps its provenance column whole."""
        # whole words: "model" is not in "modelled"
        return "" if holds_words(self.value, self.provenance) else self.provenance


@section
class FleetRank(GridCapped):
    S_max: int | None
    S_min: int | None
    agent: int | str | None  # the GPU agent, or "cpu"
    collapsed_layers: int | None  # None: no layer of the rank could be judged
    collapsed_steps: int | None
    dp_group: int | None
    host: str | None
    # the rank's layer records; None: no rank of the run holds any (a log, an engine run)
    layers: int | None = reads_when_none("not recorded")
    pid: int | None
    rank: int
    trust: str | None
    engine: int | None = opt()  # its engine where the trace shows several (analysis.engines)
    S_grid_cap: int | None = opt()  # S decided on the device: its layer records' grid cap


@section
class SplitRanks(Section):
    S: int
    ranks: str


@section
class FleetLayer(GridCapped):
    S_by_ranks: list[SplitRanks]
    S_max: int | None
    S_min: int | None
    layer: int
    ranks: int
    time_us_max: float | None
    time_us_min: float | None
    engine: int | None = opt()  # the engine whose ranks this row compares (several engines)
    S_grid_cap: int | None = opt()  # S decided on the device: its layer records' grid cap


@section
class EngineGroup(Section):
    """One engine a trace's ranks show (analysis.engines.engine_groups): its ranks and what they
    run (heads from stage-2 grids, verify qlen values, path families), hosts and pids."""

    engine: int
    ranks: list[int]
    heads: int | None
    qlen: list[int]
    paths: list[str]
    hosts: list[str]
    pids: list[int]


@section
class FleetEngine(Section):
    """One engine of a trace whose ranks run different models or configurations
    (analysis.engines): its ranks and signature, its own S range and agreement."""

    engine: int
    ranks: list[int]
    heads: int | None  # from its stage-2 grids
    qlen: list[int]
    paths: list[str]
    hosts: list[str] | None  # None: no rank of the engine has a recorded host
    pids: list[int] | None
    S_min: int | None
    S_max: int | None
    ranks_collapsed: list[int] | None = reads_when_none(NOT_JUDGED)  # None: no rank judged
    agree: bool
    text: str


@section
class Fleet(Section):
    agree: bool
    dp_groups: int | None
    dp_groups_exact: bool | None
    dp_groups_source: str
    hosts_source: str
    # S per layer across ranks; None: no rank holds a layer record (never an empty "none")
    per_layer: list[FleetLayer] | None = reads_when_none(
        "not recorded: no rank holds layer records"
    )
    per_rank: list[FleetRank]
    ranks: int
    # the judged ranks on each side of a collapse; None: no rank was judged (never "none")
    ranks_collapsed: list[int] | None = reads_when_none(NOT_JUDGED)
    ranks_not_collapsed: list[int] | None = reads_when_none(NOT_JUDGED)
    text: str = says("ranks")  # the line every view prints: "ranks: 8, all agree"
    engines: list[FleetEngine] | None = opt()  # several engines in one trace: a view per engine
    # ranks no layer of which could be judged, where any (left out: every rank judged)
    ranks_not_judged: list[int] | None = opt()

    def none_reads(self, name: str) -> str | None:
        """No rank judged because every rank's layer records hold the grid's cap (S decided on
        the device): said so, not as a missing S reference."""
        capped = bool(self.per_rank) and all(
            getattr(r, "S_grid_cap", None) is not None for r in self.per_rank
        )
        if capped and name in ("ranks_collapsed", "ranks_not_collapsed"):
            return DEVICE_NOT_JUDGED
        return None


@section
class StartSpeculative(Section):
    method: str | None
    num_spec_tokens: int | None


@section
class SpecDecodingLine(Section):
    accepted: int | None
    avg_acceptance_pct: float | None
    drafted: int | None
    line: int | None
    mean_acceptance_length: float | None
    per_position: list[float] | None
    time: str | None


@section
class SpecDecoding(Section):
    acceptance_rate: float | None  # None: no draft token in the summed lines
    accepted: int
    drafted: int
    lines: int
    per_position_last: list[float] | None
    provenance: str
    # False: the sum is a lower bound (the log's last interval may be missing); with its reason
    complete: bool | None = opt()
    completeness: str | None = opt()


@section
class MemoryProfiling(Section):
    enabled: bool | None
    equivalent_without: float | None
    suggested: float | None
    utilization: float | None


@section
class StartMemory(Section):
    capture_secs: float | None
    estimate_ratio: float | None
    estimated_bytes: int | None
    measured_bytes: int | None
    process: str | None
    profiling: MemoryProfiling | None
    rank: int


@section
class GraphCaptureLine(Section):
    done: int | None
    line: int | None
    mode: str | None
    phase: str | None
    rank: int | None
    total: int | None

    @property
    def label(self) -> str:
        """ "decode, FULL": the capture progress bar's name; the phase alone where the bar names
        no mode."""
        return str(self.phase) + (f", {self.mode}" if self.mode else "")


@section
class Downgrade(Section):
    backend: str
    line: int | None
    message: str
    ranks: list[int]
    requested: str
    setting: str
    spec_decode: bool
    support: str
    time: str | None


@section
class EngineStart(Section):
    attention_backends: list[str]
    capture_sizes: list[int] | None
    capture_skipped: bool
    device: str | None
    downgrades: list[Downgrade]
    final_mode: str | None
    graphs: list[GraphCaptureLine]
    line: int | None
    memory: list[StartMemory]
    model: str | None
    prefill_backends: list[str]
    profile: dict[str, ProfiledGraphs] | None
    provenance: str
    ranks: list[int]
    requested_mode: str | None
    spec_decoding: SpecDecoding | None
    spec_lines: list[SpecDecodingLine]
    speculative: StartSpeculative | None
    start: int
    tensor_parallel_size: int | None
    time: str | None
    version: str | None
    world_size: int | None


@section
class SyncRecord(Section):
    function: str
    layer: int
    location: str
    op: str
    rank: int
    step: int


@section
class PathOp(Section):
    op: str
    location: str


@section
class PathCheck(Section):
    """One verify path sync-checked on step 0's metadata (a CPU run's ``path-check`` event,
    mlaprof.cpu_runner.record_path_check)."""

    backend: str
    syncs_per_layer: int
    ops: list[PathOp]
    allocs_per_layer: int | None = opt()
    # the ranks whose check this is (ranks whose checks agree are one row; None: not recorded)
    ranks: list[int] | None = opt()


@section
class EngineRankVerify(Section):
    """One worker rank's verify counts, from its own records (analysis.served.served_summary)."""

    rank: int
    verify_steps: int
    verify_rows: int
    verify_rows_as_prefill: int
    draft_tokens: int
    drafter_builds: int


class Pairing(StrEnum):
    """Whether an EngineCore's records pair with the worker rank of its own engine
    (analysis.served.pairing_of, from the rule its ``rank<N>.scheduler.db`` recorded naming N:
    vllm_names.RANK_SOURCE_KEY)."""

    KNOWN = "known"  # N is the process's own distributed rank or its engine's layout's
    ASSUMED = "assumed"  # N from RANK / LOCAL_RANK / no rule, or paired with another rank
    UNPAIRED = "unpaired"  # no worker rank of this run has its rank: paired with none


# what a pairing (or its rule) of a run that recorded no rule reads as: never "known"
PAIRING_NOT_RECORDED = "not recorded"


@section
class EngineAcceptance(Section):
    """One EngineCore's acceptance counters (its ``rank<N>.scheduler.db``) against the drafts of
    the worker rank of its own engine, the same global rank (analysis.served.served_summary):
    never another engine's drafts."""

    rank: int  # the N of its rank<N>.scheduler.db
    # the worker rank whose verify steps and drafts its records pair with; None: no worker rank
    # of this run has its rank (not attributed to an engine: no rate)
    paired_rank: int | None
    scheduler_steps: int
    accepted_tokens: int
    draft_tokens: int | None  # the paired worker rank's verify draft tokens
    acceptance_rate: float | None
    scheduler_matches_worker: bool | None
    scheduler_worker_compared: int
    scheduler_worker_text: str
    # whether rank N is its engine's, and the rule its database recorded naming N (None: the
    # run recorded none, a run before the plugin wrote it)
    pairing: Pairing | None = reads_when_none(PAIRING_NOT_RECORDED)
    rank_source: str | None = reads_when_none(PAIRING_NOT_RECORDED)


@section
class EngineSection(Section):
    """What a recorded vLLM engine did, measured by the plugin (analysis.served.served_summary)."""

    source: str
    backend: str | None
    builder: str | None
    heads: int | None
    spec_method: str | None
    num_speculative_tokens: int | None
    max_num_seqs: int | None
    # every rank's records (said so where they are several)
    steps: int = over_ranks()
    kinds: dict[str, int] = over_ranks()
    graph_modes: dict[str, int] = over_ranks()
    # the verify counts: every rank's records added (each rank's in ``per_rank``), said so
    # where several ranks hold some
    verify_steps: int = over_ranks()
    verify_rows: int = over_ranks()
    verify_rows_as_prefill: int = over_ranks()
    draft_tokens: int = over_ranks()
    # one EngineCore: its acceptance pairs with one worker's steps, ``verify_rank``'s, the rate
    # of that rank's draft tokens (per_rank), never of a sum over ranks. Several (data
    # parallelism): each engine's in ``per_engine``; these add the engines' (said so), the rate
    # of the attributed engines' accepted and paired draft tokens pooled
    accepted_tokens: int | None = over_ranks("sum", of="per_engine")
    acceptance_rate: float | None = over_ranks("rate of the tokens pooled", of="per_engine")
    scheduler_steps: int = over_ranks("sum", of="per_engine")
    # None: no scheduler record to compare; several engines: False where any disagrees
    scheduler_matches_worker: bool | None
    drafter_builds: int = over_ranks()
    padded_steps: int = over_ranks()
    ranks: list[int]
    per_rank: list[EngineRankVerify]  # each worker rank's verify counts
    verify_rank: int | None = opt()  # whose verify records the scheduler's are compared with
    # over the steps both databases committed (h/live's analysis.consistency)
    scheduler_worker_compared: int | None = opt("sum", of="per_engine")
    scheduler_worker_text: str | None = opt()
    # each EngineCore's acceptance, where the run holds several (None: one, or none)
    per_engine: list[EngineAcceptance] | None = opt()
    # one EngineCore's: whether its records pair with ``verify_rank`` by its engine's rank, and
    # the rule its database recorded (EngineAcceptance's; written null where the run recorded
    # no rule; left out with no EngineCore record or several, each in ``per_engine``)
    pairing: Pairing | None = opt(reads=PAIRING_NOT_RECORDED)
    rank_source: str | None = opt(reads=PAIRING_NOT_RECORDED)
    null_keys: frozenset[str] = nulls()


@section
class AiterRuleSection(Section):
    """The modelled rule that stands for a named AITER release (splits.releases.AiterRule)."""

    requested: str
    rule_of: str
    gluon_policy: str
    exact: bool
    label: str


@section
class ShadowStep(Section):
    """One recorded verify batch, modelled on the shadow device (S as float: NaN where the
    model gives none, as the frame holds it)."""

    rank: int
    step: int
    path: str
    policy: str
    heads: int
    qlen: int
    real_rows: int
    rows: int
    capture_size: float | None
    graph_mode: str
    padding_rows: float
    padding_tokens: float
    min_kv_all_rows: float
    min_kv_active_rows: float
    s_bug: float | None
    s_fix: float | None
    s_frozen: float | None
    s_deserved: float | None
    occupancy_fix: float | None
    occupancy_deserved: float | None
    target: str
    aiter: str
    note: str

    @property
    def collapsed(self) -> bool:
        """The bug's S below the fix's for this batch (the one rule, analysis.splits.is_collapsed)."""
        from mlaprof.splits.policies import collapsed_known

        return collapsed_known(self.s_bug, self.s_fix)


@section
class ShadowSection(Section):
    """The engine's recorded batches modelled for an AITER device (analysis.shadow)."""

    provenance: str
    aiter_rule: AiterRuleSection
    device: str
    aiter: str
    steps: int = over_ranks()
    paths: dict[str, int] = over_ranks()
    policies: list[str]
    s_bug: list[int | None]  # [min, max]
    s_fix: list[int | None]
    s_frozen: list[int | None]
    s_deserved: list[int | None]
    occupancy_fix: list[float]
    capture_sizes: list[int]
    # every rank's verify batches (per_step: each batch with its rank)
    padding_rows: int = over_ranks()
    real_rows: int = over_ranks()
    steps_collapsed_by_bug: int = over_ranks()
    steps_frozen_below_fix: int = over_ranks()
    per_step: list[ShadowStep]
