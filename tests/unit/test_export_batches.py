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

from mlaprof.errors import MlaprofError
from mlaprof.exporters import perfetto, rocpd_export
from mlaprof.store import columnar, create_run, load

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


def test_a_run_of_several_ranks_is_not_written_as_one_rocpd_process(
    ordered_run: Path, tmp_path: Path
) -> None:
    """Its ranks would be read back as one (every rank's steps on rank 0): refused, naming the
    formats that keep them, nothing written."""
    with load(ordered_run) as run, pytest.raises(MlaprofError) as e:
        rocpd_export.export_rocpd(run, tmp_path / "fleet.db")
    assert "holds 2 ranks (0-1)" in str(e.value) and "--format csv" in str(e.value)
    assert list(tmp_path.glob("fleet*")) == []
