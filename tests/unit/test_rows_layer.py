"""The one section -> rows layer (mlaprof.reporters.rows) and the one formatting module
(mlaprof.reporters.fmt): rows are derived from the section dataclasses, so a field or a whole
section added to the summary shows in every view (terminal, Markdown, HTML, ``tui --once``)
with no change to any view; values are worded once (units, shares, unknown, none)."""

from __future__ import annotations

import dataclasses
import io
import itertools
import re
from dataclasses import dataclass

import pytest
from rich.console import Console

from mlaprof.analysis.sections import Padding
from mlaprof.reporters import fmt
from mlaprof.reporters.markdown import render_markdown
from mlaprof.reporters.rows import TABLE_ROWS, block_lines, summary_blocks
from mlaprof.reporters.terminal import TerminalRenderer
from tests import shipped_runs

RUN = "demo-bug-padding-collapses-splits-c16"


def flat(text: str) -> str:
    return " ".join(re.sub(r"[|*`\\:]", " ", text).split())


def all_views(s) -> dict[str, str]:  # noqa: ANN001
    """The four text views of summary ``s`` (the HTML page's text, tags dropped)."""
    from mlaprof.figures.html_report import render_html
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text

    console = Console(file=io.StringIO(), width=200, color_system=None)
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)
    view, _ = read_view(shipped_runs.run_dir(RUN))
    return {
        "terminal": TerminalRenderer(console).render(s),
        "md": re.sub(r"</?(details|summary)>", " ", render_markdown(s)),
        "html": re.sub(r"<[^>]+>", " ", page),
        "tui": render_text(dataclasses.replace(view, summary=s)),
    }


@dataclass(frozen=True, slots=True)
class PaddingWithMore(Padding):
    """The padding section as a later analysis may return it: one field more."""

    rows_per_pad_kib: float = 0.0


@dataclass(frozen=True, slots=True)
class Drafts:
    """A section no view knows of."""

    drafted_rows: int
    drafter_median_us: float | None
    provenance: str


def test_a_field_added_to_a_section_shows_in_every_view() -> None:
    s = shipped_runs.summary(RUN)
    more = PaddingWithMore(
        **{f.name: getattr(s.padding, f.name) for f in dataclasses.fields(Padding)},
        rows_per_pad_kib=0.25,
    )
    s2 = dataclasses.replace(s, padding=more)
    row = next(r for b in summary_blocks(s2) for r in b.rows if r.key == "padding.rows_per_pad_kib")
    assert (row.label, row.text) == ("rows per pad kib", "0.25")
    for name, text in all_views(s2).items():
        assert "rows per pad kib 0.25" in flat(text), name
    assert "rows per pad kib" not in flat(all_views(s)["md"])  # not there before


def test_a_section_added_to_the_summary_shows_in_every_view() -> None:
    from mlaprof.analysis.run_summary import RunSummary

    s = shipped_runs.summary(RUN)
    wider = dataclasses.make_dataclass(
        "RunSummary",
        [("drafts", Drafts, dataclasses.field(default=None))],
        bases=(RunSummary,),
        frozen=True,
    )
    s2 = wider(
        **{f.name: getattr(s, f.name) for f in dataclasses.fields(RunSummary)},
        drafts=Drafts(drafted_rows=12, drafter_median_us=None, provenance="measured on cpu"),
    )
    block = next(b for b in summary_blocks(s2) if b.key == "drafts")
    assert [(r.label, r.text) for r in block.rows] == [
        ("drafted rows", "12"),
        ("drafter median", "unknown"),  # None: the evidence holds no value, never a 0
        ("provenance", "measured on cpu"),
    ]
    for name, text in all_views(s2).items():
        got = flat(text)
        rows = got.find("drafted rows 12 drafter median unknown provenance measured on cpu")
        assert rows > 0 and got.rfind("drafts", 0, rows) > 0, name  # under its title


