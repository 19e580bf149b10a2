"""vLLM log import and its analysis: process prefixes and ranks, server starts, cudagraph-mode
downgrades with their cause, capture memory per rank per start, vLLM's estimate vs measured.

Log lines use vLLM's logger layout (``(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [file:line] msg``,
vllm/logger.py) and its message format strings (vLLM 0.32's sources; AITER v0.1.19/v0.1.20 and vLLM 0.32 sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.analysis import analyze, summary
from mlaprof.analysis.sections import EngineStart, GraphCaptureLine, StartSpeculative
from mlaprof.analysis.server_starts import start_findings as engine_log_findings
from mlaprof.analysis.starts import engine_starts
from mlaprof.cli import main
from mlaprof.importers.vllm_log import (
    GIB,
    Start,
    gib_bytes,
    import_vllm_log,
    parse_config,
    parse_log,
    process_rank,
)
from mlaprof.portable import portable_path
from mlaprof.store import load

DATA = Path(__file__).parents[1] / "data" / "vllm"
TWO_STARTS = DATA / "tp2_two_starts.log"
SPEC_DOWN = (
    "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with spec-decode for attention backend "
    "TritonMLABackend (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting "
    "cudagraph_mode=PIECEWISE"
)


def line(proc: str | None, msg: str, level: str = "INFO", t: str = "08-30 12:34:56") -> str:
    pre = f"({proc}) " if proc else ""
    return f"{pre}{level} {t} [gpu_model_runner.py:6582] {msg}"


def took(gib: str, secs: int = 9) -> str:
    return f"Graph capturing finished in {secs} secs, took {gib} GiB"


def _import(tmp_path: Path, text: str) -> object:
    p = tmp_path / "server.log"
    p.write_text(text)
    run, _ = import_vllm_log(p, tmp_path / "t", "v")
    return load(run)


# -- prefixes and ranks ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prefix", "process", "rank", "worker"),
    [
        ("(APIServer pid=2301) ", "APIServer", 0, False),
        ("(EngineCore_DP0 pid=2388) ", "EngineCore_DP0", 0, False),
        ("(EngineCore_3 pid=77) ", "EngineCore_3", 3, False),
        ("(Worker_TP1 pid=2452) ", "Worker_TP1", 1, True),
        ("(Worker pid=2452) ", "Worker", 0, True),
        ("(VllmWorker rank=1 pid=812) ", "VllmWorker rank=1", 1, True),
        ("(VllmWorker TP rank=1 pid=812) ", "VllmWorker TP rank=1", 1, True),
        ("(VllmWorker TP1 pid=812) ", "VllmWorker TP1", 1, True),
        ("(MainProcess pid=7) ", "MainProcess", 0, False),  # a process vLLM did not name
        ("", None, 0, False),
    ],
)
def test_prefix_forms(prefix: str, process: str | None, rank: int, worker: bool) -> None:
    f = parse_log(prefix + "INFO 08-30 12:34:56 [gpu_model_runner.py:6582] " + took("0.51"))
    (r,) = f.records
    assert (r["process"], r["rank"], r["worker"]) == (process, rank, worker)
    assert r["bytes"] == 51 * GIB // 100 and r["time"] == "08-30 12:34:56"
    assert r["pid"] == (int(prefix.split("pid=")[1].rstrip(") ")) if prefix else None)


def test_composite_worker_names_use_the_config_sizes() -> None:
    st = Start(index=1, line=1, config={"tensor_parallel_size": 2, "pipeline_parallel_size": 2})
    assert process_rank("Worker_PP1_TP1", st) == (3, True)
    assert process_rank("Worker_DP1_PP0_TP1", st) == (5, True)
    assert process_rank("Worker_DP1_TP0", None) == (0, True)  # sizes unknown: TP rank only
    assert process_rank("EngineCore_DP1", st) == (4, False)  # first worker of DP group 1


def test_ansi_colours_and_continuation_lines() -> None:
    coloured = (
        "\x1b[0;36m(Worker_TP1 pid=9)\x1b[0;0m \x1b[33mWARNING\x1b[0m \x1b[90m08-30 12:34:56\x1b[0m "
        "\x1b[90m[compilation.py:1460]\x1b[0m " + SPEC_DOWN
    )
    # vLLM's NewLineFormatter continues a multi-line message with "\r\n" + the prefix
    multi = line("Worker_TP0 pid=8", "first\r\n(Worker_TP0 pid=8) INFO 08-30 12:34:56 [x.py:1] " + took("0.50"))  # fmt: skip
    f = parse_log(coloured + "\n" + multi + "\n")
    down, done = f.records
    assert (
        down["rank"] == 1
        and down["message"] == SPEC_DOWN
        and down["support"] == ("UNIFORM_SINGLE_TOKEN_DECODE")
    )
    assert done["rank"] == 0 and done["bytes"] == gib_bytes("0.50") and done["line"] == 3


# -- server starts ---------------------------------------------------------------------------------
def test_two_starts_of_the_committed_log() -> None:
    f = parse_log(TWO_STARTS.read_bytes().decode())  # keep tqdm's "\r" (no newline translation)
    assert [(s.index, s.version, s.line) for s in f.starts] == [(1, "0.30.1", 1), (2, "0.32.0", 27)]
    s1, s2 = f.starts
    assert s1.config["spec_method"] == "ngram" and s1.config["num_spec_tokens"] == 3
    assert s1.config["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert s1.config["capture_sizes"] == [1, 2, 4, *range(8, 129, 8)]
    assert (
        s1.config["tensor_parallel_size"] == 2 and s2.model == "deepseek-ai/DeepSeek-V2-Lite-Chat"
    )
    assert f.final_mode(1) == "PIECEWISE" and f.final_mode(2) == "FULL_AND_PIECEWISE"
    mem = {
        (r["start"], r["rank"]): r["bytes"] for r in f.records if r["kind"] == "capture-finished"
    }
    assert mem == {
        (1, 0): gib_bytes("0.48"),
        (1, 1): gib_bytes("0.47"),
        (2, 0): gib_bytes("1.02"),
        (2, 1): gib_bytes("1.03"),
    }
    bars = [(r["start"], r["phase"], r["mode"], r["done"], r["total"])
            for r in f.records if r["kind"] == "capture-progress"]  # fmt: skip
    assert bars == [
        (1, "mixed prefill-decode", "PIECEWISE", 19, 19),
        (2, "mixed prefill-decode", "PIECEWISE", 19, 19),
        (2, "decode", "FULL", 17, 17),
    ]


def test_start_boundaries() -> None:
    eng = "Initializing a V1 LLM engine (v0.32.0) with config: model='m', speculative_config=None"
    text = "\n".join(
        [
            line("Worker_TP0 pid=1", took("0.10")),  # before any start line: start 1
            line("APIServer pid=2", "vLLM API server version 0.31.0"),
            line("EngineCore_DP0 pid=3", eng),  # same start as the server line above
            line("Worker_TP0 pid=4", took("0.20")),
            line("EngineCore_DP0 pid=5", eng),  # an engine restart without a server line
            line("Worker_TP0 pid=6", took("0.30")),
            line("APIServer pid=7", "vLLM server version 0.33.0, serving model x/y"),
            line("Worker_TP0 pid=8", took("0.40")),
        ]
    )
    f = parse_log(text)
    assert [(s.index, s.version, s.model) for s in f.starts] == [
        (1, None, None), (2, "0.31.0", "m"), (3, "0.32.0", "m"), (4, "0.33.0", "x/y"),
    ]  # fmt: skip
    assert [r["start"] for r in f.records] == [1, 2, 3, 4]


def test_attention_backend_lines() -> None:
    rocm = (
        "Using ROCM_AITER_MLA backend out of potential backends: ['ROCM_AITER_MLA', 'TRITON_MLA']."
    )
    cuda = "Using FLASHMLA attention backend out of potential backends: ['FLASHMLA']."
    forced = "Using TRITON_MLA backend (selected via --attention-backend)."
    f = parse_log("\n".join(line("Worker_TP0 pid=1", m) for m in (rocm, cuda, forced)))
    assert [r["backend"] for r in f.records] == ["ROCM_AITER_MLA", "FLASHMLA", "TRITON_MLA"]


def test_config_forms() -> None:
    new = parse_config(
        "model='a', speculative_config=SpeculativeConfig(method='mtp', model='a', "
        "num_spec_tokens=3), tensor_parallel_size=8, compilation_config={'mode': "
        "<CompilationMode.VLLM_COMPILE: 3>, 'cudagraph_mode': <CUDAGraphMode.FULL_DECODE_ONLY: "
        "(2, 0)>, 'cudagraph_capture_sizes': [4, 8], 'pass_config': {}}, kernel_config=K()"
    )
    assert new["spec_method"] == "mtp" and new["num_spec_tokens"] == 3
    assert new["cudagraph_mode"] == "FULL_DECODE_ONLY" and new["capture_sizes"] == [4, 8]
    assert new["compilation_config"].endswith("'pass_config': {}}")
    old = parse_config(
        'model=\'a\', speculative_config=None, compilation_config={"level":3,"cudagraph_mode":'
        '[2,1],"cudagraph_capture_sizes":[16,8,4,2,1],"max_capture_size":16}'
    )
    assert old["speculative_config"] is None and "spec_method" not in old
    assert old["cudagraph_mode"] == "FULL_AND_PIECEWISE" and old["capture_sizes"] == [
        16,
        8,
        4,
        2,
        1,
    ]
    assert parse_config('compilation_config={"cudagraph_mode":1}')["cudagraph_mode"] == "PIECEWISE"


def test_gib_bytes_is_exact() -> None:
    assert gib_bytes("0.51") == 51 * GIB // 100 and gib_bytes("12") == 12 * GIB
    assert gib_bytes("-0.05") == -(5 * GIB // 100)  # vLLM logs a negative delta when memory freed


# -- import ----------------------------------------------------------------------------------------
def test_import_writes_each_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["import", "vllm-log", str(TWO_STARTS), "--traces", str(tmp_path / "t"), "--name", "v"])  # fmt: skip
    assert rc == 0 and "events" in capsys.readouterr().out
    run = load(tmp_path / "t" / "v")
    assert run.ranks == [0, 1]
    assert run.meta["graph_mode"] == "FULL_AND_PIECEWISE" and run.meta["starts"] == 2
    assert run.meta["backend"] == "TRITON_MLA"  # the last start's, as its workers logged it
    ev = run.events
    per_rank = ev[ev["kind"] == "capture-finished"].groupby("rank").size().to_dict()
    assert per_rank == {0: 2, 1: 2}
    procs = {json.loads(d)["process"] for d in ev[ev["rank"] == 1]["data"]}
    assert procs == {"Worker_TP1"}
    c = run.counters
    c = c[c["name"] == "capture_memory_bytes"]
    got = {(int(r), k): v for r, k, v in zip(c["rank"], c["key"], c["value"], strict=True)}
    assert got == {
        (0, "start 1"): gib_bytes("0.48"),
        (1, "start 1"): gib_bytes("0.47"),
        (0, "start 2"): gib_bytes("1.02"),
        (1, "start 2"): gib_bytes("1.03"),
    }
    assert run.count("memory") == 0 and run.count("captures") == 0  # a log has neither


def test_failed_multi_rank_import_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlaprof.importers.vllm_log as vl

    real = vl._event

    def boom(rec: dict) -> dict:
        if rec.get("rank") == 1:
            raise RuntimeError("disk full")
        return real(rec)

    monkeypatch.setattr(vl, "_event", boom)
    with pytest.raises(RuntimeError):
        import_vllm_log(TWO_STARTS, tmp_path / "t", "v")
    assert list((tmp_path / "t").iterdir()) == []


def test_not_a_vllm_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "x.log"
    p.write_text("hello\nworld\n")
    rc = main(["import", "vllm-log", str(p), "--traces", str(tmp_path / "t")])
    assert rc == 2 and "no vLLM" in capsys.readouterr().err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


# -- analysis --------------------------------------------------------------------------------------
def test_report_of_two_starts_two_ranks(tmp_path: Path) -> None:
    main(["import", "vllm-log", str(TWO_STARTS), "--traces", str(tmp_path / "t"), "--name", "v"])
    s = summary(load(tmp_path / "t" / "v"))
    s1, s2 = s["engine_starts"]
    assert (s1["version"], s1["requested_mode"], s1["final_mode"]) == (
        "0.30.1", "FULL_AND_PIECEWISE", "PIECEWISE",
    )  # fmt: skip
    assert (s2["version"], s2["final_mode"], s2["downgrades"]) == (
        "0.32.0",
        "FULL_AND_PIECEWISE",
        [],
    )
    (d,) = s1["downgrades"]  # both workers logged it: one downgrade, two ranks
    assert d["backend"] == "TritonMLABackend" and d["spec_decode"] and d["ranks"] == [0, 1]
    assert d["message"] == SPEC_DOWN
    assert [(m["rank"], m["measured_bytes"], m["estimated_bytes"]) for m in s2["memory"]] == [
        (0, gib_bytes("1.02"), gib_bytes("1.12")),
        (1, gib_bytes("1.03"), gib_bytes("1.11")),
    ]
    assert [m["profiling"]["enabled"] for m in s1["memory"]] == [False, False]
    assert s2["memory"][0]["profiling"]["equivalent_without"] == 0.8921
    assert s2["profile"] == {"PIECEWISE": {"graphs": 19, "largest": 128},
                             "FULL": {"graphs": 17, "largest": 128}}  # fmt: skip
    assert s["capture"]["status"] == "captured" and s["capture"]["start"] == 2
    # recorded data holds no machine path: the log as seen from the working directory
    assert s1["provenance"] == f"imported from {portable_path(str(TWO_STARTS.resolve()))}"
    assert not s1["provenance"].split("from ", 1)[1].startswith("/")

    by_kind: dict[str, list[dict]] = {}
    for f in s["findings"]:
        by_kind.setdefault(f["kind"], []).append(f)
    (down,) = by_kind["capture-downgrade"]
    assert down["severity"] == "critical"
    assert (
        "the attention backend TritonMLABackend reports cudagraph support "
        "UNIFORM_SINGLE_TOKEN_DECODE under speculative decoding" in down["title"]
    )
    assert "minimum over all (backend, KV-cache group) pairs" in down["title"]
    assert "whole engine ran PIECEWISE" in down["title"]
    assert SPEC_DOWN in down["evidence"] and "ranks 0-1" in down["evidence"]
    assert "UNIFORM_BATCH" in down["fix"] and "#51171" in down["fix"]
    mem = [f["title"] for f in by_kind["memory"]]
    assert mem == [
        "start 1 (vLLM 0.30.1), PIECEWISE: graph capture memory per rank: rank 0: 0.48 GiB in "
        "9 s; rank 1: 0.47 GiB in 9 s",
        "start 2 (vLLM 0.32.0), FULL_AND_PIECEWISE: graph capture memory per rank: rank 0: "
        "1.02 GiB in 14 s (vLLM estimated 1.12 GiB); rank 1: 1.03 GiB in 14 s (vLLM estimated "
        "1.11 GiB)",
    ]
    text = json.dumps(s["findings"])
    # never a sync/offender verdict from a log, never memory summed over starts or ranks
    for wrong in ("first offender", "metadata builder; then", "3.00 GiB", "2.05 GiB", "0.95 GiB"):
        assert wrong not in text
    assert any("different cudagraph modes" in f["title"] for f in by_kind["capture"])


def _starts(tmp_path: Path, text: str) -> list[EngineStart]:
    run = _import(tmp_path, text)
    return engine_starts(run.events, "x.log")


def test_estimate_far_from_measured(tmp_path: Path) -> None:
    w = "Worker_TP0 pid=1"
    text = "\n".join(
        [
            line(w, "Estimated CUDA graph memory: 118.65 GiB total"),
            line(w, took("2.11")),
            line("Worker_TP1 pid=2", "Estimated CUDA graph memory: 2.20 GiB total"),
            line("Worker_TP1 pid=2", took("2.11")),
        ]
    )
    found = [f for f in engine_log_findings(_starts(tmp_path, text)) if f.severity == "warning"]
    (f,) = found  # rank 1's 2.20 vs 2.11 is close: no warning
    assert "rank 0: vLLM estimated 118.65 GiB" in f.title and "(56.23x)" in f.title
    assert f.data["start"] == 1 and f.data["rank"] == 0


def test_estimate_below_measured_is_far_too(tmp_path: Path) -> None:
    text = (
        line(None, "Estimated CUDA graph memory: 0.40 GiB total") + "\n" + line(None, took("1.00"))
    )
    (f,) = [f for f in engine_log_findings(_starts(tmp_path, text)) if f.severity == "warning"]
    assert "(0.40x)" in f.title


def test_capture_that_stops_is_reported_without_a_verdict(tmp_path: Path) -> None:
    bar = "Capturing CUDA graphs (decode, FULL):  40%|████      | 14/35 [00:00<00:01, 20.0it/s]"
    run = _import(tmp_path, line("Worker_TP0 pid=1", took("0.2")) + "\n" + bar + "\n")
    fs = analyze(run)
    (f,) = [f for f in fs if "stopped" in f.title]
    assert f.severity == "warning" and "14/35" in f.title and "(decode, FULL)" in f.title
    assert not [f for f in fs if f.kind == "sync" or "offender" in f.title]


@pytest.mark.parametrize(
    ("support", "setting", "severity"),
    [("UNIFORM_BATCH", "FULL_AND_PIECEWISE", "info"), ("NEVER", "PIECEWISE", "warning")],
)
def test_downgrade_without_spec_decode(
    tmp_path: Path, support: str, setting: str, severity: str
) -> None:
    msg = (
        f"CUDAGraphMode.FULL is not supported with FlashInferMLABackend backend (support: "
        f"AttentionCGSupport.{support}); setting cudagraph_mode={setting}"
    )
    if setting == "PIECEWISE":
        msg += " because attention is compiled piecewise"
    (st,) = _starts(tmp_path, line("Worker_TP0 pid=1", msg, "WARNING"))
    assert st.final_mode == setting and st.downgrades[0].message == msg  # verbatim, whole
    (f,) = engine_log_findings([st])
    assert f.severity == severity and "FlashInferMLABackend" in f.title and "spec" not in f.title


def test_terminal_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    main(["import", "vllm-log", str(TWO_STARTS), "--traces", str(tmp_path / "t"), "--name", "v"])
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "200")  # each table row on one line
    assert main(["report", "v", "--traces", str(tmp_path / "t")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # the rows layer's server-starts table: start, vLLM, log line, time, spec decode, attention,
    # cudagraph asked -> ran, capture sizes
    assert "1 0.30.1 1 08-28 09:14:02 ngram x3 TRITON_MLA FULL_AND_PIECEWISE -> PIECEWISE" in out
    assert "2 0.32.0 27 09-02 14:03:11 ngram x3 TRITON_MLA FULL_AND_PIECEWISE 19 (1..128)" in out
    assert "TritonMLABackend UNIFORM_SINGLE_TOKEN_DECODE yes FULL_AND_PIECEWISE PIECEWISE" in out
    assert "1 Worker_TP1 481.28 MiB 9 s unknown unknown" in out  # start 1: no estimate logged
    assert "0 Worker_TP0 1.02 GiB 14 s 1.12 GiB 1.10x" in out
    # a log holds no sync records: said as not checked (every view says so), never a count
    assert "syncs in region: not checked" in out and "predicted-ok" not in out
    assert "syncs in region: 0" not in out


def test_html_report_shows_starts_and_memory_per_rank(tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    import html
    import re

    from mlaprof.figures.html_report import render_html

    main(["import", "vllm-log", str(TWO_STARTS), "--traces", str(tmp_path / "t"), "--name", "v"])
    from mlaprof.analysis.run_summary import build_summary

    with load(tmp_path / "t" / "v") as run:
        page = render_html(build_summary(run))
    body = page[page.index('id="front"') : page.index('id="sections"')]
    text = html.unescape(" ".join(re.sub(r"<[^>]+>", " ", body).split()))
    assert "1 0.30.1 1 08-28 09:14:02 ngram x3 TRITON_MLA FULL_AND_PIECEWISE -> PIECEWISE" in text
    assert "TritonMLABackend UNIFORM_SINGLE_TOKEN_DECODE yes FULL_AND_PIECEWISE PIECEWISE" in text
    assert "1 Worker_TP1 481.28 MiB 9 s unknown unknown" in text
    assert "0 Worker_TP0 1.02 GiB 14 s 1.12 GiB 1.10x" in text
    # where the starts' and their memory's numbers come from, said with the table
    assert re.search(r"19 \(1\.\.128\) imported from \S*tp2_two_starts\.log server starts 1", text)


def test_ranks_without_a_capture_line_are_named(tmp_path: Path) -> None:
    eng = line(
        "EngineCore_DP0 pid=1",
        "Initializing a V1 LLM engine (v0.32.0) with config: model='m', tensor_parallel_size=4, "
        "pipeline_parallel_size=1, data_parallel_size=1",
    )
    text = "\n".join(
        [eng, line("Worker_TP0 pid=2", took("0.50")), line("Worker_TP1 pid=3", took("0.51"))]
    )
    (f,) = [f for f in engine_log_findings(_starts(tmp_path, text)) if f.kind == "memory"]
    assert "only 2 of the engine's 4 worker ranks logged one" in f.evidence
    est = line("Worker_TP2 pid=4", "Estimated CUDA graph memory: 0.52 GiB total")
    (tmp_path / "2").mkdir()
    (f,) = [f for f in engine_log_findings(_starts(tmp_path / "2", text + "\n" + est))
            if f.kind == "memory"]  # fmt: skip
    assert "no 'Graph capturing finished' line from rank 2" in f.evidence


def test_starts_in_different_modes_compare_memory_per_rank(tmp_path: Path) -> None:
    main(["import", "vllm-log", str(TWO_STARTS), "--traces", str(tmp_path / "t"), "--name", "v"])
    (f,) = [
        f for f in analyze(load(tmp_path / "t" / "v")) if "different cudagraph modes" in f.title
    ]
    assert "start 1 PIECEWISE, start 2 FULL_AND_PIECEWISE" in f.title
    assert (
        "capture memory from start 1 to start 2: rank 0 0.48 GiB -> 1.02 GiB, "
        "rank 1 0.47 GiB -> 1.03 GiB" in f.evidence
    )


def test_older_log_forms(tmp_path: Path) -> None:
    """vLLM 0.9/0.10 layouts: unprefixed API server, EngineCore_0, VllmWorker rank=N / TPN
    workers with their tqdm bars prefixed, JSON compilation configs, the one-bar capture."""
    run = _import(tmp_path, (DATA / "legacy_prefixes_tp2.log").read_bytes().decode())
    assert run.ranks == [0, 1]
    s1, s2 = engine_starts(run.events, "legacy.log")
    assert (s1.version, s1.requested_mode, s1.final_mode) == (
        "0.9.2",
        "PIECEWISE",
        "PIECEWISE",
    )
    assert s1.speculative is None and sorted(s1.capture_sizes) == [1, 2, 4, *range(8, 65, 8)]
    assert s1.graphs == [
        GraphCaptureLine(rank=0, phase="all shapes", mode=None, done=11, total=11, line=10)
    ]
    assert [(m.rank, m.process, m.measured_bytes) for m in s1.memory] == [
        (0, "VllmWorker rank=0", gib_bytes("0.32")),
        (1, "VllmWorker rank=1", gib_bytes("0.31")),
    ]
    assert (s2.version, s2.requested_mode, s2.final_mode) == (
        "0.10.2", "FULL", "FULL_AND_PIECEWISE",
    )  # fmt: skip
    assert s2.speculative == StartSpeculative("mtp", 1)
    assert [m.process for m in s2.memory] == ["VllmWorker TP0", "VllmWorker TP1"]
    (d,) = s2.downgrades
    assert (d.backend, d.support, d.spec_decode, d.ranks) == (
        "AiterMLABackend", "UNIFORM_BATCH", False, [0, 1],
    )  # fmt: skip
    assert [(g.phase, g.mode, g.done) for g in s2.graphs] == [
        ("mixed prefill-decode", "PIECEWISE", 11), ("decode", "FULL", 7),
    ]  # fmt: skip
    (f,) = [f for f in engine_log_findings([s1, s2]) if f.kind == "capture-downgrade"]
    assert f.severity == "info" and "decode batches still run FULL graphs" in f.fix


def test_gzipped_log(tmp_path: Path) -> None:
    import gzip

    p = tmp_path / "server.log.gz"
    p.write_bytes(gzip.compress(TWO_STARTS.read_bytes()))
    run, _ = import_vllm_log(p, tmp_path / "t")
    assert run.name == "vllm-server" and load(run).meta["starts"] == 2


def test_a_second_bar_of_the_same_kind_is_its_own_record() -> None:
    d = "Capturing CUDA graphs (decode, FULL)"
    text = f"{d}:   0%| | 0/7 [00:00<?, ?it/s]\r{d}: 100%|#| 7/7 [00:02<00:00, 3.1it/s]\n" * 2
    text += f"{d}:  50%|#| 2/4 [00:01<00:01, 2.0it/s]\n"
    f = parse_log(text)
    assert [(r["done"], r["total"], r["line"]) for r in f.records] == [
        (7, 7, 1),
        (7, 7, 2),
        (2, 4, 3),
    ]


def test_a_vllm_034_log_with_the_drafters_own_graphs(tmp_path: Path) -> None:
    """vLLM 0.34's lines as its source writes them: the engine line (``v1/engine/core.py`` L154),
    the model runner V2's bars ``f"{progress_bar_desc} ({mode.name})"``
    (``v1/worker/gpu/cudagraph_utils.py`` L482) for the target ("Capturing CUDA graphs") and the
    speculator ("Capturing prefill/decode CUDA graphs", ``spec_decode/autoregressive/
    speculator.py`` L139, L161), and the capture total (``v1/worker/gpu/model_runner.py``
    L1217). The drafter's bars are their own records, apart from the target's."""
    eng = "EngineCore_DP0 pid=2388"
    w = "Worker_TP0 pid=2452"
    bar = "{}: 100%|##########| {n}/{n} [00:02<00:00, 20.1it/s]"
    text = "\n".join([
        line(eng, "Initializing a V1 LLM engine (v0.34.0) with config: model='deepseek-ai/"
             "DeepSeek-V3', speculative_config=SpeculativeConfig(method='mtp', model='m', "
             "num_spec_tokens=3), tensor_parallel_size=1"),
        "(Worker_TP0 pid=2452) " + bar.format("Capturing CUDA graphs (PIECEWISE)", n=51),
        "(Worker_TP0 pid=2452) " + bar.format("Capturing CUDA graphs (FULL)", n=49),
        line(w, "Capturing autoregressive speculator..."),
        "(Worker_TP0 pid=2452) " + bar.format("Capturing prefill CUDA graphs (FULL)", n=49),
        "(Worker_TP0 pid=2452) " + bar.format("Capturing decode CUDA graphs (FULL)", n=37),
        line(w, took("2.10", 14)),
    ]) + "\n"  # fmt: skip
    f = parse_log(text)
    assert f.starts[0].version == "0.34.0"
    bars = [(r["phase"], r["mode"], r["done"], r["total"])
            for r in f.records if r["kind"] == "capture-progress"]  # fmt: skip
    assert bars == [
        ("model runner V2", "PIECEWISE", 51, 51),
        ("model runner V2", "FULL", 49, 49),
        ("drafter prefill", "FULL", 49, 49),
        ("drafter decode", "FULL", 37, 37),
    ]
    done = [r for r in f.records if r["kind"] == "capture-finished"]
    assert len(done) == 1 and done[0]["rank"] == 0
    run = _import(tmp_path, text)
    assert run.meta["starts"] == 1


def test_terminal_counts_every_start_past_the_table_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log with more starts than a table shows: the capture line counts them all (the starts'
    table cuts at its row limit; "start 14 of 12" was printed)."""
    from mlaprof.reporters.rows import TABLE_ROWS

    eng = "Initializing a V1 LLM engine (v0.32.0) with config: model='m', speculative_config=None"
    n = TABLE_ROWS + 2
    text = "\n".join(
        x
        for _ in range(n)
        for x in (line("EngineCore_DP0 pid=3", eng), line("Worker_TP0 pid=4", took("0.20")))
    )
    (tmp_path / "s.log").write_text(text)
    main(
        [
            "import",
            "vllm-log",
            str(tmp_path / "s.log"),
            "--traces",
            str(tmp_path / "t"),
            "--name",
            "v",
        ]
    )
    capsys.readouterr()
    assert main(["report", "v", "--traces", str(tmp_path / "t")]) == 0
    assert f"at start {n} of {n}, as the log says" in capsys.readouterr().out
