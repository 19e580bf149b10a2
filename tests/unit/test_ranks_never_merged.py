"""Every record and finding is per rank; a view may add ranks up, never merge them silently. On a
two-rank trace built here (rank 0: three FULL graph replays; rank 1: five eager steps that only
idle gaps tell apart), each rule below failed with its fix undone:

1. the trace checks' step group showed one rank's graphs and graph-per-step beside counts summed
   over the ranks: it is a row per rank now, in the JSON and in every view;
2. a collapse check's steps were a sum over ranks that named no rank: it names its ranks and
   each rank's steps, and every view labels the sum;
3. whether and how a sum over ranks is labelled is decided by one function
   (``typed_json.over_ranks_label``), never by a ``if ranks > 1`` at each site;
4. other sums and picks over ranks: the import checks' sum kept the later rank's texts, the
   trust note said one rank's step source for all, an older import's summed checks stood as
   rank 0's, a host-sync finding, an engine's, a path's qlen source and an unrecognised
   kernel's launches summed ranks unsaid;
5. the capture said one rank's counts as sums over both ("3 of 3, sum over 2 ranks", "eagerly in
   5 steps (sum over 2 ranks)"), lost each rank's step source and added a fleet's capture
   memory unsaid; the timing kind was the first step's of any rank; the no-MLA finding listed
   the names of ranks whose MLA kernels were recognised; an engine's verify counts were the
   first rank's alone: each is per rank now, a sum labelled where several ranks' values add;
6. the capture's status was judged over every rank's steps pooled: rank 0's replays beside
   rank 1's eager steps read "mixed" though no rank mixed; it is the ranks' own status where
   they agree, else "per-rank", its line naming each rank's."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from mlaprof.analysis.sections import SUMMED_STEP_CHECKS
from mlaprof.analysis.typed_json import over_ranks_label, over_ranks_text
from mlaprof.reporters import rows
from tests import step_shapes as shapes
from tests.view_texts import every_view

WORKER_GROUP = "two-rank-trace"  # one worker builds the trace below once
PKG = Path(__file__).resolve().parents[2] / "mlaprof"
SUMMED = f"({over_ranks_text('sum', 2)})"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A two-rank rocprofv3 trace imported into a temporary folder, and its summary."""
    eager = shapes.Process(pid=4002, agent=3)
    for _ in range(5):  # no sampler, no roctx range: only idle gaps bound its steps
        shapes.step_eager(eager, rows=8, s=8, qlen=4, layers=4, closing=False)
    return _imported(tmp_path_factory, "two", _full_rank(), eager)


def _full_rank() -> Any:
    """Rank 0 of both traces here: three steps replayed in FULL graphs (gluon MLA)."""
    full = shapes.Process(pid=4001, agent=2)
    for _ in range(3):
        shapes.step_full(full, rows=8, s=8, qlen=4, layers=4)
    return full


def _imported(factory: pytest.TempPathFactory, name: str, *ranks: Any) -> tuple[Path, Any]:
    """``ranks`` (processes, one rank each) written as rocprofv3 CSVs, imported into a
    temporary folder: the run folder and its summary."""
    import mlaprof
    from mlaprof.importers.rocprof import import_rocprof

    tmp = factory.mktemp(name)
    folder = shapes.write_csv(shapes.Shape(name, list(ranks), {}), tmp / "in")
    run_dir, _ = import_rocprof(folder, tmp / "traces", name)
    with mlaprof.load(run_dir) as run:
        assert run.ranks == list(range(len(ranks)))
        return Path(run_dir), mlaprof.build_summary(run)


def test_each_ranks_step_checks_are_its_own_in_the_json_and_every_view(two: Any) -> None:
    run_dir, s = two
    steps = s.trace.checks.steps
    assert [r.ranks for r in steps] == [[0], [1]], steps
    full, eager = steps
    assert (full.source, eager.source) == ("graph-launches", "idle-gaps")
    assert full.graph_by_step == [[0, 3]] and [g.replays for g in full.graphs] == [3]
    assert eager.graph_by_step == [[None, 5]] and eager.graphs == [] and eager.gap_breaks == 4
    assert (full.graph_by_step_runs, eager.graph_by_step_runs) == (1, 1)  # each rank's, not 2
    doc = s.to_json()["trace"]["checks"]["steps"]
    assert [(r["ranks"], r["source"], r["graph_by_step"]) for r in doc] == [
        ([0], "graph-launches", [[0, 3]]),
        ([1], "idle-gaps", [[None, 5]]),
    ]
    # the notebook's object is the summary's (mlaprof.build_summary): the same rows
    import mlaprof

    with mlaprof.load(run_dir) as run:
        assert mlaprof.build_summary(run).trace.checks.steps == steps
    # the rows layer: a block per row that names its rank, and no sum said of its values
    blocks = {b.key: b for b in rows.summary_blocks(s)}
    for i, rank in enumerate((0, 1)):
        b = blocks[f"trace.checks.steps[{i}]"]
        got = {r.label: r.text for r in b.rows}
        assert got["ranks"] == f"1 (rank {rank})", got
        assert not any("sum over" in label for label in got), got
    title = blocks["trace.checks.steps[1]"].title
    for name, text in every_view(run_dir, s).items():
        assert title in text, name
        for said in ("1 (rank 0)", "1 (rank 1)", "graph-launches", "idle-gaps"):
            assert said in text, (name, said)


