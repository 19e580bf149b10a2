"""CSV export in rocprofv3's 7.x layout, and CSV -> import round trips."""

from __future__ import annotations

import csv
from pathlib import Path

from mlaprof.cli import main
from mlaprof.exporters.csv_export import KERNEL_HEADER, export_csv
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import TABLES, create_run, load
from tests.trace_io_helpers import (
    KERNEL_HEADER_7,
    ROCPROF,
    csv_rows,
    db_rows,
    make_run,
    reimports_with_its_ranks,
)


def test_layout_matches_rocprofv3(tmp_path: Path) -> None:
    assert KERNEL_HEADER == KERNEL_HEADER_7
    real, _ = csv_rows(ROCPROF / "rocprofiler-sdk-docs__kernel_trace.csv")
    assert real == KERNEL_HEADER
    run_dir = make_run(tmp_path / "t")
    out = tmp_path / "csv"
    with load(run_dir) as run:
        counts = export_csv(run, out)
    assert counts == {
        "kernel_trace.csv": 12,
        "hip_api_trace.csv": 2,
        "memory_copy_trace.csv": 1,
    }
    header, rows = csv_rows(out / "kernel_trace.csv")
    assert header == real
    assert rows[0][0] == "KERNEL_DISPATCH" and rows[0][1] == "Agent 0"
    # strings quoted, numbers bare, as rocprofv3 writes them
    first = (out / "kernel_trace.csv").read_text().splitlines()[1]
    assert first.startswith('"KERNEL_DISPATCH","Agent 0",,7,,1,')
    # what the store never keeps (queue, thread, LDS, scratch, registers) is an empty field,
    # never a 0 that reads as measured
    kept_none = ("Queue_Id", "Thread_Id", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                 "Accum_VGPR_Count", "SGPR_Count")  # fmt: skip
    assert all(r[header.index(c)] == "" for r in rows for c in kept_none)
    _, copies = csv_rows(out / "memory_copy_trace.csv")
    assert [r[2] for r in copies] == [""]  # a copy's stream: not kept
    api_h, _ = csv_rows(out / "hip_api_trace.csv")
    assert api_h == csv_rows(ROCPROF / "rocprofiler-sdk-docs__marker_api_trace.csv")[0]


def test_round_trip_native_run(tmp_path: Path) -> None:
    """CSV carries what rocprofv3's layout has; layers, replays, steps and S are recomputed on
    import from names, shared correlation ids and grids, and come back equal."""
    run_dir = make_run(tmp_path / "t")
    out = tmp_path / "csv"
    with load(run_dir) as run:
        export_csv(run, out)
    back, _ = import_rocprof(out, tmp_path / "t", "back")
    a = db_rows(run_dir, "kernels")
    b = db_rows(back, "kernels")
    # every column but graph_id / graph_node_id (not in the 7.x layout)
    assert [r[:-2] for r in b] == [r[:-2] for r in a]
    assert all(r[-2:] == (None, None) for r in b)
    assert db_rows(back, "api") == db_rows(run_dir, "api")


def test_round_trip_all_fixtures(tmp_path: Path) -> None:
    run, _ = import_rocprof(ROCPROF, tmp_path / "t", "fx")
    out = tmp_path / "csv"
    rc = main(["export", str(run), "--format", "csv", "-o", str(out)])
    assert rc == 0
    back, _ = import_rocprof(out, tmp_path / "t", "back")
    assert db_rows(back, "kernels") == db_rows(run, "kernels")
    assert sorted(db_rows(back, "api")) == sorted(db_rows(run, "api"))
    tr_a = sorted(db_rows(run, "transfers"), key=str)
    tr_b = sorted(db_rows(back, "transfers"), key=str)
    assert tr_b == tr_a
    # marker and HIP calls went to their own files
    assert (out / "marker_api_trace.csv").is_file() and (out / "hip_api_trace.csv").is_file()
    with open(out / "kernel_trace.csv", newline="") as f:
        assert sum(1 for _ in csv.reader(f)) - 1 == load(run).count("kernels")


TABLES_COLS = [c for c, _ in TABLES["kernels"]]


