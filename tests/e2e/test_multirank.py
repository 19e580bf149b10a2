"""``mlaprof run --ranks N`` on the CPU: real rank processes joined by gloo, an all-reduce after
every attention layer, every rank recorded in its own database of one run; a rank that dies
leaves the others' records readable and the run failed, naming that rank."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlaprof.store import runmeta
from mlaprof.store.reader import load
from tests.conftest import mlaprof_cli

SMALL = ["--kv-lens", "70,130,200", "--layers", "2"]


@pytest.fixture(scope="module")
def tp2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    traces = tmp_path_factory.mktemp("tp") / "traces"
    argv = ["run", "--ranks", "2", "--steps", "3", *SMALL, "--name", "tp2", "--json",
            "--traces", str(traces)]  # fmt: skip
    # `python -m mlaprof` that says at exit whether the launcher loaded torch (its ranks do)
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('launcher loaded torch:', 'torch' in sys.modules,"
        " file=sys.stderr))\n"
        f"sys.argv = ['mlaprof', *{argv!r}]\n"
        "runpy.run_module('mlaprof', run_name='__main__', alter_sys=True)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    # the launcher writes run.json, waits and reports: torch's import (a second) is the ranks'
    assert p.stderr.strip().endswith("launcher loaded torch: False"), p.stderr[-2000:]
    return traces, json.loads(p.stdout)


def test_every_rank_records_its_own_database(tp2):
    traces, doc = tp2
    run_dir = traces / "tp2"
    assert sorted(f.name for f in run_dir.glob("rank*.db")) == ["rank0.db", "rank1.db"]
    with load(run_dir) as run:
        steps = run.steps
        assert sorted(steps["rank"].unique()) == [0, 1]
        assert steps.groupby("rank").size().to_dict() == {0: 3, 1: 3}
        layers = run.layers
        assert layers.groupby("rank").size().to_dict() == {0: 6, 1: 6}
    meta = runmeta.read(run_dir)
    assert meta["status"] == "finished"
    assert meta["tp"]["world_size"] == 2 and meta["tp"]["collective_backend"] == "gloo"
    # the ranks' torch threads, as a run of one rank records them (a CPU timing's spread
    # depends on them: unknown, a compare judged changes against 17x instead of 1.4x)
    assert meta["threads"] == 1 and doc["timing"]["threads"] == 1
    # the ranks written are named, so a database deleted later is said, not a smaller run
    assert meta["ranks"] == [0, 1]
    gone = run_dir.parent / "tp2-gone"
    shutil.copytree(run_dir, gone)
    (gone / "rank1.db").unlink()
    rep = mlaprof_cli("report", str(gone), "--json")
    assert rep.returncode == 2 and "missing rank1.db" in rep.stderr, rep.stderr
    # each rank was its own process, and the fleet view says where each ran
    fleet = doc["fleet"]
    assert fleet["ranks"] == 2
    pids = [r["pid"] for r in fleet["per_rank"]]
    assert len(set(pids)) == 2 and all(isinstance(p, int) for p in pids)
    assert [r["agent"] for r in fleet["per_rank"]] == ["cpu", "cpu"]
    # the DP group is what the launcher placed, not inferred from equal batch rows
    assert fleet["dp_groups"] == 1 and fleet["dp_groups_source"].startswith("launcher:")


def test_findings_of_several_ranks_name_them(tp2):
    _, doc = tp2
    collapse = [f for f in doc["findings"] if f["kind"] == "split-collapse"]
    assert collapse, "the default scenario's collapse is found"
    # the same finding from both ranks is one finding naming both, not two unnamed copies
    titles = [f["title"] for f in collapse]
    assert len(titles) == len(set(titles))
    assert all(f["data"]["ranks"] == [0, 1] and "[ranks 0-1 of 2]" in f["title"] for f in collapse)
    # the per-policy table folds identical ranks into one row with its ranks
    rows = [r for r in doc["splits"] if r["policy"] == "aiter-gluon-v0.1.19"]
    assert len(rows) == 1 and rows[0]["ranks"] == [0, 1]


def test_no_two_findings_of_a_multi_rank_run_contradict(tp2):
    """The contradiction property (tests/unit/test_no_contradictions.py) over a run of real rank
    processes: 0 syncs on each rank beside the path check of the legacy path, said of neither."""
    from mlaprof.analysis.contradictions import contradictions
    from mlaprof.analysis.run_summary import build_summary

    traces, _ = tp2
    with load(traces / "tp2") as run:
        s = build_summary(run)
    assert s.sync_counts.checked and s.sync_counts.total == 0
    assert [f.kind for f in s.findings if f.data.get("legacy")] == ["path-check"]
    assert contradictions(s) == []


def test_report_tui_and_html_show_every_rank(tp2, tmp_path):
    traces, _ = tp2
    rep = mlaprof_cli("report", "tp2", "--traces", str(traces))
    assert rep.returncode == 0, rep.stderr
    assert "ranks: 2" in rep.stdout and "launcher: mlaprof run --ranks 2" in rep.stdout
    once = mlaprof_cli("tui", "--once", str(traces / "tp2"))
    assert once.returncode == 0, once.stderr
    assert "ranks: 2, all agree" in once.stdout
    assert "launcher: mlaprof run --ranks 2" in once.stdout
    for rank in (0, 1):  # each rank on its own: its 3 steps, not the run's 6
        one = mlaprof_cli("tui", "--once", str(traces / "tp2"), "--rank", str(rank))
        assert one.returncode == 0, one.stderr
        head = one.stdout.splitlines()[:2]
        assert head[0].startswith("tp2  |  finished  |")
        assert head[0].endswith(f"|  rank {rank} of 2")
        assert "|  3 steps, " in head[1]
    html = tmp_path / "r.html"
    h = mlaprof_cli("report", "tp2", "--traces", str(traces), "--html", str(html))
    assert h.returncode == 0, h.stderr
    assert "ranks: 2" in html.read_text()


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for e in env:
        if e.startswith(b"MLAPROF_TP_RANK="):
            return int(e.split(b"=", 1)[1])
    return None


def _steps(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT count(*) FROM steps").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_rank_that_dies_fails_the_run_and_keeps_the_others(tmp_path):
    traces = tmp_path / "traces"
    env = {**os.environ, "COLUMNS": "120"}
    cmd = [sys.executable, "-m", "mlaprof", "run", "--ranks", "2", "--steps", "400", *SMALL,
           "--name", "dies", "--traces", str(traces), "-q"]  # fmt: skip
    parent = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        run_dir = traces / "dies"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and _steps(run_dir / "rank1.db") < 2:
            time.sleep(0.2)
        assert _steps(run_dir / "rank1.db") >= 2, "rank 1 never recorded a step"
        victim = [c for c in _children(parent.pid) if _rank_of(c) == 1]
        assert len(victim) == 1
        os.kill(victim[0], signal.SIGKILL)
        out, err = parent.communicate(timeout=120)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 1, err
    assert "rank 1 failed (killed by signal 9)" in err
    meta = runmeta.read(run_dir)
    assert meta["status"] == "failed" and meta["reason"].startswith("rank 1 failed")
    # what both ranks committed stays readable, rank by rank
    with load(run_dir) as run:
        per_rank = run.steps.groupby("rank").size().to_dict()
    assert per_rank.get(0, 0) >= 1 and per_rank.get(1, 0) >= 2
    rep = mlaprof_cli("report", "dies", "--traces", str(traces), "--json")
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    assert doc["status"] == "failed" and doc["fleet"]["ranks"] == 2


def _alive(pid: int) -> bool:
    try:  # a zombie (exited, not yet reaped by its new parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_ranks_end_with_a_launcher_killed_outright(tmp_path):
    """A launcher killed by SIGKILL (or the OOM killer) cannot stop its ranks: they went on
    writing the run for nobody, reparented to init. Each rank asks the kernel for SIGTERM when
    its launcher dies, and stops as when the launcher stops it (recorded interrupted)."""
    traces = tmp_path / "traces"
    cmd = [sys.executable, "-m", "mlaprof", "run", "--ranks", "2", "--steps", "100000", *SMALL,
           "--name", "orphans", "--traces", str(traces), "-q"]  # fmt: skip
    parent = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks: list[int] = []
    try:
        run_dir = traces / "orphans"
        deadline = time.monotonic() + 180
        while (
            time.monotonic() < deadline
            and min(_steps(run_dir / "rank0.db"), _steps(run_dir / "rank1.db")) < 1
        ):
            time.sleep(0.2)
        ranks = [c for c in _children(parent.pid) if _rank_of(c) is not None]
        assert len(ranks) == 2, "the ranks never started"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 120  # a liveness bound, not a speed target
        while time.monotonic() < deadline and any(_alive(r) for r in ranks):
            time.sleep(0.2)
        assert not any(_alive(r) for r in ranks), "ranks outlived their launcher"
    finally:
        for pid in [parent.pid, *ranks]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    with load(run_dir) as run:  # what each rank committed stays readable
        assert sorted(run.steps["rank"].unique()) == [0, 1]


def test_bad_rank_counts_are_one_line(tmp_path):
    for n in ("0", "65"):
        p = mlaprof_cli("run", "--ranks", n, "--traces", str(tmp_path), "-q")
        assert p.returncode == 2
        assert p.stderr.strip().startswith("mlaprof: error: --ranks must be 1..64")
        assert "Traceback" not in p.stderr
    assert not any(tmp_path.iterdir()), "a refused --ranks leaves no run behind"


def test_the_dashboards_rank_view_counts_that_ranks_records(tp2):
    """``tui --rank 1 --once`` said both ranks' record count (254 where the rank holds 127)."""
    import re

    traces, _ = tp2
    counts = {}
    for rank in (None, 0, 1):
        argv = [
            "tui",
            str(traces / "tp2"),
            "--once",
            *(["--rank", str(rank)] if rank is not None else []),
        ]
        p = mlaprof_cli(*argv)
        assert p.returncode == 0, p.stderr
        counts[rank] = int(re.search(r"(\d[\d,]*) records", p.stdout).group(1).replace(",", ""))
    assert counts[0] + counts[1] == counts[None] and 0 < counts[1] < counts[None], counts