def test_a_trust_note_names_the_ranks_whose_steps_only_gaps_bound(two: Any) -> None:
    _, s = two
    (note,) = [n for n in s.trace.trust.notes or [] if "idle gaps" in n]
    assert note.startswith("steps on rank 1 of 2 told apart by idle gaps"), note


# -- 2. a collapse check names its ranks ----------------------------------------------------
def test_a_collapse_check_names_the_ranks_its_steps_add(two: Any) -> None:
    run_dir, s = two
    (chk,) = s.trace.coverage.collapse_checks
    assert chk.ranks == [0, 1] and chk.steps_per_rank == {0: 3, 1: 5} and chk.steps == 8
    (doc,) = json.loads(json.dumps(s.to_json()))["trace"]["coverage"]["collapse_checks"]
    assert doc["ranks"] == [0, 1] and doc["steps_per_rank"] == {"0": 3, "1": 5}
    (table,) = [
        t for b in rows.summary_blocks(s) for t in b.tables if t.key.endswith("collapse_checks")
    ]
    assert f"steps {SUMMED}" in table.head, table.head
    for name, text in every_view(run_dir, s).items():
        assert f"steps {SUMMED}" in text and "0=3, 1=5" in text, name


def test_a_not_checked_finding_counts_steps_per_rank() -> None:
    from mlaprof.analysis.coverage import coverage_findings
    from mlaprof.analysis.sections import (
        CollapseCheck,
        RankRecognition,
        Recognition,
        TraceCoverage,
    )

    chk = CollapseCheck(S="4", path="my-mla", status="not checked", steps=8, variant="k",
                        why="no split rule", ranks=[0, 1], steps_per_rank={0: 3, 1: 5},
                        warn=True)  # fmt: skip
    per = [RankRecognition(kernels=10, mla_layers=4, rank=r) for r in (0, 1)]
    cov = TraceCoverage(api="", api_calls=0, api_functions=[], attention_like=[],
                        attention_like_names=0, collapse_checks=[chk], host_syncs=None,
                        kernels=20, kernels_by_rank={0: 10, 1: 10}, provenance="p",
                        recognition=Recognition(per_rank=per, without_mla=[]))  # fmt: skip
    (f,) = coverage_findings(cov)
    assert "(k, 3-5 steps per rank (ranks 0: 3, 1: 5), S 4)" in f.title, f.title
    assert f.data["ranks"] == [0, 1]


# -- 3. one function says whether and how a sum over ranks is labelled -------------------------
def test_one_function_decides_the_label_of_a_sum_over_ranks() -> None:
    assert over_ranks_label("sum", 1) == "" == over_ranks_label("sum", [3]) == ""
    assert over_ranks_label("sum", 0) == ""
    assert over_ranks_label("sum", 2) == f" {SUMMED}" == over_ranks_label("sum", [0, 1, 1])
    how = "median of the steps pooled"
    assert over_ranks_label(how, range(8)) == f" ({how} over 8 ranks)"


# modules another change moves to the label function (they say sums through the words alone)
NOT_YET: frozenset[str] = frozenset()


def test_no_site_decides_for_itself_whether_to_say_a_sum_over_ranks() -> None:
    """The words "sum over N ranks" come from over_ranks_text, called by over_ranks_label
    alone: a site that calls over_ranks_text decides for itself (``if n > 1``) and punctuates on
    its own (were ~10 sites: ", sum over 8 ranks,", "(sum over 8 ranks; ", ": sum over ...")."""
    own = {
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if "over_ranks_text(" in p.read_text(encoding="utf-8")
    }
    assert own - NOT_YET == {"analysis/typed_json.py"}, own
    # nor are the words written out by hand
    by_hand = {
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if re.search(r"sum over \{|sum over [0-9]", p.read_text(encoding="utf-8"))
    }
    assert by_hand - NOT_YET == {"analysis/typed_json.py"}, by_hand


