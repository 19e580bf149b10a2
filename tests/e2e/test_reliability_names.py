"""Reliability, round two: names reserved atomically and confined, staging of a killed import
cleaned on the next start and never listed, parsers and renderers linear in long strings."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys

import pytest

from mlaprof.cli import main
from mlaprof.store import list_runs, list_runs_nested
from mlaprof.store.staging import STAGING_PREFIX, clean_dead_stages
from tests.conftest import ROOT

BUG = ROOT / "tests" / "data" / "aiter" / "gluon_v0119_bug"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_parallel_imports_with_default_names_all_succeed(tmp_path) -> None:
    """Default names are reserved (an exclusive mkdir), not checked: 4 imports started at once
    all land, under 4 names."""
    traces = tmp_path / "t"
    cmd = [sys.executable, "-m", "mlaprof", "import", "rocprof", str(BUG), "--traces", str(traces)]
    procs = [subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]  # fmt: skip
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [r[1] for r in results]
    names = sorted(r.name for r in list_runs(traces))
    stem = "rocprof-gluon_v0119_bug"
    assert names == sorted([stem, f"{stem}-2", f"{stem}-3", f"{stem}-4"])
    assert not [p for p in traces.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_a_name_that_is_a_symlink_is_refused_and_nothing_is_written_through_it(
    tmp_path, capsys
) -> None:
    traces, outside = tmp_path / "t", tmp_path / "outside"
    traces.mkdir()
    outside.mkdir()
    (traces / "x").symlink_to(outside, target_is_directory=True)
    rc = main(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", "x"])
    err = capsys.readouterr().err
    assert rc == 2 and "is a symlink" in err and "Traceback" not in err
    assert list(outside.iterdir()) == []  # nothing written outside the traces folder
    assert (traces / "x").is_symlink()  # the user's link left as it was


def test_a_killed_imports_staging_is_removed_on_the_next_start_and_never_listed(
    tmp_path,
) -> None:
    """SIGKILL an import while it holds its staging folder: the next import removes the dead
    stage (its lock is free) and its reserved empty folder; no listing ever shows either."""
    traces = tmp_path / "t"
    code = (
        "import os, sys, time\n"
        "from mlaprof.store.staging import staged_run\n"
        f"with staged_run({str(traces)!r}, 'slow', {{'source': 'rocprof', 'kind': 'trace'}}):\n"
        "    print('staged', flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env(), stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "staged"
    stages = [p for p in traces.iterdir() if p.name.startswith(STAGING_PREFIX)]
    assert len(stages) == 1 and (traces / "slow").is_dir()
    assert clean_dead_stages(traces) == []  # alive: left alone
    assert [r.name for r in list_runs_nested(traces)] == []  # neither stage nor reservation
    proc.send_signal(signal.SIGKILL)
    proc.wait()  # a SIGKILLed process's exit: an event, no clock
    assert stages[0].exists()  # a SIGKILL runs no cleanup
    assert [r.name for r in list_runs_nested(traces)] == []
    assert main(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", "next"]) == 0
    assert not stages[0].exists() and not (traces / "slow").exists()
    assert [r.name for r in list_runs_nested(traces)] == ["next"]


def _alarm(seconds: int):
    """A hang guard (not a timing): the test fails instead of running for hours."""

    def boom(*_):
        raise TimeoutError(f"took more than {seconds} s: not linear in its input")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    return old


@pytest.mark.parametrize(
    "body",
    [
        "Profiling CUDA graph memory: " + "x" * 1_000_000,
        "CUDA graph memory profiling is enabled " * 25_000,
        "Profiling CUDA graph memory: " + "a=1 " * 250_000,
    ],  # fmt: skip
    ids=["long-word", "repeated-phrase", "many-groups"],
)
def test_a_megabyte_log_line_imports_without_hanging(tmp_path, body) -> None:
    log = tmp_path / "v.log"
    log.write_text(
        "(APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.32.0\n"
        "(Worker_TP0 pid=2) INFO 01-01 00:00:01 [gpu_model_runner.py:1] Graph capturing "
        "finished in 9 secs, took 0.48 GiB\n"
        f"(Worker_TP0 pid=2) INFO 01-01 00:00:02 [x.py:1] {body}\n"
    )
    old = _alarm(60)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["import", "vllm-log", str(log), "--traces", str(tmp_path / "t")]) == 0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_long_trace_strings_are_shown_shortened_with_their_length(tmp_path, capsys) -> None:
    log = tmp_path / "v.log"
    version = "0.32." + "9" * 50_000
    log.write_text(
        f"(APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version "
        f"{version}\n(Worker_TP0 pid=2) INFO 01-01 00:00:01 [gpu_model_runner.py:1] Graph "
        "capturing finished in 9 secs, took 0.48 GiB\n"
    )
    traces = tmp_path / "t"
    assert main(["import", "vllm-log", str(log), "--traces", str(traces), "--name", "v"]) == 0
    for args in (["report", str(traces / "v")], ["tui", str(traces / "v"), "--once"]):
        capsys.readouterr()
        assert main(args) == 0
        out = capsys.readouterr().out
        assert version not in out
        assert max(len(line) for line in out.splitlines()) < 3000
    assert "chars)" in out


def test_report_html_refuses_to_overwrite_without_force(tmp_path, capsys) -> None:
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", "bug"]) == 0
    page = tmp_path / "r.html"
    page.write_text("mine")
    capsys.readouterr()
    assert main(["report", str(traces / "bug"), "--html", str(page)]) == 2
    err = capsys.readouterr().err
    assert "already exists: give --force" in err and page.read_text() == "mine"
    assert main(["report", str(traces / "bug"), "--html", str(page), "--force"]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    w = tmp_path / "w.html"
    w.write_text("mine")
    assert main(["whatif", "--batch", "1-2", "--context", "1024", "--html", str(w)]) == 2
    assert w.read_text() == "mine"


def test_a_malformed_write_on_a_full_disk_says_disk_full(monkeypatch, tmp_path) -> None:
    import sqlite3

    from mlaprof import errors

    e = sqlite3.DatabaseError("database disk image is malformed")
    assert errors.disk_message(e, tmp_path) == "database disk image is malformed"
    monkeypatch.setattr(errors, "_disk_full", lambda path: True)
    assert errors.disk_message(e, tmp_path).startswith("disk full")
    assert errors.disk_message(OSError(28, "No space left on device")).startswith("disk full")


def test_an_agent_id_past_int64_is_one_error_in_every_reader_and_writer() -> None:
    """A 5,000-digit agent id (found by the fuzz command in an export of an accepted import):
    MlaprofError, never Python's int-digits ValueError."""
    from mlaprof.errors import MlaprofError
    from mlaprof.importers.common import agent_index

    assert agent_index("Agent 4") == 4 and agent_index(" 12 ") == 12
    for bad in ("Agent " + "9" * 5000, "9" * 19):
        with pytest.raises(MlaprofError, match="64-bit"):
            agent_index(bad)


