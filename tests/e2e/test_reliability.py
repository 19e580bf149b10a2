"""Issue 13, one test per rule: importer values, liveness by lock, listings that survive bad runs,
escaped strings, full or read-only disks, confined names, clean stops (SIGTERM, crafted rocpd)."""

from __future__ import annotations

import csv
import errno
import gzip
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.store import create_run, load, runmeta
from mlaprof.store.liveness import WriterLock
from mlaprof.store.reader import EmptyRunError, list_runs, run_info
from tests.fuzz_inputs import FORMATS, make_case, run_case, seed_files
from tests.trace_io_helpers import ROCPROF, fixture, make_run

ROOT = Path(__file__).resolve().parents[2]
KERNELS = fixture("rocprofiler-sdk-docs__kernel_trace.csv")
API = fixture("rocprofiler-sdk-docs__marker_api_trace.csv")


def _one_error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("mlaprof: error: ") and err.count("\n") == 1, err
    return err


def _edit_csv(src: Path, dst: Path, edit) -> Path:  # noqa: ANN001
    rows = list(csv.reader(src.open(newline="")))
    low = [h.lower() for h in rows[0]]
    edit(rows, low)
    with dst.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_MINIMAL).writerows(rows)
    return dst


# -- 1. importer values ---------------------------------------------------------------------------
def _api_huge(rows, low):  # noqa: ANN001, ANN202
    rows[1][low.index("correlation_id")] = str(2**64 - 1)


def _api_end_first(rows, low):  # noqa: ANN001, ANN202
    s, e = low.index("start_timestamp"), low.index("end_timestamp")
    rows[2][e] = str(int(rows[2][s]) - 1)


def _kernel_end_first(rows, low):  # noqa: ANN001, ANN202
    s, e = low.index("start_timestamp"), low.index("end_timestamp")
    rows[3][e] = str(int(rows[3][s]) - 7)


def _kernel_no_grid_yz(rows, low):  # noqa: ANN001, ANN202
    keep = [j for j, h in enumerate(low) if h not in ("grid_size_y", "grid_size_z")]
    rows[:] = [[r[j] for j in keep] for r in rows]


@pytest.mark.parametrize(
    "src, edit, expect",
    [
        (API, _api_huge, "does not fit a 64-bit integer"),
        (API, _api_end_first, "api record 2: end_ns"),
        (KERNELS, _kernel_end_first, "kernel record 4 has end"),
        (KERNELS, _kernel_no_grid_yz, "without grid_y, grid_z"),
    ],
    ids=["uint64-id", "api-end-before-start", "kernel-end-before-start", "no-grid-yz"],
)
def test_csv_values_refused(tmp_path, capsys, src, edit, expect) -> None:
    p = _edit_csv(src, tmp_path / "in.csv", edit)
    rc = main(["import", "rocprof", str(p), "--traces", str(tmp_path / "t")])
    err = _one_error(capsys, rc)
    assert "in.csv" in err and expect in err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


@pytest.mark.parametrize(
    "kind, name, content, expect",
    [
        (
            "rocprof",
            "n.json",
            '{"rocprofiler-sdk-tool": ' + "[" * 200_000 + "]" * 200_000 + "}",
            "nested too deeply",
        ),
        (
            "kineto",
            "d.json",
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": '
            + "9" * 5000
            + "}]}",
            "not valid JSON",
        ),
        (
            "kineto",
            "h.json",
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e300, "dur": 1}]}',
            "does not fit",
        ),
        (
            "kineto",
            "i.json",
            '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, '
            '"args": {"correlation": 18446744073709551615}}]}',
            "does not fit a 64-bit integer",
        ),
        (
            "rocprof",
            "s.csv",
            '"Name","Calls","TotalDurationNs","AverageNs","Percentage","MinNs",'
            '"MaxNs","StdDev"\n"hipMalloc",1,2,2,inf,2,2,0\n',
            "Percentage inf is not a finite number",
        ),
    ],  # fmt: skip
    ids=["deep-json", "digits-limit", "huge-float-ts", "uint64-correlation", "inf-counter"],
)
def test_json_and_number_values_refused(tmp_path, capsys, kind, name, content, expect) -> None:
    p = tmp_path / name
    p.write_text(content)
    rc = main(["import", kind, str(p), "--traces", str(tmp_path / "t")])
    err = _one_error(capsys, rc)
    assert name in err and expect in err


