"""Traces as users record them (tests/data/aiter, made by make_aiter_traces.py from the documented
kernel names and grids): newer AITER grids with more than 16 heads, a small S from a short KV in
eager steps (not the padding bug), the cause of a small S in graph replays, mlaprof's own exports
carried back, and bounded reads of a user's rocpd database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mlaprof.cli import main
from mlaprof.errors import MlaprofError

AITER = Path(__file__).resolve().parents[1] / "data" / "aiter"


def _import(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(AITER / name), "--traces", str(traces),
                 "--name", name]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["report", str(traces / name), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _kinds(doc: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in doc["findings"]]


def test_gluon_v020_with_32_heads_reads_qlen_from_stage_2(tmp_path, capsys) -> None:
    """Stage 1 launches (B, S, ceil(32/16)*4 = 8); stage 2 (B, 32, 4) pins qlen 4 and H 32."""
    doc = _import(tmp_path, "gluon_v020_32heads", capsys)
    (p,) = doc["trace"]["paths"]
    assert p["qlen"] == "4" and p["S"] == "4" and p["rows"] == "8"
    assert "stage 2's grid axis z" in p["qlen_source"] and "differs on 12" in p["qlen_source"]
    assert {s["qlen"] for s in doc["trace"]["steps"]} == {4}
    assert doc["trace"]["checks"]["heads"] == {"aiter-gluon": {"32": 12}}
    # v0.1.20 with 32 heads: 256 // (8 * 4 * 2) = 4 = S: no collapse (one head group would say 8)
    assert "split-collapse" not in _kinds(doc)
    assert sum(r["collapsed"] for r in doc["layers"]) == 0


def test_a_small_s_from_a_short_kv_is_not_the_padding_bug(tmp_path, capsys) -> None:
    """Eager gluon steps (no graph, so no padding row) with S = 1 on 8 rows x qlen 4: v0.1.19's
    ceil(min_kv/64) on a short real KV; the #51171 fix gives the same S, v0.1.20 gives 8."""
    doc = _import(tmp_path, "gluon_eager_short_kv", capsys)
    assert doc["capture"]["status"] == "eager"
    assert "split-collapse" not in _kinds(doc)
    (f,) = [f for f in doc["findings"] if f["kind"] == "split-short-kv"]
    assert f["data"]["cause"] == "short-kv" and f["data"]["fix_gives"] == 8
    assert "from a short KV, not padding" in f["title"]
    assert "v0.1.20" in f["fix"] and "the KV is short" in f["fix"]
    assert f["severity"] == "info"
    # no S is judged against the padding fix: no layer is judged (None, never "0 collapsed"),
    # and the rank is on neither side: not judged (null), never the verdict "none collapsed"
    assert all(r["collapsed"] is None for r in doc["layers"])
    assert doc["fleet"]["ranks_collapsed"] is None is doc["fleet"]["ranks_not_collapsed"]
    assert doc["fleet"]["ranks_not_judged"] == [0]


def test_a_small_s_in_graph_replays_names_the_capture_or_padding(tmp_path, capsys) -> None:
    doc = _import(tmp_path, "gluon_v0119_bug", capsys)
    (f,) = [f for f in doc["findings"] if f["kind"] == "split-collapse"]
    assert f["data"]["cause"] == "capture-or-padding"
    assert "replays the grid of its capture" in f["evidence"]
    assert "capture-time dummy run" in f["evidence"] and "padding rows" in f["evidence"]


