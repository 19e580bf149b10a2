"""The CLI end to end: run, report (--json), runs, and bad input (one line, exit 2)."""

import json
import sqlite3

import pytest

from mlaprof.analysis.timing import CPU_SPREAD
from mlaprof.cli import main
from tests import shipped_demo
from tests.conftest import child_env, mlaprof_cli

SMALL = ["--kv-lens", "70,130,200", "--steps", "2", "-q"]


def run_json(capsys, traces, *args):
    code = main(["run", "--traces", str(traces), *SMALL, "--json", *args])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_legacy_flat_reports_12_syncs_with_ops_and_lines(capsys, traces):
    doc = run_json(capsys, traces, "--backend", "legacy-flat", "--layers", "3")
    assert len(doc["syncs"]) == 12
    assert {s["layer"] for s in doc["syncs"]} == {0, 1, 2}
    assert {s["op"] for s in doc["syncs"]} == {
        "aten._local_scalar_dense",
        "aten.repeat_interleave.Tensor",
    }
    assert all(s["location"].startswith("mlaprof/backends/legacy_flat.py:") for s in doc["syncs"])
    assert doc["capture"]["status"] == "predicted-fail" and doc["capture"]["memory_bytes"] is None
    kinds = {f["kind"] for f in doc["findings"]}
    assert "capture" in kinds and "sync" in kinds


def test_native_reports_no_syncs(capsys, traces):
    doc = run_json(capsys, traces, "--backend", "torch", "--layers", "3")
    assert doc["syncs"] == []
    assert doc["capture"] == {
        "mode": "FULL",
        "status": "predicted-ok",
        # what ran: eager steps in the FULL shape (the timing's rule); a GPU's FULL, predicted
        "effective_mode": "FULL shape on cpu",
        "predicted_mode": "FULL",
        "memory_bytes": None,  # a CPU run measures no capture memory: unknown, never 0
        "memory_measure": "driver free-memory delta",
        # the capture size the padding section says, and that nothing was captured: no count
        # (a "sizes": 0 beside the padding's "capture size 16" read as a measured result)
        "sizes_text": "steps padded to capture size 16 (of the scenario's vLLM 0.34.0 capture "
        "sizes); captured: none (CPU engine: graph capture needs a GPU, not attempted)",
        "label": "no sync seen (predicted)",
        "provenance": "predicted from syncs",
        "text": "FULL -> predicted-ok (would run FULL on a GPU: predicted from syncs; ran FULL "
        "shape on cpu)",
    }


