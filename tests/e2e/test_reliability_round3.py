"""Reliability, round three: one confinement rule for every writer, the vLLM plugin's writer on a
full disk, one name->folder rule, HTML escaping and shortening, long steps of a live engine,
kernel files of one pid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.store import list_runs, load, runmeta
from tests.trace_io_helpers import fixture

KERNELS = fixture("rocprofiler-sdk-docs__kernel_trace.csv")
RUN = ["run", "--steps", "2", "--layers", "1", "--quiet"]


def _one_error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mlaprof: error:"), err
    return lines[0]


@pytest.fixture
def victim(tmp_path: Path) -> tuple[Path, Path]:
    """traces/victim -> elsewhere (an existing folder outside the traces folder)."""
    traces, outside = tmp_path / "t", tmp_path / "elsewhere"
    traces.mkdir()
    outside.mkdir()
    (traces / "victim").symlink_to(outside, target_is_directory=True)
    return traces, outside


# -- one confinement rule for every writer --------------------------------------------------------
def test_run_name_through_a_symlink_is_refused(victim, capsys) -> None:
    """``mlaprof run --name victim`` wrote rank0.db and run.json through the link (mkdir with
    exist_ok follows it)."""
    traces, outside = victim
    err = _one_error(capsys, main([*RUN, "--traces", str(traces), "--name", "victim"]))
    assert "is a symlink" in err
    assert list(outside.iterdir()) == []


def test_plugin_run_through_a_symlink_is_refused(victim, monkeypatch) -> None:
    """The vLLM plugin's writer with ``MLAPROF_RUN=victim``: the same rule, nothing written."""
    from mlaprof.integrations import vllm_plugin

    traces, outside = victim
    monkeypatch.setenv("MLAPROF_TRACES", str(traces))
    monkeypatch.setenv("MLAPROF_RUN", "victim")
    with pytest.raises(MlaprofError, match="is a symlink"):
        vllm_plugin.open_writer()
    assert list(outside.iterdir()) == []


def test_a_folder_swapped_for_a_symlink_after_creation_is_caught(tmp_path, monkeypatch) -> None:
    """The check is made after the folder exists (a swap between check and use is caught)."""
    traces, outside = tmp_path / "t", tmp_path / "out"
    outside.mkdir()
    real_mkdir = Path.mkdir

    def mkdir_then_swap(self: Path, *a, **kw) -> None:  # noqa: ANN002, ANN003
        real_mkdir(self, *a, **kw)
        if self.name == "swapped":
            self.rmdir()
            self.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(Path, "mkdir", mkdir_then_swap)
    with pytest.raises(MlaprofError, match="is a symlink"):
        runmeta.make_run_dir(traces, "swapped")
    assert list(outside.iterdir()) == []


def test_a_lock_file_planted_as_a_symlink_is_not_followed(tmp_path) -> None:
    from mlaprof.store import create_run

    run_dir, target = tmp_path / "t" / "r", tmp_path / "target"
    run_dir.mkdir(parents=True)
    (run_dir / "rank0.lock").symlink_to(target)
    with pytest.raises(MlaprofError, match="rank0.lock"):
        create_run(tmp_path / "t", "r", {})
    assert not target.exists()


# -- one name -> folder rule ----------------------------------------------------------------------
def test_a_name_with_a_space_is_found_by_the_same_name(tmp_path, capsys) -> None:
    traces = tmp_path / "t"
    assert main([*RUN, "--traces", str(traces), "--name", "a b"]) == 0
    assert [r.name for r in list_runs(traces)] == ["a-b"]
    capsys.readouterr()
    assert main(["report", "a b", "--traces", str(traces)]) == 0
    assert capsys.readouterr().out.startswith("a-b ")
    assert main(["export", "a b", "--traces", str(traces), "--format", "perfetto",
                 "-o", str(tmp_path / "x.json")]) == 0  # fmt: skip
    assert "exported a-b" in capsys.readouterr().out


def test_traces_wins_over_the_working_folder(tmp_path, capsys, monkeypatch) -> None:
    """``report NAME --traces T`` opened ./NAME when the working folder had one."""
    traces = tmp_path / "t"
    assert main([*RUN, "--traces", str(traces), "--name", "r1"]) == 0
    assert main([*RUN, "--traces", str(tmp_path / "other"), "--name", "r1"]) == 0
    monkeypatch.chdir(tmp_path / "other")  # ./r1 is another run
    from mlaprof.commands.common import resolve_run

    assert resolve_run("r1", str(traces)) == traces / "r1"
    monkeypatch.setenv("MLAPROF_TRACES", str(traces))
    assert resolve_run("r1") == traces / "r1"
    monkeypatch.delenv("MLAPROF_TRACES")
    assert resolve_run("r1") == Path("r1")  # no --traces: the working folder's, as before


