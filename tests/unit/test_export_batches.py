"""The exporters' batch paths (a whole Arrow batch written as text or inserted at once) write
byte for byte what their row-by-row paths write: the Perfetto trace's bytes and the rocpd
database's SQL dump, on a run in start order with what makes a row leave the fast path
(overlaps on a track, equal starts, zero lengths, unknown ends and starts, odd names, launch
flows, new tracks mid-run, a rank whose values are not the declared types)."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from mlaprof.exporters import perfetto, rocpd_export
from mlaprof.store import columnar, create_run, load
from tests.trace_io_helpers import db_rows, reimports_with_its_ranks

T0 = 1_750_000_000_000_000_000
B = 16  # rows per Arrow batch in these tests: each case below has a batch of its own
LAUNCHED = 5 * B + 5  # the kernel whose correlation a host call carries (a flow)


def _kernel(i: int, odd: bool) -> dict[str, Any]:
    """Kernel ``i`` (100 ns apart, 50 long, on device 0 stream 0), and in batch ``i // B`` at
    position 5 what that batch tests."""
    batch, pos = divmod(i, B)
    t = T0 + 100 * i
    k = {"name": f"k{i % 3}", "device": 0, "stream": 0, "correlation": 10_000 + i,
         "start_ns": t, "end_ns": t + 50, "layer": i % 5, "step": i // 20, "grid_x": i,
         "grid_z": 1, "block_x": "x" if odd and i == 17 else 64, "splits": None if i % 2 else 8}  # fmt: skip
    case = {2: "overlap", 3: "same start", 4: "marker", 5: "flow", 6: "new track", 8: "stream 1",
            9: "two tracks", 11: "negative", 12: "no end", 13: "no start", 14: "names"}.get(batch)  # fmt: skip
    if case == "overlap" and pos == 5:  # past the previous kernel's end: lane 1
        k.update(start_ns=t - 90, end_ns=t + 20)
    elif case == "same start" and pos == 4:  # zero-length, then a longer one at its start
        k["end_ns"] = t
    elif case == "same start" and pos == 5:  # (written longest first: their order swapped)
        k.update(start_ns=t - 100, end_ns=t - 40)
    elif case == "marker" and pos == 5:
        k["name"] = "@mlaprof-ns:5"
    elif case == "flow" and pos == 5:
        k["correlation"] = LAUNCHED
    elif (case == "new track" and pos >= 5) or case == "stream 1":
        k["stream"] = 1
    elif case == "two tracks":
        k["stream"] = pos % 2
    elif case == "negative" and pos == 5:
        k["end_ns"] = t - 30
    elif case == "no end" and pos == 5:
        k["end_ns"] = None
    elif case == "no start" and pos == 5:
        k["start_ns"] = None
    elif case == "names" and pos in (3, 5, 7, 9):
        k["name"] = {3: 'say "hi"', 5: "ünïcode ⚡", 7: None, 9: "back\\slash"}[pos]
    if batch == 10 and pos == B - 1:  # the held-back last row overlaps the last one written
        k.update(start_ns=t - 80, end_ns=t + 10)
    if batch == 16 and pos == 0:  # starts with the previous batch's held-back last row
        k.update(start_ns=t - 100, end_ns=t - 20)
    return k


def _rank(traces: Path, rank: int, odd: bool) -> None:
    w = create_run(traces, "r", {"source": "test"}, rank=rank)
    for i in range(20 * B):
        w.add("kernels", **_kernel(i, odd))
    w.add("api", domain="HIP_API", function="hipGraphLaunch", pid=100 + rank, tid=5,
          correlation=LAUNCHED, start_ns=T0 + 100 * LAUNCHED - 20, end_ns=T0 + 100 * LAUNCHED - 5)  # fmt: skip
    for i in range(8 * B):
        batch, pos = divmod(i, B)
        t = T0 + 100 * i
        w.add("layers", step=i // 4, layer=i % 4, t_start_ns=None if i == 2 * B + 5 else t,
              duration_ns=None if i == 3 * B + 5 else 300 if i == 4 * B + 5 else 90,
              syncs=0 if i % 2 else None, splits_used=None if i % 3 == 0 else 8,
              splits_deserved=None if i % 5 else 16)  # fmt: skip
    for s in range(30):
        w.add("steps", step=s, t_start_ns=T0 + 400 * s, duration_ns=390, graph_mode="FULL",
              backend="vllm-triton", timing="trace-replay")  # fmt: skip
    w.finish()


@pytest.fixture
def ordered_run(tmp_path: Path) -> Path:
    _rank(tmp_path / "t", 0, odd=False)
    _rank(tmp_path / "t", 1, odd=True)  # its kernels go row by row (a text in an int column)
    return tmp_path / "t" / "r"


def _small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "ROW_BATCH", B)
    monkeypatch.setattr(perfetto, "HOLD_ROWS", 10)  # every table streams
    monkeypatch.setattr(rocpd_export, "BATCH_ROWS", 16)
    monkeypatch.setattr(rocpd_export, "uuid7", lambda: uuid.UUID(int=7))


def test_perfetto_batches_write_what_rows_write(
    ordered_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_batches(monkeypatch)
    fast_batches = []
    real_fast = perfetto._Ordered.fast

    def fast(self: Any, *a: Any) -> Any:
        got = real_fast(self, *a)
        fast_batches.append(got is not None)
        return got

    monkeypatch.setattr(perfetto._Ordered, "fast", fast)
    with load(ordered_run) as run:
        perfetto.export_perfetto(run, tmp_path / "batches.json")
        monkeypatch.setattr(perfetto, "typed", lambda *a: False)  # every table row by row
        perfetto.export_perfetto(run, tmp_path / "rows.json")
    assert sum(fast_batches) >= 10 and not all(fast_batches)  # both paths taken
    assert (tmp_path / "batches.json").read_text() == (tmp_path / "rows.json").read_text()


def _dump(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return list(con.iterdump())
    finally:
        con.close()


@pytest.mark.parametrize("odd", [False, True])  # typed kernels, and kernels row by row
def test_rocpd_batches_write_what_rows_write(
    odd: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_batches(monkeypatch)
    _rank(tmp_path / "t", 0, odd=odd)  # one rank: a rocpd database here is one process
    with load(tmp_path / "t" / "r") as run:
        rocpd_export.export_rocpd(run, tmp_path / "batches.db")
        monkeypatch.setattr(rocpd_export, "typed", lambda *a: False)
        rocpd_export.export_rocpd(run, tmp_path / "rows.db")
    a, b = _dump(tmp_path / "batches.db"), _dump(tmp_path / "rows.db")
    assert len(a) > 1000
    assert a == b


def test_a_run_of_several_ranks_is_written_as_a_rocpd_database_each(
    ordered_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database holds one process: a run of two ranks is a folder of two, each with that
    rank's rows only (the batched writer and the row writer alike), under ``rank<N>/`` where
    the run does not know the ranks' hosts; it imports back as the same two ranks."""
    from mlaprof.importers.rocprof import import_rocprof

    _small_batches(monkeypatch)
    with load(ordered_run) as run:
        counts = rocpd_export.export_rocpd(run, tmp_path / "fleet")
        per_rank = [len(db_rows(ordered_run, "kernels", r)) for r in run.ranks]
    files = sorted(
        p.relative_to(tmp_path / "fleet").as_posix() for p in (tmp_path / "fleet").rglob("*.db")
    )
    assert files == ["rank0/results.db", "rank1/results.db"]  # no host or pid recorded
    for f, n in zip(files, per_rank, strict=True):
        con = sqlite3.connect(tmp_path / "fleet" / f)
        got = con.execute("SELECT COUNT(*) FROM kernels").fetchone()[0]
        pids = {r[0] for r in con.execute("SELECT pid FROM rocpd_info_process")}
        con.close()
        assert got == n and pids == {100 + int(f[4])}, f  # each its own process
    assert counts["kernel_dispatch"] == sum(per_rank)
    # read back (ranks whose values are all of their declared types: an import refuses text
    # in an integer field)
    for r in (0, 1):
        _rank(tmp_path / "c", r, odd=False)
    with load(tmp_path / "c" / "r") as run:
        rocpd_export.export_rocpd(run, tmp_path / "clean")
    back, _ = import_rocprof(tmp_path / "clean", tmp_path / "t", "back")
    with load(back) as b:
        assert b.ranks == [0, 1]
    for r in (0, 1):
        assert len(db_rows(back, "kernels", r)) == len(db_rows(tmp_path / "c" / "r", "kernels", r))
        assert db_rows(back, "steps", r) == db_rows(tmp_path / "c" / "r", "steps", r)
    assert list(tmp_path.glob(".fleet*")) == []  # no temporary folder left