def test_rows_follow_the_section_fields_and_tables_say_what_they_leave_out() -> None:
    s = shipped_runs.summary(RUN)
    blocks = {b.key: b for b in summary_blocks(s)}
    assert blocks["run"].rows[0].text == s.run  # the summary's plain fields first
    pad = blocks["padding"]
    shown = [r.key.split(".")[1] for r in pad.rows] + [t.key.split(".")[1] for t in pad.tables]
    want = [  # every field: plain ones as rows in the declared order, lists of records as tables
        f.name
        for f in dataclasses.fields(Padding)
        if getattr(s.padding, f.name) is not None or not f.metadata
    ]
    # but the one rank's table of a one-rank run, whose numbers the block's rows hold
    assert len(s.ranks) == 1 and len(s.padding.per_rank) == 1
    want.remove("per_rank")
    assert sorted(shown) == sorted(want) and shown[: len(pad.rows)] == [
        n for n in want if n not in {t.key.split(".")[1] for t in pad.tables}
    ]
    layers = next(t for b in blocks.values() for t in b.tables if t.key == "layers")
    assert len(layers.rows) == min(TABLE_ROWS, len(s.layers))
    assert layers.more == max(0, len(s.layers) - TABLE_ROWS)
    # absent sections are named once, never a row of "unknown" per field
    absent = next(r for r in blocks["run"].rows if r.key == "absent").text
    assert "imported trace" in absent and "trace" not in blocks
    lines = block_lines(summary_blocks(s))
    assert "  padding fraction: 7.1%" in lines


@pytest.mark.parametrize(
    ("value", "name", "text"),
    [
        (None, "S_min", "unknown"),
        ([], "capture_sizes", "none"),
        ("", "reason", "none"),
        ({}, "modes", "none"),
        (True, "verified", "yes"),
        (1234.56, "step_median_us", "1234.6 µs"),
        (0.0712, "padding_fraction", "7.1%"),
        (0.81234, "occupancy_deserved", "81.2%"),
        (3 * 2**20, "memory_bytes", "3.00 MiB"),
        (float("nan"), "time_us", "unknown"),
        (
            list(range(20)),
            "ranks",
            "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 (+4 more)",
        ),
        ({"FULL": 3, "NONE": 1}, "graph_modes", "FULL=3, NONE=1"),
        ({5: 66, 0: 54}, "kernels_by_rank", "0=54, 5=66"),  # ranks in order, however read
        ({"10": 1, "9": 2}, "kernels_by_rank", "9=2, 10=1"),  # as a JSON document keys them
        ("a\x1bb", "path", "a\\x1bb"),  # a control character from a trace is shown, not sent
    ],
)
def test_one_wording_for_every_value(value: object, name: str, text: str) -> None:
    assert fmt.value_text(value, fmt.unit_of(name)) == text


def test_labels_drop_the_unit_the_value_says() -> None:
    assert fmt.label_of("step_median_us") == "step median"
    assert fmt.label_of("time_us_max") == "time max"
    assert fmt.label_of("S_min") == "S min"


def test_the_run_block_says_how_many_ranks_and_which() -> None:
    """A list of rank ids never reads as a count ("ranks: 0" for a one-rank run)."""
    from mlaprof.rank_counts import ranks_count as ranks_text

    assert ranks_text([0]) == "1 (rank 0)"
    assert ranks_text([3, 1, 0, 2]) == "4 (ranks 0-3)"
    assert ranks_text([0, 2, 5]) == "3 (ranks 0, 2, 5)"
    from mlaprof.reporters.rows import summary_blocks
    from tests import shipped_runs

    run = summary_blocks(shipped_runs.summary("demo-fix-padding-active-rows-c16"))[0]
    assert {r.key: r.text for r in run.rows}["ranks"] == "1 (rank 0)"


