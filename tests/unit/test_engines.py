"""Two engines on one host (two TP4 models: 16 heads per rank on GPUs 0-3, 4 heads on GPUs
4-7), traced by rocprofv3 as one file set per process under the host's folder (rocprofv3
``<host>/<pid>_kernel_trace.csv``, tests/conformance/rocprof_csv.py). Ranks whose stage-2 grids
carry different head counts cannot be DP peers of one model: two engines, each with its own
fleet view, DP groups only within one, S never compared across them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from tests.conformance import render
from tests.conformance.shapes import graph_replays

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _fleet(tmp: Path, capsys: pytest.CaptureFixture[str], heads_b: int = 4) -> dict:
    for gpu in range(8):
        a = gpu < 4  # engine A on GPUs 0-3, engine B on GPUs 4-7
        tr = graph_replays(steps=4, layers=4, S=4 if a else 8, rows=8 if a else 4,
                           heads=16 if a else heads_b)  # fmt: skip
        tr.pid, tr.tid, tr.agent = 5000 + gpu, 5000 + gpu, 2 + gpu
        render(tr, "csv-7", tmp / "in")
    assert (
        main(["import", "rocprof", str(tmp / "in"), "--traces", str(tmp / "t"), "--name", "x"]) == 0
    )
    capsys.readouterr()
    assert main(["report", str(tmp / "t" / "x"), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_engines_on_one_host_are_two_engines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = _fleet(tmp_path, capsys)
    fl = rep["fleet"]
    engines = fl["engines"]
    assert [e["ranks"] for e in engines] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [e["heads"] for e in engines] == [16, 4]
    assert [(e["S_min"], e["S_max"]) for e in engines] == [(4, 4), (8, 8)]
    assert all(e["agree"] for e in engines) and fl["agree"]
    # not one model with "at least 2" DP groups: within each engine the rows are equal
    assert fl["dp_groups"] is None and "at least" not in fl["dp_groups_source"]
    assert "2 engines" in fl["text"] and "DISAGREE" not in fl["text"]
    assert {r["engine"] for r in fl["per_rank"] if r["rank"] < 4} == {0}
    # S per layer is compared within an engine only
    for p in fl["per_layer"]:
        assert p["S_min"] == p["S_max"] and p["engine"] in (0, 1)
    # the DP-group rows never span engines
    assert [(g.get("engine"), g["ranks"]) for g in rep["dp_groups"]] == [
        (0, [0, 1, 2, 3]), (1, [4, 5, 6, 7])
    ]  # fmt: skip
    assert not [f for f in rep["findings"] if "DISAGREE" in f["title"]]
    # one path row per engine, each with its own S; no "variant switch" across engines
    assert sorted((p["engine"], p["S"]) for p in rep["trace"]["paths"]) == [(0, "4"), (1, "8")]
    assert not [f for f in rep["findings"] if f["kind"] == "variant"]
    # the headline gives S per engine, never one range over both
    (h,) = [h for h in rep["headline"] if h["label"].startswith("KV splits")]
    assert h["value"] == (
        "engine 0 (ranks 0-3, 16 heads): S 4 on vllm-triton; "
        "engine 1 (ranks 4-7, 4 heads): S 8 on vllm-triton"
    )


def test_one_engine_keeps_one_fleet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = _fleet(tmp_path, capsys, heads_b=16)  # same heads: rows differ, one model, DP 2
    fl = rep["fleet"]
    assert "engines" not in fl
    assert fl["dp_groups"] == 2 and fl["dp_groups_source"].startswith("at least 2")


def test_unknown_is_no_evidence_of_two_engines() -> None:
    from mlaprof.analysis.engines import RankSignature, engine_groups
    from mlaprof.analysis.sections import EngineGroup

    def sig(h: int | None, q: list[int], p: list[str]) -> RankSignature:
        return RankSignature(heads=h, qlen=q, paths=p)

    # a rank whose S is 1 launches no stage 2: its heads are unknown, not different
    same = {0: sig(None, [4], ["aiter-gluon"]), 1: sig(8, [4], ["aiter-gluon"])}
    (one,) = engine_groups(same)
    # a typed group from the analyzer to the fleet (no dict on the way): the known heads kept
    assert isinstance(one, EngineGroup) and (one.ranks, one.heads) == ([0, 1], 8)
    # known heads, qlen or path family that differ: apart
    for b in (sig(4, [4], ["vllm-triton"]), sig(16, [2], ["vllm-triton"]),
              sig(16, [4], ["aiter-gluon"])):  # fmt: skip
        two = {0: sig(16, [4], ["vllm-triton"]), 1: b}
        assert [e.ranks for e in engine_groups(two)] == [[0], [1]], b
    # the persistent and plain ASM kernels are one route (the batch size picks)
    ps = {0: sig(16, [4], ["aiter-asm"]), 1: sig(16, [4], ["aiter-asm"])}
    assert len(engine_groups(ps)) == 1


def test_an_engine_names_its_hosts_and_pids_from_the_typed_rank_sources() -> None:
    """run.json's rank sources reach the engines typed (RunMeta.rank_sources), never as dicts."""
    from mlaprof.analysis.engines import RankSignature, engine_groups
    from mlaprof.analysis.evidence.model import RankSource

    sig = RankSignature(heads=16, qlen=[4], paths=["aiter-gluon"])
    src = [RankSource(rank=0, host="h0", pid=11), RankSource(rank=1, host="h1", pid=None),
           RankSource(rank=2)]  # fmt: skip
    (one,) = engine_groups({0: sig, 1: sig, 2: sig}, src)
    assert (one.ranks, one.hosts, one.pids) == ([0, 1, 2], ["h0", "h1"], [11])