def test_a_two_rank_runs_sums_say_so_in_one_wording(two: Any) -> None:
    """Every label of a value summed over the two ranks reads the same words, right after it."""
    _, s = two
    labels = {r.key: r.label for b in rows.summary_blocks(s) for r in b.rows}
    for key in ("trace.checks.replays.replays", "trace.checks.launches.graph_launches",
                "trace.coverage.kernels", "trace.trust.counts.replays"):  # fmt: skip
        name = key.rsplit(".", 1)[1].replace("_", " ")
        assert labels[key] == f"{name} {SUMMED}", (key, labels[key])
    (p,) = s.trace.paths  # 3 x 4 layers of rank 0 and 5 x 4 of rank 1, said to be added
    assert p.qlen_source.endswith(f"exact) on 32 {SUMMED} layers"), p.qlen_source


# -- 4. other sums and picks over ranks -------------------------------------------------------
def test_the_checks_sum_over_ranks_never_keeps_one_ranks_text() -> None:
    from mlaprof.analysis.run_checks import RunChecks
    from mlaprof.store.trace_checks import TraceChecks

    def rank(r: int, source: str) -> TraceChecks:
        return TraceChecks(r, {"steps": {"source": source, "gap_breaks": r + 1},
                               "launches": {"graph_launches": 2, "note": "same"}})  # fmt: skip

    fleet = RunChecks({0: rank(0, "graph-launches"), 1: rank(1, "idle-gaps")}).fleet()
    assert fleet.group("steps") == {"gap_breaks": 3}  # the ranks' sources differ: neither
    assert fleet.group("launches") == {"graph_launches": 4, "note": "same"}
    three = RunChecks({0: rank(0, "a"), 1: rank(1, "b"), 2: rank(2, "a")}).fleet()
    assert "source" not in three.group("steps")


def test_an_older_imports_summed_checks_are_no_ranks_own() -> None:
    from mlaprof.analysis.grid import step_checks_by_rank
    from mlaprof.analysis.run_checks import RunChecks
    from mlaprof.store.trace_checks import SUMMED_RANKS, TraceChecks

    group = {"source": "idle-gaps", "source_text": "gaps", "graph_identity": "none",
             "graphs": [], "other_graphs": 0, "graph_by_step": None, "graph_by_step_runs": 9,
             "edge_partial": {"first": 0, "last": 0}, "gap_breaks": 4}  # fmt: skip
    summed = RunChecks({SUMMED_RANKS: TraceChecks(SUMMED_RANKS, {"steps": group})})
    assert step_checks_by_rank(summed) == {}  # was rank 0's
    (row,) = summed.section().steps or []
    assert row.ranks is None and row.gap_breaks == 4
    got = {r.key: r.text for b in _summary_blocks_of(row) for r in b.rows}
    assert got["x.ranks"] == SUMMED_STEP_CHECKS, got


def _summary_blocks_of(x: Any) -> list[rows.Block]:
    return rows._blocks("x", "x", x, ranks=2)


def test_a_host_sync_finding_counts_its_layers_per_rank() -> None:
    from mlaprof.analysis.sections import TraceSync, TraceSyncs
    from mlaprof.analysis.syncs import host_sync_findings

    def sync(rank: int, layer: int) -> TraceSync:
        return TraceSync(duration_ns=10, layer=layer, op="hipDeviceSynchronize", rank=rank,
                         step=0, t_ns=layer)  # fmt: skip

    ev = TraceSyncs(count=3, evidence="e", provenance="p", status="found",
                    syncs=[sync(0, 0), sync(0, 1), sync(1, 0)])  # fmt: skip
    (f,) = host_sync_findings(ev, ranks=2)
    assert f.title.endswith("in 1-2 layers per rank (ranks 0: 2, 1: 1) on ranks 0-1 of 2")
    assert f.data["ranks"] == [0, 1]
    (one,) = host_sync_findings(dataclasses.replace(ev, syncs=ev.syncs[:2]), ranks=1)
    assert one.title.endswith("hipDeviceSynchronize in 2 layers"), one.title


