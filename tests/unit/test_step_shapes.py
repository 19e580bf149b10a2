"""Steps, graphs and trust from a trace's structure (tests/step_shapes.py): each shape as vLLM
runs it, from ``mlaprof import rocprof FOLDER`` to ``mlaprof report --json``, with the answers it
must give; and the rules behind them, each broken once in the tests below."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mlaprof import step_sources
from mlaprof.analysis import run_summary
from mlaprof.analysis.ranks import dp_groups
from mlaprof.cli import main
from mlaprof.importers import step_model
from mlaprof.importers.annotate import KernelColumns
from mlaprof.reporters.renderer import renderer
from tests import step_shapes as shapes
from tests.conformance import FORMATS as CORPUS_FORMATS
from tests.conftest import EACH_TEST

WORKER_GROUP = EACH_TEST  # the shapes are independent: spread over the workers


def _report(folder: Path, tmp: Path, name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    traces = tmp / "t"
    assert main(["import", "rocprof", str(folder), "--traces", str(traces), "--name", name]) == 0
    capsys.readouterr()
    assert main(["report", str(traces / name), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _text(tmp: Path, name: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", str(tmp / "t" / name)]) == 0
    return capsys.readouterr().out


FORMATS = ["csv", *sorted(CORPUS_FORMATS)]


CASES = [(make, fmt) for make in shapes.SHAPES_PER_FORMAT for fmt in FORMATS] + [
    (shapes.dp2_tp8, "csv")
]


@pytest.mark.parametrize(("make", "fmt"), CASES, ids=[f"{m.__name__}-{f}" for m, f in CASES])
def test_shape_from_import_to_report(
    make: Any, fmt: str, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    shape = make()
    exp = shape.expected
    if fmt.startswith("csv-convert") and len(shape.processes) > 1:
        pytest.skip("rocpd convert writes one unprefixed file set per output folder")
    built = []  # the summary ``report --json`` builds (the terminal view below renders it)
    if fmt == "csv":
        real = run_summary.build_summary
        monkeypatch.setattr(
            run_summary, "build_summary", lambda *a, **k: built.append(real(*a, **k)) or built[-1]
        )
    doc = _report(shapes.write(shape, fmt, tmp_path / "in"), tmp_path, shape.name, capsys)
    tr = doc["trace"]
    ranks = sorted({s["rank"] for s in tr["steps"]})
    assert len(ranks) == exp.get("ranks", 1)
    for rank in ranks:  # every rank: its own steps, modes, layers and S
        st = [s for s in tr["steps"] if s["rank"] == rank]
        assert len(st) == exp["steps"], rank
        assert [s["capture"] for s in st] == exp["capture"], rank
        assert [s["layers"] for s in st] == exp["layers"], rank
        assert [s["S"] for s in st] == exp["S"], rank
    # S per layer: each layer's smallest S over the steps, and its S in the last step
    assert {r["S_min"] for r in doc["layers"]} == {min(exp["S"])}
    assert {r["S_used"] for r in doc["layers"]} == {exp["S"][-1]}
    assert len(doc["layers"]) == max(exp["layers"]) * len(ranks)
    assert doc["capture"]["status"] == exp["status"]
    assert tr["trust"]["verdict"] == exp["trust"], tr["trust"]["reasons"]
    assert tr["trust"]["counts"]["edge_partial_steps"] == exp["edge_partial"] * len(ranks)
    assert tr["syncs"]["count"] == exp["syncs"]
    kinds = [f["kind"] for f in doc["findings"]]
    assert "sync" not in kinds and "trust" not in kinds
    assert not any(f["unreliable"] for f in doc["findings"])
    # the step checks are each rank's own: every rank in one row, with its own source
    assert sorted(r for row in tr["checks"]["steps"] for r in row["ranks"]) == ranks
    if "source" in exp:
        assert {row["source"] for row in tr["checks"]["steps"]} == {exp["source"]}
    if "graph_launches" in exp:
        assert tr["checks"]["launches"]["graph_launches"] == exp["graph_launches"]
    if "short_replays" in exp:
        assert tr["trust"]["counts"]["short_replays"] == exp["short_replays"]
    if "drafter_steps" in exp:
        assert tr["drafter"]["steps"] == exp["drafter_steps"]
    if len(ranks) > 1:
        assert doc["fleet"]["dp_groups"] == exp["dp_groups"]
        assert all(r["dp_group"] is None for r in doc["fleet"]["per_rank"])
        assert "cannot tell DP groups apart" in doc["fleet"]["dp_groups_source"]
    if fmt == "csv":  # the terminal view says the same: ``report``'s text renders the summary
        # checked above (whichever format the store was imported from), as report.main does
        (s,) = built
        assert json.loads(json.dumps(s.to_json(), default=str)) == doc
        text = renderer("text").render(s, None)
        assert "UNRELIABLE" not in text and "host sync inside MLA layers" not in text
        if exp["edge_partial"]:
            edges = f"{exp['edge_partial']} partial step{'' if exp['edge_partial'] == 1 else 's'} at the window edges, not analysed"
            assert edges in text


def test_piecewise_never_reads_eager_and_its_pieces_are_counted(
    tmp_path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    shape = shapes.piecewise_qlen4()
    doc = _report(shapes.write_csv(shape, tmp_path / "in"), tmp_path, "p", capsys)
    cap = doc["capture"]
    assert cap["piecewise_steps"] == 6 and cap["eager_steps"] == 0 and cap["graph_steps"] == 0
    assert "PIECEWISE" in cap["evidence"] and "graph pieces" in cap["evidence"]
    (f,) = [f for f in doc["findings"] if f["kind"] == "capture"]
    assert "between graph pieces (PIECEWISE) in 6 steps" in f["title"]
    # the terminal and HTML views count the PIECEWISE steps beside graph / eager
    monkeypatch.setenv("COLUMNS", "200")
    assert "+6PIECEWISE" in "".join(_text(tmp_path, "p", capsys).split())  # wrap-proof
    html = tmp_path / "p.html"
    assert main(["report", str(tmp_path / "t" / "p"), "--html", str(html)]) == 0
    assert "+6 PIECEWISE" in html.read_text()


def test_the_html_view_says_the_partial_steps_at_the_edges(tmp_path, capsys) -> None:
    _report(shapes.write_csv(shapes.cut_window(), tmp_path / "in"), tmp_path, "c", capsys)
    html = tmp_path / "c.html"
    assert main(["report", str(tmp_path / "t" / "c"), "--html", str(html)]) == 0
    assert "2 partial steps at the window edges, not analysed" in html.read_text()


def test_without_ranges_the_pause_splits_the_step_and_the_report_says_gaps(
    tmp_path, capsys
) -> None:
    """The same eager run without its marker trace: nothing but idle gaps bounds its steps, so
    the 5 ms pause splits step 3 (7 steps) and the report says how the steps were found."""
    folder = shapes.write_csv(shapes.eager_pause_roctx(), tmp_path / "in")
    (marker,) = folder.glob("*_marker_api_trace.csv")
    marker.unlink()
    doc = _report(folder, tmp_path, "g", capsys)
    assert len(doc["trace"]["steps"]) == 7
    (sc,) = doc["trace"]["checks"]["steps"]  # one rank's
    assert sc["source"] == step_sources.SOURCE_GAPS and sc["ranks"] == [0]
    assert any("idle gaps" in n for n in doc["trace"]["trust"]["notes"])
    assert "idle gaps" in doc["capture"]["evidence"]


def test_a_lossy_target_replay_is_judged_against_the_target_only(tmp_path, capsys) -> None:
    """One target replay of the MTP shape lost two dispatches: 1 short replay of 24 (the drafter
    passes are judged against their own graphs and are whole), the trace is unreliable."""
    shape = shapes.mtp_first_pass()
    p = shape.processes[0]
    target = sorted({k.corr for k in p.kernels if k.graph_exec == 0x7F01})[2]
    ks = [k for k in p.kernels if k.corr == target]
    for k in (ks[10], ks[30]):
        p.kernels.remove(k)
    doc = _report(shapes.write_csv(shape, tmp_path / "in"), tmp_path, "l", capsys)
    c = doc["trace"]["trust"]["counts"]
    assert (c["replays"], c["short_replays"], c["missing_kernels"]) == (24, 1, 2)
    assert doc["trace"]["trust"]["verdict"] == "unreliable"
    assert doc["trace"]["drafter"]["steps"] == 18 and len(doc["trace"]["steps"]) == 6


def test_a_lossy_drafter_pass_is_judged_against_the_drafter_graph(tmp_path, capsys) -> None:
    """A drafter pass that lost one dispatch is a drafter replay short of 1 kernel, not a target
    replay short of 54 (the target's longer sequence holds it too)."""
    shape = shapes.mtp_first_pass()
    p = shape.processes[0]
    first = sorted({k.corr for k in p.kernels if k.graph_exec == 0x7F10})[3]
    p.kernels.remove([k for k in p.kernels if k.corr == first][0])
    doc = _report(shapes.write_csv(shape, tmp_path / "in"), tmp_path, "d", capsys)
    c = doc["trace"]["trust"]["counts"]
    assert (c["short_replays"], c["missing_kernels"]) == (1, 1)
    assert doc["trace"]["drafter"]["steps"] == 18 and len(doc["trace"]["steps"]) == 6


def test_syncs_between_steps_are_not_in_layers_but_a_sync_in_a_layer_is(tmp_path, capsys) -> None:
    """The mixed-prefill shape's end-of-step syncs stay out of the layers; one more sync inside
    layer 5 of the PIECEWISE step 2 is found there."""
    shape = shapes.mixed_prefill()
    p = shape.processes[0]
    s1 = [k for k in p.kernels if k.name == shapes.GLUON_S1 and not k.graph_exec]
    t = s1[5].start - 2_000  # before layer 5's stage 1 of the first non-FULL step
    p.calls.append(shapes.Call(shapes.HIP, "hipStreamSynchronize", 99_999, t, t + 1_000))
    doc = _report(shapes.write_csv(shape, tmp_path / "in"), tmp_path, "s", capsys)
    sy = doc["trace"]["syncs"]
    assert sy["count"] == 1
    assert (sy["syncs"][0]["step"], sy["syncs"][0]["layer"]) == (2, 5)


def test_an_end_of_step_sync_right_before_the_next_step_is_not_in_its_first_layer(
    tmp_path, capsys
) -> None:
    """Without a pause between steps the end-of-step sync lies within one inter-layer gap of
    the next step's first layer: the layer's window starts where its step does."""
    doc = _report(shapes.write_csv(shapes.piecewise_qlen4(gap=0), tmp_path / "in"), tmp_path,
                  "p0", capsys)  # fmt: skip
    assert len(doc["trace"]["steps"]) == 6
    assert doc["trace"]["syncs"]["status"] == "none" and doc["trace"]["syncs"]["count"] == 0


def test_graph_identity_by_graph_id_and_by_kernel_sequence() -> None:
    names = ["a", "b", "mla"]
    # replays 0, 1, 3: (a, b, mla); replay 2: (b, mla), its "a" lost
    seq = [0, 1, 2, 0, 1, 2, 1, 2, 0, 1, 2]
    rep = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3], np.int64)
    role = np.array([1 if n == 2 else 0 for n in seq], np.int64)

    def kc(gid: list[int] | None) -> KernelColumns:
        cols = ("name", "start_ns", *(("graph_id",) if gid else ()))
        flat: list[Any] = []
        for i, n in enumerate(seq):
            flat += [names[n], i * 10, *((gid[i],) if gid else ())]
        return KernelColumns.from_rows(cols, flat)

    g = step_model.graph_identity(kc(None), rep, role, 4)
    assert g.identity == "kernel sequences"
    assert len(set(g.canon.tolist())) == 1 and list(g.usual) == [3, 3, 3, 3]
    # with graph ids, replays 0 and 1 are two graphs although their kernels are the same
    g2 = step_model.graph_identity(kc([7, 7, 7, 8, 8, 8, 8, 8, 7, 7, 7]), rep, role, 4)
    assert g2.identity == "graph ids in the trace"
    assert g2.canon[0] == g2.canon[3] != g2.canon[1] == g2.canon[2]
    assert list(g2.usual) == [3, 3, 3, 3]