def test_a_declared_table_leads_with_its_columns_and_keeps_every_field() -> None:
    """A table SPECS declares (an imported trace's paths): its columns first, a composed cell
    said once, the long sources as notes, every other field after; front_tables shows the
    declared columns, the same cells. A field added to the record still shows."""
    from mlaprof.analysis.sections import TracePath
    from mlaprof.reporters.rows import SPECS, front_tables

    s = shipped_runs.summary("aiter-persistent_switch")
    table = next(t for b in summary_blocks(s) for t in b.tables if t.key == "trace.paths")
    spec = SPECS["TracePath"]
    n = len(spec.cols)
    assert table.declared == n and table.head[:n] == [c.head for c in spec.cols]
    p = s.trace.paths[0]
    # after the ranks, the path and the variant
    assert table.rows[0][3] == f"{p.steps} ({p.graph_steps}/{p.eager_steps})"
    assert any(p.S_source in note for note in table.notes)
    shown = {f for c in spec.cols for f in c.fields} | set(spec.note_fields)
    rest = [f.name for f in dataclasses.fields(TracePath) if f.name not in shown]
    assert table.head[n:] == [fmt.label_of(f) for f in rest if f != "engine"]  # engine: opt()
    front = next(t for t in front_tables(summary_blocks(s)) if t.key == "trace.paths")
    assert front.head == table.head[:n] and front.rows == [r[:n] for r in table.rows]

    @dataclass(frozen=True, slots=True)
    class TracePathWithMore(TracePath):
        launch_gap_us: float = 0.0

    more = TracePathWithMore(
        **{f.name: getattr(p, f.name) for f in dataclasses.fields(TracePath)}, launch_gap_us=2.5
    )
    TracePathWithMore.__name__ = "TracePath"  # the same record type, one field more
    trace = dataclasses.replace(s.trace, paths=[more])
    got = next(t for b in summary_blocks(dataclasses.replace(s, trace=trace))
               for t in b.tables if t.key == "trace.paths")  # fmt: skip
    assert got.head[-1] == "launch gap" and got.rows[0][-1] == "2.5 µs"


@pytest.mark.parametrize(
    ("ident", "ranks"),
    [("demo-bug-padding-collapses-splits-c16", 1), ("aiter-two_ranks_one_lossy", 2)],
)
def test_one_rank_is_no_fleet_in_every_view(ident: str, ranks: int) -> None:
    """The fleet's line and its per-rank table show up front from two ranks on, decided once
    in the rows layer (rows.fleet_line, rows.FRONT): the terminal, Markdown, HTML and ``tui``
    each say the line where it says something, and none for one rank."""
    from mlaprof.figures.html_report import render_html
    from mlaprof.reporters.rows import fleet_line, front_rows, front_tables
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import detail_lines

    s = shipped_runs.summary(ident)
    assert s.fleet.ranks == ranks
    shown = ranks > 1
    assert (fleet_line(s) == s.fleet.text) is shown and (fleet_line(s) is None) is not shown
    keys = [t.key for t in front_tables(summary_blocks(s))]
    assert ("fleet.per_rank" in keys) is shown
    # beside the table, where its DP groups and hosts come from (said once, in the rows layer)
    said = {b.key: b.rows for b in front_rows(summary_blocks(s))}
    assert ("fleet" in said) is shown
    if shown:
        assert [r.text for r in said["fleet"]] == [s.fleet.dp_groups_source, s.fleet.hosts_source]
    terminal = TerminalRenderer(Console(file=io.StringIO(), width=200)).render(s)
    view, _ = read_view(shipped_runs.run_dir(ident))
    texts = {
        "text": terminal.split("\nfindings (")[0],
        "md": render_markdown(s).split("### Findings")[0],
        "html": render_html(s).split('id="sections"')[0],
        "tui": "\n".join(detail_lines(dataclasses.replace(view, summary=s))),
    }
    for view_name, text in texts.items():
        assert (s.fleet.text in " ".join(text.split())) is shown, view_name