def test_an_engines_counts_say_whose_records_they_are() -> None:
    """Each rank's verify counts (``per_rank``), their sums labelled, the acceptance of the
    rank the scheduler's records pair with."""
    from mlaprof.analysis.served import served_findings, served_summary
    from mlaprof.analysis.step_records import EngineStep

    def step(rank: int, n: int) -> EngineStep:
        return EngineStep(rank=rank, step=n, kind="verify", backend="TRITON_MLA", builder="b",
                          heads=16, graph_mode="FULL", num_tokens=8, padded_tokens=8,
                          verify_rows=2, verify_draft_tokens=6, verify_rows_as_prefill=0,
                          drafter_builds=0, qo_lens=None, draft_tokens=None,
                          seq_lens_upper_bound=None, drafter_graphs=[], max_num_seqs=4,
                          max_model_len=64, num_speculative_tokens=3, spec_method="mtp")  # fmt: skip

    eng = served_summary([step(0, 0), step(0, 1), step(1, 0), step(1, 1), step(1, 2)], [])
    assert eng is not None and eng.verify_rank == 0 and eng.verify_steps == 5 and eng.steps == 5
    assert [(r.rank, r.verify_steps, r.verify_rows) for r in eng.per_rank] == [(0, 2, 4), (1, 3, 6)]
    (f,) = served_findings(eng)
    assert "2-3 verify steps per rank (ranks 0: 2, 1: 3), 4-6 verify rows per rank" in f.title
    assert f"5 steps, graph FULL x5 {SUMMED}" in f.evidence, f.evidence
    labels = {
        r.key: r.label for b in rows._blocks("engine", "engine", eng, ranks=2) for r in b.rows
    }
    assert labels["engine.steps"] == f"steps {SUMMED}"
    assert labels["engine.verify_steps"] == f"verify steps {SUMMED}"


def test_unrecognised_kernels_launches_say_their_sum_over_ranks() -> None:
    from mlaprof.analysis.coverage import coverage_findings
    from mlaprof.analysis.sections import (
        AttentionLike,
        RankRecognition,
        Recognition,
        TraceCoverage,
    )

    per = [RankRecognition(kernels=10, mla_layers=0, rank=r) for r in (0, 1)]
    cov = TraceCoverage(api="", api_calls=0, api_functions=[],
                        attention_like=[AttentionLike(name="my_attn", launches=12, ranks=[0, 1])],
                        attention_like_names=1, collapse_checks=[], host_syncs=None, kernels=20,
                        kernels_by_rank={0: 10, 1: 10}, provenance="p",
                        recognition=Recognition(per_rank=per, without_mla=[0, 1]))  # fmt: skip
    (f,) = coverage_findings(cov)
    assert f"20 {SUMMED} kernels read" in f.title, f.title
    assert f"my_attn (x12); launches {SUMMED}" in f.evidence, f.evidence


def test_an_engines_modelled_aiter_counts_say_their_sum_over_ranks() -> None:
    from mlaprof.analysis.sections import AiterRuleSection, ShadowSection, ShadowStep
    from mlaprof.analysis.shadow import shadow_findings

    def step(rank: int) -> ShadowStep:
        return ShadowStep(rank=rank, step=0, path="gluon-verify", policy="p", heads=16, qlen=4,
                          real_rows=3, rows=4, capture_size=4.0, graph_mode="FULL",
                          padding_rows=1.0, padding_tokens=4.0, min_kv_all_rows=4.0,
                          min_kv_active_rows=99.0, s_bug=1.0, s_fix=8.0, s_frozen=1.0,
                          s_deserved=None, occupancy_fix=0.5, occupancy_deserved=None,
                          target="mi355x", aiter="0.1.19", note="")  # fmt: skip

    rule = AiterRuleSection("0.1.19", "v0.1.19", "aiter-gluon-v0.1.19", True, "v0.1.19")
    sh = ShadowSection(provenance="modelled", aiter_rule=rule, device="mi355x", aiter="0.1.19",
                       paths={"gluon-verify": 2}, s_bug=[1, 1], s_fix=[8, 8], s_frozen=[1, 1],
                       s_deserved=[None, None], occupancy_fix=[0.5, 0.5], steps=2,
                       steps_collapsed_by_bug=2, steps_frozen_below_fix=2, padding_rows=2,
                       real_rows=6, capture_sizes=[4], policies=["p"],
                       per_step=[step(0), step(1)])  # fmt: skip
    got = {f.kind: f.title for f in shadow_findings(sh)}
    assert f"on 2 of 2 steps {SUMMED}" in got["split-collapse"], got
    assert f"(2 steps {SUMMED})" in got["split-frozen"], got
    assert got["padding"].endswith(f"over 2 steps {SUMMED}"), got
    one = {f.kind: f.title for f in shadow_findings(dataclasses.replace(sh, per_step=[step(0)]))}
    assert not any("sum over" in t for t in one.values()), one