def _kernel_run(traces: Path, name: str, timestamps: bool) -> Path:
    """Kernels the way a run records them when some ids are unknown (no stream, correlation or
    device): unknown values must come back unknown, not break the import."""
    w = create_run(traces, name, {"source": "test"})
    for i in range(4):
        w.add(
            "kernels",
            name=f"mla_verify_stage{1 + i % 2}",
            start_ns=1_000 + 100 * i if timestamps else None,
            end_ns=1_050 + 100 * i if timestamps else None,
            device=None,
            stream=None,
            correlation=None,
            grid_x=2,
            grid_y=14,
            grid_z=1,
            block_x=128,
            block_y=1,
            block_z=1,
        )
    w.finish()
    return w.run_dir


def test_cli_export_reimports_to_the_same_kernels(tmp_path: Path, monkeypatch, capsys) -> None:
    run_dir = _kernel_run(tmp_path / "t", "k", timestamps=True)
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(run_dir), "--format", "csv"]) == 0
    out = tmp_path / "out" / "k_csv"
    assert f"-> {out} " in capsys.readouterr().out  # the default folder, printed
    back, _ = import_rocprof(out, tmp_path / "t", "back")
    cols = ("name", "start_ns", "end_ns", "device", "stream", "correlation", "grid_x", "grid_y")
    pick = [list(TABLES_COLS).index(c) for c in cols]
    a = [tuple(r[i] for i in pick) for r in db_rows(run_dir, "kernels")]
    b = [tuple(r[i] for i in pick) for r in db_rows(back, "kernels")]
    assert a == b and len(a) == 4


