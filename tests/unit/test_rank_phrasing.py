"""Ranks are named in one set of words in every view (mlaprof.rank_counts): which ranks
("ranks 0-1"), how many and which ("2 (ranks 0-1)"), some of the run's ("rank 1 of 2"), a
count per rank ("3 steps per rank (2 ranks)"). The dashboard's header, its splits table,
the terminal and Markdown reports, the figures' titles and the findings say them alike; no
module words them its own way ("all ranks (0-1)", "9 steps per rank (0-1)", "on 1 of 2 ranks
(1)", "rank 0 of 2 ranks", "(ranks: [0, 1])")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mlaprof
from mlaprof.rank_counts import per_rank_count, rank_list, ranks_count, ranks_of
from mlaprof.reporters.renderer import renderer
from mlaprof.store import create_run, list_runs
from mlaprof.synthetic.dashboard import meta, write_captures, write_step
from mlaprof.tui import text
from mlaprof.tui.follower import RunFollower

ROOT = Path(__file__).resolve().parents[2]
# ranks worded by hand instead of through mlaprof.rank_counts
HAND_MADE = {
    "a span in brackets after 'rank(s)' (rank_list / per_rank_count)": r"ranks? \(\{rank_span\(",
    "a hand-made plural (rank_list)": r"rank\{'s'|rank\{\"s\"|rank\(s\) \{",
    "'ranks' before a span (rank_list)": r"ranks \{rank_span\(",
    "a list's repr (rank_list)": r"\(ranks: \{",
    "'rank X of N' (ranks_of)": r"rank \{[^}]+\} of \{(len\(|n_ranks|ranks)",
    "'of N ranks (span)' (ranks_of)": r"of \{[^}]+\} ranks \(",
}


def test_the_phrases() -> None:
    assert rank_list([1]) == "rank 1" and rank_list([0, 1, 2]) == "ranks 0-2"
    assert ranks_count([0, 1]) == "2 (ranks 0-1)"
    assert ranks_of([1], 2) == "rank 1 of 2" and ranks_of([0, 2], 3) == "ranks 0, 2 of 3"
    assert per_rank_count({0: 3, 1: 3}, "step(s)") == "3 steps per rank (2 ranks)"


def test_no_module_words_ranks_by_hand() -> None:
    found = []
    for path in sorted((ROOT / "mlaprof").rglob("*.py")):
        if path.name == "rank_counts.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for what, pattern in HAND_MADE.items():
                if re.search(pattern, line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {what}: {line.strip()}")
    if found:
        raise AssertionError("ranks worded by hand:\n" + "\n".join(found))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks that disagree (rank 0 collapses, rank 1 does not): their rows stay apart."""
    traces = tmp_path_factory.mktemp("t")
    for rank, bug in ((0, True), (1, False)):
        w = create_run(traces, "mix", meta("mix", True), rank=rank)
        write_captures(w, True)
        for s in range(3 + rank):
            write_step(w, s, 2, bug)
        w.finish()
    return traces / "mix"


def test_the_dashboard_names_ranks_as_the_reports_and_the_listing_do(mixed: Path) -> None:
    f = RunFollower(mixed)
    f.catch_up()
    v = f.view()
    (info,) = list_runs(mixed.parent)
    assert v.rank_label == rank_list([0, 1]) == "ranks 0-1"
    # the step count per rank in the listing's words (the runs listing, the picker, the report)
    assert v.steps_text == info.steps_text("step(s)") == "3-4 steps per rank (ranks 0: 3, 1: 4)"
    assert v.latency_scope == ranks_of([0], 2)
    one = f.view(rank=1)
    assert one.rank_label == "rank 1 of 2" and one.steps_text == "4 steps"
    # the splits table: each row's ranks in the words the terminal and Markdown tables use
    with mlaprof.load(mixed) as run:
        s = mlaprof.build_summary(run)
    cells = {r[0] for r in text.split_table(v)[1]}
    assert cells == {ranks_count([0]), ranks_count([1])} == {"1 (rank 0)", "1 (rank 1)"}
    for fmt in ("text", "md"):
        out = renderer(fmt).render(s)
        # the splits table's rows of one policy: one per rank, each naming its rank alike
        rows = [line for line in out.splitlines() if "vllm-triton" in line and "%" in line]
        assert len(rows) >= 2 and all(any(c in line for c in cells) for line in rows), rows
        assert "all ranks (" not in out and "(0-1)" not in out
    f.close()


def test_a_figure_the_dashboard_and_a_finding_say_the_rank_drawn_alike(mixed: Path) -> None:
    from mlaprof import figures

    with mlaprof.load(mixed) as run:
        s = mlaprof.build_summary(run)
    fig = figures.splits_used_vs_deserved(s)
    assert s.series is not None and s.series.label().endswith(", rank 0 of 2")
    assert fig.layout.title.text.endswith(", rank 0 of 2"), fig.layout.title.text
    folded = [f.title for f in s.findings if f.title.endswith("]")]
    assert folded and all(re.search(r"\[ranks? [0-9, -]+ of 2\]$", t) for t in folded), folded
