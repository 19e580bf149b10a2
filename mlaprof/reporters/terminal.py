"""Terminal report: findings table, KV splits per policy, syncs per layer (rich).

A renderer of the typed summary only (:class:`TerminalRenderer`): every number and every
verdict (red cells included) is the summary's, computed in :mod:`mlaprof.analysis`; nothing
here reads the run or its tables."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from mlaprof.analysis.capture import trace_capture_text
from mlaprof.analysis.sections import FROZEN_LEGEND
from mlaprof.analysis.syncs import trace_sync_text
from mlaprof.rank_counts import ranks_count
from mlaprof.reporters.names import fit_names
from mlaprof.reporters.rows import (
    HEADING,
    NEVER_FROZEN,
    ON_DEVICE,
    Block,
    block_lines,
    fleet_line,
    front_rows,
    front_tables,
    layer_splits_title,
    not_runnable_notes,
    row_line,
    split_cells,
    splits_title,
    summary_blocks,
    what_if_notes,
)
from mlaprof.textsafe import term

if TYPE_CHECKING:
    from mlaprof.analysis.diff import SummaryDiff
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.reporters.rows import Table as RowsTable

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


class TerminalRenderer:
    """The terminal report of a summary (and, with ``--compare``, its diff) as text: rich markup
    rendered for ``console`` (its width and colours)."""

    def __init__(self, console: Console | None = None, verbose: bool = False) -> None:
        self.console = console or Console()
        self.verbose = verbose

    def render(self, s: RunSummary, diff: SummaryDiff | None = None) -> str:
        with self.console.capture() as out:
            print_report(s, self.console, self.verbose)
            if diff is not None:
                print_diff(diff, self.console)
        return out.get()


def print_report(
    s: RunSummary, console: Console | None = None, verbose: bool = False, sections: bool = True
) -> None:
    """The terminal report: the headline, the tables and the findings, then (``sections``)
    every section of the summary as the rows layer lays it out. ``mlaprof run`` leaves the
    sections to ``mlaprof report`` and says so: a quick start ends on its findings."""
    console = console or Console()
    sc = s.scenario
    fields = {
        "backend": s.backend,
        "device": s.device,
        "model": sc.model,
        "qlen": sc.qlen,
        "graph_asked": sc.graph_mode,  # what ran is the capture section's ("mode that ran")
        "min_kv_mode": sc.min_kv_mode,
        "policy": sc.policy,
        "target": sc.target,
    }
    # every string here may come from an imported trace or log: escaped (textsafe.term)
    head = " ".join(f"{k}={term(v)}" for k, v in fields.items() if v not in (None, ""))
    if s.imported is not None:  # an imported trace has no scenario: say where it came from
        head += f" imported from {term(s.imported.text)}"
    console.print(f"[bold]{term(s.run)}[/]  {head}")
    if not s.state.closed:  # a run that finished and closed its record: no flag
        console.print(f"[yellow]status: {term(s.state.status)}[/] ({term(s.state.text)})")
    cap = s.capture
    padding = s.padding.text
    trace = s.trace
    blocks = summary_blocks(s)  # the rows layer: every section's rows and tables, laid out once
    starts = next((b for b in blocks if b.key == "engine_starts"), None)
    if starts is not None and not sc.recorded:  # an imported log: no syncs or padding in it
        console.print(f"capture: {term(cap.text)}")  # which start: in the section's text
        _headline(console, s, skip="capture")  # the capture is said on the line above
        console.print(f"syncs in region: {s.sync_counts.text}")
    elif trace is not None:  # an imported trace: only the verdicts its evidence supports
        said, syncs = trace_capture_text(trace.capture), trace_sync_text(trace.syncs, s.ranks)
        console.print(f"capture: {term(said)}  |  syncs: {term(syncs)}  |  padding: {padding}")
        _headline(console, s, skip="capture")  # the capture is said on the line above
        for note in trace.trust.notes or []:
            console.print(f"[dim]trace: {term(note)}[/]")
        if trace.cpu is not None:
            for line in trace.cpu.lines:
                if sections and line == trace.cpu.limits:
                    continue  # the CPU section below says what a CPU trace cannot show
                console.print(f"cpu trace: {term(line)}", highlight=False)
        if trace.trust.verdict == "unreliable":
            console.print(
                "[bold magenta]UNRELIABLE TRACE[/]: " + term("; ".join(trace.trust.reasons)),
                highlight=False,
            )
        # the sync count's label in every view (an import has no probe: its own check counted)
        console.print(f"syncs in region: {s.sync_counts.text}")
    else:
        _headline(console, s)
        console.print(f"syncs in region: {s.sync_counts.text}  |  padding: {padding}")

    route = s.route
    console.print(
        "vLLM route: "
        # the analysis' line (analysis.paths.route_text: where the route comes from beside what
        # the run ran), escaped: its "[vLLM ...]" is text, not markup
        + (
            term(route.line)
            if route
            else "not modelled (no scenario: heads, KV dtype and arch are unknown; an imported "
            "trace's own paths are listed with it)"
        ),
        highlight=False,
    )
    if fleet := fleet_line(s):  # ranks side by side, never merged: the verdict, then the table
        console.print(term(fleet), highlight=False)
    for b in front_rows(blocks):  # declared once in the rows layer, as every view shows them
        console.print(term(row_line(b)), highlight=False)
    for t in front_tables(blocks):
        print_table(console, t)
    n_ranks = s.fleet.ranks
    # ranks that disagree are never merged: then every row names the ranks it holds for
    by_rank = n_ranks > 1 and any(len(r.ranks or [0]) != n_ranks for r in s.splits)

    def splits_table(show: Callable[[str], str]) -> Table:
        t = _simple_table(splits_title(s))  # the sections' title: where its S come from
        # the numbers and their headers keep their width; a long policy name breaks after a
        # separator (reporters.names), never inside a version
        t.add_column("policy", ratio=1)
        if by_rank:
            t.add_column("ranks", no_wrap=True)
        for col in ("S", "all/act", "deserved", "frozen", "occ. (model)"):
            t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
        for r in s.splits:
            mark = " *" if r.policy == sc.policy else ""
            # the ranks cell as the rows layer's splits table says it (Markdown, HTML, TUI)
            who = [ranks_count([x or 0 for x in r.ranks] or [r.rank or 0])] if by_rank else []
            c = split_cells(r)  # a policy that cannot run: marked, its reason under the table
            if r.collapsed:
                c = dataclasses.replace(c, s=f"[bold red]{c.s}[/]")
            t.add_row(
                show(r.policy + mark + ("" if r.verified else " †")),
                *who,
                *(c.s, c.all_act, c.deserved, c.frozen, c.occupancy),
            )
        return t

    t = fit_names(console, splits_table)
    if not s.splits and (starts is not None or _holds(blocks, "shadow.per_step")):
        t = None  # a log has no kernels; a recorded engine's modelled splits are shown above
    elif not s.splits and _holds(blocks, "trace.paths"):
        t = None  # the trace's paths table above shows S per path and variant
    elif not s.splits and not s.layer_splits:
        t = None  # nothing to tabulate: an empty table says nothing
    elif not s.splits:
        t = Table(title="KV splits: no split metadata recorded", title_justify="left", box=None)
        t.add_column(layer_splits_title(s), justify="right")
        t.add_column("layer records", justify="right")
        for x in s.layer_splits:
            t.add_row("unknown" if x.splits is None else str(x.splits), str(x.records))
    if t is not None:
        console.print(t)
    if s.splits:
        console.print(
            "[dim]* the run's policy; S: splits used; all/act: S with min_kv_seq_len over all rows / active rows; "
            f"deserved: real rows only; {FROZEN_LEGEND} "
            f"({ON_DEVICE} S, {NEVER_FROZEN} frozen: S decided on the device at each replay, "
            "its worst step's S shown); "
            f"occupancy of the {sc.target or 'unknown'} preset's units used -> deserved; "
            "† UNVERIFIED: part of the "
            "rule is not verified (see --json 'source')[/]"
        )
        for line in not_runnable_notes(s.splits):  # the section's words, one line a policy
            console.print(f"[dim]{term(line)}[/]", highlight=False)
        for line in what_if_notes(s.splits):  # a frozen S of a policy vLLM does not run here
            console.print(f"[dim]{term(line)}[/]", highlight=False)

    if s.syncs and verbose:
        st = Table(title="syncs in the captured region", title_justify="left")
        for col in ("layer", "op", "location"):
            st.add_column(col)
        for x in s.syncs:
            st.add_row(str(x.layer), term(x.op), term(x.location))
        console.print(st)

    findings = s.findings  # analysed once, in the summary
    console.print(f"\n[bold]findings[/] ({len(findings)})")
    ft = Table(show_header=False, box=None, padding=(0, 1, 1, 0))
    ft.add_column("severity", no_wrap=True)
    ft.add_column("finding")
    for f in findings:
        ft.add_row(
            f"[{_STYLE.get(f.severity, '')}]{f.severity.upper()}[/]"
            + ("\n[magenta]unreliable[/]" if f.unreliable else ""),
            f"[bold]{term(f.title)}[/]\n[dim]{term(f.evidence)}[/]\n[green]fix:[/] {term(f.fix)}",
        )
    verdict = s.findings_verdict  # the analysis' line under an empty list ("OK" or "UNKNOWN")
    if verdict.line is not None:
        style = "green" if verdict.verdict == "ok" else "bold yellow"
        ft.add_row(f"[{style}]{term(verdict.label or '')}[/]", term(verdict.line))
    console.print(ft)
    if sections:
        print_sections(s, console, blocks)
    else:
        console.print(
            f"every section of the summary: mlaprof report {term(s.run)}",
            style="dim",
            markup=False,
            highlight=False,
        )


def _headline(console: Console, s: RunSummary, skip: str | None = None) -> None:
    """The summary's headline rows, as every view prints them (``skip``: a row's label the
    report says on a line of its own)."""
    for h in s.headline:
        if h.label != skip:
            after = f"  [dim]({term(h.provenance_after)})[/]" if h.provenance_after else ""
            console.print(f"{h.label}: [bold]{term(h.value)}[/]{after}")


def print_sections(s: RunSummary, console: Console, blocks: list[Block] | None = None) -> None:
    """Every section of the summary, as the rows layer lays it out (mlaprof.reporters.rows):
    the same rows, values and wording as the Markdown, HTML and ``tui`` views."""
    console.print("\n" + HEADING, style="bold", markup=False, highlight=False, soft_wrap=True)
    for line in block_lines(blocks or summary_blocks(s), console.width):
        console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)


def _holds(blocks: list[Block], key: str) -> bool:
    """Whether the rows layer laid out a table ``key`` (a section with records in it)."""
    return any(t.key == key and t.rows for b in blocks for t in b.tables)


NAME_CELL = 16  # a text column with a cell this long holds names: it folds at separators


def print_table(console: Console, t: RowsTable) -> None:
    """A table of the rows layer as a rich table: every cell whole where it fits (numbers
    right-aligned, never wrapped), the one column of long names broken after a separator
    (reporters.names), the table's notes and what it leaves to ``report --json`` under it."""
    from mlaprof.reporters.rows import numeric_column, table_more

    cols = list(zip(*t.rows, strict=True)) if t.rows else [()] * len(t.head)
    numeric = [numeric_column(c) for c in cols]
    widths = [max((len(x) for x in c), default=0) for c in cols]
    text_cols = [i for i in range(len(t.head)) if not numeric[i] and widths[i] >= NAME_CELL]
    names = max(text_cols, key=lambda i: widths[i], default=None)

    # the numbers' columns and every other column's header word, with the gaps between them
    words = [max((len(w) for w in h.split()), default=0) for h in t.head]
    least = sum(max(widths[i], words[i]) if numeric[i] else max(words[i], min(12, widths[i]))
                for i in range(len(t.head)))  # fmt: skip
    whole = least + 3 * len(t.head) <= console.width

    def build(show: Callable[[str], str]) -> Table:
        table = Table(title=term(t.title), title_justify="left", box=box.SIMPLE,
                      pad_edge=False, collapse_padding=True)  # fmt: skip
        for i, head in enumerate(t.head):
            word = words[i]  # a header breaks between its words
            if i == names:
                table.add_column(term(head), overflow="fold", ratio=1, min_width=max(word, 12))
            elif numeric[i]:  # a number reads whole (where the numbers fit the width)
                table.add_column(term(head), justify="right", no_wrap=whole, overflow="fold",
                                 min_width=max(word, widths[i]) if whole else None)  # fmt: skip
            else:  # a text wraps between its words where the width asks
                table.add_column(term(head), overflow="fold",
                                 min_width=min(word, widths[i]) or None)  # fmt: skip
        for row in t.rows:
            table.add_row(*(show(c) if i == names else term(c) for i, c in enumerate(row)))
        return table

    console.print(fit_names(console, build, column=names) if names is not None else build(term))
    for note in [*t.notes, table_more(t)]:
        if note:
            console.print(f"[dim]{term(note)}[/]", highlight=False)