def _heads_both_ways(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    """rank_heads from the votes the import stored, and from the query over every kernel."""
    import mlaprof
    from mlaprof.analysis import engines

    with mlaprof.load(run_dir) as run:
        stored = engines._stored_heads(run)
        with monkeypatch.context() as m:
            m.setattr(engines, "_stored_heads", lambda run: None)
            queried = engines.rank_heads(run)
    return stored, queried


def test_a_fleets_stored_head_votes_are_the_querys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a fleet import stores each rank's votes (no scan of every kernel at each report): the
    # same heads per rank as the query, for two engines (16 and 4 heads), the shipped 8-rank
    # fleet, and persistent ASM eager steps whose heads are only on their reduce kernel's grid
    # (x, in work-items: 16 heads of 128)
    import shutil

    from mlaprof.importers.rocprof import import_rocprof
    from tests import shipped_runs

    _fleet(tmp_path / "two", capsys)
    persistent = tmp_path / "asm" / "host"
    for pid, agent in ((100, 2), (300, 3)):
        persistent.mkdir(parents=True, exist_ok=True)
        src = Path(__file__).resolve().parents[1] / "data" / "aiter" / "persistent_eager_steps"
        text = (src / "4242_kernel_trace.csv").read_text().replace('"Agent 2"', f'"Agent {agent}"')
        (persistent / f"{pid}_kernel_trace.csv").write_text(text)
        shutil.copy(src / "4242_hip_api_trace.csv", persistent / f"{pid}_hip_api_trace.csv")
    asm, _ = import_rocprof(persistent.parent, tmp_path / "t", "asm")
    cases = {
        "two engines": (tmp_path / "two" / "t" / "x", {r: 16 if r < 4 else 4 for r in range(8)}),
        "shipped fleet": (shipped_runs.run_dir("aiter-fleet_dp2_tp4"), None),
        "persistent asm": (asm, {0: 16, 1: 16}),
    }
    for what, (run_dir, want) in cases.items():
        stored, queried = _heads_both_ways(run_dir, monkeypatch)
        assert stored is not None, what  # the import stored the votes
        assert stored == queried, (what, stored, queried)
        if want is not None:
            assert stored == want, (what, stored)


def test_head_votes_count_what_the_query_counts() -> None:
    # rank_heads' rules, kernel by kernel: in a layer only, on the name's heads axis, the grid in
    # work-items divided by a block that divides it (a missing, zero or non-dividing block, a
    # missing or zero grid: no vote)
    import numpy as np

    from mlaprof.analysis.replay_sums import layer_head_votes

    name_idx = np.array([0, 0, 0, 0, 0, 0, 1, 0])
    layer = np.array([0, 1, 2, 3, 4, 5, 6, -1])
    grid = np.array([1024, 1024, 1000, 0, 1024, 1024, 4096, 1024])
    gmask = np.array([False, False, False, False, True, False, False, False])
    block = np.array([64, 64, 64, 64, 64, 0, 64, 64])
    bmask = np.array([False, True, False, False, False, False, False, False])
    cols = {"grid_y": (grid, gmask), "block_y": (block, bmask)}

    def take(col: str, rows: np.ndarray):  # noqa: ANN202
        if col not in cols:
            return None
        v, m = cols[col]
        return v[rows], m[rows]

    axis = np.array([1, -1])  # name 0: heads on y; name 1: no such kernel
    got = layer_head_votes(take, name_idx, layer, axis, items=True)
    assert got["heads"].tolist() == [16] and got["n"].tolist() == [1]
    got = layer_head_votes(take, name_idx, layer, axis, items=False)  # grids in blocks
    assert got["heads"].tolist() == [1000, 1024] and got["n"].tolist() == [1, 3]