def test_report_json_shows_the_collapse_and_the_fix(capsys, traces):
    main(
        [
            "run",
            "--traces",
            str(traces),
            "--name",
            "bug",
            "--kv-lens",
            "1040,2600,6000",
            "--steps",
            "1",
            "--layers",
            "1",
            "-q",
        ]
    )
    main(
        [
            "run",
            "--traces",
            str(traces),
            "--name",
            "fix",
            "--kv-lens",
            "1040,2600,6000",
            "--steps",
            "1",
            "--layers",
            "1",
            "-q",
            "--min-kv-mode",
            "active-rows",
        ]
    )
    capsys.readouterr()
    assert main(["report", str(traces / "bug"), "--json"]) == 0
    bug = {s["policy"]: s for s in json.loads(capsys.readouterr().out)["splits"]}
    g = bug["aiter-gluon-v0.1.19"]
    assert (g["used"], g["all_rows"], g["active_rows"], g["deserved"]) == (1, 1, 16, 17)
    assert g["occupancy"] < g["occupancy_deserved"]
    assert main(["report", "fix", "--traces", str(traces), "--json"]) == 0
    fix = {s["policy"]: s for s in json.loads(capsys.readouterr().out)["splits"]}
    assert fix["aiter-gluon-v0.1.19"]["used"] == 16
    assert main(["report", "bug", "--traces", str(traces), "--compare", "fix", "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)["compare"]
    # each side's route names its vLLM version, and where it comes from: modelled for the
    # target, the CPU ran none of it (the route's own provenance)
    want = cmp["route"]["before"]
    assert cmp["route"] == {"before": want, "after": want}
    assert want.startswith("gluon-verify (vLLM 0.34.0; modelled for the mi355x target; "), want
    assert "on the CPU, not this route)" in want, want
    rows = {r["metric"]: r for r in cmp["table"]}
    s_used = rows["KV splits S used (run's policy, worst step)"]
    assert (s_used["a"], s_used["b"], s_used["verdict"]) == (1, 16, "better")
    # CPU reference timings: differences inside the run-to-run spread are not called a result
    step = rows["median step time"]
    assert step["provenance"] == "CPU time of the stepping thread, 1 thread"
    assert cmp["cpu_spread"] == CPU_SPREAD


def test_padding_counts(capsys, traces):
    doc = run_json(capsys, traces, "--layers", "1")
    pad = doc["padding"]  # the run's totals with the per-step range beside them
    steps = 2  # SMALL's --steps
    assert pad["steps"] == steps and pad["padding_rows_per_step"] == [1, 1]
    assert pad["real_rows"] == 3 * steps and pad["padding_rows"] == steps
    assert pad["capture_size"] == 16
    # the capture section says the same size, and that the CPU engine captured none
    assert "steps padded to capture size 16 " in doc["capture"]["sizes_text"]
    assert "sizes" not in doc["capture"]


def test_runs_tell_a_bug_run_from_a_fix_run(capsys, traces, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the table
    main(["run", "--traces", str(traces), *SMALL, "--layers", "1", "--name", "bug"])
    fix = ["--min-kv-mode", "active-rows", "--backend", "legacy-flat", "--name", "fix"]
    main(["run", "--traces", str(traces), *SMALL, "--layers", "1", *fix])
    capsys.readouterr()
    assert main(["runs", str(traces)]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if "min_kv_mode" in line)
    names = [c.strip() for c in head.strip().strip("┃").split("┃")]
    body = [line.strip().strip("│").split("│") for line in out.splitlines() if "│" in line]
    cells = {r[0].strip(): dict(zip(names, (c.strip() for c in r), strict=True)) for r in body}
    rows = cells
    assert list(rows) == ["fix", "bug"]  # newest first
    assert (
        cells["bug"]["min_kv_mode"] == "all-rows" and cells["fix"]["min_kv_mode"] == "active-rows"
    )
    assert cells["bug"]["backend"] == "torch" and cells["fix"]["backend"] == "legacy-flat"
    assert cells["bug"]["device"] == "cpu" and cells["bug"]["status"] == "finished"
    assert cells["bug"]["policy"] == cells["fix"]["policy"] != "-"


def test_findings_table_on_terminal(capsys, traces):
    assert (
        main(
            [
                "run",
                "--traces",
                str(traces),
                "--kv-lens",
                "70,130,200",
                "--steps",
                "1",
                "--layers",
                "2",
                "--backend",
                "legacy-flat",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "CRITICAL" in out and "legacy_flat.py" in out and "fix:" in out


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--scenario", "nope"], "unknown scenario"),
        (["run", "--layers", "0"], "layers must be"),
        (["run", "--layers", "three"], "invalid int value"),
        (["run", "--kv-lens", "1,x"], "--kv-lens"),
        (["run", "--backend", "fast"], "unknown backend"),
        (["run", "--spec-tokens", "9"], "0..7"),
        (["run", "--threads", "0"], "--threads must be >= 1"),
        (["report", "/no/such/run"], "not found"),
        (["runs", "/no/such/folder"], "does not exist"),
    ],
)
def test_bad_input_one_line_exit_2(argv, words, capsys, traces):
    code = main([*argv, *(["--traces", str(traces)] if argv[0] != "runs" else [])])
    err = capsys.readouterr().err
    assert code == 2
    assert words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_real_entry_point_bad_inputs_and_nothing_damaged(traces):
    ok = mlaprof_cli("run", "--traces", str(traces), "--name", "keep", *SMALL, "--layers", "1")
    assert ok.returncode == 0, ok.stderr
    db = traces / "keep" / "rank0.db"
    before = db.read_bytes()
    # wrong schema version in a copy of the run
    bad = traces / "bad"
    bad.mkdir()
    meta = json.loads((traces / "keep" / "run.json").read_text())
    meta["schema_version"] = 999
    (bad / "run.json").write_text(json.dumps(meta))
    (bad / "rank0.db").write_bytes(before)
    res = mlaprof_cli("report", str(bad))
    assert res.returncode == 2 and "schema version" in res.stderr and "Traceback" not in res.stderr
    # corrupt database
    corrupt = traces / "corrupt"
    corrupt.mkdir()
    (corrupt / "run.json").write_text((traces / "keep" / "run.json").read_text())
    (corrupt / "rank0.db").write_bytes(b"\0garbage" * 64)
    res = mlaprof_cli("report", str(corrupt))
    assert res.returncode == 2 and "rank0.db" in res.stderr and "Traceback" not in res.stderr
    # a name that already exists is refused without touching the recorded run
    res = mlaprof_cli("run", "--traces", str(traces), "--name", "keep", *SMALL, "--layers", "1")
    assert res.returncode == 2 and "already exists" in res.stderr
    assert db.read_bytes() == before
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 2


def test_every_run_shows_both_verify_paths(capsys, traces):
    doc = run_json(capsys, traces, "--layers", "1")
    paths = {p["backend"]: p for p in doc["paths"]}
    assert paths["torch"]["syncs_per_layer"] == 0
    assert paths["legacy-flat"]["syncs_per_layer"] == 4
    assert any("flattened legacy" in f["title"] for f in doc["findings"])


def test_triton_on_cpu_without_interpreter_is_refused_before_recording(capsys, traces, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    code = main(["run", "--traces", str(traces), "--backend", "triton", *SMALL])
    assert code == 2 and "TRITON_INTERPRET=1" in capsys.readouterr().err
    assert list(traces.iterdir()) == []  # no half-made run folder


def test_runs_at_80_columns_keep_every_field(capsys, monkeypatch) -> None:
    """A narrow terminal gets one block per run: no line past 80 columns, no field cut."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", str(shipped_demo.traces())]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    flat = " ".join(out.split())
    run = shipped_demo.run("fix-splits-decided-on-device-c1-long")
    created = json.loads((run / "run.json").read_text())["created"][:16].replace("T", " ")
    for field in ("demo/fix-splits-decided-on-device-c1-long", "finished", "triton on cuda",
                  "mlaprof-triton", "active-rows", "c1-long", "32 steps", created):  # fmt: skip
        assert field in flat, field


def test_runs_before_any_run_is_friendly(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLAPROF_TRACES", raising=False)
    assert main(["runs"]) == 0
    assert "no runs yet" in capsys.readouterr().out


def test_default_run_takes_a_path_vllm_runs_and_states_three_numbers(capsys, traces):
    """The default: 8 heads (Kimi-K2 at TP8) on mla_gluon v0.1.19, as vLLM routes it."""
    code = main(["run", "--traces", str(traces), "--steps", "1", "--layers", "1", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scenario"]["model"] == "kimi-k2-tp8" and doc["route"]["path"] == "gluon-verify"
    assert doc["route"]["version"] == "0.34.0" and doc["route"]["verified"]  # the newest release
    (collapse,) = [f for f in doc["findings"] if f["kind"] == "split-collapse"
                   and f["data"]["policy"] == "aiter-gluon-v0.1.19"]  # fmt: skip
    assert collapse["severity"] == "critical"
    assert "S = 1 used, the fix gives 16 (padding rows still count in B), 17 without padding " \
        "rows" in collapse["title"]  # fmt: skip
    assert "route" not in {f["kind"] for f in doc["findings"]}
    res = {(r["path"], r["sized_by"]): r["bytes"] for r in doc["reservation"]}
    assert res[("4-D", "max_model_len")] == 256 * 131072 * 4 + 2 * 257 * 4
    assert res[("legacy-flat", "kv-cache")] is None
    splits = {s["policy"]: s for s in doc["splits"]}
    # every constant of AITER's get_meta_param is read: verified, with the releases named
    assert (
        splits["aiter-asm"]["verified"] is True
        and "UNVERIFIED" not in splits["aiter-asm"]["source"]
    )
    assert "v0.1.19 (3135022)..v0.1.20.post1" in splits["aiter-asm"]["source"]


def test_deepseek_tp8_preset_takes_the_persistent_asm_path(capsys, traces):
    doc = run_json(capsys, traces, "--scenario", "deepseek-v3-tp8", "--layers", "1")
    assert doc["route"]["path"] == "asm-persistent" and doc["route"]["splits_on_device"]
    kinds = {f["kind"]: f for f in doc["findings"]}
    assert "decided on the device" in kinds["split-device"]["title"]
    assert "route" not in kinds


def test_a_policy_vllm_does_not_run_is_flagged(capsys, traces):
    doc = run_json(capsys, traces, "--model", "deepseek-v3-tp8", "--layers", "1")
    (f,) = [f for f in doc["findings"] if f["kind"] == "route"]
    assert "aiter-gluon-v0.1.19 models a kernel vLLM does not run" in f["title"]
    assert "16 heads >= 16" in f["evidence"]


def test_terminal_report_shows_route_and_reservation(capsys, traces):
    assert main(["run", "--traces", str(traces), *SMALL[:-1], "--name", "r"]) == 0
    out = capsys.readouterr().out
    assert "vLLM route: gluon-verify" in out and "verify buffers (modelled)" in out
    assert main(["run", "--traces", str(traces), *SMALL, "--name", "n", "--target", "h200"]) == 0
    capsys.readouterr()
    assert main(["report", "n", "--traces", str(traces), "--json"]) == 0
    # vLLM on sm90 with bf16 KV tries FLASH_ATTN_MLA first (0.32 platforms/cuda.py L146-151)
    assert json.loads(capsys.readouterr().out)["route"]["path"] == "flash-attn-mla"


def test_commands_that_run_no_backend_never_import_torch(tmp_path) -> None:
    """Reading, importing, exporting and planning never pay torch's import (most of a
    second and hundreds of MiB): only `run`, `check` and an engine's shadow model load it."""

    from tests.conftest import ROOT

    demo = shipped_demo.run("bug-padding-collapses-splits-c16")
    bug = ROOT / "tests" / "data" / "aiter" / "gluon_v0119_bug"
    t = tmp_path / "t"
    commands = [
        ["import", "rocprof", str(bug), "--traces", str(t), "--name", "bug"],
        ["runs", str(t)],
        ["report", str(t / "bug")],
        ["report", str(demo), "--json"],
        ["report", str(demo), "--html", str(tmp_path / "r.html")],
        ["tui", str(demo), "--once"],
        ["export", str(demo), "--format", "csv", "-o", str(tmp_path / "csv")],
        ["whatif", "--batch", "1-4", "--context", "1024"],
        ["plan-capture", "--counts", str(ROOT / "examples" / "batches.txt"), "--spec", "3"],
    ]
    code = (
        "import sys, contextlib, io\nfrom mlaprof.cli import main\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        rc = main(argv)\n"
        "    print(argv[0], rc, 'torch' in sys.modules)\n"
    )
    out = _python_prints(code, tmp_path, timeout=600)
    lines = [ln.split() for ln in out.splitlines()]
    assert [(c, rc) for c, rc, _ in lines] == [(a[0], "0") for a in commands], out
    assert all(torch == "False" for _, _, torch in lines), out


def _python_prints(code: str, cwd, timeout: int) -> str:
    """What ``python -c code`` prints in a child process (mlaprof's environment), which must
    exit 0: a clean interpreter, so ``sys.modules`` holds only what the code loaded."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, cwd=cwd, env=child_env())  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_a_trace_import_loads_neither_torch_nor_pandas(tmp_path) -> None:
    """The import path is parse, annotate and store: pandas (a quarter of a second, more than
    parsing a million dispatches) and torch are loaded only by what reads or runs."""

    from tests.conftest import ROOT

    runs = []
    for i, src in enumerate(("tests/data/aiter/gluon_v0119_bug", "tests/data/aiter/fleet_dp2_tp4")):
        runs.append(["import", "rocprof", str(ROOT / src), "--traces", str(tmp_path), "--name", f"r{i}"])  # fmt: skip
    code = (
        "import sys, contextlib, io\nfrom mlaprof.cli import main\n"
        f"for argv in {runs!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main(argv) == 0\n"
        "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))\n"
    )
    assert _python_prints(code, tmp_path, timeout=300).strip().splitlines()[-1] == "[]"


def test_a_report_loads_no_vllm_plugin_module(tmp_path) -> None:
    """The engine analysis reads the plugin's names (``integrations.vllm_names``), not the plugin,
    its recorder or its patch table: they are vLLM's side, and every first report would load
    them."""

    code = (
        "import sys\nimport mlaprof.analysis.run_summary\n"
        "print(sorted(m for m in ('mlaprof.integrations.vllm_plugin',"
        " 'mlaprof.integrations.vllm_patches', 'mlaprof.integrations.vllm_recorder')"
        " if m in sys.modules))\n"
    )
    assert _python_prints(code, tmp_path, timeout=120).strip() == "[]"


def test_cuda_without_a_gpu_is_refused_at_once_and_records_nothing(traces) -> None:
    """No GPU device node: one line, exit 2, no run folder, and torch never loaded."""
    import subprocess
    import sys

    from mlaprof.gpu.visible import no_gpu_reason

    if no_gpu_reason() is None:
        pytest.skip("this machine has a GPU device node")
    code = (
        "import sys, time\nfrom mlaprof.cli import main\nt = time.perf_counter()\n"
        f"rc = main(['run', '--device', 'cuda', '--traces', {str(traces)!r}])\n"
        "print(rc, 'torch' in sys.modules, time.perf_counter() - t)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=traces.parent, env=child_env())  # fmt: skip
    rc, torch_loaded, _seconds = res.stdout.split()
    # torch not loaded is what keeps it under a second; the wall time itself is not asserted
    # here (a loaded machine stretches it)
    assert (rc, torch_loaded) == ("2", "False"), res.stdout
    assert res.stderr.count("\n") == 1 and "none is visible" in res.stderr, res.stderr
    assert list(traces.iterdir()) == []


def _failed_start(traces, name: str) -> None:
    """A run that failed before its first step, as `run` records one (writer.finish)."""
    from mlaprof.cpu_runner import start_run
    from mlaprof.scenario import load_scenario

    w = start_run(load_scenario("default"), "torch", "cuda", traces, name)
    w.finish("failed", "the CUDA runner is not available")


def test_a_failed_start_is_never_latest_and_exports_nothing(capsys, traces) -> None:
    from mlaprof.store import runmeta

    assert main(["run", "--traces", str(traces), "--name", "good", *SMALL, "--layers", "1"]) == 0
    runmeta.update(traces / "good", created="2026-01-01T00:00:00")  # older than the failed one
    _failed_start(traces, "dead")
    capsys.readouterr()
    assert main(["report", "latest", "--traces", str(traces), "--json"]) == 0
    io = capsys.readouterr()
    assert json.loads(io.out)["run"] == "good"
    assert "latest is good; newer dead ended before recording a step" in io.err
    out = traces.parent / "dead.json"
    code = main(["export", "dead", "--format", "perfetto", "-o", str(out), "--traces", str(traces)])
    err = capsys.readouterr().err
    assert code == 2 and "dead failed before recording a step: the CUDA runner" in err
    assert not out.exists()


def test_latest_with_only_failed_starts_says_so(capsys, traces) -> None:
    _failed_start(traces, "dead")
    assert main(["report", "latest", "--traces", str(traces)]) == 2
    assert "1 ended before recording a step" in capsys.readouterr().err


def test_runs_takes_traces_like_every_command(capsys, traces) -> None:
    _failed_start(traces, "dead")
    assert main(["runs", "--traces", str(traces)]) == 0
    assert "dead" in capsys.readouterr().out
    assert main(["runs", str(traces), "--traces", str(traces / "x")]) == 2
    assert "two traces folders" in capsys.readouterr().err


def test_a_mistyped_run_name_gets_a_suggestion(capsys, traces) -> None:
    _failed_start(traces, "bug-padding-c16")
    assert main(["report", "bug-paddng-c16", "--traces", str(traces)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'bug-padding-c16'?" in err
    assert main(["report", "zzz", "--traces", str(traces)]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_a_cpu_run_sets_and_records_its_thread_count(capsys, traces) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        doc = run_json(capsys, traces, "--layers", "1", "--threads", "2", "--name", "two")
        assert torch.get_num_threads() == 2
        assert doc["timing"]["threads"] == 2
        assert json.loads((traces / "two" / "run.json").read_text())["threads"] == 2
        doc = run_json(capsys, traces, "--layers", "1", "--name", "one")  # the default
        assert torch.get_num_threads() == 1 and doc["timing"]["threads"] == 1
    finally:
        torch.set_num_threads(before)
