"""vLLM log import: capture time/memory, estimated graph memory, cudagraph-mode downgrades (and the
backend named in them), capture progress bars, from lines made with vLLM's format strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.store import load
from mlaprof.trace_io.vllm_log import GIB, import_vllm_log, parse_log
from tests.trace_io_helpers import db_rows

PFX = "(EngineCore_DP0 pid=4242) INFO 08-30 12:34:{:02d} [gpu_model_runner.py:4321] "


def _log() -> str:
    lines = [
        PFX.format(1) + "Starting to load model deepseek-ai/DeepSeek-V3...",
        "WARNING 08-30 12:34:02 [compilation.py:77] "
        + "CUDAGraphMode.{} is not supported with {} backend (support: {}); setting "
        "cudagraph_mode={}".format(
            "FULL_AND_PIECEWISE", "AiterMLABackend", "AttentionCGSupport.UNIFORM_BATCH",
            "FULL_DECODE_ONLY",
        ),  # fmt: skip
        "WARNING 08-30 12:34:03 [gpu_model_runner.py:99] "
        + "CUDAGraphMode.{} is not supported with spec-decode for attention backend {} "
        "(support: {}); setting cudagraph_mode={}".format(
            "FULL_DECODE_ONLY", "TritonMLABackend", "AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE",
            "PIECEWISE",
        ),  # fmt: skip
        PFX.format(4) + "Estimated CUDA graph memory: %.2f GiB total" % 2.11,  # noqa: UP031 (vLLM format)
        # a tqdm bar rewriting itself with carriage returns, then a second phase that stops early
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]"
        "\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  50%|█████     | 34/67 [00:01<00:01, 30.1it/s]"
        "\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:02<00:00, 31.0it/s]",
        "Capturing CUDA graphs (decode, FULL):  40%|████      | 14/35 [00:00<00:01, 20.0it/s]",
        PFX.format(9) + "Graph capturing finished in %.0f secs, took %.2f GiB" % (12.4, 0.51),  # noqa: UP031
        PFX.format(10) + "unrelated line",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_parse_log() -> None:
    f = parse_log(_log())
    assert f.backend == "TritonMLABackend" and f.graph_mode == "PIECEWISE"
    kinds = [e["kind"] for e in f.events]
    assert kinds.count("cudagraph-downgrade") == 2
    down = [json.loads(e["data"]) for e in f.events if e["kind"] == "cudagraph-downgrade"]
    assert down[0]["backend"] == "AiterMLABackend" and down[0]["setting"] == "FULL_DECODE_ONLY"
    assert down[1]["spec_decode"] is True and down[1]["requested"] == "FULL_DECODE_ONLY"
    assert f.memory == [{"graph_mode": "FULL", "driver_bytes": 51 * GIB // 100,
                         "capture_ns": 12_000_000_000}]  # fmt: skip
    est = [c for c in f.counters if c["name"] == "estimated_graph_memory_bytes"]
    assert est[0]["value"] == float(211 * GIB // 100)
    prog = {c["key"]: c["value"] for c in f.counters if c["name"] == "graphs_captured"}
    assert prog == {"mixed prefill-decode, PIECEWISE": 67.0, "decode, FULL": 14.0}
    status = {(c["graph_mode"], c["status"]) for c in f.captures}
    assert ("PIECEWISE", "captured") in status and ("FULL", "failed") in status
    assert ("FULL_AND_PIECEWISE", "not-attempted") in status


def test_import_vllm_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "server.log"
    p.write_text(_log())
    rc = main(["import", "vllm-log", str(p), "--traces", str(tmp_path / "t"), "--name", "v"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "events" in out and "memory" in out
    run = load(tmp_path / "t" / "v")
    assert run.meta["backend"] == "TritonMLABackend"
    assert run.count("memory") == 1 and run.count("captures") == 4
    mem = db_rows(tmp_path / "t" / "v", "memory")
    assert mem[0][4] == 51 * GIB // 100  # driver_bytes, exact from "0.51"


def test_not_a_vllm_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "x.log"
    p.write_text("hello\nworld\n")
    rc = main(["import", "vllm-log", str(p), "--traces", str(tmp_path / "t")])
    assert rc == 2 and "no vLLM" in capsys.readouterr().err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_direct_api(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_text(_log())
    run, s = import_vllm_log(p, tmp_path, None)
    assert run.name == "vllm-a" and s.rows["events"] == len(parse_log(_log()).events)