def test_a_shorter_sequence_seen_as_often_is_a_graph_of_its_own() -> None:
    """The drafter's first pass: a subsequence of the target's kernels, once per step like the
    target: its own graph. Seen once (or less often than the longer one): a lossy replay."""
    long, short = np.array([0, 1, 2, 3]), np.array([1, 2])
    assert step_model._roots([long, short], [6, 6]) == [0, 1]
    assert step_model._roots([long, short], [6, 1]) == [0, 0]
    assert step_model._roots([long, short], [6, 2]) == [0, 0]
    # a lossy copy of the shorter graph is the shorter graph's
    lossy = np.array([1])
    assert step_model._roots([long, short, lossy], [6, 6, 1]) == [0, 1, 1]


def test_dp_groups_only_from_evidence() -> None:
    same = {r: (8, 8, 8) for r in range(4)}
    groups, src, exact = dp_groups(same)
    assert groups == {} and src.startswith("unknown") and "same token count" in src
    # different rows: at least two groups, never exact
    diff = {0: (15, 15, 15), 1: (15, 15, 15), 2: (6, 6, 7), 3: (6, 6, 7)}
    groups, src, exact = dp_groups(diff)
    assert groups == {0: 0, 1: 0, 2: 1, 3: 1} and src.startswith("at least 2") and not exact
    # one rank's first step cut by the window is no evidence
    shifted = {0: (4, 5, 6, 7), 1: (5, 6, 7)}
    assert dp_groups(shifted)[0] == {}
    # the ranks' metadata says it exactly
    from mlaprof.analysis.evidence.model import RankSource

    meta = [RankSource(rank=r, dp_rank=r // 2) for r in range(4)]
    groups, src, exact = dp_groups(same, meta)
    assert groups == {0: 0, 1: 0, 2: 1, 3: 1} and exact and "metadata" in src


def test_rle_round_trip() -> None:
    vals = [None, 1, 1, 1, None, 2]
    assert step_sources.unrle(step_sources.rle(vals)) == vals
    assert step_sources.unrle("junk") == [] and step_sources.unrle([[1, "x"]]) == []


def test_shapes_write_the_same_files_twice(tmp_path: Path) -> None:
    a = shapes.write_csv(shapes.cut_window(), tmp_path / "a")
    b = shapes.write_csv(shapes.cut_window(), tmp_path / "b")
    for f in sorted(a.rglob("*.csv")):
        assert f.read_bytes() == (b / f.relative_to(a)).read_bytes()
    shutil.rmtree(tmp_path / "b")


def test_past_the_cap_graph_kinds_fall_back_to_the_layer_rule(
    tmp_path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank's per-step graph list is bounded in run.json; past it the drafter is still told
    from the verify steps (by its layer count), and the checks keep the run count."""
    from mlaprof.importers import annotate

    monkeypatch.setattr(annotate, "MAX_STEP_RUNS", 2)
    doc = _report(shapes.write_csv(shapes.mtp_first_pass(), tmp_path / "in"), tmp_path, "m",
                  capsys)  # fmt: skip
    (sc,) = doc["trace"]["checks"]["steps"]  # one rank's
    assert sc["graph_by_step"] is None and sc["graph_by_step_runs"] > 2
    assert doc["trace"]["drafter"]["steps"] == 18 and len(doc["trace"]["steps"]) == 6