def _simple_table(title: str) -> Table:
    """A titled table without side edges (the report's per-policy and per-kernel tables)."""
    return Table(title=title, title_justify="left", box=box.SIMPLE, pad_edge=False)


def print_diff(d: SummaryDiff, console: Console | None = None) -> None:
    """The run diff as the rows layer lays it out (:func:`mlaprof.reporters.diff_rows.diff_block`):
    the metrics' table (A, B, change, verdict), then whether the workloads match and where the
    marked numbers come from."""
    from mlaprof.reporters.diff_rows import diff_block

    console = console or Console()
    b = diff_block(d)
    t = b.tables[0]
    table = Table(title=term(b.title.replace(" -> ", "  ->  ")), title_justify="left")
    # A and B take at most a quarter of what the borders and the last two columns leave each,
    # the metric's name the rest (at 80 columns it wrapped over up to 5 lines beside a long A
    # or B text); a long value wraps within its column
    table.add_column(t.head[0], overflow="fold")
    for col in t.head[1:3]:
        table.add_column(
            col, justify="right", overflow="fold", max_width=max(10, (console.width - 28) // 4)
        )
    table.add_column(t.head[3], justify="right", no_wrap=True, min_width=6)
    table.add_column(t.head[4], no_wrap=True, min_width=6)
    style = {"better": "green", "worse": "red"}
    for row in t.rows:
        v = row[-1]
        table.add_row(*map(term, row[:-1]), f"[{style[v]}]{v}[/]" if v in style else term(v))
    console.print(table)
    for r in b.rows:  # the workload line first: whether these two runs compare at all
        look = "yellow" if r.key.endswith(".workload") else "dim"
        console.print(f"[{look}]{term(r.label)}: {term(r.text)}[/]", highlight=False)