# -- 5. the capture, timing, no-MLA and engine sections, rank by rank --------------------------
def _words(text: str) -> str:
    """A view's text as words (a table's cells in order, whatever draws its borders)."""
    return " ".join(re.sub(r"[^\w.µ%']+", " ", text).split())


def test_the_capture_evidence_and_counts_are_each_ranks_own(two: Any) -> None:
    """Rank 0 replayed 3 FULL graphs, rank 1 ran 5 steps eagerly: the capture said "3 of 3,
    sum over 2 ranks" and "eagerly in 5 steps (sum over 2 ranks)" (each one rank's), and lost
    how each rank's steps were told apart (they differ); its trust counted rank 1's eager steps
    as between rank 0's replays."""
    run_dir, s = two
    cap = s.trace.capture
    got = [(r.rank, str(r.status), r.graph_steps, r.eager_steps, r.graph_launches, r.step_source)
           for r in cap.per_rank or []]  # fmt: skip
    assert got == [(0, "replayed", 3, 0, 3, "graph-launches"), (1, "eager", 0, 5, 0, "idle-gaps")]
    ev = cap.evidence or ""
    assert ev.startswith("Rank 0: 3 MLA steps replayed in a graph"), ev
    assert "(FULL; 3 of 3 carry the correlation id" in ev and "Rank 1: 5 eager steps" in ev
    assert "Steps told apart by graph launches" in ev and "Steps told apart by idle gaps" in ev
    assert "sum over" not in ev and s.capture == cap
    doc = json.loads(json.dumps(s.to_json()))["trace"]["capture"]["per_rank"]
    assert [(r["rank"], r["status"], r.get("eager_steps")) for r in doc] == [
        (0, "replayed", 0),
        (1, "eager", 5),
    ]
    # a count only one rank holds is that rank's: no sum said (each rank's in the table)
    labels = {r.key: r.label for b in rows.summary_blocks(s) for r in b.rows}
    assert labels["trace.capture.graph_steps"] == "graph steps", labels
    assert labels["trace.capture.eager_steps"] == "eager steps", labels
    (f,) = [f for f in s.findings if f.kind == "capture"]
    assert f.title == (
        "attention ran eagerly in 5 steps on rank 1 of 2 beside 3 FULL graph replays on rank 0 of 2"
    ), f.title
    assert f.data["ranks"] == [1]
    assert s.trace.trust.counts.eager_steps_between_replays == 0  # no rank's are between
    import mlaprof

    with mlaprof.load(run_dir) as run:  # the notebook's object
        assert mlaprof.build_summary(run).trace.capture.per_rank == cap.per_rank
    for name, text in every_view(run_dir, s).items():
        w = _words(text)
        assert "rank status graph steps piecewise steps eager steps graph launches" in w, name
        assert "0 replayed 3 0 0 3 0 graph launches" in w, name
        assert "1 eager 0 0 5 0 0 idle gaps" in w, name
        assert "Rank 1: 5 eager steps" in text and "idle gaps between MLA kernels" in text, name
        assert "eagerly in 5 steps on rank 1 of 2" in text, name


def test_the_capture_status_is_the_ranks_own_never_their_steps_pooled(two: Any) -> None:
    """Rank 0 replays every step in a FULL graph, rank 1 runs every step eagerly: the status
    read "mixed: graph replays and eager steps" though neither rank mixes. It is "per-rank",
    its line (every view's, the JSON's) naming each rank's; the finding names rank 1."""
    from mlaprof.analysis.capture_status import CAPTURE_LABELS, CaptureStatus

    run_dir, s = two
    cap = s.trace.capture
    assert cap.status is CaptureStatus.PER_RANK, cap.status
    assert [(r.rank, r.status) for r in cap.per_rank or []] == [
        (0, CaptureStatus.REPLAYED),
        (1, CaptureStatus.EAGER),
    ]
    said = "differs by rank: rank 0 replayed in a graph; rank 1 eager (attention not in a graph)"
    assert cap.label == cap.text == said, cap.label
    assert not cap.no_full_graph  # no one verdict: each rank's row and the finding say it
    doc = json.loads(json.dumps(s.to_json()))["trace"]["capture"]
    assert (doc["status"], doc["text"]) == ("per-rank", said)
    (f,) = [f for f in s.findings if f.kind == "capture"]
    assert "eagerly in 5 steps on rank 1 of 2" in f.title and f.data["ranks"] == [1], f
    for name, text in every_view(run_dir, s).items():
        assert said in text, name
        assert CAPTURE_LABELS[CaptureStatus.MIXED] not in text, name


