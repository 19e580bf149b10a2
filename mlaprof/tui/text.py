"""Table rows shared by the widgets and the plain-text snapshot (``mlaprof tui --once``)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING

from mlaprof.analysis.findings_verdict import OK
from mlaprof.analysis.sections import NO_TIMED_STEP
from mlaprof.reporters.rows import (
    SPLITS_TITLE,
    field_words,
    not_runnable_notes,
    over_of,
    split_cells,
    splits_scope_of,
    summed_columns,
    text_table,
    what_if_notes,
)
from mlaprof.reporters.rows import splits_title as rows_splits_title
from mlaprof.tui.fmt import fmt_bytes, fmt_count, fmt_ms, fmt_pct
from mlaprof.tui.view import ANALYSING, FULL

if TYPE_CHECKING:
    from mlaprof.analysis.sections import LayerRow, SplitStep
    from mlaprof.tui.view import View

Table = tuple[list[str], list[list[str]]]
BLOCKS = "▁▂▃▄▅▆▇█"
SEV_TAG = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}

# (LayerRow field the column sorts by, header)
LAYER_COLUMNS = (
    ("layer", "layer"),
    ("time_us", "time ms"),
    ("syncs", "syncs"),
    ("S_used", "S used"),
    ("S_reference", "S ref"),
    ("collapsed", "collapsed"),
)
RANK_COLUMN = ("rank", "rank")  # first, where several ranks are shown (never merged)


def _s(v: object) -> str:
    return "-" if v is None else str(v)


def header_lines(v: View) -> list[str]:
    return [
        f"{v.name}  |  {v.status}  |  capture {v.capture}  |  {v.rank_label}",
        f"{v.origin} {v.scenario}  |  device {v.device}  |  backend {v.backend}  |  "
        f"{v.steps_text}, {fmt_count(v.events)} records  |  {v.findings_source}",
    ]


def latency_line(v: View, width: int = 200) -> str:
    """Recent step times with how they were measured ("CPU reference timing" on a CPU run);
    the numbers always fit ``width`` (an 80-column terminal), the words shrink first."""
    stats = v.latency
    if v.steps_decided and not v.latency_ms:  # no row of "-" for a run with no step time
        return f"step ms{f' ({v.latency_scope})' if v.latency_scope else ''}: {NO_TIMED_STEP}"
    tries = [("  ", v.timing_label), (" ", v.timing_label), (" ", v.timing_short), (" ", "")]
    for sep, label in tries:
        nums = sep.join(f"{k} {fmt_ms(x)}" for k, x in stats)
        scope = f", {v.latency_scope}" if v.latency_scope else ""
        # no count before the analysis told the steps apart (an imported trace's warm-ups)
        last = f"last {len(v.latency_ms)}" if v.steps_decided else ANALYSING
        line = f"step ms ({last}{scope}{', ' + label if label else ''}): {nums}"
        if len(line) <= width:
            return line
    return line


def splits_title(v: View) -> str:
    """The splits panel's title: the report's and the sections' one title, with where its S
    come from (:func:`mlaprof.reporters.rows.splits_title`, from the analysis)."""
    return rows_splits_title(v.summary)


def splits_border(v: View) -> tuple[str, str]:
    """The splits panel's border: the title (:func:`splits_title`) in its two parts, its name
    above the table and where its S come from below it (the whole title is wider than the
    panel at 80 columns), or the note of a run with no policy step (:func:`splits_note`)."""
    return SPLITS_TITLE, splits_note(v) or splits_scope_of(v.summary) or ""


def splits_note(v: View) -> str | None:
    """What the KV-splits panel says where the run has no policy step to list but its S is
    known: an imported trace's S is what its kernel grids show (the summary's KV-splits line,
    its paths, S per layer in the layer table), never "no records" beside a layer table that
    shows S."""
    if v.splits or v.summary is None or v.summary.trace is None:
        return None
    return (
        "no policy step modelled: an imported trace's S is what its kernel grids show (in the "
        "summary's KV splits line, per path in the trace's paths, per layer in the layer table)"
    )


def sparkline(values: list[float], width: int) -> str:
    """Block-character sparkline of the last ``width`` values (min..max scaled)."""
    vals = values[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = hi - lo
    return "".join(
        BLOCKS[int((x - lo) / span * (len(BLOCKS) - 1))] if span else BLOCKS[0] for x in vals
    )


def syncs_cell(r: LayerRow | None) -> str:
    """A layer's syncs per watched step (``4``, ``2.5``); where none of its steps was watched,
    the words every view's rows give it ("not checked"), distinct from ``0`` (checked, none)."""
    if r is None:
        return "-"
    if r.syncs is None:
        return field_words(r, "syncs")
    return f"{r.syncs:g}"


