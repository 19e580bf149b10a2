"""The one diff -> rows function: a run diff (:class:`mlaprof.analysis.diff.SummaryDiff`) as the
block every compare view lays out (the terminal's ``--compare``, Markdown, the HTML page and
the ``tui`` compare screen and ``--once --compare``).

The block says first whether the two runs ran the same workload (the diff's own line), then
one table: each metric with A, B, the change and the diff's verdict, then what has no number
(whether each run finished, capture, vLLM route, S per kernel variant of imported traces,
backend); a run that did not finish is said in the block's rows. The verdicts are the
diff's: where the workloads differ, a workload-dependent row reads "other workload", where
they are not known to be the same "not judged" (the workload line names the parts a run
does not state), never better or worse (:func:`mlaprof.analysis.diff.diff_rows`); nothing here
judges a change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.diff import SHORT_NAMES, fmt_change, fmt_value, unfinished_note
from mlaprof.reporters.rows import Block, Row, Table

if TYPE_CHECKING:
    from mlaprof.analysis.diff import DiffRow, SummaryDiff

HEAD = ["metric", "A", "B", "change", "B is"]
MARK = "*"  # after a metric's name: where its number comes from is said in the block's rows
KEY = "compare"


def diff_block(d: SummaryDiff, short: bool = False) -> Block:
    """``d`` as one block: the workload line, where the marked numbers come from (and the CPU
    spread a timing is judged against), then the metrics' table with the verdict last.
    ``short``: the metrics' short names (80 columns)."""
    sources = list(dict.fromkeys(r.provenance for r in d.table if r.provenance))
    marks = {p: MARK * (i + 1) for i, p in enumerate(sources)}
    rows = [_metric(r, short, marks.get(r.provenance, "")) for r in d.table]
    rows.append(["run", _s(d.state.before), _s(d.state.after), "", ""])
    rows.append(["capture", _s(d.capture.before), _s(d.capture.after), "", ""])
    if d.route.before or d.route.after:
        route = [r or "not modelled" for r in (d.route.before, d.route.after)]
        rows.append(["vLLM route", *route, "", ""])
    for t in d.trace_splits:
        cells = [_or_absent(t.S_before, t.rows_before), _or_absent(t.S_after, t.rows_after)]
        rows.append([f"S from the trace ({t.variant})", *cells, "", ""])
    rows.append(["backend", _s(d.backend.before), _s(d.backend.after), "", ""])
    said = [Row(f"{KEY}.workload", "workload", d.workload.text)]
    unfinished = unfinished_note(d)
    if unfinished:
        said.append(Row(f"{KEY}.state", "run state", unfinished))
    said += [Row(f"{KEY}.source{i}", m, p) for i, (p, m) in enumerate(marks.items())]
    if d.trace_splits:  # one source for every trace row
        said.append(Row(f"{KEY}.trace_splits", "S from the trace", d.trace_splits[0].source))
    if d.cpu_spread:
        said.append(Row(f"{KEY}.cpu_spread", "CPU reference timings",
                        f"identical CPU runs differ by up to {d.cpu_spread:.1f}x on their clock "
                        "(bench/cpu_step_stability.py); smaller changes read 'within spread'"))  # fmt: skip
    table = Table(f"{KEY}.table", "metrics", list(HEAD), rows, 0)
    return Block(KEY, f"A {d.before} -> B {d.after}", said, [table])


def _metric(r: DiffRow, short: bool, mark: str) -> list[str]:
    name = SHORT_NAMES.get(r.metric, r.metric) if short else r.metric
    return [f"{name} ({r.unit}){mark}", fmt_value(r.a), fmt_value(r.b), fmt_change(r),
            str(r.verdict)]  # fmt: skip


def _or_absent(s: str | None, rows: str | None) -> str:
    if s is None:
        return "not run"
    return f"{s} ({rows} rows)" if rows else str(s)


def _s(v: str | None) -> str:
    return "-" if v is None else str(v)