def _two_ranks(rank0: list[str], rank1: list[str]) -> Any:
    """The capture of a two-rank trace whose ranks' steps ran in the given modes."""
    import pandas as pd

    from mlaprof.analysis.capture import step_mode_evidence
    from mlaprof.analysis.evidence.model import run_meta

    modes = rank0 + rank1
    steps = pd.DataFrame({"backend": ["gluon"] * len(modes), "graph_mode": modes,
                          "rank": [0] * len(rank0) + [1] * len(rank1),
                          "step": [*range(len(rank0)), *range(len(rank1))]})  # fmt: skip
    return step_mode_evidence(run_meta({}), steps)


G, P, E = "graph", "piecewise", "eager"


@pytest.mark.parametrize(
    ("rank0", "rank1", "status", "each"),
    [
        ([G, G], [E, E, E], "per-rank", ["replayed", "eager"]),
        ([G, G], [P, P], "per-rank", ["replayed", "piecewise"]),
        ([G, E], [G, G], "per-rank", ["mixed", "replayed"]),  # rank 0 mixes, rank 1 does not
        ([G, G], [G], "replayed", ["replayed", "replayed"]),
        ([E], [E, E], "eager", ["eager", "eager"]),
        ([P, P], [P], "piecewise", ["piecewise", "piecewise"]),
        ([G, E], [E, G], "mixed", ["mixed", "mixed"]),  # every rank itself mixes
    ],
)
def test_a_multi_rank_capture_status_is_the_ranks_own(
    rank0: list[str], rank1: list[str], status: str, each: list[str]
) -> None:
    from mlaprof.analysis.capture import step_mode_findings
    from mlaprof.analysis.capture_status import CAPTURE_LABELS, CaptureStatus

    cap = _two_ranks(rank0, rank1)
    assert (str(cap.status), [str(r.status) for r in cap.per_rank or []]) == (status, each)
    if status == "per-rank":  # the line names each rank's own status
        for r, st in enumerate(each):
            assert f"rank {r} {CAPTURE_LABELS[CaptureStatus(st)]}" in cap.text, cap.text
    else:
        assert cap.label == CAPTURE_LABELS[CaptureStatus(status)]
    # the finding fires for, and names, exactly the ranks whose attention ran outside graphs
    outside = [r for r, m in enumerate((rank0, rank1)) if set(m) & {E, P}]
    found = step_mode_findings(cap, 2)
    assert [f.data["ranks"] for f in found] == ([outside] if outside else []), found


def test_mixed_is_said_of_one_rank_or_an_older_imports_summed_checks() -> None:
    """The status "mixed" stays where no rank's own steps can be judged apart: a one-rank
    trace, and an older import that kept only its ranks' checks summed (no rank's own launches)."""
    import pandas as pd

    from mlaprof.analysis.capture import step_mode_evidence
    from mlaprof.analysis.evidence.model import run_meta
    from mlaprof.analysis.run_checks import RunChecks
    from mlaprof.store.trace_checks import SUMMED_RANKS, TraceChecks

    one = step_mode_evidence(run_meta({}), pd.DataFrame(
        {"backend": ["gluon"] * 2, "graph_mode": [G, E], "rank": [0, 0], "step": [0, 1]}))  # fmt: skip
    assert one.status == "mixed" and one.per_rank is None
    steps = pd.DataFrame({"backend": ["gluon"] * 2, "graph_mode": [G, E], "rank": [0, 1],
                          "step": [0, 0]})  # fmt: skip
    launches = {"launches": {"graph_launches": 1}}
    summed = RunChecks({SUMMED_RANKS: TraceChecks(SUMMED_RANKS, launches)})
    old = step_mode_evidence(run_meta({}), steps, summed)
    assert old.status == "mixed" and old.per_rank is None


def _scenario_ranks(traces: Path, name: str, captured: tuple[int, ...]) -> Path:
    """A scenario run of two ranks, the ``captured`` ranks with their FULL graphs' memory."""
    from mlaprof.store import create_run
    from mlaprof.synthetic.dashboard import meta, write_captures, write_step

    for rank in (0, 1):
        w = create_run(traces, name, meta(name, False), rank=rank)
        if rank in captured:
            write_captures(w, False)
        for step in range(3):
            write_step(w, step, 2, False)
        w.finish()
    return traces / name