def collapsed_cell(r: LayerRow | None) -> str:
    """A layer's collapsed steps of its steps (``3/10``); where no step had an S to judge
    against, the words every view's rows give it ("not judged"), never ``0`` or ``-/10``."""
    if r is None:
        return "-"
    return field_words(r, "collapsed") if r.collapsed is None else f"{r.collapsed}/{r.steps}"


def reference_cell(r: LayerRow | None) -> str:
    """The S a layer is judged against: deserved, or the fix's S for an imported trace."""
    if r is None:
        return "-"
    ref, source = r.S_reference, r.reference_source
    if ref is None:  # the report's words for it (never a "-" beside its "unknown")
        return field_words(r, "S_reference")
    return f"{ref} (fix)" if source == "fix" else str(ref)


def layer_columns(v: View) -> tuple[tuple[str, str], ...]:
    return (RANK_COLUMN, *LAYER_COLUMNS) if v.per_rank_layers else LAYER_COLUMNS


def layer_table(v: View) -> Table:
    rows = [
        [_s(r.rank)] * v.per_rank_layers
        + [
            _s(r.layer),
            fmt_ms(layer_ms(r)),
            syncs_cell(r),
            s_used_cell(r),
            reference_cell(r),
            collapsed_cell(r),
        ]
        for r in v.layers
    ]
    return [h for _, h in layer_columns(v)], rows


def s_used_cell(r: LayerRow) -> str:
    """A layer's S used, with its minimum where lower and the steps it is known on where the
    layer's S was not recorded on every step (a kernel that decides S on the device)."""
    if r.S_used is None and (said := r.none_reads("S_used")) is not None:
        return said  # the analysis' words: the grid's cap where the device decides S
    cell = _s(r.S_used) if r.S_min in (None, r.S_used) else f"{r.S_used} (min {r.S_min})"
    if r.S_steps < r.steps:
        cell += f" ({r.S_steps} of {r.steps} steps)"
    return cell


def layer_ms(r: LayerRow | None) -> float | None:
    """A layer row's time in ms (the analysis gives µs)."""
    return None if r is None or r.time_us is None else r.time_us / 1e3


def _ranks(r: SplitStep) -> str:
    """The row's ranks as the report's splits table says them (``2 (ranks 0-1)``)."""
    from mlaprof.rank_counts import ranks_count

    rs = [x for x in r.ranks if x is not None]
    return ranks_count(rs) if rs else ranks_count([r.rank]) if r.rank is not None else "-"


def split_table(v: View) -> Table:
    """The analysis' worst-step row per policy (ranks that agree share a row; ranks that
    disagree keep their own)."""
    head = ["ranks", "policy", "S used", "deserved", "frozen", "occ (model)"]
    rows = []
    for r in v.splits:
        c = split_cells(r)  # the terminal report's words ("never": S decided on the device)
        rows.append([_ranks(r), _s(r.policy), c.s, c.deserved, c.frozen, c.occupancy])
    return head, rows


def split_notes(v: View) -> list[str]:
    """The lines under the splits table: each policy that cannot run, then each what-if frozen
    S, in the section's words (:func:`mlaprof.reporters.rows.not_runnable_notes`,
    :func:`mlaprof.reporters.rows.what_if_notes`, as the terminal report says them)."""
    return [_s(n) for n in (*not_runnable_notes(v.splits), *what_if_notes(v.splits))]


# the padding panel's columns: (Padding field, header)
PADDING_COLUMNS = (
    ("steps", "steps"),
    ("steps_padded", "padded"),
    ("real_rows", "real rows"),
    ("padding_rows", "pad rows"),
    ("real_tokens", "real tok"),
    ("padding_tokens", "pad tok"),
    ("padding_fraction", "waste"),
    ("kv_bytes_padding", "pad KV"),
)
PADDING_TITLE = "padding (every recorded step)"