def test_kernels_without_timestamps_are_refused_with_a_reason(tmp_path: Path, capsys) -> None:
    run_dir = _kernel_run(tmp_path / "t", "k", timestamps=False)
    assert main(["export", str(run_dir), "--format", "csv", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "4 of 4 kernels have no timestamps" in err and "perfetto or rocpd" in err
    assert not (tmp_path / "x").exists()


def test_formulas_are_inert_in_the_export_and_come_back_on_import(tmp_path: Path) -> None:
    """Kernel names and API functions starting with =, +, -, @ are written with a leading '
    (a spreadsheet shows them, never runs them); mlaprof's importer takes the ' back off, on
    both of its CSV parsers, so the export still round-trips."""
    from mlaprof.formats.spreadsheet import neutralize, restore

    evil = ['=HYPERLINK("http://x")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "'quoted", "ok"]
    for s in evil:
        assert restore(neutralize(s)) == s
        assert not neutralize(s).startswith(("=", "+", "-", "@"))
    w = create_run(tmp_path / "t", "evil", {"source": "rocprof", "kind": "trace"})
    for i, name in enumerate(evil):
        w.add("kernels", name=name, start_ns=1000 * i, end_ns=1000 * i + 500, device=0, stream=0,
                 correlation=i, grid_x=1, grid_y=1, grid_z=1, block_x=1, block_y=1, block_z=1)  # fmt: skip
    w.finish("finished")
    out = tmp_path / "csv"
    with load(tmp_path / "t" / "evil") as run:
        export_csv(run, out)
    cells = [r[7] for r in csv_rows(out / "kernel_trace.csv")[1]]
    assert all(not c.startswith(("=", "+", "-", "@")) for c in cells)
    for arrow in (True, False):
        back, _ = import_rocprof(out, tmp_path / "t", f"back-{arrow}", use_arrow=arrow)
        with load(back) as run:
            assert sorted(run.kernels["name"].astype(str)) == sorted(evil)


def test_file_names_built_from_trace_strings_are_bounded(tmp_path: Path) -> None:
    """An API domain of 5,000 characters names a file of at most 40 + suffix characters (it
    used to fail "File name too long"); two long domains stay apart."""
    w = create_run(tmp_path / "t", "dom", {"source": "rocprof", "kind": "trace"})
    for i, dom in enumerate(("X" * 5000, "X" * 4999 + "Y", "HIP_RUNTIME_API")):
        w.add("api", domain=dom, function=f"f{i}", pid=1, tid=1, correlation=i, start_ns=i,
              end_ns=i + 1)  # fmt: skip
    w.finish("finished")
    out = tmp_path / "csv"
    with load(tmp_path / "t" / "dom") as run:
        counts = export_csv(run, out)
    names = sorted(p.name for p in out.iterdir())
    assert all(len(n) <= 40 + len("_api_trace.csv") for n in names), names
    assert "hip_api_trace.csv" in names and len(names) == 3 and sum(counts.values()) == 3


def test_ranks_are_written_apart_and_import_back_as_ranks(tmp_path: Path) -> None:
    """A run of several ranks is one set of rocprofv3 files per process (never merged into one
    kernel trace, where correlation ids of different ranks would collide)."""
    from tests.trace_io_helpers import pid_fleet

    run_dir, _ = import_rocprof(pid_fleet(tmp_path / "in", 3), tmp_path / "t", "fleet")
    out = tmp_path / "csv"
    with load(run_dir) as run:
        counts = export_csv(run, out)
    assert sorted(counts) == sorted(
        f"rank{r}/{4242 + r}_{kind}_trace.csv" for r in range(3) for kind in ("kernel", "hip_api")
    )
    assert set(counts.values()) == {54, 9}  # each rank's 54 dispatches and 9 HIP calls
    back, _ = import_rocprof(out, tmp_path / "t", "back")
    with load(back) as b:
        assert b.ranks == [0, 1, 2]
    for r in range(3):
        assert db_rows(back, "kernels", r) == db_rows(run_dir, "kernels", r)
        assert db_rows(back, "api", r) == db_rows(run_dir, "api", r)


def test_rows_are_streamed_to_their_files(tmp_path: Path, monkeypatch) -> None:
    """Rows reach their file as they are read (rank 0's kernels are on disk before rank 1's
    are read), and a file closed to bound the open files is reopened to append."""
    import mlaprof.exporters.csv_export as ce
    from tests.trace_io_helpers import pid_fleet

    run_dir, _ = import_rocprof(pid_fleet(tmp_path / "in", 2), tmp_path / "t", "two")
    seen: list[int] = []
    real, real_batches = ce.iter_rows, ce.iter_batches

    def look(table: str, rank: int | None) -> None:
        if (table, rank) == ("kernels", 1):
            seen.extend(p.stat().st_size for p in tmp_path.glob(".csv.*/rank0/*kernel_trace.csv"))

    def reading(run, table, rank=None):  # type: ignore[no-untyped-def]
        look(table, rank)
        return real(run, table, rank)

    def reading_batches(run, table, rank, columns):  # type: ignore[no-untyped-def]
        look(table, rank)
        return real_batches(run, table, rank, columns)

    monkeypatch.setattr(ce, "iter_rows", reading)
    monkeypatch.setattr(ce, "iter_batches", reading_batches)
    monkeypatch.setattr(ce._Files, "OPEN_MAX", 1)  # rank 0's kernel file closes at its API file
    with load(run_dir) as run:
        ce.export_csv(run, tmp_path / "csv")
    assert seen and seen[0] > 0


def test_a_file_closed_to_bound_open_files_is_appended_to(tmp_path: Path, monkeypatch) -> None:
    import mlaprof.exporters.csv_export as ce

    w = create_run(tmp_path / "t", "mixed", {"source": "test"})
    for i in range(6):  # HIP and marker calls interleaved: their files alternate
        w.add("api", domain="HIP_RUNTIME_API" if i % 2 else "MARKER_CORE_API",
              function=f"f{i}", pid=1, tid=1, correlation=i + 1, start_ns=10 * i,
              end_ns=10 * i + 5)  # fmt: skip
    w.finish()
    with load(w.run_dir) as run:
        ref = ce.export_csv(run, tmp_path / "ref")
        monkeypatch.setattr(ce._Files, "OPEN_MAX", 1)
        assert ce.export_csv(run, tmp_path / "one") == ref == {
            "marker_api_trace.csv": 3, "hip_api_trace.csv": 3}  # fmt: skip
    for f in (tmp_path / "ref").iterdir():
        assert (tmp_path / "one" / f.name).read_text() == f.read_text()


def _row_writer_kernels(run, rank: int) -> str:  # type: ignore[no-untyped-def]
    """The kernel file as the per-row writer wrote it before batches (a value at a time through
    ``_cell``): the oracle the batched writer must match byte for byte."""
    from mlaprof.exporters.csv_export import _cell
    from mlaprof.store.rows import iter_rows

    ids: dict[str, int] = {}
    lines = [",".join(_cell(h) for h in KERNEL_HEADER)]
    for i, k in enumerate(iter_rows(run, "kernels", rank)):
        name = k["name"] or ""
        kid = ids.setdefault(name, len(ids) + 1)
        agent = None if k["device"] is None else f"Agent {k['device']}"
        row = ["KERNEL_DISPATCH", agent, None, k["stream"], None, i + 1, kid, name,
               k["correlation"], k["start_ns"], k["end_ns"], None, None, None, None, None,
               k["block_x"], k["block_y"],
               k["block_z"], k["grid_x"], k["grid_y"], k["grid_z"]]  # fmt: skip
        lines.append(",".join(_cell(v) for v in row))
    return "\n".join(lines) + "\n"


def test_batched_kernel_file_is_the_row_writers_byte_for_byte(tmp_path: Path, monkeypatch) -> None:
    """Kernels in the database and in an import's columnar file, several ranks, names that need
    quoting or neutralizing, null fields, batch boundaries inside a rank."""
    import sys

    from mlaprof.store import columnar
    from tests.trace_io_helpers import pid_fleet

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from import_bench import generate

    monkeypatch.setattr(columnar, "ROW_BATCH", 7)
    generate(tmp_path / "kernel_trace.csv", 300)
    imported, _ = import_rocprof(tmp_path / "kernel_trace.csv", tmp_path / "t", "imp")
    fleet, _ = import_rocprof(pid_fleet(tmp_path / "in", 2), tmp_path / "t", "two")
    w = create_run(tmp_path / "t", "odd", {"source": "test"})
    names = ['say "hi"', "=cmd|' /C calc'!A0", "-neg", "'quoted", "multi\nline", "", None,
             "ünïcode ⚡", "a,b", "say \"hi\""]  # fmt: skip
    for i, name in enumerate(names * 2):
        w.add("kernels", name=name, start_ns=100 * i, end_ns=100 * i + 50,
              device=None if i % 3 == 0 else i % 2, stream=None if i % 4 == 0 else 7,
              correlation=None if i % 5 == 0 else i, grid_x=4, grid_y=None, grid_z=2,
              block_x=64, block_y=1, block_z=None)  # fmt: skip
    w.finish()
    # SQLite keeps any value in any column: text where an integer belongs goes by the row writer
    w = create_run(tmp_path / "t", "untyped", {"source": "test"})
    for i, device in enumerate([0, "cuda:0", 1.5, None]):
        w.add("kernels", name=f"k{i % 2}", start_ns=10 * i, end_ns=10 * i + 5, device=device,
              stream="s" if i == 3 else 0, grid_x=1)  # fmt: skip
    w.finish()
    checked = 0
    for run_dir in (imported, fleet, tmp_path / "t" / "odd", tmp_path / "t" / "untyped"):
        out = tmp_path / f"csv-{run_dir.name}"
        with load(run_dir) as run:
            export_csv(run, out)
            files = sorted(out.rglob("*kernel_trace.csv"))
            assert len(files) == len(run.ranks)
            for rank, f in zip(sorted(run.ranks), files, strict=True):
                assert f.read_text() == _row_writer_kernels(run, rank), f
                checked += 1
    assert checked == 5


def test_a_fleet_is_written_in_its_hosts_folders_and_imports_back_with_them(
    tmp_path: Path,
) -> None:
    """Where the run knows each rank's host and pid (an 8-rank fleet imported from rocprofv3's
    ``%hostname%/%pid%`` layout), the export writes that layout, so the hosts, pids and DP
    groups import back as they were (``rank<N>/`` folders read back as 8 hosts)."""
    from pathlib import Path as P

    src = P(__file__).parent.parent / "data" / "aiter" / "fleet_dp2_tp4"
    run_dir, _ = import_rocprof(src, tmp_path / "t", "fleet")
    out = tmp_path / "csv"
    with load(run_dir) as run:
        counts = export_csv(run, out)
        before = [(r["rank"], r["host"], r["pid"]) for r in run.meta["rank_sources"]]
    assert {c.split("/")[0] for c in counts} == {"host0", "host1"}, sorted(counts)
    reimports_with_its_ranks(out, run_dir, before, tmp_path / "t", ("kernels",))
