"""The diff figure draws what the compare section says: every row of the diff's table with the
diff's own verdict, and the section's workload line. A compare of two different workloads
gives no verdict in any view (the figure showed 2 "B is better" bars and dropped every "other
workload" row, with no word that the workloads differ)."""

from __future__ import annotations

from dataclasses import replace

from mlaprof.analysis.diff import Verdict, diff
from mlaprof.figures.diff import run_diff
from mlaprof.reporters.diff_rows import HEAD
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


def _drawn(fig: object) -> dict[str, str]:
    """Each drawn metric (its axis label) and the legend entry of its bar."""
    return {y: t.name for t in fig.data for y in t.y}  # type: ignore[attr-defined]


def _said(fig: object) -> str:
    lay = fig.layout  # type: ignore[attr-defined]
    texts = [lay.title.text or "", lay.xaxis.title.text or ""]
    texts += [a.text or "" for a in lay.annotations or ()]
    return " ".join(t.replace("<br>", " ") for t in texts)


def test_two_workloads_draw_every_row_with_no_verdict_and_say_why() -> None:
    d = diff(shipped_runs.summary("demo-bug-padding-collapses-splits-c16"),
             shipped_runs.summary("demo-fix-native-kernel-full-graph"))  # fmt: skip
    assert d.workload.same is False
    fig = run_diff(d)
    want = {f"{r.metric} ({r.unit})": f"{HEAD[-1]} {r.verdict}" for r in d.table}
    assert _drawn(fig) == want  # every row of the section, in its verdict
    assert Verdict.OTHER_WORKLOAD in {r.verdict for r in d.table}
    assert d.workload.text in _said(fig)


def test_every_verdict_of_the_diff_is_drawn() -> None:
    """A verdict the figure has no colour for is still drawn (the section's vocabulary, read
    from the diff, never a second list)."""
    d = diff(shipped_runs.summary("demo-bug-padding-collapses-splits-c16"),
             shipped_runs.summary("demo-fix-padding-active-rows-c16"))  # fmt: skip
    r0 = d.table[0]
    rows = [replace(r0, metric=f"m{i}", verdict=v) for i, v in enumerate(Verdict)]
    fig = run_diff(replace(d, table=rows))
    assert sorted(_drawn(fig).values()) == sorted(f"{HEAD[-1]} {v}" for v in Verdict)
    assert d.workload.text in _said(fig)  # the same workload is said too