def test_mlaprofs_perfetto_export_is_refused_by_the_kineto_importer(tmp_path, capsys) -> None:
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(AITER / "gluon_v0119_bug"), "--traces", str(traces),
                 "--name", "bug"]) == 0  # fmt: skip
    out = tmp_path / "bug.perfetto.json"
    assert main(["export", str(traces / "bug"), "--format", "perfetto", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["import", "kineto", str(out), "--traces", str(traces)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "mlaprof's own Perfetto export of run 'bug'" in err and "--format rocpd" in err
    assert sorted(p.name for p in traces.iterdir()) == ["bug"]  # nothing half-imported
    # every kind says the same of it (import rocprof sent it to import kineto, which refused
    # it): told by the run its exporter names at the file's end (otherData's mlaprof_run)
    for kind in ("rocprof", "vllm-log"):
        assert main(["import", kind, str(out), "--traces", str(traces)]) == 2
        said = capsys.readouterr().err.strip()
        assert said == err, (kind, said)
        assert "import kineto" not in said
    assert sorted(p.name for p in traces.iterdir()) == ["bug"]


def test_duplicate_exports_of_one_run_are_one_run(tmp_path, capsys) -> None:
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(AITER / "gluon_v0119_bug"), "--traces", str(traces),
                 "--name", "bug"]) == 0  # fmt: skip
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in ("a.db", "b.db"):
        assert main(["export", str(traces / "bug"), "--format", "rocpd", "--out",
                     str(folder / name)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["import", "rocprof", str(folder), "--traces", str(traces), "--name", "two"]) == 0
    assert "b.db: another export of run 'bug' (as a.db); read once" in capsys.readouterr().out
    assert main(["report", str(traces / "two"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranks"] == [0] and len(doc["trace"]["steps"]) == 3


def test_rank_ordering_of_a_users_database_is_bounded(tmp_path, monkeypatch) -> None:
    """first_agent (which orders the ranks of a folder of databases) runs on the user's file:
    a view that never ends gives up at the time limit instead of hanging."""
    from mlaprof.importers.rocpd_sqlite import first_agent
    from mlaprof.synthetic.rocpd_crafted import never_ending_rocpd

    db = never_ending_rocpd(tmp_path / "crafted.db")
    monkeypatch.setenv("MLAPROF_ROCPD_TIMEOUT", "0.5")
    # the limit's own message says it fired; how soon is a bench target, not a unit assertion
    # (bench/rocpd_time_limit.py: a loaded machine stretches any wall time)
    with pytest.raises(MlaprofError, match="gave up after 0.5 s"):
        first_agent(db)


def test_the_default_time_limit_is_a_minute_at_most(monkeypatch) -> None:
    from mlaprof.importers import rocpd_sqlite

    monkeypatch.delenv("MLAPROF_ROCPD_TIMEOUT", raising=False)
    assert rocpd_sqlite._timeout() <= 60


def test_the_mtp_drafters_graphs_are_not_verify_steps(tmp_path, capsys) -> None:
    """3 verify replays (4 MLA layers, ASM verify kernel, ~2 ms) each followed by 3 drafter
    replays (1 MLA layer of the ASM decode kernel, ~50 us): the drafter gets its own table and
    never reads as lost kernels, a variant switch or verify steps."""
    doc = _import(tmp_path, "asm_mtp_drafter", capsys)
    tr = doc["trace"]
    (p,) = tr["paths"]
    assert p["variant"] == "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1" and p["steps"] == 3
    assert len(tr["steps"]) == 3
    d = tr["drafter"]
    assert (d["steps"], d["graph_steps"], d["layers_per_pass"], d["S"]) == (9, 9, "1", "4")
    assert d["variants"] == ["aiter::mla_dec_stage1_bf16_a16w16_subQ16_mqa16"]
    assert tr["trust"]["verdict"] == "reliable"
    assert "variant" not in _kinds(doc) and "trust" not in _kinds(doc)
    # the median step is the verify replay's (~2 ms), not the drafter's 47 us
    assert doc["timing"]["step_median_us"] > 1000
    assert doc["timing"]["steps"] == 3
    # every view shows the drafter's line
    assert main(["report", str(tmp_path / "t" / "asm_mtp_drafter")]) == 0
    assert "drafter passes (the drafter's own graphs, not verify steps): 9" in " ".join(
        capsys.readouterr().out.split()
    )


def test_trust_is_judged_rank_by_rank(tmp_path, capsys) -> None:
    """Two processes, one whose tracer lost every third dispatch of two replays: that rank is
    unreliable, the other reliable, side by side (never one verdict for both)."""
    doc = _import(tmp_path, "two_ranks_one_lossy", capsys)
    assert doc["ranks"] == [0, 1]
    assert [r["trust"] for r in doc["fleet"]["per_rank"]] == ["unreliable", "reliable"]
    assert doc["trace"]["trust"]["verdict"] == "unreliable"  # the run as a whole
