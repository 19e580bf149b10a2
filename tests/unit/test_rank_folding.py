"""Findings and split rows of several ranks: the same statement is folded into one that names its
ranks; statements that differ between ranks stay apart (ranks that disagree are never merged)."""

from mlaprof.analysis.findings import Finding, fold_ranks
from mlaprof.analysis.splits import fold_rank_rows
from mlaprof.rank_counts import rank_list


def _f(rank, used=1, title="S collapsed"):
    return Finding("split-collapse", "critical", f"{title} S={used}", "ev", "fix",
                   data={"used": used, "rank": rank})  # fmt: skip


def test_same_finding_on_every_rank_is_one_naming_them():
    out = fold_ranks([_f(0), _f(1), _f(2)], ranks=3)
    assert len(out) == 1
    assert out[0].data["ranks"] == [0, 1, 2] and "rank" not in out[0].data
    assert out[0].title.endswith("[ranks 0-2 of 3]")


def test_ranks_that_disagree_stay_apart_each_named():
    out = fold_ranks([_f(0, 1), _f(1, 8), _f(2, 1)], ranks=3)
    assert [f.data["ranks"] for f in out] == [[0, 2], [1]]
    assert out[0].title.endswith("[ranks 0, 2 of 3]") and out[1].title.endswith("[rank 1 of 3]")


def test_one_rank_and_rankless_findings_are_untouched():
    one = [_f(0)]
    assert fold_ranks(one, ranks=1) is one and one[0].title == "S collapsed S=1"
    other = Finding("timing", "info", "t", "e", "f")
    assert fold_ranks([other], ranks=4) == [other]


def test_rank_list_text():
    assert rank_list([3]) == "rank 3"
    assert rank_list([2, 0, 1]) == "ranks 0-2"
    assert rank_list([0, 2, 5]) == "ranks 0, 2, 5"


def test_split_rows_fold_only_what_is_equal():
    from mlaprof.analysis.sections import SplitStep

    def row(rank: int, policy: str, used: int, step: int) -> SplitStep:
        kw = dict.fromkeys(SplitStep.__dataclass_fields__)
        kw.update(rank=rank, ranks=[rank], policy=policy, used=used, step=step)
        return SplitStep(**kw)  # type: ignore[arg-type]

    rows = [
        row(0, "p", 1, 3),
        row(1, "p", 1, 5),  # same statement, other worst step
        row(2, "p", 8, 3),  # disagrees
        row(0, "q", 4, 0),
    ]
    out = fold_rank_rows(rows)
    assert [(r.policy, r.used, r.ranks) for r in out] == [
        ("p", 1, [0, 1]),
        ("p", 8, [2]),
        ("q", 4, [0]),
    ]