def test_a_fleet_is_written_in_its_hosts_folders_a_database_a_rank(tmp_path: Path) -> None:
    """An 8-rank fleet imported from rocprofv3's ``%hostname%/%pid%`` layout (two hosts,
    tests/data/aiter/fleet_dp2_tp4) exports one database per rank at ``<host>/<pid>_results.db``,
    each process row naming its host and pid; the folder imports back with the same ranks,
    hosts, pids and each rank's kernels and steps."""
    from mlaprof.importers.rocprof import import_rocprof

    src = Path(__file__).parent.parent / "data" / "aiter" / "fleet_dp2_tp4"
    run_dir, _ = import_rocprof(src, tmp_path / "t", "fleet")
    out = tmp_path / "rocpd"
    with load(run_dir) as run:
        rocpd_export.export_rocpd(run, out)
        before = [(r["rank"], r["host"], r["pid"]) for r in run.meta["rank_sources"]]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.db")) == sorted(
        f"{h}/{pid}_results.db" for _, h, pid in before
    )
    for _, h, pid in before:
        con = sqlite3.connect(out / h / f"{pid}_results.db")
        procs = con.execute("SELECT pid FROM rocpd_info_process").fetchall()
        hosts = con.execute("SELECT hostname FROM rocpd_info_node").fetchall()
        con.close()
        assert procs == [(pid,)] and hosts == [(h,)]
    reimports_with_its_ranks(out, run_dir, before, tmp_path / "t", ("kernels", "steps"))


