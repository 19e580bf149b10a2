"""A section's values are laid out in one place, the rows layer (mlaprof.reporters.rows and,
for a diff, mlaprof.reporters.diff_rows): the terminal report, the Markdown report, the HTML
page and the ``tui`` text read no field of the sections that were laid out by hand in each of
them (trace paths, replay time, server starts, ranks side by side, the engine and its shadow,
the diff's rows); they render the Blocks and Tables the rows layer gives. Held by reading the
views' source (AST): an attribute read of one of those fields fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]
VIEWS = (
    "mlaprof/reporters/terminal.py",
    "mlaprof/reporters/markdown.py",
    "mlaprof/figures/html_report.py",
    "mlaprof/tui/text.py",
    "mlaprof/tui/compare.py",
)
# the sections' fields (mlaprof.analysis.sections) whose layout lives in the rows layer only
LAID_OUT = frozenset({
    "paths", "replay_time", "engine_starts", "per_rank", "per_step", "per_layer", "downgrades",
    "kernels", "log_spec", "drafter", "capture_phase", "shadow", "engine", "spec_decoding",
    # the diff (mlaprof.analysis.diff.SummaryDiff): its rows come from diff_rows.diff_block
    "table", "trace_splits", "workload", "cpu_spread",
})  # fmt: skip


def field_reads(source: str) -> list[tuple[int, str]]:
    """(line, source) of every ``<x>.<field>`` read of a field in :data:`LAID_OUT`."""
    return [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and node.attr in LAID_OUT
    ]


def test_views_get_the_laid_out_sections_through_the_rows_layer() -> None:
    bad = [
        f"{rel}:{line}: {src}"
        for rel in VIEWS
        for line, src in field_reads((ROOT / rel).read_text(encoding="utf-8"))
    ]
    assert not bad, "views laying a section out by hand (render rows.summary_blocks):\n" + (
        "\n".join(bad)
    )


def test_the_scan_sees_a_hand_laid_section() -> None:
    src = "def f(s, d):\n    return [p.S for p in s.trace.paths], d.workload.text, s.fleet.text\n"
    assert sorted(code for _, code in field_reads(src)) == ["d.workload", "s.trace.paths"]