@pytest.fixture(scope="module")
def fuzz_seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    return seed_files(tmp_path_factory.mktemp("seeds"))


@pytest.mark.parametrize("fmt", FORMATS)
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32))
def test_fuzz_every_format(fuzz_seeds, tmp_path, monkeypatch, fmt, seed) -> None:
    """Mutated inputs of every format (tests/fuzz_inputs.py; scripts/fuzz_import.py runs 10,000 per
    format): a whole run or one error line, nothing left behind, never a traceback."""
    monkeypatch.setenv("MLAPROF_ROCPD_TIMEOUT", "1")
    case = tmp_path / f"case{seed}"
    case.mkdir()
    path, ops = make_case(fmt, fuzz_seeds[fmt], seed, case)
    # every eighth case also goes through what a user runs on an import (tests/fuzz_inputs.py)
    out = run_case(fmt, path, tmp_path / f"t{seed}", report=seed % 4 == 0, post=seed % 8 == 0)
    assert out.result in ("imported", "refused"), (ops, out.detail)


def test_error_messages_are_one_line(fuzz_seeds, tmp_path, capsys, monkeypatch) -> None:
    """SQLite quotes a damaged view's SQL, newlines included (fuzz case rocpd 3445 found it)."""
    from mlaprof.cli import one_line

    assert one_line("a\n   b\x1b[2J\r c") == "a b\\x1b[2J c"
    assert len(one_line("x" * 5000)) == 600
    monkeypatch.setenv("MLAPROF_ROCPD_TIMEOUT", "2")
    path, _ = make_case("rocpd", fuzz_seeds["rocpd"], 3445, tmp_path)
    err = _one_error(
        capsys, main(["import", "rocprof", str(path), "--traces", str(tmp_path / "t")])
    )
    assert "malformed database schema" in err


def test_decode_errors_at_the_boundary(tmp_path, capsys) -> None:
    """A gzip stream whose deflate data is damaged (zlib.error inside gzip) and a rocpd file with
    inserted bytes: one line each, whatever the decoder raised."""
    raw = gzip.compress(json.dumps({"traceEvents": [{"ph": "X"}] * 200}).encode())
    bad = raw[:30] + bytes(b ^ 0x5A for b in raw[30:60]) + raw[60:]
    p = tmp_path / "z.json.gz"
    p.write_bytes(bad)
    _one_error(capsys, main(["import", "kineto", str(p), "--traces", str(tmp_path / "t")]))
    src = tmp_path / "x.db"
    with load(make_run(tmp_path / "src")) as run:
        from mlaprof.exporters.rocpd_export import export_rocpd

        export_rocpd(run, src)
    data = src.read_bytes()
    for off in (4096, 8192, 20000):
        q = tmp_path / f"ins{off}.db"
        q.write_bytes(data[:off] + b"\xff\xfe\xc3\x28" * 8 + data[off:])
        _one_error(capsys, main(["import", "rocprof", str(q), "--traces", str(tmp_path / "t")]))
    assert not any((tmp_path / "t").iterdir())


