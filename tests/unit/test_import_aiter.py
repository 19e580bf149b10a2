"""AITER / vLLM MLA kernels in rocprofv3 traces (tests/data/aiter, made by make_aiter_traces.py):
whole-name recognition, S and batch rows from the right grid axis per path, split collapse
against the policy formula, variant switches, and capture / sync verdicts only from evidence."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from mlaprof.analysis import summary
from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.kernel_table import (
    DEVICE,
    METADATA,
    REDUCE,
    STAGE1,
    STAGE2,
    KernelMatcher,
    load_patterns,
)
from mlaprof.portable import portable_path
from mlaprof.store import load
from tests import shipped_runs
from tests.conftest import summary_of
from tests.trace_io_helpers import DATA, csv_rows, kernel_dicts

AITER = DATA / "aiter"
TRACES = (
    "gluon_v0119_bug",
    "gluon_v0119_fix",
    "gluon_v0119_bug_rocm63",
    "asm_16heads",
    "persistent_switch",
    "eager_syncs",
    "gluon_v0119_fix_dropped",
    "persistent_eager_steps",
)


# the traces imported and summarised once per worker (tests/shipped_runs.py: the tests only read
# the runs), shared with the figure, golden-document and SQL-vs-pandas tests
WORKER_GROUP = "shipped-runs"


@pytest.fixture(scope="module")
def runs() -> dict[str, Path]:
    return {name: shipped_runs.run_dir(f"aiter-{name}") for name in TRACES}


@pytest.fixture(scope="module")
def sums(runs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    # what ``report --json`` prints: mlaprof.analysis.summary(run) = build_summary(run).to_json()
    return {name: shipped_runs.summary(f"aiter-{name}").to_json() for name in TRACES}


def _findings(s: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [f for f in s["findings"] if f["kind"] == kind]


def test_committed_traces_are_the_generators_output(tmp_path: Path) -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "make_aiter_traces", DATA / "make_aiter_traces.py"
    )
    gen = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["make_aiter_traces"] = gen  # dataclasses look their module up
    spec.loader.exec_module(gen)  # type: ignore[union-attr]
    made = gen.build(tmp_path)
    assert {p.relative_to(tmp_path) for p in made} == {
        p.relative_to(AITER) for p in AITER.rglob("*.csv")
    }
    for p in made:
        assert p.read_bytes() == (AITER / p.relative_to(tmp_path)).read_bytes(), p


# -- the kernel table ---------------------------------------------------------------------------
REAL = {
    "_mla_gluon": ("aiter-gluon", STAGE1, "y"),
    "_mla_softmax_reducev_kernel": ("aiter-gluon", STAGE2, None),
    "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1": ("aiter-asm", STAGE1, "z"),
    "aiter::mla_dec_stage1_bf16_a16w16_subQ16_mqa16": ("aiter-asm", STAGE1, "z"),
    "_fwd_kernel_stage2_asm": ("aiter-asm", STAGE2, None),
    "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps": ("aiter-asm-persistent", STAGE1, DEVICE),
    # the same code-object symbols undemangled (lengths as AITER hsa/gfx950/mla/mla_asm.csv
    # knl_name writes them: the Itanium ABI prefixes each name with its length)
    "_ZN5aiter42mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_psE": ("aiter-asm-persistent", STAGE1,
                                                               DEVICE),
    "_ZN5aiter39mla_a16w16_qh16_m16x4_n16x1_coex0_mask1E.kd": ("aiter-asm", STAGE1, "z"),
    "kn_get_mla_metadata_v1_2<MlaMetadataV12Traits<16, 1, true> >(int const*, int*)": (
        "aiter-asm-persistent", METADATA, None),
    "void kn_mla_reduce_v1<MlaReduceKernelV1Traits<512, 16, 2>, float, __hip_bfloat16>(float*)": (
        "aiter-asm-persistent", REDUCE, None),
    "_fwd_grouped_kernel_stage1": ("vllm-triton", STAGE1, "z"),
    "_fwd_kernel_stage1": ("vllm-triton", STAGE1, "z"),
    "_fwd_kernel_stage2": ("vllm-triton", STAGE2, None),
    "mla_verify_stage1": ("mlaprof-triton", STAGE1, "z"),
    "mla_verify_stage1_hopper": ("mlaprof-triton", STAGE1, "z"),
    "mla_verify_stage1_hopper_tma": ("mlaprof-triton", STAGE1, "z"),
    "mla_verify_stage1_hopper_roles": ("mlaprof-triton", STAGE1, "z"),
    "mla_verify_stage1_hopper_ws": ("mlaprof-triton", STAGE1, "z"),
    "mla_verify_stage2": ("mlaprof-triton", STAGE2, None),
}  # fmt: skip
LOOKALIKES = (
    "fused_qk_rope_cat_and_cache_mla",
    "_fused_qk_rope_cat_and_cache_mla_kernel",
    "void vllm::concat_and_cache_mla_kernel<__hip_bfloat16, __hip_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*, float const*)",
    "_mla_gluon_helper",
    "my_mla_gluon",
    "_fwd_kernel_stage2_asm_v2",
    "mla_reduce_kernel",
    "aiter::fmla_fwd",
)


@pytest.mark.parametrize("name", sorted(REAL))
def test_every_real_kernel_is_recognised(name: str) -> None:
    p = KernelMatcher().match(name)
    assert p is not None, name
    assert (p.path, p.role, p.split_axis) == REAL[name]


@pytest.mark.parametrize("name", LOOKALIKES)
def test_lookalikes_are_not_mla_layers(name: str) -> None:
    assert KernelMatcher().match(name) is None


def test_no_lookalike_is_counted(runs: dict[str, Path]) -> None:
    for name, run in runs.items():
        ks = kernel_dicts(run)
        for k in ks:
            if "cache_mla" in k["name"]:
                assert k["layer"] is None and k["splits"] is None, (name, k)
        r = load(run)
        if name != "gluon_v0119_fix_dropped":  # that one lost kernels
            assert r.count("layers") == r.count("steps") * 4, name  # 4 layers per step


# -- S, rows and qlen per path ------------------------------------------------------------------
def _paths(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["variant"]: p for p in s["trace"]["paths"]}


@pytest.mark.parametrize("name", ["gluon_v0119_bug", "gluon_v0119_bug_rocm63"])
def test_gluon_bug_reports_the_collapse_with_the_fixed_s(sums: dict, name: str) -> None:
    s = sums[name]
    p = _paths(s)["_mla_gluon"]
    # grid (3840, 1, 4) work-items / (256, 1, 1): B = 15 (x), S = 1 (y), qlen = 4 (z)
    assert (p["S"], p["rows"], p["qlen"], p["graph_steps"]) == ("1", "15", "4", 3)
    assert (
        "grid axis y of _mla_gluon" in p["S_source"]
        and portable_path(str(AITER / name)) in p["S_source"]
    )
    (f,) = _findings(s, "split-collapse")
    d = f["data"]
    # v0.1.19: max(1, min(256 // (15*4), ceil(min_kv/64))) = 1 with min_kv = qlen = 4;
    # over active rows (>= 193 tokens) or under v0.1.20: 256 // 60 = 4
    assert (d["used"], d["fix_gives"], d["without_padding"]) == (1, 4, None)
    assert (d["rows"], d["qlen"], d["policy"]) == (15, 4, "aiter-gluon-v0.1.19")
    assert d["s_source"] == "grid axis y of _mla_gluon"
    assert f["severity"] == "critical"
    # the one collapse wording (mlaprof.analysis.collapse), as a scenario's collapse says it
    assert "S = 1 used on 15 rows x qlen 4, the fix gives 4" in f["title"]
    assert "unknown without padding rows" in f["title"]
    assert f"imported from {portable_path(str(AITER / name))}" in f["evidence"]
    # stage 2 absent on every S = 1 layer: consistent, not missing
    assert s["trace"]["checks"]["stage2"]["aiter-gluon"]["s1_without_stage2"] == 12


def test_gluon_fix_reports_no_collapse(sums: dict) -> None:
    s = sums["gluon_v0119_fix"]
    p = _paths(s)["_mla_gluon"]
    assert (p["S"], p["rows"], p["qlen"]) == ("4", "15", "4")
    assert not _findings(s, "split-collapse")
    assert s["trace"]["checks"]["stage2"]["aiter-gluon"]["split_with_stage2"] == 12


def test_asm_s_from_grid_z(sums: dict, runs: dict) -> None:
    p = _paths(sums["asm_16heads"])["aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1"]
    # grid (256, 15, 16) work-items / (256, 1, 1): (1, B = 15, S = 16)
    assert (p["S"], p["rows"], p["path"]) == ("16", "15", "aiter-asm")
    assert "grid axis z" in p["S_source"]
    ks = [k for k in kernel_dicts(runs["asm_16heads"]) if k["name"].startswith("aiter::mla_")]
    assert {k["splits"] for k in ks} == {16} and len(ks) == 12


def test_persistent_s_is_decided_on_the_device(sums: dict, runs: dict) -> None:
    s = sums["persistent_switch"]
    paths = _paths(s)
    ps = paths["aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps"]
    assert ps["S"] == "decided on the device" and ps["rows"] is None
    assert ps["path"] == "aiter-asm-persistent" and ps["steps"] == 3
    big = paths["aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1"]
    assert (big["S"], big["rows"], big["steps"]) == ("6", "40", 2)
    ks = kernel_dicts(runs["persistent_switch"])
    assert all(k["splits"] is None for k in ks if k["name"].endswith("_ps"))
    # the metadata kernel: once per step, before it, never a layer
    meta = [k for k in ks if "kn_get_mla_metadata" in k["name"]]
    assert [k["step"] for k in meta] == [0, 1, 2] and all(k["layer"] is None for k in meta)
    (f,) = _findings(s, "variant")
    assert "_ps on 3 steps" in f["evidence"] and "batch rows 40" in f["evidence"]
    assert "AITER_MLA_DECODE_PERSISTENT_MAX_BATCH" in f["evidence"]


# -- capture and sync verdicts only from evidence ----------------------------------------------
def test_capture_verdicts(sums: dict) -> None:
    for name in ("gluon_v0119_bug", "asm_16heads", "persistent_switch"):
        cap = sums[name]["capture"]
        assert cap["status"] == "replayed" and cap["label"] == "replayed in a graph", name
        assert "carry the correlation id of a graph-launch call" in cap["evidence"]
        # the mode asked for is not in a trace; the one that ran is, where a launch confirms it
        assert cap["mode"] is None and cap["effective_mode"] == "FULL"
    cap = sums["gluon_v0119_bug_rocm63"]["capture"]  # no API trace: the shared ids only
    assert cap["status"] == "replayed" and "no graph-launch call" in cap["evidence"]
    assert cap["effective_mode"] is None  # a replay no launch confirms: FULL or a piece
    cap = sums["eager_syncs"]["capture"]
    assert cap["status"] == "eager" and cap["eager_steps"] == 2 and cap["effective_mode"] == "NONE"
    for s in sums.values():  # the engine's configured mode is not in a trace
        assert s["capture"]["mode"] is None
    # each step's own mode: attention inside a graph replay is a FULL graph's
    assert {st["capture"] for st in sums["gluon_v0119_bug"]["trace"]["steps"]} == {"FULL"}
    assert {st["capture"] for st in sums["eager_syncs"]["trace"]["steps"]} == {"eager"}


def test_syncs_in_every_layer_of_the_eager_trace(sums: dict) -> None:
    sy = sums["eager_syncs"]["trace"]["syncs"]
    assert sy["status"] == "found" and sy["count"] == 8
    every = [(step, layer) for step in (0, 1) for layer in range(4)]
    assert [(x["step"], x["layer"]) for x in sy["syncs"]] == every
    assert {x["op"] for x in sy["syncs"]} == {"hipStreamSynchronize"}
    (f,) = _findings(sums["eager_syncs"], "sync")
    assert f["severity"] == "critical" and "8 layers" in f["title"]


def test_syncs_unknown_without_an_api_trace(sums: dict, tmp_path: Path) -> None:
    assert sums["gluon_v0119_bug_rocm63"]["trace"]["syncs"]["status"] == "unknown"
    assert sums["gluon_v0119_bug_rocm63"]["trace"]["syncs"]["count"] is None
    # the eager trace's kernels alone: the syncs are not in the data
    run, _ = import_rocprof(AITER / "eager_syncs" / "4242_kernel_trace.csv", tmp_path, "k")
    s = summary(load(run))
    assert s["trace"]["syncs"]["status"] == "unknown" and not _findings(s, "sync")


def test_no_syncs_in_graph_replays_with_an_api_trace(sums: dict) -> None:
    sy = sums["gluon_v0119_bug"]["trace"]["syncs"]
    assert sy["status"] == "none" and sy["count"] == 0


def test_eager_steps_split_at_idle_gaps(runs: dict) -> None:
    r = load(runs["eager_syncs"])
    st = r.steps
    assert list(st["graph_mode"]) == ["eager", "eager"]
    assert list(st["timing"]) == ["trace-eager"] * 2
    assert sorted(r.layers.groupby("step").size().tolist()) == [4, 4]


def test_kineto_graph_replays_are_replayed(tmp_path: Path) -> None:
    from mlaprof.importers.kineto import import_kineto
    from tests.trace_io_helpers import KINETO_REAL

    run, _ = import_kineto(KINETO_REAL, tmp_path, "k")
    s = summary(load(run))
    assert s["capture"]["status"] == "replayed"
    assert "3 of 3 carry the correlation id" in s["capture"]["evidence"]
    assert s["trace"]["syncs"]["status"] in ("none", "found")  # the trace has its runtime calls
    (p,) = s["trace"]["paths"]
    assert (p["path"], p["S"], p["rows"]) == ("mlaprof-triton", "32", "4")


# -- user patterns --------------------------------------------------------------------------------
def test_mla_pattern_never_rereads_gluon_qlen_as_s(tmp_path: Path) -> None:
    trace = AITER / "gluon_v0119_bug" / "4242_kernel_trace.csv"
    m = KernelMatcher().with_extra(["_mla_gluon"])  # plain: S on z, but known kernels win
    run, _ = import_rocprof(trace, tmp_path, "g", m)
    assert {k["splits"] for k in kernel_dicts(run) if k["name"] == "_mla_gluon"} == {1}


def test_patterns_file_extends_the_table(tmp_path: Path) -> None:
    src = (AITER / "gluon_v0119_fix" / "4242_kernel_trace.csv").read_text()
    p = tmp_path / "kernel_trace.csv"
    p.write_text(src.replace('"_mla_gluon"', '"my_fork_mla_kernel"'))
    toml = tmp_path / "pat.toml"
    toml.write_text(
        '[[pattern]]\nname = "my_fork_mla_.*"\npath = "fork"\nrole = "stage1"\n'
        'split_axis = "y"\nrows_axis = "x"\nqlen_axis = "z"\n'
    )
    run, s = import_rocprof(p, tmp_path, "f", KernelMatcher().with_user(load_patterns(toml)))
    assert s.mla_kernels == 12
    paths = summary(load(run))["trace"]["paths"]
    assert [(x["path"], x["S"], x["rows"], x["qlen"]) for x in paths] == [("fork", "4", "15", "4")]


@pytest.mark.parametrize(
    "doc",
    [
        '[{"name": "k", "role": "stage1"}]',  # no split axis
        '[{"name": "k", "role": "stage1", "split_axis": "w"}]',
        '[{"name": "k", "role": "stage3", "split_axis": "z"}]',
        '[{"name": "k", "role": "stage2", "split_axis": "z"}]',
        '[{"name": "(", "split_axis": "z"}]',
        '[{"regex": "k", "split_axis": "z", "colour": 1}]',
        "[]",
        "not json",
    ],
)
def test_bad_patterns_file(tmp_path: Path, doc: str, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "p.json"
    f.write_text(doc)
    with pytest.raises(MlaprofError):
        load_patterns(f)
    rc = main(["import", "rocprof", str(AITER / "asm_16heads"), "--patterns", str(f),
               "--traces", str(tmp_path / "t")])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("mlaprof: error:") and "Traceback" not in err


# -- the views render what the analysis returns ---------------------------------------------------
def test_report_json_and_compare(runs: dict, capsys: pytest.CaptureFixture[str]) -> None:
    bug, fix = str(runs["gluon_v0119_bug"]), str(runs["gluon_v0119_fix"])
    assert main(["report", bug, "--json", "--compare", fix]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["capture"]["status"] == "replayed" and doc["trace"]["syncs"]["count"] == 0
    (ts,) = doc["compare"]["trace_splits"]
    assert (ts["variant"], ts["S_before"], ts["S_after"]) == ("_mla_gluon", "1", "4")
    assert doc["compare"]["capture"] == {"before": "replayed in a graph",
                                         "after": "replayed in a graph"}  # fmt: skip
    assert main(["report", bug, "--compare", fix]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "S from the trace" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[1:3] == ["1 (15 rows)", "4 (15 rows)"] and "(_mla_gluon)" in out


def test_terminal_report_of_the_eager_trace(
    runs: dict, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["report", str(runs["eager_syncs"])]) == 0
    out = "".join(capsys.readouterr().out.split())
    assert "capture:eager(attentionnotinagraph)" in out and "syncs:8inMLAlayers" in out
    assert "(?)" not in out and "FULL->" not in out


def test_html_shows_the_trace(runs: dict, tmp_path: Path) -> None:
    from mlaprof.figures.html_report import write_html_report

    text = write_html_report(summary_of(runs["persistent_switch"]), tmp_path / "r.html").read_text()
    assert "Imported trace" in text and "decided on the device" in text
    assert "aiter::mla_a16w16_qh16_m16x4_n16x1_coex0_mask1_ps" in text


def test_rocpd_database_of_the_bug_trace(runs: dict, tmp_path: Path) -> None:
    """The same trace as rocprofv3's default rocpd output (mlaprof's export with its own extras
    stripped): same S, rows, collapse and capture verdict."""
    import sqlite3

    from mlaprof.exporters.rocpd_export import export_rocpd

    db = tmp_path / "bug_results.db"
    with load(runs["gluon_v0119_bug"]) as r:
        export_rocpd(r, db)
    con = sqlite3.connect(db)
    for (t,) in con.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_%\\_%' ESCAPE '\\'"
    ).fetchall():
        if "extdata" in [c[1] for c in con.execute(f'PRAGMA table_info("{t}")')]:
            con.execute(f"UPDATE \"{t}\" SET extdata = '{{}}'")
    con.commit()
    con.close()
    run, _ = import_rocprof(db, tmp_path, "db")
    s = summary(load(run))
    assert (_paths(s)["_mla_gluon"]["S"], _paths(s)["_mla_gluon"]["rows"]) == ("1", "15")
    (f,) = _findings(s, "split-collapse")
    assert (f["data"]["used"], f["data"]["fix_gives"]) == (1, 4)
    assert s["capture"]["status"] == "replayed"


# -- can this trace be trusted (issue 14) ---------------------------------------------------------
def test_replays_missing_kernels_make_the_trace_unreliable(sums: dict) -> None:
    tr = sums["gluon_v0119_fix_dropped"]["trace"]["trust"]
    # 5 replays of 20 kernels; replays 1 and 3 lost every third dispatch (6 each); one more
    # hipGraphLaunch has no kernel at all
    assert tr["verdict"] == "unreliable"
    c = tr["counts"]
    assert (c["replays"], c["short_replays"], c["missing_kernels"], c["expected_kernels"]) == (
        5, 2, 12, 100)  # fmt: skip
    assert c["launches_without_kernels"] == 1 and c["steps_missing_layers"] == 2
    (f,) = _findings(sums["gluon_v0119_fix_dropped"], "trust")
    assert "2 of 5 replays miss kernels" in f["title"] and "26-65%" in f["evidence"]
    for name in ("gluon_v0119_fix", "gluon_v0119_bug", "asm_16heads", "persistent_switch"):
        assert sums[name]["trace"]["trust"]["verdict"] == "reliable", name
        assert not any(f["unreliable"] for f in sums[name]["findings"])


def test_steps_without_a_graph(sums: dict, runs: dict) -> None:
    s = sums["persistent_eager_steps"]
    # graph, eager, eager, graph: the two eager steps run back to back, split by the persistent
    # metadata kernel each starts with
    assert list(load(runs["persistent_eager_steps"]).steps["graph_mode"]) == [
        "graph", "eager", "eager", "graph"]  # fmt: skip
    assert s["capture"]["status"] == "mixed"
    assert s["trace"]["trust"]["counts"]["eager_steps_between_replays"] == 2
    # steps that ran without a graph are how the engine ran, not a fault of the trace: the
    # capture finding says so, and the trace stays reliable
    assert s["trace"]["trust"]["verdict"] == "reliable"
    flagged = {f["kind"]: f["unreliable"] for f in s["findings"]}
    assert "trust" not in flagged and flagged["capture"] is False


def test_unreliable_in_every_view(
    runs: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlaprof.figures.html_report import write_html_report

    run = runs["gluon_v0119_fix_dropped"]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["report", str(run)]) == 0
    assert "UNRELIABLE TRACE: 2 of 5 graph replays miss kernels" in capsys.readouterr().out
    assert main(["report", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace"]["trust"]["verdict"] == "unreliable"
    text = write_html_report(summary_of(run), tmp_path / "r.html").read_text()
    assert "unreliable trace" in text


# -- where the time goes inside a replay (issue 14) ---------------------------------------------
def test_time_inside_graph_replays(sums: dict, runs: dict, tmp_path: Path) -> None:
    from mlaprof.figures.html_report import write_html_report

    rt = sums["gluon_v0119_bug"]["trace"]["replay_time"]
    # per layer: [prev GEMM 6 us] + RMSNorm 2 + rope/cache 3 + _mla_gluon 30 (S = 1, no stage 2);
    # layer 0 has no GEMM before it; the last GEMM (6 us) is outside every layer
    assert rt["replays"] == 3
    assert [(x["layer"], x["median_us"], x["attention_median_us"], x["S"]) for x in rt["layers"]] == [
        (0, 35.0, 30.0, 1), (1, 41.0, 30.0, 1), (2, 41.0, 30.0, 1), (3, 41.0, 30.0, 1)]  # fmt: skip
    assert rt["attention_share"] == pytest.approx(360 / (12 * (2 + 3 + 30 + 6)))
    assert rt["outside_layers_us"] == 6.0
    k = {x["name"]: x for x in rt["kernels"]}
    assert (k["_mla_gluon"]["launches"], k["_mla_gluon"]["total_us"]) == (12, 360.0)
    assert k["_mla_gluon"]["attention"] and not k["_fused_qk_rope_cat_and_cache_mla_kernel"][
        "attention"]  # fmt: skip
    fix = sums["gluon_v0119_fix"]["trace"]["replay_time"]  # stage 2 joins its layer
    assert fix["layers"][0]["attention_median_us"] == 9.0 + 2.5
    assert sums["eager_syncs"]["trace"]["replay_time"]["replays"] == 0  # no replay: no claim
    text = write_html_report(summary_of(runs["gluon_v0119_bug"]), tmp_path / "r.html").read_text()
    # the page's front part: the replay time's rows and tables as the rows layer lays them out
    front = text[text.index('id="front"') : text.index('id="sections"')]
    assert "<h3>imported trace · replay time</h3>" in front
    assert (
        "<td>replays</td><td>3</td>" in front and "<td>attention share</td><td>73.2%</td>" in front
    )
    assert "GPU time per layer inside graph replays" in front


def test_no_correlation_ids_no_capture_verdict(tmp_path: Path) -> None:
    """Kernels without correlation ids: replays and eager launches look alike, so no verdict."""
    from mlaprof.importers.kineto import import_kineto
    from tests.trace_io_helpers import kineto_trace, write_kineto

    trace, _ = kineto_trace(replays=2, layers=3)
    for ev in trace["traceEvents"]:
        if ev.get("cat") == "kernel":
            ev["args"].pop("correlation", None)
    run, _ = import_kineto(write_kineto(tmp_path / "t.json", trace), tmp_path, "nc")
    s = summary(load(run))
    assert s["capture"]["status"] == "unknown" and "no correlation id" in s["capture"]["evidence"]
    assert load(run).steps["graph_mode"].isna().all()
    assert not _findings(s, "capture")


def test_a_trace_cut_in_its_last_replay_is_not_a_loss(tmp_path: Path) -> None:
    lines = (AITER / "gluon_v0119_fix" / "4242_kernel_trace.csv").read_text().splitlines()
    # drop the last eager kernels and the tail of the last replay (its last GEMM and stage 2)
    kept = [ln for ln in lines if "concat_and_cache" not in ln and "argmax" not in ln.lower()
            and "ArgMaxOps" not in ln][:-2]  # fmt: skip
    p = tmp_path / "kernel_trace.csv"
    p.write_text("\n".join(kept) + "\n")
    run, _ = import_rocprof(p, tmp_path, "cut")
    doc = summary(load(run))
    tr = doc["trace"]["trust"]
    # the cut replay is left out and said: 2 whole steps analysed, 1 partial step not
    assert tr["verdict"] == "reliable" and tr["counts"]["edge_partial_steps"] == 1
    assert tr["counts"]["split_layers_without_stage2"] == 0
    assert "1 partial step at the window edges, not analysed" in tr["notes"][0]
    assert len(doc["trace"]["steps"]) == 2


def test_a_host_sync_during_a_replay_is_not_in_the_region(tmp_path: Path) -> None:
    """The host waiting on a graph replay is outside the captured region: not a sync in a layer."""
    import shutil

    d = tmp_path / "t"
    shutil.copytree(AITER / "gluon_v0119_bug", d)
    kernels = (d / "4242_kernel_trace.csv").read_text().splitlines()
    second_gluon = [ln for ln in kernels if '"_mla_gluon"' in ln][1].split(",")
    t = int(second_gluon[9]) + 100  # inside layer 1 of the first replay
    with open(d / "4242_hip_api_trace.csv", "a") as f:
        f.write(f'"HIP_RUNTIME_API_EXT","hipStreamSynchronize",4242,4242,999,{t},{t + 50_000}\n')
    run, _ = import_rocprof(d, tmp_path, "s")
    sy = summary(load(run))["trace"]["syncs"]
    assert (sy["status"], sy["count"]) == ("none", 0) and "graph replays" in sy["evidence"]


def test_two_processes_reuse_correlation_ids(tmp_path: Path) -> None:
    """A multi-GPU trace: every process numbers its own correlation ids, each on its own GPU;
    replays and eager steps stay apart per device."""
    d = tmp_path / "tp2"
    d.mkdir()
    for pid, agent, shift in ((4242, "Agent 2", 0), (4243, "Agent 3", 700)):
        for src in ("gluon_v0119_bug", "eager_syncs"):
            header, rows = csv_rows(AITER / src / "4242_kernel_trace.csv")
            later = shift + (10**9 if src == "eager_syncs" else 0)
            for f in rows:
                f[1] = agent
                f[9], f[10] = str(int(f[9]) + later), str(int(f[10]) + later)
                if src == "eager_syncs":  # later in the same process: later correlation ids
                    f[8] = str(int(f[8]) + 100_000)
            with open(d / f"{pid}_{src}_kernel_trace.csv", "w", newline="") as fh:
                csv.writer(fh).writerows([header, *rows])
    run, s = import_rocprof(d, tmp_path / "runs", "tp2")
    r = load(run)
    # one rank per process (issue 15); per GPU: 3 replays + 2 eager steps, 4 layers each
    assert r.ranks == [0, 1]
    assert (s.replays, s.eager_steps) == (6, 4)
    assert sorted(r.layers.groupby(["rank", "step"]).size().tolist()) == [4] * 10
    assert set(r.layers["splits_used"]) == {1, 8}


def test_device_to_host_copies_inside_layers(tmp_path: Path) -> None:
    """No API trace, but a memory-copy trace: a device-to-host copy in each eager layer's window
    is sync evidence; a host-to-device copy is not."""
    d = tmp_path / "t"
    d.mkdir()
    src = AITER / "eager_syncs" / "4242_kernel_trace.csv"
    (d / "4242_kernel_trace.csv").write_bytes(src.read_bytes())
    api = (AITER / "eager_syncs" / "4242_hip_api_trace.csv").read_text().splitlines()
    syncs = [ln.split(",") for ln in api if "hipStreamSynchronize" in ln]
    lines = ['"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id",'
             '"Correlation_Id","Start_Timestamp","End_Timestamp"']  # fmt: skip
    for i, f in enumerate(syncs):
        t0 = int(f[5]) + 1000
        way = "DEVICE_TO_HOST" if i % 2 == 0 else "HOST_TO_DEVICE"
        lines.append(f'"MEMORY_COPY","MEMORY_COPY_{way}",0,"Agent 2","Agent 0",{9000 + i},'
                     f"{t0},{t0 + 2000}")  # fmt: skip
    (d / "4242_memory_copy_trace.csv").write_text("\n".join(lines) + "\n")
    run, _ = import_rocprof(d, tmp_path, "m")
    sy = summary(load(run))["trace"]["syncs"]
    assert sy["status"] == "found" and sy["count"] == 4 and "memory-copy trace" in sy["evidence"]
    assert {x["op"] for x in sy["syncs"]} == {"memory copy MEMORY_COPY_DEVICE_TO_HOST"}
    assert [x["layer"] for x in sy["syncs"]] == [0, 2, 0, 2]


def test_per_step_path_variant_rows_and_s(sums: dict) -> None:
    st = sums["persistent_switch"]["trace"]["steps"]
    assert [(x["step"], x["path"], x["rows"], x["S"], x["layers"], x["graph_mode"]) for x in st] == [
        (0, "aiter-asm-persistent", None, None, 4, "graph"),
        (1, "aiter-asm-persistent", None, None, 4, "graph"),
        (2, "aiter-asm-persistent", None, None, 4, "graph"),
        (3, "aiter-asm", 40, 6, 4, "graph"),
        (4, "aiter-asm", 40, 6, 4, "graph"),
    ]  # fmt: skip


def test_rocprof_json_of_the_bug_trace(tmp_path: Path) -> None:
    """The gluon bug trace written as rocprofv3 JSON (``-f json``): same S, collapse, verdicts."""
    header, rows = csv_rows(AITER / "gluon_v0119_bug" / "4242_kernel_trace.csv")
    col = {h: i for i, h in enumerate(header)}
    names = list(dict.fromkeys(r[col["Kernel_Name"]] for r in rows))
    dispatch = [
        {
            "correlation_id": {"internal": int(r[col["Correlation_Id"]]), "external": 0},
            "start_timestamp": int(r[col["Start_Timestamp"]]),
            "end_timestamp": int(r[col["End_Timestamp"]]),
            "dispatch_info": {
                "agent_id": {"handle": 2},
                "kernel_id": names.index(r[col["Kernel_Name"]]) + 1,
                "grid_size": {a: int(r[col[f"Grid_Size_{a.upper()}"]]) for a in "xyz"},
                "workgroup_size": {a: int(r[col[f"Workgroup_Size_{a.upper()}"]]) for a in "xyz"},
            },
        }
        for r in rows
    ]
    _, api_rows = csv_rows(AITER / "gluon_v0119_bug" / "4242_hip_api_trace.csv")
    hip = [
        {"kind": d, "operation": fn, "thread_id": int(t), "correlation_id": {"internal": int(c)},
         "start_timestamp": int(s0), "end_timestamp": int(s1)}
        for d, fn, _p, t, c, s0, s1 in api_rows
    ]  # fmt: skip
    doc = {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 4242},
        "kernel_symbols": [{"kernel_id": i + 1, "formatted_kernel_name": n}
                           for i, n in enumerate(names)],
        "buffer_records": {"kernel_dispatch": dispatch, "hip_api": hip},
    }]}  # fmt: skip
    p = tmp_path / "bug_results.json"
    p.write_text(json.dumps(doc))
    run, _ = import_rocprof(p, tmp_path, "json")
    s = summary(load(run))
    assert (_paths(s)["_mla_gluon"]["S"], _paths(s)["_mla_gluon"]["rows"]) == ("1", "15")
    (f,) = _findings(s, "split-collapse")
    assert (f["data"]["used"], f["data"]["fix_gives"]) == (1, 4)
    assert s["capture"]["status"] == "replayed" and "3 of 3 carry" in s["capture"]["evidence"]
    assert s["trace"]["syncs"]["status"] == "none"


@pytest.mark.parametrize(
    ("rows", "qlen", "s", "collapsed"),
    [
        (15, 4, 1, True),  # 256 // 60 = 4: S = 1 is a collapse
        (15, 4, 2, True),  # at most half of 4
        (15, 4, 3, False),
        (64, 4, 1, False),  # 256 // 256 = 1: nothing to split further
        (40, 4, 1, False),  # 256 // 160 = 1
        (8, 1, 4, True),  # 256 // 8 = 32
    ],
)
def test_collapse_rule(rows: int, qlen: int, s: int, collapsed: bool) -> None:
    import pandas as pd

    from mlaprof.analysis.collapse import collapse_findings
    from mlaprof.analysis.step_stats import step_stats

    steps = pd.DataFrame({"rank": [0], "step": [0], "backend": ["aiter-gluon _mla_gluon"],
                          "num_reqs": [rows], "qlen": [qlen], "graph_mode": ["graph"]})  # fmt: skip
    layers = pd.DataFrame({"rank": [0, 0], "step": [0, 0], "layer": [0, 1], "splits_used": [s, s]})
    found = collapse_findings(None, "imported from x.csv", steps, step_stats(layers))
    assert bool(found) == collapsed
    if found:
        assert found[0].data["fix_gives"] == max(1, 256 // (rows * qlen))