def test_binary_cells_in_a_rocpd_database_are_refused_at_import(tmp_path, capsys) -> None:
    """A rocpd cell holding a BLOB where text belongs (fuzz case rocpd 'sql-cell'): the import
    says so in one line instead of storing it, so no export or view meets bytes later."""
    import sqlite3

    from mlaprof.exporters.rocpd_export import export_rocpd
    from mlaprof.store import load
    from tests.trace_io_helpers import make_run

    db = tmp_path / "x.db"
    with load(make_run(tmp_path / "src")) as run:
        export_rocpd(run, db)
    con = sqlite3.connect(db)
    (table,) = con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_string%'"
    ).fetchone()
    con.execute(f'UPDATE "{table}" SET string = CAST(string AS BLOB)')  # every name a blob
    con.commit()
    con.close()
    capsys.readouterr()
    rc = main(["import", "rocprof", str(db), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "binary data" in err or "not a readable" in err or "not a" in err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_names_keep_unicode_letters_and_refuse_names_without_any(tmp_path, capsys) -> None:
    """'名前' names its folder '名前' (it used to become 'run' and collide with the next); '~' and
    '*' have nothing to name a folder by: one line, no run."""
    from mlaprof.store.runmeta import folder_name

    assert folder_name("名前") == "名前" and folder_name("ünï-cödé") == "ünï-cödé"
    assert folder_name("x*y") == "x-y"
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", "名前"]) == 0
    assert (traces / "名前" / "run.json").is_file()
    for bad in ("~", "*"):
        capsys.readouterr()
        assert main(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", bad]) == 2
        assert "no letter or digit" in capsys.readouterr().err
    assert sorted(p.name for p in traces.iterdir()) == ["名前"]