def test_a_fleets_capture_memory_is_each_ranks_and_a_sum_says_so(tmp_path: Path) -> None:
    """The capture memory added every rank's (96 MiB for two ranks of 48 MiB) and read as one
    rank's: each rank's is in ``per_rank``, the sum labelled in the sections, the headline and
    the memory finding; one rank's (the other captured nothing) is said as that rank's."""
    import mlaprof

    mib = 1024**2
    both = _scenario_ranks(tmp_path, "both", (0, 1))
    with mlaprof.load(both) as run:
        s = mlaprof.build_summary(run)
    cap = s.capture
    assert cap.memory_bytes == 96 * mib
    assert [(r.rank, str(r.status), r.memory_bytes) for r in cap.per_rank or []] == [
        (0, "captured", 48 * mib),
        (1, "captured", 48 * mib),
    ]
    labels = {r.key: r.label for b in rows.summary_blocks(s) for r in b.rows}
    assert labels["capture.memory_bytes"] == f"capture memory {SUMMED}", labels
    (head,) = [h for h in s.headline if h.label.startswith("capture memory")]
    # per GPU: the headline says it per rank, never the sum
    assert "sum over" not in head.label and head.value == "48.00 MiB per rank (2 ranks)", head
    (f,) = [f for f in s.findings if f.kind == "memory"]
    assert f"96.00 MiB {SUMMED} over 2 capture sizes" in f.title, f.title
    assert "per rank: rank 0 48.00 MiB, rank 1 48.00 MiB" in f.evidence, f.evidence
    from mlaprof.analysis.diff import diff_table

    (row,) = [r for r in diff_table(s, s) if r["metric"].startswith("capture memory")]
    assert row["provenance"].endswith(SUMMED), row  # the compare's row says it too
    for name, text in every_view(both, s).items():
        assert f"capture memory {SUMMED}" in text, name
        assert "0 captured 48.00 MiB" in _words(text), name
        assert "1 captured 48.00 MiB" in _words(text), name
    one = _scenario_ranks(tmp_path, "one", (0,))
    with mlaprof.load(one) as run:
        s = mlaprof.build_summary(run)
    assert s.capture.memory_bytes == 48 * mib
    assert [(r.rank, r.memory_bytes) for r in s.capture.per_rank or []] == [
        (0, 48 * mib),
        (1, None),
    ]
    labels = {r.key: r.label for b in rows.summary_blocks(s) for r in b.rows}
    assert labels["capture.memory_bytes"] == "capture memory", labels
    (f,) = [f for f in s.findings if f.kind == "memory"]
    assert "sum over" not in f.title + f.evidence, f


def test_the_timing_kind_is_decided_per_rank(two: Any) -> None:
    """Rank 0's steps are graph replays, rank 1's eager: the timing kind was the first step's
    over every rank ("trace-replay", "imported trace") and read as both ranks'."""
    from mlaprof.analysis.timing import PER_RANK, timing_summary

    run_dir, s = two
    t = s.timing
    assert [(r.rank, r.timing) for r in t.per_rank] == [(0, "trace-replay"), (1, "trace-eager")]
    assert t.timing == PER_RANK
    said = "rank 0: imported trace; rank 1: imported trace (eager steps)"
    assert t.timing_label == said
    doc = json.loads(json.dumps(s.to_json()))["timing"]
    assert doc["timing"] == PER_RANK and [r["timing"] for r in doc["per_rank"]] == [
        "trace-replay",
        "trace-eager",
    ]
    import mlaprof

    with mlaprof.load(run_dir) as run:  # one rank's steps alone: that rank's kind, as before
        steps = run.steps
    alone = timing_summary(steps[steps["rank"] == 1], steps.iloc[:0])
    assert (alone.timing, alone.timing_label) == ("trace-eager", "imported trace (eager steps)")
    for name, text in every_view(run_dir, s).items():
        assert said in text, name
        assert "rank step median steps timing" in _words(text), name
        assert "1 167.0 µs 5 trace eager" in _words(text), name