# -- 2. liveness ----------------------------------------------------------------------------------
LIVE_WRITER = textwrap.dedent(
    """
    import sys, time
    from mlaprof.store import create_run
    w = create_run(sys.argv[1], "live", {"scenario": {"name": "t"}, "backend": "torch"})
    for i in range(3):
        with w.transaction():
            w.add("layers", step=i, layer=0)
            w.add("steps", step=i)
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_killed_writer_reads_incomplete_however_recent(tmp_path, capsys) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", LIVE_WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        run_dir = tmp_path / "live"
        with load(run_dir) as run:
            assert run.status == "running"  # its writer holds the lock
        proc.kill()
        proc.wait()
        for p in run_dir.iterdir():  # "recently modified" must not pass for alive
            os.utime(p)
        with load(run_dir) as run:
            assert run.status == "incomplete"
            assert run.count("steps") == 3
        assert run_info(run_dir).status == "incomplete"
        assert main(["report", str(run_dir)]) == 0
        out = capsys.readouterr().out
        assert "status: incomplete" in out and "last committed step 2" in out
        assert main(["report", str(run_dir), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "incomplete"
    finally:
        proc.kill()
        proc.wait()


def test_empty_runs_are_starting_or_abandoned(tmp_path) -> None:
    run_dir = runmeta.init_run_dir(tmp_path, "empty", {"scenario": {"name": "t"}})
    assert run_info(run_dir).status == "abandoned"  # run.json, no database, no writer
    with pytest.raises(EmptyRunError, match="abandoned before its first record"):
        load(run_dir)
    lock = WriterLock(run_dir, 0)  # a writer that has not created its database yet
    try:
        assert run_info(run_dir).status == "starting"
        with pytest.raises(EmptyRunError, match="starting"):
            load(run_dir)
    finally:
        lock.release()
    assert run_info(run_dir).status == "abandoned"


def test_database_appears_whole(tmp_path, monkeypatch) -> None:
    """The tables and schema version exist before rank0.db has its name (no schema-0 window)."""
    from mlaprof.store import writer

    seen = []
    real = writer._create_tables

    def spy(con):  # noqa: ANN001, ANN202
        seen.append((tmp_path / "r" / "rank0.db").exists())
        real(con)

    monkeypatch.setattr(writer, "_create_tables", spy)
    w = create_run(tmp_path, "r", {})
    assert seen == [False]
    with load(w.run_dir) as run:
        assert run.count("steps") == 0 and run.status == "running"
    w.finish()
    assert [p.name for p in w.run_dir.iterdir() if p.name.startswith(".")] == []


HOT_JOURNAL = textwrap.dedent(
    """
    import sqlite3, sys, time
    con = sqlite3.connect(sys.argv[1], isolation_level=None)
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("PRAGMA cache_size=2")  # spill to the file: the journal holds the old pages
    con.execute("BEGIN")
    for i in range(300):
        con.execute("INSERT INTO events (rank, message) VALUES (0, ?)", ("x" * 4000,))
    print("ready", flush=True)
    time.sleep(600)
    """
)


def test_hot_journal_of_a_dead_writer_is_rolled_back(tmp_path) -> None:
    """A writer killed inside a rollback-journal transaction leaves a hot journal; read-only
    readers cannot roll it back, so the reader does it once the writer's lock is free."""
    w = create_run(tmp_path, "hot", {})
    w.add("steps", step=0)
    w.finish()
    db = w.run_dir / "rank0.db"
    proc = subprocess.Popen([sys.executable, "-c", HOT_JOURNAL, str(db)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        proc.kill()
        proc.wait()
    finally:
        proc.kill()
    assert (w.run_dir / "rank0.db-journal").stat().st_size > 0
    with load(w.run_dir) as run:
        assert run.count("steps") == 1 and run.count("events") == 0


def test_second_writer_of_a_rank_is_refused(tmp_path) -> None:
    w = create_run(tmp_path, "r", {})
    with pytest.raises(MlaprofError, match="already exists|another process"):
        create_run(tmp_path, "r", {})
    w.finish()


# -- 3. listings and escaping ---------------------------------------------------------------------
def test_runs_survives_damaged_runs_and_escapes_names(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per run: the cells are not folded
    good = make_run(tmp_path, "good")
    nasty = make_run(tmp_path, "nasty")
    runmeta.update(nasty, backend="Evil[/]\x1b[2J\x1b]0;pwned\x07")
    bad_scenario = make_run(tmp_path, "badscenario")
    doc = json.loads((bad_scenario / "run.json").read_text())
    (bad_scenario / "run.json").write_text(json.dumps({**doc, "scenario": "a string"}))
    bad_json = make_run(tmp_path, "badjson")
    (bad_json / "run.json").write_text("{not json")
    bad_db = make_run(tmp_path, "baddb")
    (bad_db / "rank0.db").write_bytes(b"SQLite format 3\x00" + b"\xa5" * 4000)
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "Evil[/]\\x1b[2J\\x1b]0;pwned\\x07" in out  # shown as written, escaped
    infos = {r.name: r for r in list_runs(tmp_path)}
    assert infos["good"].status == "finished" and infos["nasty"].status == "finished"
    assert infos["badjson"].status == "unreadable" and "corrupt" in infos["badjson"].error
    assert infos["baddb"].status == "unreadable"
    assert "'scenario' is a str" in infos["badscenario"].error
    assert main(["report", str(nasty)]) == 0
    rep = capsys.readouterr().out
    assert "\x1b" not in rep and "Evil[/]" in rep
    assert good.exists()


def test_textsafe() -> None:
    from mlaprof.textsafe import plain, term

    assert plain("a\x1b[2Jb\n") == "a\\x1b[2Jb\\x0a"
    assert term("[red]x[/]") == "\\[red]x\\[/]"


# -- 4. full disk, read-only targets, names -------------------------------------------------------
def test_run_on_a_full_disk(tmp_path, capsys, monkeypatch) -> None:
    from mlaprof.store import writer

    real = writer.RunWriter.add
    calls = [0]

    def add(self, table, **row):  # noqa: ANN001, ANN202
        calls[0] += 1
        if calls[0] > 5:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, table, **row)

    monkeypatch.setattr(writer.RunWriter, "add", add)
    argv = ["run", "--traces", str(tmp_path), "--name", "full", "--quiet", "--steps", "3",
            "--layers", "2", "--model", "deepseek-v3-tp8", "--kv-lens", "64,32",
            "--check-syncs", "off"]  # fmt: skip
    err = _one_error(capsys, main(argv))
    assert "database or disk is full" in err
    with load(tmp_path / "full") as run:
        assert run.status == "failed" and "disk is full" in run.reason
    assert json.loads((tmp_path / "full" / "run.json").read_text())["status"] == "failed"


def test_html_report_on_a_full_disk(tmp_path, capsys, monkeypatch) -> None:
    run_dir = make_run(tmp_path / "t")
    out = tmp_path / "out"
    out.mkdir()

    def full(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        Path.write_bytes(self, b"<html>partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    err = _one_error(capsys, main(["report", str(run_dir), "--html", str(out / "r.html")]))
    assert "disk full (no space left on the device)" in err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("fail", ["full", "readonly"])
def test_rocpd_export_on_a_full_or_readonly_target(tmp_path, capsys, monkeypatch, fail) -> None:
    from mlaprof.exporters import rocpd_export

    run_dir = make_run(tmp_path / "t")
    out = tmp_path / "out"
    out.mkdir()
    if fail == "full":
        real = rocpd_export._write

        def write(con, *a):  # noqa: ANN001, ANN002, ANN202
            real(con, *a)
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(rocpd_export, "_write", write)
    else:
        real_connect = sqlite3.connect

        def connect(target, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            if Path(str(target)).parent == out:  # what a read-only folder answers (not as root)
                raise sqlite3.OperationalError("unable to open database file")
            return real_connect(target, *a, **k)

        monkeypatch.setattr(rocpd_export.sqlite3, "connect", connect)
    argv = ["export", str(run_dir), "--format", "rocpd", "-o", str(out / "x.db")]
    err = _one_error(capsys, main(argv))
    assert "cannot write" in err and str(out / "x.db") in err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../up", "x\x1by", ".hidden", ""])
def test_names_stay_in_the_traces_folder(tmp_path, capsys, name) -> None:
    traces = tmp_path / "traces"
    rc = main(["import", "rocprof", str(KERNELS), "--traces", str(traces), "--name", name])
    err = _one_error(capsys, rc)
    assert "run name" in err
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["traces"])  # nothing beside
    assert not traces.exists() or not any(traces.iterdir())


def test_import_onto_a_dangling_symlink(tmp_path, capsys) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "dang").symlink_to(tmp_path / "nowhere")
    argv = ["import", "rocprof", str(KERNELS), "--traces", str(tmp_path / "t"), "--name", "dang"]
    assert "is a symlink" in _one_error(capsys, main(argv))
    assert not (tmp_path / "nowhere").exists()


def test_default_names_never_collide(tmp_path, monkeypatch) -> None:
    from mlaprof.cpu_runner import start_run
    from mlaprof.scenario import load_scenario

    monkeypatch.setattr(runmeta, "new_run_name", lambda label: "20260101-000000-" + label)
    sc = load_scenario("default")
    a = start_run(sc, "torch", "cpu", tmp_path)
    b = start_run(sc, "torch", "cpu", tmp_path)
    assert b.run_dir.name == a.run_dir.name + "-2"
    a.finish()
    b.finish()
    for _ in range(2):
        main(["import", "rocprof", str(KERNELS), "--traces", str(tmp_path / "i")])
    names = sorted(p.name for p in (tmp_path / "i").iterdir())
    stem = "rocprof-rocprofiler-sdk-docs__kernel_trace"
    assert names == [stem, stem + "-2"]


# -- 5. clean stops ---------------------------------------------------------------------------------
def _crafted_rocpd(tmp_path: Path) -> Path:
    """A rocpd export whose kernel view never returns its first row (a recursive query)."""
    from mlaprof.exporters.rocpd_export import export_rocpd

    db = tmp_path / "crafted.db"
    with load(make_run(tmp_path / "src")) as run:
        export_rocpd(run, db)
    con = sqlite3.connect(db)
    (sql,) = con.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'rocpd_kernel_dispatch'"
    ).fetchone()
    con.execute("DROP VIEW rocpd_kernel_dispatch")
    con.execute(
        "CREATE VIEW rocpd_kernel_dispatch AS SELECT K.* FROM (" + sql.split(" AS ", 1)[1] + ") K "
        "WHERE (WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
        "SELECT max(n) FROM c) > 0"
    )
    con.commit()
    con.close()
    return db


def test_crafted_rocpd_is_bounded_in_time(tmp_path, capsys, monkeypatch) -> None:
    db = _crafted_rocpd(tmp_path)
    monkeypatch.setenv("MLAPROF_ROCPD_TIMEOUT", "0.5")
    err = _one_error(capsys, main(["import", "rocprof", str(db), "--traces", str(tmp_path / "t")]))
    assert "gave up after 0.5 s" in err and "MLAPROF_ROCPD_TIMEOUT" in err
    assert not any((tmp_path / "t").iterdir())


def test_a_read_that_starts_after_the_stop_signal_stops_at_once(tmp_path, monkeypatch) -> None:
    """The import reads a rocpd database in a worker thread, which may still be loading its
    driver when SIGTERM comes: its read must stop too, not run until the time limit."""
    from mlaprof.errors import Terminated, clear_signals, note_signal
    from mlaprof.importers import rocpd_sqlite

    db = _crafted_rocpd(tmp_path)
    monkeypatch.setenv("MLAPROF_ROCPD_TIMEOUT", "120")
    clear_signals()
    note_signal(signal.SIGTERM)  # what the CLI's handler notes, before the read below starts
    try:
        # no clock read: a read that ran to the time limit would end in the limit's error
        # ("gave up after 120 s"), not in these two outcomes of the stop
        assert rocpd_sqlite.read_dispatches(db) is None  # interrupted: no columns
        with pytest.raises(Terminated):
            rocpd_sqlite.first_agent(db)
    finally:
        clear_signals()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopped_import_leaves_nothing(tmp_path, sig) -> None:
    db = _crafted_rocpd(tmp_path)
    traces = tmp_path / "t"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLAPROF_ROCPD_TIMEOUT": "120"}
    # Ctrl-C's default in the child, whatever this process inherited: a test run started in
    # the background (`cmd &` in a script, nohup) passes SIGINT ignored to its children, and
    # an import that ignores SIGINT rightly runs on to its time limit
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlaprof", "import", "rocprof", str(db), "--traces", str(traces)],
        stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    # events, not seconds: the import staged its run (or ended), then its exit. The crafted
    # query never ends, so the import ends only on the signal or at its own time limit (120 s,
    # whose error exit fails the test), however loaded the machine
    try:
        while proc.poll() is None and not (traces.exists() and any(traces.iterdir())):
            time.sleep(0.05)
        assert any(traces.iterdir()), "the import never staged"
        time.sleep(0.3)  # most often inside the query by then; a read begun after the signal
        # stops at once too (test_a_read_that_starts_after_the_stop_signal_stops_at_once)
        proc.send_signal(sig)
        _, err = proc.communicate()
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert list(traces.iterdir()) == []


# -- 6. crash safety --------------------------------------------------------------------------------
def test_sigkill_at_random_instants(tmp_path) -> None:
    """20 SIGKILLs of ``mlaprof run`` (bench/crash_kill.py): no unreadable store, no "running"
    ghost, no lost, duplicated or partial step, readers polling meanwhile never fail."""
    out = tmp_path / "kills.json"
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "crash_kill.py"), "--kills", "20", "--seed", "1",
         "--traces", str(tmp_path / "t"), "--json", str(out)],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    doc = json.loads(out.read_text())
    assert res.returncode == 0, res.stdout + res.stderr
    assert doc["kills"] == 20 and doc["kills_by_mode"]["start"] >= 5
    assert doc["unreadable"] == doc["running_ghosts"] == doc["lost_steps"] == 0
    assert doc["hole_or_duplicate"] == doc["partial_steps"] == doc["reader_polls_unreadable"] == 0
    assert {*doc["states"]} <= {"not-started", "abandoned", "incomplete", "finished"}
    # a "store" kill comes after run.json exists: always a run that says it is dead or done
    store = [t for t in doc["trials"] if t["mode"] == "store"]
    assert store and all(t["state"] in ("abandoned", "incomplete", "finished") for t in store)


def test_rocprof_folder_fixtures_still_import(tmp_path, capsys) -> None:
    """The real rocprofv3 CSVs pass the value checks (no false refusals)."""
    assert main(["import", "rocprof", str(ROCPROF), "--traces", str(tmp_path)]) == 0
    capsys.readouterr()


def test_imported_trace_report_escapes_kernel_names_and_markup(tmp_path, capsys) -> None:
    """Every section of the report on an imported AITER trace (paths, replay time, kernels)
    shows trace strings as data: no raw escape sequence, no rich markup applied."""
    src = Path(__file__).parents[1] / "data" / "aiter" / "gluon_v0119_bug"
    dst = tmp_path / "in"
    dst.mkdir()
    nasty = "rmsnorm\x1b]0;pwned\x07[red]x[/]"
    for f in src.iterdir():
        (dst / f.name).write_text(f.read_text().replace("rmsnorm", nasty))
    tr = tmp_path / "t"
    assert main(["import", "rocprof", str(dst), "--traces", str(tr), "--name", "n"]) == 0
    capsys.readouterr()
    assert main(["report", str(tr / "n")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    # shown as written (table cells wrap: compare without white space)
    assert "rmsnorm\\x1b]0;pwned\\x07[red]x[/]" in "".join(out.split())
