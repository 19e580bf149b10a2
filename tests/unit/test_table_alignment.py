"""One alignment rule for every table view (mlaprof.reporters.rows.numeric_column): a column
whose cells are numbers or a number's gap ("-", typed_json.reads_when_none's word) is
right-aligned in the reports' plain text, ``tui --once``, the dashboard's table and the rich
terminal, so a "frozen" cell that does not stand sits where its numbers stand in any run."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mlaprof.reporters.rows import Table, numeric_column, text_table
from mlaprof.reporters.terminal import print_table
from mlaprof.tui.text import format_table

HEAD = ["policy", "used", "frozen", "source"]
MIXED = [["aiter-gluon", "1", "-", "trace"], ["vllm-triton", "16", "16", "unknown"]]
GAPS = [["aiter-gluon", "1", "-", "unknown"], ["vllm-triton", "16", "-", "unknown"]]


@pytest.mark.parametrize(
    ("cells", "right"),
    [
        (["1", "-", "16"], True),
        (["-", "-"], True),  # a column of gaps: where its numbers would stand
        (["-3", "2.5", "unknown"], True),
        (["unknown", "unknown"], False),  # "unknown" alone is a word
        (["trace", "-"], False),
        ([], False),
    ],
)
def test_the_rule(cells: list[str], right: bool) -> None:
    assert numeric_column(cells) is right


def _right_aligned(lines: list[str], column: str, cell: str, row: int) -> bool:
    """Whether ``cell`` ends where the header ``column`` ends in the text ``lines``."""
    end = lines[0].index(column) + len(column)
    line = lines[1 + row]
    return line[end - len(cell) : end] == cell and line[end : end + 1] in ("", " ")


@pytest.mark.parametrize("rows", [MIXED, GAPS])
def test_every_plain_text_view_right_aligns_a_gap_in_a_numbers_column(
    rows: list[list[str]],
) -> None:
    for lines in (text_table(HEAD, rows), format_table((HEAD, rows))):
        assert _right_aligned(lines, "frozen", "-", 0), lines
        assert _right_aligned(lines, "used", "1", 0), lines
        assert lines[1].index("trace" if rows is MIXED else "unknown") == lines[0].index("source")


def test_the_terminal_table_right_aligns_the_same_column() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None)
    print_table(console, Table(key="splits", title="t", head=HEAD, rows=MIXED, more=0))
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    top = next(i for i, ln in enumerate(lines) if "frozen" in ln)
    assert set(lines[top + 1].strip()) == {"─"}, lines  # the rule under the header
    assert _right_aligned(lines[top:], "frozen", "-", 1), lines
    assert _right_aligned(lines[top:], "frozen", "16", 2), lines