@pytest.mark.parametrize("ended", ["interrupted", "incomplete"])
def test_an_export_of_a_run_that_did_not_finish_imports_as_that_run(
    tmp_path: Path, ended: str
) -> None:
    """An export of a killed run read back "finished" in every view: the file carries the
    status and reason the run had, and the import reads them as its own."""
    from mlaprof.importers.rocprof import import_rocprof

    w = create_run(tmp_path / "t", "r", {"source": "test"})
    for i in range(3):
        w.add("kernels", **_kernel(i, False))
        w.add("steps", step=i, t_start_ns=T0 + 400 * i, duration_ns=390, graph_mode="FULL",
              backend="vllm-triton", timing="trace-replay")  # fmt: skip
    if ended == "interrupted":
        w.finish("interrupted", "Ctrl-C")
    else:  # its writer gone without closing its record (a kill): the lock freed, nothing marked
        w._con.commit()
        w._lock.release()
    with load(tmp_path / "t" / "r") as run:
        assert run.status == ended
        rocpd_export.export_rocpd(run, tmp_path / "r.db")
    back, _ = import_rocprof(tmp_path / "r.db", tmp_path / "t", "back")
    with load(back) as b:
        assert b.status == ended
        assert b.reason is not None and b.reason.startswith(
            f"the run this was exported from was {ended}"
        )
        assert ended != "interrupted" or b.reason.endswith(": Ctrl-C")
    # a finished run's export imports finished, with no such reason
    w2 = create_run(tmp_path / "t", "done", {"source": "test"})
    w2.add("kernels", **_kernel(0, False))
    w2.finish()
    with load(tmp_path / "t" / "done") as run:
        rocpd_export.export_rocpd(run, tmp_path / "done.db")
    ok, _ = import_rocprof(tmp_path / "done.db", tmp_path / "t", "ok")
    with load(ok) as b:
        assert b.status == "finished" and b.reason is None
