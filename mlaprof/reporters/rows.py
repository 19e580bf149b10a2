"""The one section -> rows layer: a run summary's typed sections as labelled rows and tables
that every view lays out (terminal, Markdown, HTML, ``tui``), each value formatted once by
:mod:`mlaprof.reporters.fmt`.

The rows are derived from the section dataclasses (:mod:`mlaprof.analysis.sections`), field by
field in their declared order, so a field or a section added there shows in every view with no
change here or in any view. What a view may want to say otherwise is declared once, below:
a section's title (:data:`TITLES`), a field's label (:data:`LABELS`), the fields the views
lay out on their own (:data:`OWN`), a list of records' table where one column per field does
not read well (:data:`SPECS`: its title, its first columns, its notes; the other fields follow)
and what every view shows before the findings (:data:`FRONT`, :data:`FRONT_ROWS`: the same
Tables and rows in the terminal, the HTML page and ``tui``). The shape:

- the summary's plain fields (run, status, kind, ...) are the rows of the first block, ``run``,
  which also names the sections this run does not hold (None, or an empty list);
- a section (a dataclass) is a block: its plain fields are rows; a nested section is a block of
  its own (titled ``parent · child``), or, where it holds nothing to show, named in its
  parent's "not recorded" row; a list of small records is a table; a list of records
  that hold records of their own (an engine start and its memory per rank) is a block each;
- a table shows at most :data:`TABLE_ROWS` rows and says how many more ``report --json`` has;
  where its :data:`SPECS` entry says so, a column whose value every record shares is said once
  under it ("in every row: ...").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture_status import capture_region
from mlaprof.analysis.headline import layer_splits_scope, splits_scope
from mlaprof.analysis.section_base import Section
from mlaprof.analysis.sections import (
    FROZEN_NONE,
    WHAT_IF,  # beside a frozen S of a policy vLLM does not run here (in full: what_if_notes)
    SplitLike,
    no_s_text,
    what_if_route_said,
)
from mlaprof.analysis.share import share_text
from mlaprof.analysis.timing import MLA_LAYER_TIME
from mlaprof.analysis.typed_json import (
    COUNTED_BY,
    EACH_RANK_OF,
    KEEP_VALUE,
    NONE_READS,
    OMIT,
    OVER_RANKS,
    OVER_RECORDS,
    SAYS,
    WORDS_OF,
    holds_words,
    over_ranks_label,
)
from mlaprof.rank_counts import counted, ranks_count
from mlaprof.reporters.fmt import NONE, field_text, label_of, value_text

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import SplitStep

TABLE_ROWS = 12  # rows a table shows in a report; the JSON document holds them all
SAID_ONCE_CHARS = 40  # a text this long that a field repeats is shown once (said_once)
BLOCKS_PER_LIST = 8  # records of a list shown as a block each (engine starts)
SEP = " · "  # between a section's title and a nested one's
# the row naming a section's nested sections that hold nothing to show (every field unknown)
NOT_RECORDED_KEY = "not_recorded"
NOT_RECORDED = "not recorded"
# the heading every view puts above the blocks
HEADING = "Sections (every field of the summary; report --json has every row)"

# summary fields each view lays out itself (its findings with severity, the headline numbers)
# or that are not part of the document (the figures' series)
OWN = frozenset({"findings", "headline", "series"})
HIDDEN_FIELDS = frozenset({"null_keys"})  # typed-JSON bookkeeping, not evidence

# a section's title where its field name does not say it (key: the summary field's name)
TITLES: dict[str, str] = {
    "run": "run",
    "state": "where the run stands",
    "imported": "imported from",
    "sync_counts": "sync counts (device->host, in the watched region)",
    "route": "vLLM route",
    "splits": "KV splits per policy (worst step; modelled)",
    "layers": "layers",
    "fleet": "ranks side by side",
    "trace": "imported trace",
    "reservation": "verify buffers (modelled)",
    "paths": "verify paths (step 0, one layer)",
    "engine_starts": "server starts",
    "engine": "engine (measured)",
    "shadow": "shadow AITER (modelled)",
    "replayed_splits": "S the captured graph replayed (measured)",
    "log_spec": "spec decoding over the log",
    "dp_groups": "data-parallel groups",
    "full_graph_splits": "S a captured graph replays (measured or modelled)",
    "capture_errors": "capture errors",
}


SPLITS_TITLE = "KV splits per policy (worst step)"


def splits_scope_of(s: RunSummary | None) -> str | None:
    """Where the splits table's S come from, as the analysis says it
    (:func:`mlaprof.analysis.headline.splits_scope`; ``None``: no summary yet)."""
    return None if s is None else splits_scope(s.splits, s.scenario.policy, s.device)


def splits_title(s: RunSummary | None) -> str:
    """The splits table's title, with where its S come from (:func:`splits_scope_of`): the
    sections, the terminal's table and the dashboard's panel (which says the scope under the
    table where the whole title does not fit its border)."""
    scope = splits_scope_of(s)
    return SPLITS_TITLE if scope is None else f"{SPLITS_TITLE.removesuffix(')')}; {scope})"


def layer_splits_title(s: RunSummary) -> str:
    """The S per MLA layer section's title: where its S come from, as the analysis says it
    (:func:`mlaprof.analysis.headline.layer_splits_scope`)."""
    return f"S per MLA layer ({layer_splits_scope(s.trace)})"


# a section's title where it depends on where the run's numbers come from (the analysis says)
TITLE_OF: dict[str, Callable[[RunSummary], str]] = {
    "splits": splits_title,
    **{
        name: lambda s, what=what: f"{what} in {capture_region(s.capture.mode)}"
        for name, what in (
            ("syncs", "syncs"),
            ("allocations", "allocations"),
            ("h2d_copies", "host-to-device copies"),
        )
    },
    "layer_splits": layer_splits_title,
}


# a field's label where its name does not say it (key: "<Dataclass>.<field>")
LAYER_TIME = f"mean {MLA_LAYER_TIME}"  # a layer row's time: how it was taken, in its label
LABELS: dict[str, str] = {
    "Timing.step_median_text": "median step",
    "Timing.timing_label": "timing",
    "Timing.timing": "timing kind",
    "Timing.full_share": "steps replayed in a graph",  # FULL or not: the capture section says
    "Capture.text": "capture",
    "Capture.effective_mode": "mode that ran",
    "RankCapture.effective_mode": "mode that ran",
    "Capture.predicted_mode": "mode a GPU would run (predicted)",
    "RankCapture.predicted_mode": "mode a GPU would run (predicted)",
    "Capture.mode": "mode asked for",
    "Capture.memory_bytes": "capture memory",
    "Capture.sizes": "capture sizes covered (captured or attempted)",
    "Capture.sizes_text": "capture sizes",
    # the routing rule checked against vLLM's code (or an engine's record), not "this run took
    # it": the route's provenance says what the run ran
    "Route.verified": "routing rule verified",
    "Route.text": "route",
    "SyncCounts.text": "verdict",
    "Padding.text": "padding",
    "Fleet.text": "ranks",
    "RunState.text": "state",
    "TraceDrafter.text": "drafter",
    "TraceDrafter.pass_steps": "pass step ids (rank=ids)",
    # one op's layer time three ways: each says how it was taken (never three bare "layer" times)
    # one name per quantity (analysis.timing): a layer record spans its MLA attention, never
    # the whole layer (the replay table's GPU time per layer)
    "Timing.layer_median_us": f"median {MLA_LAYER_TIME} (every layer record)",
    "LayerRow.time_us": LAYER_TIME,
    "LayerRow.S_steps": "steps with S",
    "TraceReplayTime.outside_layers_text": "outside layers",
    "ReplayRank.outside_layers_us": "outside layers (mean per step)",
    # each {group} shares its layer rows (ranks whose rows read the same), never a count
    "TraceReplayTime.rank_groups": "rank groups with alike layer rows",
    # a multi-rank run's sync counts are sums over its ranks (per rank: its rank rows)
    "SyncCounts.total": "total over ranks",
    "SyncCounts.watched_steps": "watched steps over ranks",
    "SyncCounts.by_kind": "by kind, over ranks",
    "FullGraphSplits.modelled_if": "modelled S holds",
    # set only where a modelled S stands (then nothing was measured): S used is a what-if too
    "FullGraphSplits.modelled_what_if": "S used and modelled S hold only",
    "SplitStep.on_route": "on vLLM's route",
    # each rank's own, a row per rank (ranks that read the same share one): never summed
    "TraceChecks.steps": "steps (each rank's own)",
    "EngineSection.verify_rank": "scheduler records paired with rank",
    "EngineSection.per_engine": "acceptance per engine (each EngineCore's own)",
    "EngineAcceptance.rank": "EngineCore rank",
    "EngineAcceptance.paired_rank": "drafts of worker rank",
    # whether the scheduler database's rank is its engine's, and the rule that named it
    "EngineAcceptance.pairing": "pairing by rank",
    "EngineAcceptance.rank_source": "rank named by",
    "EngineSection.pairing": "scheduler records paired by rank",
    "EngineSection.rank_source": "scheduler rank named by",
    # the launch grid's split axis where the device decides S: a cap, never an S used
    **{
        f"{c}.S_grid_cap": "grid cap"
        for c in ("LayerRow", "LayerSplitCount", "FleetRank", "FleetLayer", "DpGroup")
    },
}


# -- the tables a view shows up front (declared once; every view renders these Tables) ---------
@dataclass(frozen=True, slots=True)
class Col:
    """One column of a declared table: its header and the record fields it shows (``cell``:
    the value made of them; without it, the one field's value in its unit)."""

    head: str
    fields: tuple[str, ...]
    cell: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class Spec:
    """A list of records' table as declared here: its title, its first columns (the record's
    other fields follow, in their declared order, so a field added still shows), and ``note``:
    a line under the table per record for its long texts (``note_fields``: the fields it says).
    A list of records that hold records of their own is one block per record: ``cols`` are then
    an overview table of the list, each record's block holding the fields the overview does not."""

    title: str | None  # None: the section's own title
    cols: tuple[Col, ...]
    note: Callable[[Any], str] | None = None
    note_fields: tuple[str, ...] = ()
    # lines under the table said once for several records (after each record's ``note``)
    notes: Callable[[Sequence[Any]], list[str]] | None = None
    # a column not declared in ``cols`` whose value every record holds alike is said once
    # under the table, not in each row
    shared_once: bool = False


Column = tuple[str, tuple[str, ...], Callable[[Any], str]]  # header, fields, cell


def _cell(*names: str) -> tuple[str, ...]:
    return names


def _steps_cell(p: Any) -> str:
    piecewise = f" +{p.piecewise_steps} PIECEWISE" if p.piecewise_steps else ""
    return f"{p.steps} ({p.graph_steps}/{p.eager_steps}){piecewise}"


def _mode_cell(st: Any) -> str:
    final = st.final_mode or "mode not logged"
    asked = st.requested_mode
    return f"{asked} -> {final}" if asked and asked != st.final_mode else final


def _sizes_cell(st: Any) -> str:
    sizes = st.capture_sizes
    return "none" if not sizes else f"{len(sizes)} ({min(sizes)}..{max(sizes)})"


def _spec_cell(st: Any) -> str:
    sp = st.speculative
    return "none" if sp is None else f"{sp.method} x{sp.num_spec_tokens}"


def _ops_cell(p: Any) -> str:
    """A path's ops once each, with how often and the source lines they ran at
    (``aten._local_scalar_dense x2 at mlaprof/backends/legacy_flat.py:53, 59``): the list of
    op / location pairs read one pair per line where a row has several."""
    if not p.ops:
        return NONE
    by_op: dict[str, list[str]] = {}
    for o in p.ops:
        by_op.setdefault(o.op, []).append(o.location)
    return "; ".join(
        f"{op}{f' x{len(locs)}' if len(locs) > 1 else ''} at {_lines(locs)}"
        for op, locs in by_op.items()
    )


def _lines(locations: list[str]) -> str:
    """``file:53, 59`` where the locations share a file, else each in full."""
    files = {loc.rpartition(":")[0] for loc in locations}
    if len(files) == 1 and all(loc.rpartition(":")[2].isdigit() for loc in locations):
        return f"{files.pop()}:" + ", ".join(loc.rpartition(":")[2] for loc in locations)
    return ", ".join(locations)


SPECS: dict[str, Spec] = {
    # frozen in the one wording the front splits table has (split_cells): a policy the device
    # decides is "never" frozen, in the sections too (they read "-", "no FULL graph serves");
    # the columns before it as the fields are declared
    "SplitStep": Spec(
        None,
        (
            *(
                Col(label_of(n), _cell(n))
                for n in ("rank", "ranks", "policy", "source", "verified", "on_device")
            ),
            # a row with no S (cannot run, or none recorded): marked as in the front table, why
            # under the table in the one wording (no_s_text)
            Col(label_of("used"), _cell("used"), lambda r: split_cells(r).s if no_s_text(r)
                else field_text("used", r.used)),  # fmt: skip
            Col(label_of("deserved"), _cell("deserved"), lambda r: split_cells(r).deserved
                if no_s_text(r) else field_text("deserved", r.deserved)),  # fmt: skip
            Col(label_of("frozen"), _cell("frozen", "frozen_if", "frozen_what_if"),
                lambda r: split_cells(r).frozen),  # fmt: skip
        ),
        None,
        # not_runnable: one line per reason (not_runnable_notes); what_if: one line for the
        # rows off the route (what_if_notes)
        ("not_runnable", "what_if"),
        lambda rows: [*not_runnable_notes(rows), *what_if_notes(rows)],
    ),
    "PathCheck": Spec(
        "verify paths (step 0, one layer)",
        (
            Col("ranks", _cell("ranks"), lambda c: ranks_count(c.ranks) if c.ranks else GAP),
            Col("backend", _cell("backend")),
            Col("syncs per layer", _cell("syncs_per_layer")),
            Col("allocs per layer", _cell("allocs_per_layer")),
            Col("ops", _cell("ops"), _ops_cell),
        ),
    ),
    "TracePath": Spec(
        "verify path and kernel variant per step (from the trace)",
        (
            # the ranks a row pools (its S, rows and layer time are over their steps)
            Col("ranks", _cell("ranks"), lambda p: ranks_count(p.ranks) if p.ranks else GAP),
            Col("path", _cell("path", "engine"),
                lambda p: p.path + ("" if p.engine is None else f" (engine {p.engine})")),
            Col("kernel variant", _cell("variant")),
            Col("steps (graph/eager)", _cell("steps", "graph_steps", "eager_steps",
                                             "piecewise_steps"), _steps_cell),
            Col("S", _cell("S")),
            Col("rows", _cell("rows")),
            Col("qlen", _cell("qlen")),
            Col("layer", _cell("layer_median_us")),
        ),
        lambda p: f"{p.variant}: S {p.S_source}; rows: {p.rows_source}; qlen: {p.qlen_source}; "
        # the row's steps are its ranks' steps: said under the table (the column stays narrow)
        + ("layer: the median of its steps' median layer times"
           + f"{over_ranks_label('pooled', p.ranks)}; " if p.layer_median_us else "")
        + p.provenance,
        ("S_source", "rows_source", "qlen_source", "provenance"),
    ),
    "ReplayLayer": Spec(
        "GPU time per layer inside graph replays",
        (
            Col("ranks", _cell("ranks", "ranks_text"), lambda x: x.ranks_text),
            Col("layer", _cell("layer")),
            Col("median", _cell("median_us")),
            Col("attention", _cell("attention_median_us")),
            Col("attention share", _cell("attention_share")),
            Col("S", _cell("S")),
        ),
    ),
    "ReplayKernel": Spec(
        "kernels inside graph replays (GPU time; a fleet's: every rank's launches added)",
        (
            Col("kernel", _cell("name", "attention"),
                lambda k: k.name + (" (attention)" if k.attention else "")),
            Col("launches", _cell("launches")),
            Col("total", _cell("total_us")),
            Col("median", _cell("median_us")),
            Col("share", _cell("share")),
        ),
    ),
    "FleetRank": Spec(
        "per rank",
        (
            Col("rank", _cell("rank")),
            Col("host", _cell("host")),
            Col("pid", _cell("pid")),
            Col("agent", _cell("agent")),
            Col("DP", _cell("dp_group")),
            Col("trust", _cell("trust")),
            Col("layers", _cell("layers")),
            Col("S min", _cell("S_min")),
            Col("S max", _cell("S_max")),
            Col("coll. layers", _cell("collapsed_layers")),
        ),
    ),
    "StartMemory": Spec(
        "graph capture memory per rank (never summed)",
        (
            Col("rank", _cell("rank")),
            Col("process", _cell("process")),
            Col("took", _cell("measured_bytes")),
            Col("secs", _cell("capture_secs")),
            Col("estimate", _cell("estimated_bytes")),
            Col("est/took", _cell("estimate_ratio"),
                lambda m: None if m.estimate_ratio is None else f"{m.estimate_ratio:.2f}x"),
        ),
    ),
    "EngineStart": Spec(
        "server starts",
        (
            Col("start", _cell("start")),
            Col("vLLM", _cell("version")),
            Col("log line", _cell("line")),
            Col("logged", _cell("time")),
            Col("spec decode", _cell("speculative"), _spec_cell),
            Col("attention", _cell("attention_backends")),
            Col("cudagraph", _cell("requested_mode", "final_mode"), _mode_cell),
            Col("capture sizes", _cell("capture_sizes"), _sizes_cell),
        ),
        # where every number of a start (and of its memory per rank) comes from, under the table
        lambda st: st.provenance,
        ("provenance",),
    ),
    "Downgrade": Spec(
        "downgrades (as the log says)",
        (
            Col("backend", _cell("backend")),
            Col("support", _cell("support")),
            Col("spec decode", _cell("spec_decode")),
            Col("asked", _cell("requested")),
            Col("setting", _cell("setting")),
            Col("ranks", _cell("ranks")),
            Col("log line", _cell("line")),
        ),
        lambda d: f"log line {d.line}: {d.message}",
        ("message",),
    ),
    "ShadowStep": Spec(
        "shadow AITER per step (modelled)",
        (
            Col("step", _cell("step")),
            Col("rank", _cell("rank")),
            Col("path", _cell("path")),
            Col("rows+pad", _cell("real_rows", "padding_rows"),
                lambda r: f"{r.real_rows}+{value_text(r.padding_rows)}"),
            Col("size", _cell("capture_size")),
            Col("S bug", _cell("s_bug")),
            Col("S fix", _cell("s_fix")),
            Col("frozen", _cell("s_frozen")),
            Col("deserved", _cell("s_deserved")),
            Col("occ", _cell("occupancy_fix")),
        ),
    ),
    # a layer's syncs, its S and what it is judged by first; its time (a long label) last
    "LayerRow": Spec(
        None,
        (
            Col("rank", _cell("rank")),
            Col("layer", _cell("layer")),
            Col("syncs", _cell("syncs")),
            Col("S used", _cell("S_used")),
            Col("S reference", _cell("S_reference")),
            Col("collapsed", _cell("collapsed")),
            Col(LAYER_TIME, _cell("time_us")),
        ),
        shared_once=True,
    ),
    # the modelled verify buffers: a row per path and sizing rule, where each number comes
    # from (its scenario, the formula's source) said under the table, once for the rows it holds
    "Reservation": Spec(
        None,
        (
            Col("path", _cell("path")),
            Col("sized by", _cell("sized_by")),
            Col("bytes", _cell("bytes")),
        ),
        None,
        ("provenance", "source"),
        lambda rows: reservation_notes(rows),
    ),
}  # fmt: skip


def reservation_notes(rows: Sequence[Any]) -> list[str]:
    """Where the verify buffers' numbers come from, once for the rows each line holds for:
    "4-D by max_model_len, legacy-flat by max_model_len: modelled for scenario 'default'",
    then each formula's source ("source of 4-D: vLLM 0.32.0 ...")."""
    said: dict[str, list[str]] = {}
    for r in rows:
        said.setdefault(r.provenance, []).append(f"{r.path} by {r.sized_by}")
    sources: dict[str, list[str]] = {}
    for r in rows:
        paths = sources.setdefault(r.source, [])
        if r.path not in paths:
            paths.append(r.path)
    return [f"{', '.join(who)}: {prov}" for prov, who in said.items()] + [
        f"source of {', '.join(paths)}: {src}" for src, paths in sources.items()
    ]


FLEET_LEAST = 2  # ranks side by side: one rank is no fleet (its line and its table)

# the tables every view shows up front, before the findings (keys of summary_blocks' tables;
# ``[]``: any record of a list; with the rows a table needs to be shown): what a reader of an
# imported trace, log, engine run or fleet looks at first
FRONT = (
    ("paths", 1),
    ("trace.paths", 1),
    ("trace.replay_time.layers", 1),
    ("trace.replay_time.kernels", 1),
    ("fleet.per_rank", FLEET_LEAST),
    ("engine.per_rank", FLEET_LEAST),  # each rank's verify counts beside their sums
    ("engine.per_engine", 2),  # each EngineCore's acceptance beside the pooled rate
    ("engine_starts", 1),
    ("engine_starts[].downgrades", 1),
    ("engine_starts[].memory", 1),
    ("shadow.per_step", 1),
    ("reservation", 1),  # the modelled verify buffers (the measured capture memory: headline)
)
# the rows every view shows up front, one line per section (section key -> its fields)
FRONT_ROWS: dict[str, tuple[str, ...]] = {
    "fleet": ("dp_groups_source", "hosts_source"),  # where the per-rank table's DP, host are from
    "engine": ("backend", "heads", "spec_method", "num_speculative_tokens", "steps",
               "verify_steps", "verify_rows", "verify_rows_as_prefill", "draft_tokens",
               "accepted_tokens", "acceptance_rate", "graph_modes", "scheduler_worker_text"),
    "shadow": ("provenance", "steps", "steps_collapsed_by_bug", "steps_frozen_below_fix"),
    "log_spec": ("accepted", "drafted", "acceptance_rate", "lines", "completeness"),
    "trace.trust": ("verdict", "reasons"),
    "trace.trust.counts": (),  # (): every row it holds (the counts a trace was judged by)
    # each rank's time outside the layers (a range with the ranks behind each value where
    # they differ), never the pooled mean alone
    "trace.replay_time": ("replays", "attention_share", "attention_only",
                          "outside_layers_text", "provenance"),
    "trace.drafter": ("text",),
    "trace.capture_phase": ("text",),
}  # fmt: skip
# a section of FRONT_ROWS said only beside a front table: (its key, the rows it needs)
FRONT_ROWS_BESIDE = {"fleet": ("fleet.per_rank", FLEET_LEAST)}


@dataclass(frozen=True, slots=True)
class Row:
    """One labelled value: ``key`` names the field (``timing.step_median_us``)."""

    key: str
    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Table:
    """A list of records: one column per field, one row per record (the first
    :data:`TABLE_ROWS`; ``more``: how many the report leaves to ``report --json``)."""

    key: str
    title: str
    head: list[str]
    rows: list[list[str]]
    more: int
    notes: list[str] = dataclasses.field(default_factory=list)  # said under the rows
    declared: int = 0  # the first columns, as SPECS declares them (front_tables shows those)


@dataclass(frozen=True, slots=True)
class Block:
    """One section: its rows, then its tables."""

    key: str
    title: str
    rows: list[Row]
    tables: list[Table]


def summary_blocks(s: RunSummary) -> list[Block]:
    """Every section of ``s`` as a block, in the summary's field order (``run`` first)."""
    run_rows: list[Row] = []
    absent: list[str] = []
    out: list[Block] = []
    for f in dataclasses.fields(s):
        if f.name in OWN:
            continue
        v = getattr(s, f.name)
        title = TITLE_OF[f.name](s) if f.name in TITLE_OF else TITLES.get(f.name, label_of(f.name))
        if v is None or (isinstance(v, list) and not v) or _all_unknown(v):
            absent.append(title)
        elif dataclasses.is_dataclass(v):
            out += _blocks(f.name, title, v, ranks=len(s.ranks))
        elif _records(v):
            out += _list_blocks(f.name, title, v, len(s.ranks))
        else:
            run_rows.append(Row(f.name, _label(type(s).__name__, f.name), _text(f, v)))
    if absent:
        run_rows.append(Row("absent", "not in this run", ", ".join(absent)))
    return said_once([Block("run", TITLES["run"], run_rows, []), *out])


def said_once(blocks: list[Block]) -> list[Block]:
    """A long text that fields repeat (a verdict and the reason inside it, the capture of the
    run and of its trace) is said once: a later row that says it again, or says a part of an
    earlier row, points to that row instead."""
    first: dict[str, str] = {}  # long text -> where it was said
    out = []
    for b in blocks:
        rows = []
        for r in b.rows:
            if len(r.text) >= SAID_ONCE_CHARS:
                where = first.get(r.text) or next(
                    (w for t, w in first.items() if r.text in t), None
                )
                if where is not None:
                    r = Row(r.key, r.label, f"said in {where}")
                else:
                    first[r.text] = f"{b.title}{SEP}{r.label}"
            rows.append(r)
        out.append(Block(b.key, b.title, rows, b.tables))
    return out


def _all_unknown(v: Any) -> bool:
    """A section whose every field is None (an import's scenario): said absent, not row by row."""
    return dataclasses.is_dataclass(v) and all(getattr(v, f.name) is None for f in _fields(v))


def _label(owner: str, name: str) -> str:
    return LABELS.get(f"{owner}.{name}", label_of(name))


def _records(v: Any) -> bool:
    """A non-empty list of records (dataclasses)."""
    return isinstance(v, list) and bool(v) and all(dataclasses.is_dataclass(x) for x in v)


def _record_map(v: Any) -> bool:
    """A non-empty map of records (a kernel variant's stage-2 check, a mode's graphs)."""
    return isinstance(v, dict) and bool(v) and all(dataclasses.is_dataclass(x) for x in v.values())


def _rich(x: Any) -> bool:
    """A record that holds records of its own (shown as a block, not a table row)."""
    for f in _fields(x):
        v = getattr(x, f.name)
        if dataclasses.is_dataclass(v) and len(_fields(v)) > 2:
            return True
        if _records(v) and len(_fields(v[0])) > 2:
            return True
    return False


def _fields(*records: Any) -> list[dataclasses.Field]:
    """The fields a view shows of ``records`` (of one type): bookkeeping left out, and an
    optional key (``opt()``) no record's producer wrote (left out of the JSON document too); one
    written ``null`` that says what its ``null`` means (``opt(reads=...)``) is shown."""
    return [
        f
        for f in dataclasses.fields(records[0])
        if f.name not in HIDDEN_FIELDS
        and not (
            f.metadata.get(OMIT)
            and all(getattr(r, f.name) is None and not _said_null(r, f) for r in records)
        )
    ]


def _said_null(record: Any, f: dataclasses.Field) -> bool:
    """Field ``f`` of ``record`` was written ``null`` and says what that means."""
    return NONE_READS in f.metadata and f.name in getattr(record, "null_keys", ())


def _blocks(
    key: str, title: str, v: Any, skip: frozenset[str] = frozenset(), ranks: int = 1
) -> list[Block]:
    """A section's block, then the blocks of the sections nested in it (``skip``: fields an
    overview table of its list shows; ``ranks``: the run's, for the fields made of every
    rank's value, :func:`mlaprof.analysis.typed_json.over_ranks`)."""
    owner = type(v).__name__
    rows: list[Row] = []
    tables: list[Table] = []
    nested: list[Block] = []
    pooled: set[str] = set()  # the rows whose label says the ranks their value is made of
    empty: list[str] = []  # nested sections with nothing to show (named, never a bare title)
    for f in _fields(v):
        if f.name in skip:
            continue
        x = getattr(v, f.name)
        k, label = f"{key}.{f.name}", _label(owner, f.name)
        how = f.metadata.get(OVER_RANKS)
        if how and x is not None:  # an unknown is no rank's value: no sum to say
            said = over_ranks_label(how, field_ranks(v, f.name, ranks))
            label += said
            if said:
                pooled.add(k)
        if dataclasses.is_dataclass(x):
            inner = _blocks(k, title + SEP + label, x, ranks=ranks)
            if any(b.rows or b.tables for b in inner):
                nested += inner
            else:
                empty.append(label)
        elif _records(x) and any(_rich(r) for r in x):
            nested += _list_blocks(k, title + SEP + label, x, ranks)
        elif _records(x):
            if not _restated(v, x, ranks):
                tables.append(_table(k, label, x, ranks=ranks))
        elif _record_map(x):
            tables.append(_map_table(k, label, x, ranks))
        elif _said_by_another_row(v, f, x, ranks):
            continue
        else:
            rows.append(Row(k, label, _unlabelled(label, _text(f, x, v))))
    if empty:
        rows.append(Row(f"{key}.{NOT_RECORDED_KEY}", NOT_RECORDED, ", ".join(empty)))
    return [Block(key, title, _worded_once(key, v, rows, pooled), tables), *nested]


def _said_by_another_row(v: Any, f: dataclasses.Field, x: Any, ranks: int) -> bool:
    """Field ``f``'s value ``x`` says nothing another field's row of ``v`` does not: an empty
    list or map of what a count counts, where that count is 0 or unknown
    (:func:`mlaprof.analysis.typed_json.counted_by`); a map of each rank's value
    (:func:`mlaprof.analysis.typed_json.each_rank_of`) where the run's one rank's value is the
    field's (or none: the field's value is that rank's), or no rank's beside a 0."""
    if not isinstance(x, (list, dict)):
        return False
    if (count := f.metadata.get(COUNTED_BY)) is not None:
        return not x and not getattr(v, count)
    if (name := f.metadata.get(EACH_RANK_OF)) is not None and isinstance(x, dict):
        own = attrgetter(name)(v)  # a field of the section's own, or of one nested in it
        # one rank: the field's value is that rank's (the map holds it, or nothing more)
        return (not x and own == 0) or (ranks == 1 and list(x.values()) in ([], [own]))
    return False


def _unlabelled(label: str, text: str) -> str:
    """A value whose words begin with its own label (a fleet's line "ranks: 1, all agree",
    labelled "ranks") without it: the row says it once ("ranks: 1, all agree", never
    "ranks: ranks: 1, ...")."""
    head = f"{label}: "
    return text[len(head) :] if text.startswith(head) and len(text) > len(head) else text


def _worded_once(key: str, v: Any, rows: list[Row], pooled: set[str]) -> list[Row]:
    """``rows`` with a value and the section's text field that words it
    (:func:`mlaprof.analysis.typed_json.words_of`) said once where they read the same: the
    value's row where its label says the ranks it pools (ranks that agree), else the words' (one
    rank's time). Where the words say more (a range with the ranks behind each value), both.
    A line made of fields (:func:`mlaprof.analysis.typed_json.says`) leaves out the rows of
    those it holds as whole words."""
    said = {r.key: r.text for r in rows}
    # words -> (the value it words, whether the value's row stays where they read the same)
    links = {
        f"{key}.{f.name}": (f"{key}.{f.metadata[WORDS_OF]}", bool(f.metadata.get(KEEP_VALUE)))
        for f in dataclasses.fields(v)
        if WORDS_OF in f.metadata
    }

    def depth(w: str) -> int:  # words of a plain value first, then words of those words
        return 1 + depth(links[w][0]) if links[w][0] in links else 0

    dropped: set[str] = set()
    for words in sorted(links, key=depth):
        value, keep = links[words]
        # words of words (a capture's text words its label, the label its status): a value row
        # that went for its own value is said by that one, compared with it instead
        while value in dropped and value in links:
            value, kept = links[value]
            keep = keep or kept
        if words in said and words not in dropped and said[words] == said.get(value):
            dropped.add(words if value in pooled or keep else value)
    # a line made of fields (typed_json.says): each field's row where the line holds its words
    for f in dataclasses.fields(v):
        line = said.get(f"{key}.{f.name}")
        if line is not None and f"{key}.{f.name}" not in dropped:
            dropped.update(
                k
                for k in (f"{key}.{n}" for n in f.metadata.get(SAYS, ()))
                if k in said and holds_words(line, said[k])
            )
    return [r for r in rows if r.key not in dropped]


def _restated(v: Any, records: list[Any], ranks: int) -> bool:
    """A run of one rank whose per-rank list holds that rank alone, each of its values the
    section's own field of that name holds (a one-rank run's timing or committed steps, said
    once in the section's rows, not again as a table of one row)."""
    if ranks != 1 or len(records) != 1:
        return False
    own = {f.name for f in dataclasses.fields(v)}
    shown = [f.name for f in _fields(records[0]) if f.name != "rank"]
    return bool(shown) and all(n in own and getattr(v, n) == getattr(records[0], n) for n in shown)


def field_ranks(v: Any, name: str, ranks: int) -> int | list[int]:
    """The ranks field ``name`` of section ``v`` adds, where it is made of every rank's: where
    the section keeps each rank's own value of it (its ``per_rank`` rows hold the field), the
    ranks whose value is not 0 or unknown (a count only one rank holds is that rank's, no sum);
    where it is made of another list's records (``over_ranks(of=...)``), the ranks of those
    holding a value, and none where the section holds no such list (one record's own value);
    else the run's ``ranks``."""
    of = v.__dataclass_fields__[name].metadata.get(OVER_RECORDS)
    if of is not None:
        held = getattr(v, of, None) or []
        return [r.rank for r in held if getattr(r, name) is not None]
    per = getattr(v, "per_rank", None)
    if _records(per) and all(hasattr(r, name) and hasattr(r, "rank") for r in per):
        return [r.rank for r in per if getattr(r, name)]
    return ranks


def _list_blocks(key: str, title: str, items: list[Any], ranks: int = 1) -> list[Block]:
    """A list of records: one table, or one block per record where they hold records (after
    the list's overview table where :data:`SPECS` declares one)."""
    if not any(_rich(x) for x in items):
        return [Block(key, title, [], [_table(key, title, items, ranks=ranks)])]
    out: list[Block] = []
    spec = SPECS.get(type(items[0]).__name__)
    skip: frozenset[str] = frozenset()
    if spec is not None:
        out.append(Block(key, title, [], [_table(key, title, items, True, ranks)]))
        skip = frozenset(n for c in spec.cols for n in c.fields)
    for i, x in enumerate(items[:BLOCKS_PER_LIST]):
        out += _blocks(f"{key}[{i}]", f"{title} {i + 1} of {len(items)}", x, skip, ranks)
    more = len(items) - BLOCKS_PER_LIST
    if more > 0:
        note = Row(f"{key}.more", "more", f"{more} more in report --json")
        out.append(Block(f"{key}.more", title, [note], []))
    return out


def _table(key: str, title: str, items: list[Any], overview: bool = False, ranks: int = 1) -> Table:
    """A list of records as a table: the columns :data:`SPECS` declares for their type first
    (``overview``: those only), then every other field in its declared order; a column made of
    every rank's values says so (:func:`summed_columns`; ``ranks``: the run's)."""
    spec = SPECS.get(type(items[0]).__name__)
    cols = _fields(*items)
    owner = type(items[0]).__name__
    shown = items[:TABLE_ROWS]
    columns: list[Column]
    notes: list[str] = []
    declared: list[Col] = []
    if spec is None:
        columns = [(_label(owner, f.name), (f.name,), _field_cell(f)) for f in cols]
    else:
        names = {f.name for f in cols}
        declared = [c for c in spec.cols if any(n in names for n in c.fields)]
        used = {n for c in spec.cols for n in c.fields} | set(spec.note_fields)
        rest = [] if overview else [f for f in cols if f.name not in used]
        columns = [(c.head, c.fields, lambda x, c=c: _declared(c, x)) for c in declared]
        columns += [(_label(owner, f.name), (f.name,), _field_cell(f)) for f in rest]
        # a record with nothing to say under the table ("") adds no line
        notes = [value_text(n) for x in shown if (n := spec.note(x))] if spec.note else []
        notes += [value_text(n) for n in spec.notes(shown)] if spec.notes else []
    if spec is not None and spec.shared_once:
        columns, shared = _shared_columns(columns, len(declared), items)
        if shared:
            notes.insert(0, shared)
    title, head, rows = summed_columns(
        spec.title or title if spec else title,
        [h for h, _, _ in columns],
        [[cell(x) for _, _, cell in columns] for x in shown],
        [[over_of(x, names_, ranks) for _, names_, _ in columns] for x in shown],
    )
    return Table(key, title, head, rows, max(0, len(items) - TABLE_ROWS),
                 list(dict.fromkeys(notes)), len(declared))  # fmt: skip


SHARED = "in every row"  # the note a table's shared values are said in


def _shared_columns(
    columns: list[Column], declared: int, items: list[Any]
) -> tuple[list[Column], str]:
    """``columns`` without those whose fields every one of several ``items`` holds alike (a
    run's layers, each judged by the same reference), and the note that says those values
    once. The ``declared`` first columns (:data:`SPECS`) stay, as does a value made of every
    rank's (its label says the ranks per row)."""
    if len(items) < 2:
        return columns, ""
    over = {f.name for f in dataclasses.fields(items[0]) if OVER_RANKS in f.metadata}
    first = items[0]
    alike = [
        i
        for i, (_, names, _) in enumerate(columns)
        if i >= declared
        and not over.intersection(names)
        and all(getattr(x, n) == getattr(first, n) for x in items[1:] for n in names)
    ]
    if not alike:
        return columns, ""
    said = "; ".join(f"{columns[i][0]}: {columns[i][2](first)}" for i in alike)
    return [c for i, c in enumerate(columns) if i not in alike], f"{SHARED}: {said}"


def _field_cell(f: dataclasses.Field) -> Callable[[Any], str]:
    return lambda x: _text(f, getattr(x, f.name), x)


Over = tuple[str, int] | None  # how a value is made of every rank's, and of how many ranks


def over_of(x: Any, names: Sequence[str], ranks: int) -> Over:
    """How a record's value made of fields ``names`` is made of every rank's (the first such
    field's :func:`mlaprof.analysis.typed_json.over_ranks` marker) and of how many ranks: the
    record's own ``ranks`` where it lists them (a row that pools some ranks), else the run's
    ``ranks``; None where it is no such value."""
    meta = {f.name: f.metadata for f in dataclasses.fields(x)}
    how = next((meta[n][OVER_RANKS] for n in names if OVER_RANKS in meta.get(n, {})), None)
    if how is None:
        return None
    own = getattr(x, "ranks", None)
    return how, (len(own) if isinstance(own, list) and own else ranks)


def summed_columns(
    title: str, head: list[str], rows: list[list[str]], overs: list[list[Over]]
) -> tuple[str, list[str], list[list[str]]]:
    """A table's columns whose values are made of several ranks' say so in the one wording
    (:func:`mlaprof.analysis.typed_json.over_ranks_label`): in the title where every such
    column of several is made of the same ranks, else in a column's header where each of its
    rows is, else in each such row's cell (a row of one rank says nothing)."""
    uniform: dict[int, Over] = {}
    for i in range(len(head)):
        col = {o[i] for o in overs}
        if any(o is not None and o[1] > 1 for o in col):
            uniform[i] = col.pop() if len(col) == 1 else None
    if not uniform:
        return title, head, rows
    said = set(uniform.values())
    if len(uniform) > 1 and len(said) == 1 and (one := said.pop()) is not None:
        return title + over_ranks_label(*one), head, rows
    head = [
        h + over_ranks_label(*o) if (o := uniform.get(i)) is not None else h
        for i, h in enumerate(head)
    ]
    rows = [
        [
            c + over_ranks_label(*o)
            if i in uniform and uniform[i] is None and (o := ov[i]) is not None
            else c
            for i, c in enumerate(r)
        ]
        for r, ov in zip(rows, overs, strict=True)
    ]
    return title, head, rows


def _declared(c: Col, x: Any) -> str:
    if c.cell is not None:
        return value_text(c.cell(x))
    f = next(f for f in dataclasses.fields(x) if f.name == c.fields[0])
    return _text(f, getattr(x, f.name), x)


def field_words(owner: Any, name: str) -> str:
    """Field ``name`` of section ``owner`` as every view's rows show it (a ``None`` in the
    words its section or field gives it): for a view that lays a field out itself (the
    dashboard's layer table)."""
    f = next(f for f in dataclasses.fields(owner) if f.name == name)
    return _text(f, getattr(owner, name), owner)


def _text(f: dataclasses.Field, v: Any, owner: Any = None) -> str:
    """A field's value as every view shows it; a ``None`` its section (``owner``) words
    (:meth:`~mlaprof.analysis.section_base.Section.none_reads`) or the field declares known
    (:func:`mlaprof.analysis.typed_json.reads_when_none`) reads those words, not "unknown"."""
    if v is None:
        said = owner.none_reads(f.name) if isinstance(owner, Section) else None
        if said is not None:
            return said
        if NONE_READS in f.metadata:
            return f.metadata[NONE_READS]
    return field_text(f.name, v)


def _map_table(key: str, title: str, items: dict[Any, Any], ranks: int = 1) -> Table:
    """A map of records as a table (its keys first); columns made of every rank's values say
    so as a list's do (:func:`summed_columns`)."""
    first = next(iter(items.values()))
    cols = _fields(*items.values())
    owner = type(first).__name__
    shown = list(items.items())[:TABLE_ROWS]
    title, head, rows = summed_columns(
        title,
        ["", *(_label(owner, f.name) for f in cols)],
        [[value_text(k), *(_text(f, getattr(x, f.name), x) for f in cols)] for k, x in shown],
        [[None, *(over_of(x, (f.name,), ranks) for f in cols)] for _, x in shown],
    )
    return Table(key, title, head, rows, max(0, len(items) - TABLE_ROWS))


def table_more(t: Table) -> str:
    """What a table that was cut says under its rows (empty: nothing was cut)."""
    return f"... {counted(t.more, 'more row(s)')} in report --json" if t.more else ""


# -- the splits table's cells (the terminal report and the dashboard share them) --------------
NEVER_FROZEN = "never"  # the frozen cell of a policy whose S the device decides at each replay
# the S and deserved cells of a policy whose kernel cannot run the row's configuration: a mark
# (the cell is narrow), said in the section's words under the table (not_runnable_notes)
NOT_RUNNABLE_MARK = "‡"
ON_DEVICE = "dev"  # beside such a policy's S: the device's, for the step (modelled)


@dataclass(frozen=True)
class SplitCells:
    """One policy row of the splits table in words (:func:`split_cells`)."""

    s: str  # S used
    all_act: str  # S over all rows / over active rows
    deserved: str
    frozen: str
    occupancy: str  # used -> deserved


def split_cells(r: SplitStep) -> SplitCells:
    """One policy row of the splits table in words, the one wording the terminal report and the
    dashboard lay out (each picks its columns): a policy whose S is decided on the device shows
    the S it decides for the worst step, marked "dev" as the JSON's ``on_device`` says, and
    is never frozen; a number the row does not hold reads "-"; a frozen S said on a condition
    (the row's ``frozen_if``: the run does not say whether its FULL graph captures) says it;
    a frozen S of a policy vLLM does not run here reads "what-if" (the row's
    ``frozen_what_if``, in full under the table: :func:`what_if_notes`), and so does its
    frozen cell where it holds no frozen S ("never what-if": :func:`_what_if_mark`)."""

    def n(x: object) -> str:
        return GAP if x is None else str(x)

    held = r.all_rows is not None or r.active_rows is not None
    shares = r.occupancy is not None or r.occupancy_deserved is not None
    s = n(r.used)
    if r.on_device:  # the S the device decides at replay, for this step (modelled)
        s = ON_DEVICE if r.used is None else f"{r.used} {ON_DEVICE}"
    # not unknown: the kernel cannot run it (the row's reason, under the table)
    gone = r.not_runnable is not None
    return SplitCells(
        s=NOT_RUNNABLE_MARK if gone and r.used is None else s,
        all_act=f"{n(r.all_rows)}/{n(r.active_rows)}" if held else GAP,
        deserved=NOT_RUNNABLE_MARK if gone and r.deserved is None else n(r.deserved),
        frozen=NEVER_FROZEN + _what_if_mark(r)
        if r.on_device
        else FROZEN_NONE + _what_if_mark(r)
        if r.frozen is None
        else _frozen_cell(r),
        occupancy=f"{share_text(r.occupancy)}->{share_text(r.occupancy_deserved)}"
        if shares
        else GAP,
    )


def _no_s_said(r: SplitLike) -> tuple[str, str] | None:
    """A no-S row's cell mark and words (:func:`no_s_text`: ``‡`` and "not runnable: bh64 needs
    64 or 128 heads"; ``-`` and "no S recorded ..." where the record gives no reason); None: the
    row holds an S."""
    said = no_s_text(r)
    if said is None:
        return None
    return NOT_RUNNABLE_MARK if r.not_runnable is not None else GAP, said


def _what_if_mark(r: SplitStep) -> str:
    """The mark a row vLLM does not run here carries where no frozen S carries it (a device
    S "never what-if", a row with no frozen S "- what-if"): every off-route row holding an S
    is marked on its row (the row's ``what_if``), its condition in full under the table."""
    held = (r.used, r.deserved, r.occupancy, r.occupancy_deserved)
    return f" {WHAT_IF}" if r.what_if and any(v is not None for v in held) else ""


def _frozen_cell(r: SplitStep) -> str:
    """A frozen S with its conditions: "1", "1 if it captures", "16 what-if",
    "16 what-if, if it captures"."""
    what_if = [WHAT_IF + ("," if r.frozen_if else "")] if r.frozen_what_if else []
    return " ".join((str(r.frozen), *what_if, *([r.frozen_if] if r.frozen_if else [])))


def what_if_notes(rows: Sequence[SplitStep]) -> list[str]:
    """The what-if rows' line under the splits table: one per route they are judged against
    (a run has one), naming once, in row order, every policy off it that holds an S (the row's
    ``what_if``), in the rows' words (:func:`mlaprof.analysis.sections.what_if_words`):
    "what-if (a, b): S and occupancy hold only if vLLM ran that policy (a what-if: this
    configuration takes <path> [vLLM <version>])"; a frozen S among them reads "16 what-if"."""
    by_route: dict[str, list[str]] = {}
    for r in rows:
        held = (r.used, r.deserved, r.frozen, r.occupancy)
        if r.what_if and any(v is not None for v in held):
            said = what_if_route_said(r.policy, r.what_if)
            by_route.setdefault(said, [])
            if r.policy not in by_route[said]:
                by_route[said].append(r.policy)
    return [
        f"{WHAT_IF} ({', '.join(pols)}): S and occupancy hold only if vLLM ran that policy ({said})"
        for said, pols in by_route.items()
    ]


def not_runnable_notes(rows: Sequence[SplitLike]) -> list[str]:
    """The lines under a splits table for its rows with no S, in row order: each row's mark,
    policy and why (``‡ aiter-gluon-bh64: not runnable: ...``), the policies that share
    one reason named on one line (a CUDA run's six Gluon policies that all assert gfx950:
    "‡ aiter-gluon-v0.1.19, aiter-gluon-v0.1.20, ...: not runnable: ...", the reason once)."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        said = _no_s_said(r)
        if said is not None and r.policy not in (pols := by_reason.setdefault(said, [])):
            pols.append(r.policy)
    return [f"{mark} {', '.join(pols)}: {said}" for (mark, said), pols in by_reason.items()]


# -- plain-text layout (the terminal report and ``tui --once`` share it) ----------------------
def text_table(head: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell, numbers right-aligned (plain text, no wrapping)."""
    cols = list(zip(head, *rows, strict=True))
    widths = [max(len(c) for c in col) for col in cols]
    right = [numeric_column(col[1:]) for col in cols]
    fmt = [(f"{{:>{w}}}" if r else f"{{:<{w}}}") for w, r in zip(widths, right, strict=True)]
    return [
        (indent + "  ".join(f.format(c) for f, c in zip(fmt, line, strict=True))).rstrip()
        for line in (head, *rows)
    ]


def text_numeric(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "-+." and cell[1:2].isdigit())


# what a number's cell reads where there is none ("-": typed_json.reads_when_none's word)
GAP = "-"
NUMBER_GAPS = (GAP, "unknown", NOT_RUNNABLE_MARK)  # the mark: no number, for a reason


def numeric_column(cells: Sequence[str]) -> bool:
    """The one rule every plain-text and terminal table aligns by: a column of numbers (right)
    is one whose cells are each a number or a number's gap, a column of gaps alone ("-") too,
    so a gap sits where its numbers stand in every view; "unknown" alone is a word."""
    return (
        bool(cells)
        and all(text_numeric(c) or c in NUMBER_GAPS for c in cells)
        and any(c != "unknown" for c in cells)
    )


def fit(lines: list[str], width: int | None) -> list[str]:
    """``lines`` broken at spaces to ``width`` columns (a terminal's), the continuation indented;
    a word is never cut, so the text reads the same with its line breaks taken out."""
    if width is None:
        return lines
    import textwrap

    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(line.strip(" "), width, initial_indent=lead,
                             subsequent_indent=lead + "    ", break_long_words=False,
                             break_on_hyphens=False)  # fmt: skip
    return out


def block_lines(blocks: list[Block], width: int | None = None) -> list[str]:
    """Every block as plain-text lines: a title, ``label: value`` rows, padded tables (lines
    broken to ``width`` columns where given: :func:`fit`)."""
    out: list[str] = []
    for b in blocks:
        out.append(b.title)
        out += [f"  {r.label}: {r.text}" for r in b.rows]
        for t in b.tables:
            if t.title != b.title:
                out.append(f"  {t.title}")
            out += text_table(t.head, t.rows, indent="    " if t.title != b.title else "  ")
            out += ["    " + n for n in t.notes]
            if t.more:
                out.append("    " + table_more(t))
    return fit(out, width)


def fleet_line(s: RunSummary) -> str | None:
    """The fleet's verdict (ranks side by side, never merged), which every view says first
    where the run holds :data:`FLEET_LEAST` ranks or more; None for one rank."""
    return s.fleet.text if s.fleet.ranks >= FLEET_LEAST else None


def front_rows(blocks: list[Block]) -> list[Block]:
    """The rows of :data:`FRONT_ROWS` that ``blocks`` hold: a block per section (no tables),
    its rows in the declared order; what every view says in a line before the findings."""
    out = []
    for key, fields in FRONT_ROWS.items():
        b = next((b for b in blocks if b.key == key), None)
        beside = FRONT_ROWS_BESIDE.get(key)
        if b is None or (beside and _held(blocks, beside[0]) < beside[1]):
            continue
        by_key = {r.key: r for r in b.rows}
        keys = [f"{key}.{f}" for f in fields] if fields else list(by_key)
        rows = [by_key[k] for k in keys if k in by_key]
        if rows:
            out.append(Block(key, b.title, rows, []))
    return out


def _held(blocks: list[Block], key: str) -> int:
    """The records the table ``key`` holds (shown and cut), 0 where there is none."""
    return next((len(t.rows) + t.more for b in blocks for t in b.tables if t.key == key), 0)


def row_line(b: Block) -> str:
    """A block's rows as one line: ``title: label value; label value`` (one row: its text)."""
    if len(b.rows) == 1:
        return f"{b.title}: {b.rows[0].text}"
    return f"{b.title}: " + "; ".join(f"{r.label} {r.text}" for r in b.rows)


def front_tables(blocks: list[Block]) -> list[Table]:
    """The tables of :data:`FRONT` that ``blocks`` hold, in that order (a list's records in
    theirs), each cut to its declared columns: what every view shows before the findings,
    the same Table in each (the sections below hold every column)."""
    import re

    tables = [(b, t) for b in blocks for t in b.tables]
    out: list[Table] = []
    for want, least in FRONT:
        pattern = re.escape(want).replace(re.escape("[]"), r"\[\d+\]")
        for b, t in tables:
            if re.fullmatch(pattern, t.key) and len(t.rows) + t.more >= least:
                n = t.declared or len(t.head)
                title = t.title if t.title == b.title else b.title + SEP + t.title
                out.append(dataclasses.replace(t, title=title, head=t.head[:n],
                                               rows=[r[:n] for r in t.rows]))  # fmt: skip
    return out