@pytest.fixture(scope="module")
def no_mla(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """Rank 0 replays gluon MLA graphs; rank 1 runs a kernel mlaprof does not know."""
    other = shapes.Process(pid=4002, agent=3)
    for _ in range(3):
        for _ in range(4):
            other.eager("my_flash_decode_kernel", (8, 8, 4), shapes.W256, 9_000)
            other.eager(shapes.GEMM, (8, 4, 1), shapes.W256, 6_000)
        other.pause(150_000)
    return _imported(tmp_path_factory, "nomla", _full_rank(), other)


def test_the_no_mla_finding_counts_names_and_kernels_over_the_same_ranks(no_mla: Any) -> None:
    """The no-MLA finding of rank 1 counted rank 1's kernels but listed the attention-like
    names of both ranks (rank 0's recognised _mla_gluon among them, launches summed)."""
    from mlaprof.analysis.sections import AttentionLike

    run_dir, s = no_mla
    cov = s.trace.coverage
    assert cov.recognition.without_mla == [1]
    assert cov.attention_like == [AttentionLike("my_flash_decode_kernel", 12, [1])]
    assert cov.attention_like_names == 1
    (f,) = [f for f in s.findings if f.kind == "no-mla"]
    assert f.title.startswith("no MLA kernel recognised on rank 1 of 2: 24 kernels read"), f
    looks = "(mla/attn/attention/decode/flash): my_flash_decode_kernel (x12); "
    assert looks in f.evidence and "_mla_" not in f.evidence, f.evidence
    assert "launches (sum" not in f.evidence and f.data["ranks"] == [1]
    doc = json.loads(json.dumps(s.to_json()))["trace"]["coverage"]["attention_like"]
    assert doc == [{"name": "my_flash_decode_kernel", "launches": 12, "ranks": [1]}]
    for name, text in every_view(run_dir, s).items():
        text = text.replace("\\", "")  # Markdown's escapes
        assert looks.strip() in text, name
        assert "launches ranks" in _words(text) and "my_flash_decode_kernel 12 1" in _words(text)


def test_an_engines_verify_counts_are_each_ranks(tmp_path: Path) -> None:
    """A two-rank engine's verify counts were rank 0's alone (named as such): each rank's are
    in ``per_rank``, their sums labelled, and the acceptance is of the drafts of the rank the
    scheduler's records pair with (never of a sum over ranks)."""
    import mlaprof
    from mlaprof.recording import event_row
    from mlaprof.store import create_run

    meta = {"kind": "engine", "source": "vllm plugin", "scenario": {"name": "vllm-engine"}}

    def step(i: int, n: int) -> dict[str, Any]:
        return {"step": i, "kind": "verify", "backend": "TRITON_MLA", "builder": "b",
                "heads": 16, "graph_mode": "FULL", "num_tokens": n * 4, "padded_tokens": n * 4,
                "verify_rows": n, "verify_draft_tokens": n * 3, "verify_rows_as_prefill": 0,
                "drafter_builds": 0, "spec_method": "mtp", "num_speculative_tokens": 3}  # fmt: skip

    for rank, per in ((0, [2, 3]), (1, [4, 4, 1])):
        w = create_run(tmp_path, "eng", meta, rank=rank)
        for i, n in enumerate(per):
            w.add("events", **event_row("vllm", "engine-step", "s", step(i, n)))
        w.finish()
    sched = create_run(tmp_path, "eng", meta, role="scheduler")
    for i, n in enumerate([2, 3]):
        accept = {"seq": i, "verify_rows": n, "draft_tokens": n * 3, "accepted_tokens": n}
        sched.add("events", **event_row("vllm", "spec-accept", "a", accept))
    sched.finish()
    with mlaprof.load(tmp_path / "eng") as run:
        s = mlaprof.build_summary(run)
    eng = s.engine
    assert eng is not None
    got = [(r.rank, r.verify_steps, r.verify_rows, r.draft_tokens) for r in eng.per_rank]
    assert got == [(0, 2, 5, 15), (1, 3, 9, 27)]
    assert (eng.verify_steps, eng.verify_rows, eng.draft_tokens) == (5, 14, 42)
    assert eng.acceptance_rate == 5 / 15  # rank 0's drafts, which the scheduler's pair with
    labels = {r.key: r.label for b in rows.summary_blocks(s) for r in b.rows}
    for key in ("verify_steps", "verify_rows", "draft_tokens"):
        assert labels[f"engine.{key}"] == f"{key.replace('_', ' ')} {SUMMED}", labels
    (f,) = [f for f in s.findings if f.kind == "engine"]
    assert f.title == (
        "engine (measured): 2-3 verify steps per rank (ranks 0: 2, 1: 3), 5-9 verify rows per "
        "rank (ranks 0: 5, 1: 9), 5 of rank 0's 15 draft tokens accepted (33%)"
    ), f.title
    doc = json.loads(json.dumps(s.to_json()))["engine"]["per_rank"]
    assert [(r["rank"], r["verify_rows"]) for r in doc] == [(0, 5), (1, 9)]
    for name, text in every_view(tmp_path / "eng", s).items():
        w = _words(text)
        assert "rank verify steps verify rows verify rows as prefill draft tokens" in w, name
        assert "0 2 5 0 15 0" in w and "1 3 9 0 27 0" in w, name
        assert f"verify steps {SUMMED}" in text, name