def test_a_default_name_from_a_file_name_with_control_characters_is_sanitised(
    tmp_path, capsys
) -> None:
    src = tmp_path / "k\x1bbad\x07.csv"
    src.write_bytes(KERNELS.read_bytes())
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(src), "--traces", str(traces)]) == 0, (
        capsys.readouterr().err
    )
    (run,) = list_runs(traces)
    assert run.name == "rocprof-k-bad"
    with pytest.raises(MlaprofError, match="control characters"):
        runmeta.folder_name("typed\x1bname")  # a name the user typed is still refused


@pytest.mark.parametrize("verb", ["run", "import"])
def test_traces_that_is_a_file_says_so(tmp_path, capsys, verb) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    argv = [*RUN] if verb == "run" else ["import", "rocprof", str(KERNELS)]
    err = _one_error(capsys, main([*argv, "--traces", str(f)]))
    assert "is not a folder" in err and "choose another --name" not in err
    assert f.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_the_plugin_uses_the_same_name_rule(tmp_path, monkeypatch) -> None:
    from mlaprof.integrations import vllm_plugin

    monkeypatch.setenv("MLAPROF_TRACES", str(tmp_path))
    monkeypatch.setenv("MLAPROF_RUN", "a b")
    w = vllm_plugin.open_writer(rank=0)
    w.finish()
    assert w.run_dir == tmp_path / "a-b"
    with load(tmp_path / "a-b") as run:
        assert run.name == "a-b"
    assert os.listdir(tmp_path) == ["a-b"]


# -- HTML: every control character escaped, long strings shortened with their length ---------------
def test_html_report_escapes_esc_and_shortens_long_strings(tmp_path, capsys) -> None:
    """One raw ESC byte was written into the page (``html.escape`` leaves control characters);
    a 10 MB string went into it whole."""
    from mlaprof.store import create_run

    long = "\x1b[2J\x07" + "k" * 10_000_000
    w = create_run(tmp_path / "t", "esc", {"source": long, "backend": "b\x1bx", "device": "cpu"})
    w.finish("failed", reason="stopped\x1b]0;title\x07")
    out = tmp_path / "r.html"
    assert main(["report", "esc", "--traces", str(tmp_path / "t"), "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert not any(ch in page for ch in "\x1b\x07\x00"), "a raw control character in the page"
    assert "\\x1b[2J\\x07kkk" in page and "(10,000,005 chars)" in page
    assert "b\\x1bx" in page and "stopped\\x1b]0;title\\x07" in page
    assert out.stat().st_size < 8_000_000  # plotly.js (4.6 MB) and the page, not the 10 MB


# -- the vLLM plugin's writer on a full disk --------------------------------------------------------
def _engine(tmp_path: Path, role_rank: int = 0):  # noqa: ANN202
    from tests import vllm_fake as vf

    mp = pytest.MonkeyPatch()
    vf.install(mp)
    from mlaprof.integrations import vllm_patches
    from mlaprof.integrations.vllm_recorder import EngineRecorder
    from mlaprof.store import create_run

    vllm_patches.uninstall()
    rec = EngineRecorder(
        lambda role: create_run(tmp_path, "run", {"source": "vllm plugin"}, rank=role_rank,
                                role=role),
        markers=False, background=False,
    )  # fmt: skip
    vllm_patches.install(rec)
    return rec, vf.GPUModelRunner([vf.MLACommonMetadataBuilder()]), mp


@pytest.mark.parametrize("rank", [0, 1])
def test_plugin_on_a_full_disk_reads_failed_with_its_committed_steps(tmp_path, rank, monkeypatch):
    """The plugin's writer warned "disk full", switched off and let the run read "finished"
    (or "running" while the engine served on); ``steps_written`` counted a step that never
    reached the database."""
    import sqlite3

    from mlaprof.integrations import vllm_patches
    from mlaprof.store import writer

    real, calls = writer.RunWriter.add, [0]

    def add(self, table, **row):  # noqa: ANN001, ANN202
        calls[0] += 1
        if calls[0] > 9:  # 3 steps of 3 records each, then the disk is full
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, table, **row)

    monkeypatch.setattr(writer.RunWriter, "add", add)
    rec, runner, mp = _engine(tmp_path, rank)
    try:
        for i in range(8):
            runner.execute([40 + i, 50 + i], [3, 3])
        assert rec.disabled
        with load(tmp_path / "run") as run:  # the engine still serving: not "running"
            assert run.status == "failed" and "disk is full" in run.reason
            steps = run.steps
            assert list(steps.step) == list(range(len(steps))) == list(range(rec.steps_written))
            assert rec.steps_written >= 2
        rec.close()
        with load(tmp_path / "run") as run:
            assert run.status == "failed" and run.count("steps") == rec.steps_written
    finally:
        vllm_patches.uninstall()
        mp.undo()


def _small_fs(path: Path, size: str = "1m") -> None:
    import subprocess

    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a 1 MiB filesystem needs root (mount -t tmpfs)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True)  # fmt: skip
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")


