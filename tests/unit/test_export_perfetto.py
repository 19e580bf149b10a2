"""Perfetto export: valid Chrome JSON, slices nest on every track (overlaps go to other lanes),
counter tracks for S used/deserved, padding and capture memory, launch->kernel flows, exact ns."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.exporters.perfetto import Lanes, export_perfetto
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import columnar, load
from tests.trace_io_helpers import (
    db_rows,
    fixture,
    kernel_dicts,
    launched_kernels,
    make_run,
    pid_fleet,
    replay_kernel_csv,
)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(), parse_float=Decimal)


def _ns(v: Decimal | int) -> int:
    d = Decimal(v) * 1000
    assert d == d.to_integral_value(), v
    return int(d)


def _assert_stacks(tracks: dict[tuple, list[tuple[int, int]]], how: str = "") -> int:
    """On each track the (start, end) spans form a proper stack: no partial overlaps."""
    for key, spans in tracks.items():
        stack: list[int] = []
        for s, e in sorted(spans, key=lambda t: (t[0], -t[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or e <= stack[-1], f"partial overlap on track {key}{how}"
            stack.append(e)
    return len(tracks)


def assert_nested(events: list[dict]) -> int:
    """On each (pid, tid) the X slices form a proper stack: no partial overlaps."""
    tracks: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    return _assert_stacks(tracks)


def test_lanes_nest_or_split() -> None:
    lanes = Lanes()
    assert lanes.place(0, 100) == 0
    assert lanes.place(10, 50) == 0  # nested
    assert lanes.place(40, 120) == 1  # partial overlap with both: new lane
    assert lanes.place(100, 130) == 0  # after the first slice ended
    assert lanes.place(110, 115) == 0  # nested in the previous


def test_native_run(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "t")
    out = tmp_path / "x.json"
    with load(run_dir) as run:
        counts = export_perfetto(run, out)
    doc = _load(out)
    ev = doc["traceEvents"]
    n_tracks = assert_nested(ev)
    assert n_tracks >= 4
    kernels = [e for e in ev if e["ph"] == "X" and e["cat"] == "kernel"]
    stored = db_rows(run_dir, "kernels")
    assert len(kernels) == len(stored) == 12
    # overlapping stage1/stage2 of a layer on stream 7 were split over two lanes
    assert len({(e["pid"], e["tid"]) for e in kernels}) == 2
    # exact ns, relative to the base the trace records (as Kineto writes baseTimeNanoseconds)
    base = doc["baseTimeNanoseconds"]
    assert base == doc["otherData"]["baseTimeNanoseconds"] <= min(r[4] for r in stored)
    assert sorted(base + _ns(e["ts"]) for e in kernels) == sorted(r[4] for r in stored)
    layers = [e for e in ev if e["ph"] == "X" and e["cat"] == "layer"]
    steps = [e for e in ev if e["ph"] == "X" and e["cat"] == "step"]
    assert len(layers) == 6 and len(steps) == 2
    cnt = [e for e in ev if e["ph"] == "C"]
    s = [e for e in cnt if e["name"] == "S gluon-v0.1.19 (rank 0)"]
    assert [(e["args"]["used"], e["args"]["deserved"]) for e in s] == [(1, 17), (1, 17)]
    assert [e["args"]["padding"] for e in cnt if e["name"] == "padding rows (rank 0)"] == [1, 1]
    assert [e["args"]["bytes"] for e in cnt if e["name"].startswith("capture memory")] == [
        2_265_972_736
    ]
    # flows: each hipGraphLaunch to the 6 kernels of its replay
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert len(starts) == len(ends) == 12 == counts["flows"]
    kpos = {(e["pid"], e["tid"], _ns(e["ts"])) for e in kernels}
    for i, f in ends.items():
        assert (f["pid"], f["tid"], _ns(f["ts"])) in kpos
        assert _ns(starts[i]["ts"]) < _ns(f["ts"])
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert any(n.startswith("GPU 0 (rank 0)") for n in names) and "host rank 0" in names


def test_imported_trace_and_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "kernel_trace.csv"
    replay_kernel_csv(p, replays=2, layers=3, splits=4)
    run, _ = import_rocprof(p, tmp_path / "t", "imp")
    monkeypatch.chdir(tmp_path)
    rc = main(["export", "imp", "--traces", str(tmp_path / "t"), "--format", "perfetto"])
    assert rc == 0
    out = tmp_path / "out" / "imp.perfetto.json"  # ./out/, never beside the run
    assert f"-> {out} " in capsys.readouterr().out
    ev = _load(out)["traceEvents"]
    assert_nested(ev)
    assert sum(1 for e in ev if e["ph"] == "X" and e["cat"] == "kernel") == 14
    assert sum(1 for e in ev if e["ph"] == "X" and e["cat"] == "layer") == 6
    # S per layer from the trace's grids, as a counter track
    s_layer = [e for e in ev if e["ph"] == "C" and e["name"].startswith("S layer")]
    assert [e["args"]["used"] for e in s_layer] == [4] * 6
    # exporting again picks a free name; naming an existing file is refused
    rc = main(["export", "imp", "--traces", str(tmp_path / "t"), "--format", "perfetto"])
    assert rc == 0 and (tmp_path / "out" / "imp-2.perfetto.json").is_file()
    again = ["-o", str(out)]
    rc = main(["export", "imp", "--traces", str(tmp_path / "t"), "--format", "perfetto", *again])
    assert rc == 2 and "already exists" in capsys.readouterr().err


def test_api_fixture_nests(tmp_path: Path) -> None:
    run, _ = import_rocprof(fixture("rocprof-unified-viewer__decode_hip_api_trace.csv"), tmp_path)
    out = tmp_path / "api.json"
    with load(run) as r:
        export_perfetto(r, out)
    text = out.read_text()
    ev = json.loads(text, parse_float=Decimal)["traceEvents"]
    assert_nested(ev)
    assert sum(1 for e in ev if e["ph"] == "X") == 920
    # timestamps are written as exact decimals (three digits after the point)
    assert re.search(r'"ts":\d+\.\d{3}[,}]', text)


@pytest.mark.parametrize("hold", [50_000, 0], ids=["held", "streamed"])
def test_multi_rank_flows_are_keyed_by_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold: int
) -> None:
    """One flow per launched kernel, from a call of its own rank's host, on every rank (small
    ranks held and sorted, big ones streamed)."""
    import mlaprof.exporters.perfetto as perfetto

    monkeypatch.setattr(perfetto, "HOLD_ROWS", hold)
    ranks = 4
    run_dir, _ = import_rocprof(pid_fleet(tmp_path / "in", ranks), tmp_path / "t", "fleet")
    out = tmp_path / "fleet.json"
    with load(run_dir) as run:
        assert run.ranks == list(range(ranks))
        counts = export_perfetto(run, out)
    ev = _load(out)["traceEvents"]
    assert_nested(ev)
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    rank_of = {}
    for pid, name in names.items():
        m = re.search(r"rank (\d+)", name)
        if m and not name.startswith("mlaprof"):
            rank_of[pid] = int(m.group(1))
    hosts = {rank_of[p] for p, n in names.items() if n.startswith("host rank")}
    gpus = {rank_of[p] for p, n in names.items() if n.startswith("GPU")}
    assert hosts == gpus == set(range(ranks))  # a host and a GPU process per rank
    kernels = {(e["pid"], e["tid"], _ns(e["ts"])) for e in ev if e.get("cat") == "kernel"}
    assert len(kernels) == 54 * ranks
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = [e for e in ev if e["ph"] == "f"]
    assert len(starts) == len(ends) == counts["flows"] == launched_kernels(ranks)
    ends_per_kernel: dict[tuple, int] = defaultdict(int)
    api = {(e["pid"], _ns(e["ts"])): e for e in ev if e["ph"] == "X" and e["cat"] != "kernel"}
    for f in ends:
        key = (f["pid"], f["tid"], _ns(f["ts"]))
        assert key in kernels
        ends_per_kernel[key] += 1
        s = starts[f["id"]]
        assert rank_of[s["pid"]] == rank_of[f["pid"]]  # the launch is on the kernel's rank
        call = api[(s["pid"], _ns(s["ts"]))]
        assert call["name"] in ("hipGraphLaunch", "hipLaunchKernel")
    assert set(ends_per_kernel.values()) == {1}  # exactly one arrow per launched kernel


def test_export_streams_rank_by_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events are written while the rows are read: rank 0's kernels are in the file before
    rank 1's rows are read, and no write is larger than one batch of rows' events."""
    import io

    import mlaprof.exporters.perfetto as perfetto

    run_dir, _ = import_rocprof(pid_fleet(tmp_path / "in", 2), tmp_path / "t", "two")
    log: list[tuple[str, ...]] = []
    real = perfetto.iter_rows

    def reading(run, table, rank=None):  # type: ignore[no-untyped-def]
        log.append(("read", table, str(rank)))
        return real(run, table, rank)

    class Recorder(io.StringIO):
        writes: list[str] = []

        def write(self, s: str) -> int:
            Recorder.writes.append(s)
            if '"cat":"kernel"' in s:
                log.append(("kernel",))
            return super().write(s)

    monkeypatch.setattr(perfetto, "iter_rows", reading)
    f = Recorder()
    with load(run_dir) as run:
        perfetto.stream_trace(run, f)
    doc = json.loads(f.getvalue())
    first_kernel = log.index(("kernel",))
    assert first_kernel < log.index(("read", "kernels", "1"))
    assert log.index(("read", "kernels", "0")) < first_kernel
    # between the opening and the closing, every write is whole events (and their commas),
    # one event or a batch of rows' events (a layer batch's counters, written together)
    body = [json.loads("[" + w.lstrip(",") + "]") for w in Recorder.writes[1:-2]]
    assert sum(len(b) for b in body) == len(doc["traceEvents"])
    assert all(isinstance(e.get("ph"), str) for b in body for e in b)
    assert max(len(b) for b in body) <= columnar.ROW_BATCH
    assert len(doc["traceEvents"]) > 100