def test_a_path_check_says_each_op_once_with_its_count_and_lines() -> None:
    """A CPU run's verify-path table listed the legacy path's four syncs as
    "op aten._local_scalar_dense; location mlaprof/backends/legacy_flat.py:53, op ..." (one
    op / location pair after another, 23 lines at 80 columns): each op is said once, with how
    often and the lines it ran at, in every view (one cell, mlaprof.reporters.rows)."""
    from mlaprof.analysis.sections import PathCheck, PathOp
    from mlaprof.reporters.rows import SPECS, _table

    legacy = "mlaprof/backends/legacy_flat.py"
    ops = [PathOp("aten._local_scalar_dense", f"{legacy}:53"),
           PathOp("aten.repeat_interleave.Tensor", f"{legacy}:54"),
           PathOp("aten.repeat_interleave.Tensor", f"{legacy}:55"),
           PathOp("aten._local_scalar_dense", f"{legacy}:59"),
           PathOp("aten.nonzero", "a.py:3"), PathOp("aten.nonzero", "b.py:4")]  # fmt: skip
    rows = [PathCheck("torch", 0, [], 0), PathCheck("legacy-flat", 6, ops, 4)]
    t = _table("paths", SPECS["PathCheck"].title, rows)
    assert t.head == ["backend", "syncs per layer", "allocs per layer", "ops"]
    assert t.rows[0] == ["torch", "0", "0", "none"]
    assert t.rows[1][3] == (
        f"aten._local_scalar_dense x2 at {legacy}:53, 59; "
        f"aten.repeat_interleave.Tensor x2 at {legacy}:54, 55; aten.nonzero x2 at a.py:3, b.py:4"
    )


def test_no_reason_is_one_value_finished_or_not_and_reads_none_recorded() -> None:
    """A run no writer recorded a reason for has one "no reason": None, as Run.reason says it
    (a finished run's read "" beside Run.reason's None), shown "none recorded" in every view
    (the field declares what its None means), never "unknown"."""
    import pandas as pd

    from mlaprof.analysis.run_state import run_state

    steps = pd.DataFrame({"rank": [0, 0], "step": [0, 1]})
    assert run_state("finished", None, steps).reason is None
    assert run_state("incomplete", None, steps).reason is None
    assert run_state("failed", "rank 1 failed", steps).reason == "rank 1 failed"
    s = shipped_runs.summary(RUN)  # a finished run
    assert s.state.reason is None and s.to_json()["state"]["reason"] is None
    state = {b.key: b for b in summary_blocks(s)}["state"]
    assert next(r.text for r in state.rows if r.key == "state.reason") == "none recorded"


def test_a_frozen_s_that_does_not_stand_reads_the_same_in_every_view() -> None:
    """The run's own policy beside its measured replays holds no modelled frozen S: the
    terminal and the TUI showed "-", the Markdown and HTML reports "unknown" (as if the evidence
    lacked it). The field declares what its None means (typed_json.reads_when_none)."""
    from mlaprof.analysis.sections import FROZEN_NONE, SplitStep

    s = shipped_runs.summary(RUN)
    own = next(r for r in s.splits if r.policy == s.scenario.policy)
    assert own.frozen is None and s.replayed_splits is not None
    table = next(t for b in summary_blocks(s) for t in b.tables if t.key == "splits")
    col = table.head.index(fmt.label_of("frozen"))
    cells = {row[table.head.index("policy")]: row[col] for row in table.rows}
    assert cells[own.policy] == FROZEN_NONE == "-"
    kept = [r for r in s.splits if r.frozen is not None]
    # a kept frozen S of a policy vLLM does not run here says so ("16 what-if": its row's
    # frozen_what_if, tests/unit/test_frozen_what_if.py)
    said = {r.policy: f"{r.frozen}{' what-if' if r.frozen_what_if else ''}" for r in kept}
    assert kept and all(cells[r.policy] == said[r.policy] for r in kept)
    assert "frozen" in [f.name for f in dataclasses.fields(SplitStep)]
    # the Markdown report's splits table says the same cells
    md = render_markdown(s).splitlines()
    at = next(i for i, line in enumerate(md) if line.startswith("| rank | ranks | policy |"))
    head = [c.strip() for c in md[at].strip("|").split("|")]
    body = itertools.takewhile(lambda line: line.startswith("|"), md[at + 2 :])
    rows = [[c.strip().replace("\\", "") for c in line.strip("|").split("|")] for line in body]
    by_policy = {r[head.index("policy")]: r[head.index("frozen")] for r in rows}
    assert by_policy[own.policy] == FROZEN_NONE
    assert all(by_policy[r.policy] == said[r.policy] for r in kept)