@pytest.mark.parametrize("fill_kib", [0, 880, 900, 1000])
def test_plugin_on_a_real_1mib_filesystem(tmp_path, fill_kib) -> None:
    """A real full disk, at fill levels where the database's creation itself fails: the run reads
    failed (or, with no byte left for even that, abandoned), never malformed or running, and every
    step counted is readable (a half-folded WAL was linked into place: "malformed")."""
    import contextlib
    import subprocess

    from mlaprof.integrations import vllm_patches

    small = tmp_path / "small"
    _small_fs(small)
    try:
        if fill_kib:
            (small / "fill").write_bytes(b"\0" * fill_kib * 1024)
        rec, runner, mp = _engine(small)
        try:
            for i in range(3000):
                runner.execute([40 + i] * 64, [3] * 64)
                if rec.disabled:
                    break
            assert rec.disabled
            info = [r for r in list_runs(small) if r.name == "run"]
            assert info and info[0].status in ("failed", "abandoned"), info
            assert info[0].error is None and info[0].steps == rec.steps_written
        finally:
            with contextlib.suppress(Exception):
                rec.close()  # its files closed: the filesystem can be unmounted
            vllm_patches.uninstall()
            mp.undo()
    finally:
        if subprocess.run(["umount", str(small)], check=False).returncode:
            subprocess.run(["umount", "-l", str(small)], check=False)


# -- two kernel files of one pid in one folder ----------------------------------------------------
BUG = Path(__file__).resolve().parents[1] / "data" / "aiter" / "gluon_v0119_bug"