def padding_panel(v: View) -> tuple[str, Table]:
    """The analysis' padding totals over every recorded step (one definition for all views),
    with its title: counts summed over ranks say so as the report's sections do
    (:func:`mlaprof.reporters.rows.summed_columns`, the fields' over-ranks marker)."""
    p = v.padding
    head = [h for _, h in PADDING_COLUMNS]
    if p is None or not p.steps:
        return PADDING_TITLE, (head, [])
    cells = [
        fmt_pct(p.padding_fraction)
        if name == "padding_fraction"
        else fmt_bytes(p.kv_bytes_padding)
        if name == "kv_bytes_padding"
        else _s(getattr(p, name))
        for name, _ in PADDING_COLUMNS
    ]
    overs = [over_of(p, (name,), p.ranks or 1) for name, _ in PADDING_COLUMNS]
    title, head, rows = summed_columns(PADDING_TITLE, head, [cells], [overs])
    return title, (head, rows)


def padding_table(v: View) -> Table:
    return padding_panel(v)[1]


def padding_title(v: View) -> str:
    return padding_panel(v)[0]


CAPTURE = "capture"  # the summary field whose section the capture panel shows


def capture_panel(v: View, width: int | None = None) -> tuple[str, list[str]]:
    """The capture section exactly as every report renders it: the rows layer's block of the
    summary's ``capture`` (:func:`mlaprof.reporters.rows.block_lines`: its title, labels,
    values and tables), never the run's captures table laid out anew; why nothing is shown
    while no summary is in. ``width``: break lines to it (the plain text; the panel wraps)."""
    if v.summary is None:
        return CAPTURE, [v.findings_source]
    from mlaprof.reporters.rows import block_lines, summary_blocks

    (block,) = [b for b in summary_blocks(v.summary) if b.key == CAPTURE]
    title, *lines = block_lines([block], width)
    return title, [line.removeprefix("  ") for line in lines]


def sync_table(v: View, layer: int | None, width: int | None = None) -> Table:
    """Each sync / allocation site: the source line whole and its count before the function
    (a narrow screen cuts the function name, never ``file.py:NN``); a rank column where several
    ranks show. Where the rows do not fit ``width`` columns, locations drop their folders
    (``legacy_flat.py:53``, the line number kept)."""
    many = len({s.rank for s in v.syncs}) > 1
    head = ["rank"] * many + ["kind", "op", "location", "count", "first step", "function"]
    sites = [s for s in v.syncs if layer is None or s.layer == layer]

    def rows(loc: Callable[[str], str]) -> list[list[str]]:
        return [
            [_s(s.rank)] * many
            + [_s(s.kind), _s(s.op), loc(_s(s.location)), _s(s.count), _s(s.first_step),
               _s(s.function)]
            for s in sites
        ]  # fmt: skip

    out = rows(str)
    if width is not None and _table_width((head, out), upto=head.index("count") + 1) > width:
        out = rows(lambda loc: loc.rsplit("/", 1)[-1])
    return head, out


def _table_width(table: Table, upto: int) -> int:
    """Columns the first ``upto`` columns of ``table`` take in :func:`format_table`'s layout."""
    head, rows = table
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(upto)]
    return 2 + sum(widths) + 2 * (upto - 1)


def empty_findings_ok(v: View) -> bool:
    """Whether an empty findings list reads as the analysis' OK (drawn as one): the full pass's
    verdict only, never "analysing...", a provisional list or an UNKNOWN line."""
    verdict = v.summary.findings_verdict if v.summary is not None else None
    return v.findings_source == FULL and verdict is not None and verdict.verdict == OK


def empty_findings_text(v: View) -> str:
    """What an empty findings list says: the full pass's line (the analysis' "OK" or
    "UNKNOWN" with what is missing, as every view prints it), none so far, or why none are
    shown yet."""
    verdict = v.summary.findings_verdict if v.summary is not None else None
    if v.findings_source == FULL and verdict is not None and verdict.line is not None:
        return f"{verdict.label} {verdict.line}" if verdict.label else verdict.line
    if v.findings_source == FULL:
        return "no findings"
    return "no findings so far (provisional)" if v.provisional else v.findings_source


def headline_lines(v: View) -> list[str]:
    """The analysis' key numbers (the lines ``mlaprof report`` prints)."""
    if not v.headline:
        return [f"  {v.findings_source}"]
    return [
        f"  {h.label}: {h.value}" + (f"  ({h.provenance_after})" if h.provenance_after else "")
        for h in v.headline
    ]