def _slices(path: Path) -> list[tuple]:
    """Each slice as (track label, name, start, duration), tracks named by their labels."""
    ev = _load(path)["traceEvents"]
    label = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    return sorted(
        (label[(e["pid"], e["tid"])], e["name"], _ns(e["ts"]), _ns(e["dur"]))
        for e in ev
        if e["ph"] == "X"
    )


def test_rows_in_start_order_stream_and_others_are_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernels stored in start order are laned as they stream past (no per-track sort: the
    sorting lane helper is never called); stored in any other order they are sorted first; both
    give the same tracks, lanes and slices."""
    import mlaprof.exporters.perfetto as perfetto
    from mlaprof.store import create_run

    # (start, end): nested, partially overlapping, equal starts, on two streams
    spans = [(0, 100), (0, 40), (10, 50), (40, 120), (100, 130), (110, 115), (110, 200)]
    outs = {}
    for order in ("sorted", "shuffled"):
        w = create_run(tmp_path / "t", order, {"source": "test"})
        seq = sorted(spans) if order == "sorted" else spans[::-1]
        for s, e in seq:  # the same stream for a span in both runs
            w.add("kernels", name=f"k{s}-{e}", start_ns=1000 + s, end_ns=1000 + e, device=0,
                  stream=s // 100)  # fmt: skip
        w.finish()
        outs[order] = tmp_path / f"{order}.json"
        with load(w.run_dir) as run:
            if order == "sorted":  # streamed (as a big table is), it never sorts a track
                monkeypatch.setattr(perfetto, "HOLD_ROWS", 0)
                monkeypatch.setattr(perfetto, "_laned", None)
            export_perfetto(run, outs[order])
        monkeypatch.undo()
    a, b = _slices(outs["sorted"]), _slices(outs["shuffled"])
    assert len(a) == len(spans)
    assert_nested(_load(outs["sorted"])["traceEvents"])
    assert a == b


# -- double-precision readers ------------------------------------------------------------------
def assert_nested_as_doubles(events: list[dict]) -> int:
    """What a reader that parses JSON numbers as doubles (json.loads, JavaScript, most C++
    readers) sees: on each (pid, tid) the X slices still form a proper stack. Like Perfetto's
    JSON importer, times are taken to whole nanoseconds (microseconds x 1000, rounded) after
    the double parse: an absolute epoch time has lost its nanoseconds by then."""
    tracks: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            ts, dur = round(float(e["ts"]) * 1000), round(float(e["dur"]) * 1000)
            assert dur >= 0, f"negative duration {dur} on {e['name']!r}: a length moved by the base"
            tracks[(e["pid"], e["tid"])].append((ts, ts + dur))
    return _assert_stacks(tracks, " (as doubles)")


def _epoch_run(tmp_path: Path) -> Path:
    """Kernels on an epoch clock (ns since 1970, ~1.8e18) laid end to end 1 ns apart: absolute
    microseconds in a double keep only ~0.25 us, so adjacent slices would overlap."""
    p = tmp_path / "k.csv"
    header = ("Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,"
              "Correlation_Id,Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,"
              "VGPR_Count,Accum_VGPR_Count,SGPR_Count,Workgroup_Size_X,Workgroup_Size_Y,"
              "Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z")  # fmt: skip
    t = 1_796_180_929_906_565_120
    rows = []
    for i in range(40):
        rows.append(f'"KERNEL_DISPATCH","Agent 2",1,0,7,{i + 1},1,"my_kernel",{i + 1},{t},'
                    f"{t + 130},0,0,64,0,32,64,1,1,64,1,1")  # fmt: skip
        t += 131
    p.write_text("\n".join([header, *rows]) + "\n")
    run, _ = import_rocprof(p, tmp_path / "t", "epoch")
    return run


def test_epoch_times_nest_when_parsed_as_doubles(tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    with load(_epoch_run(tmp_path)) as run:
        export_perfetto(run, out)
    doc = json.loads(out.read_text())  # floats, as most readers parse them
    assert doc["baseTimeNanoseconds"] == 1_796_180_929_906_565_120
    assert assert_nested_as_doubles(doc["traceEvents"]) >= 1
    ks = sorted(float(e["ts"]) for e in doc["traceEvents"] if e.get("cat") == "kernel")
    assert ks[0] == 0.0 and ks[1] == 0.131  # every nanosecond kept
    durs = {float(e["dur"]) for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    assert durs == {0.13}  # lengths are written as they are, never relative to the base


def test_shipped_runs_nest_when_parsed_as_doubles(tmp_path: Path) -> None:
    """Every shipped demo run (copied: tests never touch traces/) exports tracks that nest as
    doubles (fix-native-kernel-full-graph's "layers rank 0" did not with absolute times)."""
    import shutil

    from tests import shipped_demo

    runs = [shipped_demo.run(n) for n in shipped_demo.NAMES]  # the shipped ones, not a listing
    assert runs
    for src in runs:
        dst = tmp_path / "runs" / src.name
        shutil.copytree(src, dst)
        out = tmp_path / f"{src.name}.json"
        with load(dst) as run:
            export_perfetto(run, out)
        doc = json.loads(out.read_text())
        assert assert_nested_as_doubles(doc["traceEvents"]) >= 1, src.name


def test_durations_are_not_moved_by_the_base(tmp_path: Path) -> None:
    """Times are relative to the run's base; durations are not times: each kernel, host call and
    layer slice lasts exactly what the run stored (a duration once had the base taken off too:
    -1.75e15 us on an imported trace)."""
    replay_kernel_csv(tmp_path / "kernel_trace.csv", replays=2, layers=3, splits=8)
    run_dir, _ = import_rocprof(tmp_path / "kernel_trace.csv", tmp_path / "t", "r")
    out = tmp_path / "p.json"
    with load(run_dir) as run:
        export_perfetto(run, out)
    kernels = {(k["name"], k["start_ns"]): k["end_ns"] - k["start_ns"]
               for k in kernel_dicts(run_dir)}  # fmt: skip
    doc = _load(out)
    base = int(doc["baseTimeNanoseconds"])
    assert base > 10**15  # epoch nanoseconds: a base that would show
    seen = 0
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            assert _ns(e["dur"]) >= 0, e
        if e["ph"] == "X" and e.get("cat") == "kernel":
            assert _ns(e["dur"]) == kernels[(e["name"], _ns(e["ts"]) + base)]
            seen += 1
    assert seen == len(kernels) > 0


def test_kernel_fast_path_writes_what_json_dumps_wrote(tmp_path: Path, monkeypatch) -> None:
    """Kernel events written straight as text are byte for byte what the ``json.dumps`` path
    writes (forced by turning the fast path off), on an import and on odd names and values."""
    from mlaprof.exporters import perfetto
    from mlaprof.store import create_run

    replay_kernel_csv(tmp_path / "kernel_trace.csv", replays=2, layers=3, splits=8)
    imported, _ = import_rocprof(tmp_path / "kernel_trace.csv", tmp_path / "t", "r")
    w = create_run(tmp_path / "t", "odd", {"source": "test"})
    names = ['say "hi"', "ünïcode ⚡", None, "back\\slash", "@mlaprof-ns:5", "tab\t", ""]
    for i, name in enumerate(names * 2):
        w.add("kernels", name=name, start_ns=1_750_000_000_000_000_000 + 100 * i,
              end_ns=1_750_000_000_000_000_000 + 100 * i + 50 + i, device=0, stream=7,
              correlation=i, layer=None if i % 3 else i, grid_x=4, grid_z=None,
              block_x="x" if i == 5 else 64)  # fmt: skip
    w.finish()
    for run_dir in (imported, tmp_path / "t" / "odd"):
        outs = {}
        for fast in (True, False):
            if not fast:
                monkeypatch.setattr(perfetto, "_kernel_text", lambda *a: None)
            outs[fast] = tmp_path / f"{run_dir.name}-{fast}.json"
            with load(run_dir) as run:
                export_perfetto(run, outs[fast])
            monkeypatch.undo()
        assert outs[True].read_bytes() == outs[False].read_bytes()
    with load(imported) as run:
        rows = list(perfetto.iter_rows(run, "kernels"))
    assert perfetto._kernel_text(rows[0], 10, 1, rows[0]["start_ns"], rows[0]["end_ns"], 0)


@pytest.mark.parametrize("engine", ["duckdb", "sqlite"])
def test_the_base_is_the_earliest_time_to_the_nanosecond(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """The base is the exact earliest time, whichever table holds it, while another timed table
    is empty (its MIN is NULL): read as one float64 row it was rounded to a multiple of 256 ns
    (1_796_181_031_238_786_289 came back ...304), the earliest slice then starting at -0.015 us."""
    import sys

    from mlaprof.store import create_run

    t = 1_796_181_031_238_786_289  # not a multiple of 256: a double cannot hold it
    w = create_run(tmp_path / "t", "exact", {"source": "test"})
    w.add("steps", step=0, t_start_ns=t, duration_ns=900)
    w.add("kernels", name="k", start_ns=t + 15, end_ns=t + 500, device=0, stream=7,
          correlation=1, step=0)  # fmt: skip
    w.finish()  # no api rows: that MIN is NULL
    if engine == "sqlite":
        monkeypatch.setitem(sys.modules, "duckdb", None)
    out = tmp_path / "p.json"
    with load(tmp_path / "t" / "exact") as run:
        export_perfetto(run, out)
    doc = _load(out)
    assert int(doc["baseTimeNanoseconds"]) == t
    starts = {e["name"]: _ns(e["ts"]) for e in doc["traceEvents"] if e["ph"] == "X"}
    assert starts["step 0"] == 0 and starts["k"] == 15, starts


def test_an_unknown_count_is_no_counter_sample(tmp_path: Path) -> None:
    """A counter event ("ph": "C") draws each of its ``args`` as a series of numbers (the Trace
    Event Format, "Counter Events": https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU;
    Perfetto reads that JSON: https://perfetto.dev/docs/getting-started/other-formats): a count
    the run does not know is left out of the event, never written as 0 padding rows or 0 size."""
    from mlaprof.store import create_run

    w = create_run(tmp_path / "t", "gaps", {"source": "test"})
    w.add("steps", step=0, t_start_ns=1_000, duration_ns=900)
    w.add("steps", step=1, t_start_ns=2_000, duration_ns=900)
    w.add("padding", step=0, capture_size=8, real_rows=3, padding_rows=5)
    w.add("padding", step=1, capture_size=8, real_rows=3)  # padding not known
    w.add("padding", step=1)  # nothing known: no event
    w.add("memory", graph_mode="FULL", pool_bytes=4096)  # capture size not known
    w.finish()
    out = tmp_path / "p.json"
    with load(tmp_path / "t" / "gaps") as run:
        export_perfetto(run, out)
    ev = _load(out)["traceEvents"]
    pad = [e["args"] for e in ev if e["ph"] == "C" and e["name"].startswith("padding rows")]
    assert pad == [{"real": 3, "padding": 5}, {"real": 3}]
    mem = [e["args"] for e in ev if e["ph"] == "C" and e["name"].startswith("capture memory")]
    assert mem == [{"bytes": 4096}]