def _shifted_copy(src: Path, dst: Path, shift_ns: int) -> None:
    import csv

    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    s, e = rows[0].index("Start_Timestamp"), rows[0].index("End_Timestamp")
    for r in rows[1:]:
        r[s], r[e] = str(int(r[s]) + shift_ns), str(int(r[e]) + shift_ns)
    with open(dst, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def test_two_kernel_files_of_one_pid_are_one_rank_merged_by_dispatch(tmp_path, capsys) -> None:
    """A copied ``4242_kernel_trace.csv`` beside the original: the kernels were concatenated
    (every dispatch twice: 108 kernels, 6 replays)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for f in BUG.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    _shifted_copy(BUG / "4242_kernel_trace.csv", folder / "4242_kernel_trace_copy.csv", 0)
    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(folder), "--traces", str(traces), "--name", "d"]) == 0
    out = capsys.readouterr().out
    assert "54 kernel records repeated" in out and "merged" in out
    with load(traces / "d") as run:
        assert run.ranks == [0] and run.count("kernels") == 54 and run.count("steps") == 3


def test_two_runs_under_one_pid_are_refused(tmp_path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for f in BUG.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    _shifted_copy(BUG / "4242_kernel_trace.csv", folder / "4242_kernel_trace_2.csv", 10**9)
    traces = tmp_path / "t"
    err = _one_error(capsys, main(["import", "rocprof", str(folder), "--traces", str(traces)]))
    assert "two runs under one pid" in err
    assert not traces.exists() or list(traces.iterdir()) == []


# -- a long step inside a live run ------------------------------------------------------------------
def test_a_slow_step_keeps_its_duration_and_idle_time_is_not_counted(tmp_path, monkeypatch):
    """A step of 2.5 s mid-run was written as NULL after 1 s of nothing new (IDLE_STEP_NS): the
    Perfetto export then wrote dur 0 and the TUI "last 0.000 ms". The engine's own step end
    (sample_tokens returning) times it; the 5 s idle after it is not its duration."""
    import json

    from mlaprof.integrations import vllm_patches, vllm_recorder
    from tests import vllm_fake as vf

    clock = [1_000_000_000_000]
    monkeypatch.setattr(vllm_recorder.time, "time_ns", lambda: clock[0])
    mp = pytest.MonkeyPatch()
    vf.install(mp)
    vllm_patches.uninstall()
    rec = vllm_recorder.EngineRecorder(
        lambda role: __import__("mlaprof.store", fromlist=["create_run"]).create_run(
            tmp_path, "run", {"source": "vllm plugin"}, role=role),
        markers=False, background=False,
    )  # fmt: skip
    try:
        vllm_patches.install(rec)
        runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()])
        real_execute = runner.execute

        def slow(kv_lens, drafts):  # noqa: ANN001, ANN202
            out = real_execute(kv_lens, drafts)
            for _ in range(5):  # the writer wakes while the step runs on
                clock[0] += 500_000_000
                rec.drain()
            return out

        runner.execute = slow
        runner.execute_model(([40, 50], [3, 3]))
        runner.sample_tokens(None)  # the 2.5 s step ends
        runner.execute = real_execute
        for _ in range(10):  # 5 s idle
            clock[0] += 500_000_000
            rec.drain()
        runner.execute_model(([41, 51], [3, 3]))
        clock[0] += 10_000_000
        runner.sample_tokens(None)
        rec.close()
    finally:
        vllm_patches.uninstall()
        mp.undo()
    with load(tmp_path / "run") as run:
        steps = run.steps.sort_values("step")
        assert list(steps.duration_ns) == [2_500_000_000, 10_000_000]
        assert set(steps.timing) == {"dispatch-to-output"}
    out = tmp_path / "p.json"
    assert main(["export", str(tmp_path / "run"), "--format", "perfetto", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    durs = sorted(e.get("dur", 0) for e in events if str(e.get("name", "")).startswith("step"))
    assert 2_500_000 in durs, durs  # us


def test_html_timeline_shortens_megabyte_kernel_names(tmp_path) -> None:
    """The timeline's hover data held every kernel's full name: 1 MB names made a 13 MB page
    (10 MB names, the issue's 381 s and 3 GB)."""
    import csv

    folder = tmp_path / "in"
    folder.mkdir()
    for f in BUG.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    path = folder / "4242_kernel_trace.csv"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    ki = rows[0].index("Kernel_Name")
    for r in rows[1:]:
        if r[ki].startswith("Cijk"):
            r[ki] += "\x1b" + "k" * 1_000_000
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    traces, page = tmp_path / "t", tmp_path / "r.html"
    assert main(["import", "rocprof", str(folder), "--traces", str(traces), "--name", "h"]) == 0
    assert main(["report", "h", "--traces", str(traces), "--html", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert len(text) < 6_000_000, len(text)  # plotly.js is 4.6 MB of it
    assert "chars)" in text  # shortened with its length


def test_an_export_onto_a_dangling_symlink_is_refused(tmp_path, capsys) -> None:
    traces = tmp_path / "t"
    assert main([*RUN, "--traces", str(traces), "--name", "r"]) == 0
    link, target = tmp_path / "x.json", tmp_path / "elsewhere.json"
    link.symlink_to(target)
    capsys.readouterr()
    argv = ["export", "r", "--traces", str(traces), "--format", "perfetto", "-o", str(link)]
    assert "already exists" in _one_error(capsys, main(argv))
    assert not target.exists() and link.is_symlink()


def test_figures_read_a_runs_kernels_by_sql_as_the_frames_give_them(tmp_path) -> None:
    """The breakdown and timeline of a Run (SQL: only what they draw) match those of the same
    kernels handed over as frames (read whole)."""
    from mlaprof.figures.breakdown import time_breakdown
    from mlaprof.figures.timeline import step_timeline

    traces = tmp_path / "t"
    assert main(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", "b"]) == 0
    with load(traces / "b") as run:
        frames = {t: run.table(t) for t in ("kernels", "steps", "layers")}
        for fig_of in (time_breakdown, lambda d: step_timeline(d, max_kernels=10)):
            a, b = fig_of(run), fig_of(frames)
            assert a.layout.title.text.startswith(b.layout.title.text)  # + the run's name
            assert [(list(t.x), list(t.y)) for t in a.data] == [
                (list(t.x), list(t.y)) for t in b.data
            ]
            # the names too, but the layers' sync legend: the run holds the trace's own host
            # check (its API trace: no host sync in a layer), bare frames hold no evidence
            names = {
                t.name: u.name for t, u in zip(a.data, b.data, strict=True) if t.name != u.name
            }
            assert names in ({}, {"layer (no host sync)": "layer (syncs not checked)"})