def _step_median_lines(v: View) -> list[str]:
    """The shown ranks' median step where the headline does not say it already (one rank
    picked of several: its own median, named by its rank; said once where they read the same,
    never "median step" and "step median (analysis)" as two lines of one number)."""
    if any(h.value == v.step_median for h in v.headline):
        return []
    return [f"  step median ({v.rank_label}): {v.step_median}"]


def finding_lines(v: View, width: int = 100) -> list[str]:
    out = []
    for f in v.findings:
        tag = f"[{SEV_TAG.get(f.severity, f.severity)}] "
        pad = " " * 7
        out += textwrap.wrap(tag + f.title, width, subsequent_indent=pad)
        for text in (f.evidence, f"fix: {f.fix}" if f.fix else ""):
            if text:
                out += textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad)
    return out or textwrap.wrap(empty_findings_text(v), width, subsequent_indent=" " * 7)


def format_table(table: Table, indent: str = "  ") -> list[str]:
    """The reports' plain-text layout (numbers right-aligned, words left-aligned)."""
    head, rows = table
    if not rows:
        return [indent + "(no records)"]
    return text_table(head, [[str(c) for c in r] for r in rows], indent)


def heading(title: str) -> str:
    """A panel's title as the plain text's headings read (``KV SPLITS PER POLICY (worst
    step; modelled)``): its name in capitals, its words in brackets as they are."""
    name, sep, rest = title.partition(" (")
    return name.upper() + sep + rest


def render_text(v: View, width: int = 100) -> str:
    """The main screen as plain text: what ``--once`` prints."""
    lines = [*header_lines(v)]
    if v.problem:
        lines.append(f"! {v.problem}")
    lines += ["", f"SUMMARY ({v.findings_source})", *headline_lines(v)]
    lines += _step_median_lines(v)
    lines += [f"  syncs in region: {v.sync_text}"]
    lines += ["", latency_line(v)]
    lines += ["  " + sparkline(v.latency_ms, width - 2)] if v.latency_ms else []
    lines += ["", f"LAYERS ({v.layer_scope})", *format_table(layer_table(v))]
    lines += ["", heading(splits_title(v))]
    note = splits_note(v)
    lines += (
        textwrap.wrap(note, width, initial_indent="  ", subsequent_indent="  ")
        if note
        else [*format_table(split_table(v)), *("  " + n for n in split_notes(v))]
    )
    lines += ["", heading(padding_title(v)), *format_table(padding_table(v))]
    title, capture = capture_panel(v, width - 2)
    lines += ["", heading(title), *["  " + s for s in capture]]
    details = detail_lines(v)
    if details:
        lines += ["", "ENGINE / IMPORTED (mlaprof.analysis)", *["  " + s for s in details]]
    lines += ["", f"FINDINGS ({v.findings_source})"]
    lines += ["  " + s for s in finding_lines(v, width - 2)]
    lines += section_lines(v, width)
    return "\n".join(lines) + "\n"


def section_lines(v: View, width: int = 100) -> list[str]:
    """Every section of the summary, as the rows layer lays it out (mlaprof.reporters.rows):
    the same rows, values and wording as ``mlaprof report`` in each of its formats."""
    if v.summary is None:
        return []
    from mlaprof.reporters.rows import HEADING, block_lines, summary_blocks

    body = block_lines(summary_blocks(v.summary), width - 2)
    return ["", HEADING.upper(), *["  " + s for s in body]]


# -- engine runs, imported traces, imported vLLM logs, fleets (the rows layer's front part) ----
def detail_lines(v: View) -> list[str]:
    """What every view shows before the findings, as the rows layer declares it once
    (:func:`mlaprof.reporters.rows.front_rows` and :func:`~mlaprof.reporters.rows.front_tables`):
    an engine run's and a log's spec decoding in a line, then the tables of an imported trace's
    paths and replay time, the ranks side by side, a log's server starts and a shadow's steps."""
    if v.summary is None:
        return []
    from mlaprof.reporters.rows import (
        fleet_line,
        front_rows,
        front_tables,
        row_line,
        summary_blocks,
        table_more,
    )

    blocks = summary_blocks(v.summary)
    fleet = fleet_line(v.summary)  # ranks side by side, never merged: the verdict first
    out = [fleet] if fleet else []
    out += [row_line(b) for b in front_rows(blocks)]
    for t in front_tables(blocks):
        out += [t.title, *format_table((t.head, t.rows))]
        out += ["  " + n for n in [*t.notes, table_more(t)] if n]
    return out
