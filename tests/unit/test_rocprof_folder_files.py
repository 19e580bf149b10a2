"""A rocprofv3 output folder holds files beside the records mlaprof reads, and those must not
decide the import:

- ``--output-config`` writes ``<pid>_config.json`` (rocprofiler-sdk ``source/lib/rocprofiler-
  sdk-tool/tool.cpp`` ``generate_config_output``: the top key ``rocprofiler-sdk-tool``, one
  entry whose ``metadata`` holds pid, init/fini time, the config, the command and the build
  spec; no records). It is no results file: beside CSVs the CSVs are imported, beside a
  results JSON only that file is, and alone it is refused with what it is.
- CSV kinds mlaprof does not read (``rocpd convert``'s ``scratch_memory_trace.csv``, header in
  ``source/lib/python/rocpd/source/csv.cpp`` ``CsvManager``: no Allocation_Size) are passed
  over with a note, where they aborted the whole import before; a kernel trace with a column
  cut, or a file that is no CSV, is still refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.importers.rocprof import collect, import_rocprof
from tests.conformance import render
from tests.conformance.shapes import graph_replays

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _config(path: Path, pid: int) -> Path:
    """``<pid>_config.json`` as generate_config_output lays it out (values shortened)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "rocprofiler-sdk-tool": [
            {
                "metadata": {
                    "pid": pid,
                    "init_time": 1_750_000_000_000_000_000,
                    "fini_time": 1_750_000_001_000_000_000,
                    "config": {"kernel_trace": True, "hip_runtime_api_trace": True,
                               "output_path": "prof/%hostname%", "csv_output": True},
                    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    "build_spec": {"version_major": 1, "version_minor": 0,
                                   "version_patch": 0, "git_revision": "0" * 40},
                }
            }
        ]
    }  # fmt: skip
    path.write_text(json.dumps(doc, indent=2))
    return path


@pytest.mark.parametrize("fmt", ["csv-7", "json"])
def test_the_config_json_is_not_a_results_file(tmp_path: Path, fmt: str) -> None:
    tr = graph_replays(3, 4)
    render(tr, fmt, tmp_path / "in")
    cfg = _config(tmp_path / "in" / tr.host / f"{tr.pid}_config.json", tr.pid)
    got, files = collect(tmp_path / "in")
    assert got == ("csv" if fmt == "csv-7" else "json")
    assert cfg not in files
    run, summary = import_rocprof(tmp_path / "in", tmp_path / "t", "x")
    assert summary.replays == 3 and summary.layers == 12
    assert json.loads((run / "run.json").read_text()).get("rank_sources") is None  # one rank


def test_the_config_json_alone_is_refused_with_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path / "in" / "4242_config.json", 4242)
    for target in (cfg, cfg.parent):
        with pytest.raises(MlaprofError, match="--output-config"):
            collect(target)
        code = main(["import", "rocprof", str(target), "--traces", str(tmp_path / "t")])
        err = capsys.readouterr().err
        assert code != 0 and "configuration output" in err and "Traceback" not in err


# rocpd convert's scratch-memory CSV (csv.cpp CsvManager): no Guid, no Allocation_Size
SCRATCH_CONVERT = ('"Kind","Operation","Agent_Id","Queue_Id","Thread_Id","Alloc_Flags",'
                   '"Start_Timestamp","End_Timestamp"')  # fmt: skip


def test_a_csv_kind_mlaprof_does_not_read_is_noted_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tr = graph_replays(3, 4)
    path, _ = render(tr, "csv-convert", tmp_path / "in")
    scratch = tmp_path / "in" / tr.host / "scratch_memory_trace.csv"
    scratch.write_text(
        SCRATCH_CONVERT + "\n"
        f'"SCRATCH_MEMORY","SCRATCH_MEMORY_ALLOC","Agent {tr.agent}",1,{tr.tid},"NONE",'
        f"{tr.t0 + 5},{tr.t0 + 9}\n"
    )
    assert (
        main(["import", "rocprof", str(path), "--traces", str(tmp_path / "t"), "--name", "x"]) == 0
    )
    out = capsys.readouterr().out
    assert "not read: scratch_memory_trace.csv" in out and "does not read" in out
    assert "graph replays with MLA: 3" in out
    # given alone, it is refused (nothing of it is read)
    code = main(["import", "rocprof", str(scratch), "--traces", str(tmp_path / "t2")])
    assert code != 0 and "not a rocprofv3 CSV" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    [
        # a kernel trace with its End_Timestamp column cut: refused, never passed over
        '"Kind","Agent_Id","Kernel_Name","Start_Timestamp","Grid_Size_X"\n'
        '"KERNEL_DISPATCH","Agent 2","k",1,64\n',
        "\x00\x01binary\x00\n",  # no CSV at all
    ],
)
def test_a_broken_kernel_trace_in_a_folder_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    tr = graph_replays(2, 3)
    render(tr, "csv-7", tmp_path / "in")
    (tmp_path / "in" / tr.host / f"{tr.pid}_extra_kernel_trace.csv").write_text(body)
    code = main(["import", "rocprof", str(tmp_path / "in"), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and err.startswith("mlaprof: error:")


def test_every_view_names_the_files_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file passed over at import is said after "imported from" in every view (run.json's
    ``not_read``, relative to the imported folder), not only in the import's own output."""
    import re

    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.store.reader import load
    from tests.view_texts import every_view

    tr = graph_replays(3, 4)
    path, _ = render(tr, "csv-convert", tmp_path / "in")
    (tmp_path / "in" / tr.host / "scratch_memory_trace.csv").write_text(SCRATCH_CONVERT + "\n")
    assert (
        main(["import", "rocprof", str(path), "--traces", str(tmp_path / "t"), "--name", "x"]) == 0
    )
    run = tmp_path / "t" / "x"
    want = f"{tr.host}/scratch_memory_trace.csv"
    assert json.loads((run / "run.json").read_text())["not_read"] == [want]
    with load(run) as r:
        s = build_summary(r)
    assert s.imported is not None and s.imported.not_read == [want]
    for view, text in every_view(run, s, with_json=True).items():
        flat = re.sub(r"\\(.)", r"\1", " ".join(text.split()))  # Markdown's escapes
        assert want in flat and ("not_read" if view == "json" else "not read") in flat, view


@pytest.mark.parametrize("fmt, folder", [("csv-7", "pass"), ("rocpd-3", "pmc")])
def test_a_folder_of_several_passes_is_refused_and_one_pass_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, folder: str
) -> None:
    """rocprofv3 -i runs the application once per job, each job's output under pass_<N>
    (YAML/JSON input) or pmc_<N> (text input) (rocprofv3.py parse_yaml / parse_input, run()):
    the passes are separate runs, never ranks of one. One pass folder imports as one run."""
    for n in (1, 2):
        tr = graph_replays(2, 3)
        tr.pid = tr.tid = 1000 + n  # each pass is a new process
        render(tr, fmt, tmp_path / "out" / f"{folder}_{n}")
    code = main(["import", "rocprof", str(tmp_path / "out"), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code != 0 and "2 rocprofv3 passes" in err and f"{folder}_1, {folder}_2" in err
    assert "Traceback" not in err
    run, summary = import_rocprof(tmp_path / "out" / f"{folder}_1", tmp_path / "t", "one")
    assert summary.replays == 2
    assert json.loads((run / "run.json").read_text()).get("rank_sources") is None  # one rank


def test_kfd_event_regions_are_no_api_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rocprofv3 --kfd-trace writes each KFD event as a rocpd region whose event category is its
    buffer-tracing kind (generateRocpd.cpp ``insert_kfd_event_data``: KFD_EVENT_QUEUE, stack id
    0). They are driver events: read as API calls, a run with no API trace showed an API trace
    of them. Each also has a rocpd_pmc_event value under an info_pmc row of block "KFD" (ids
    from 0x7000000000000000, no kernel dispatch): read as counters, they showed as hardware
    counters with no kernel. Both left out, with a note that counts them; a counter sampled on a
    kernel dispatch is still read."""
    import sqlite3

    from tests.conformance.rocpd import write_rocpd

    tr = graph_replays(2, 3)
    db = write_rocpd(tr, tmp_path / "in" / tr.host / f"{tr.pid}_results.db", "3", hip_trace=False)
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        reg, evt, strs, info, pmc, kd = (
            next(t for t in tables if t.startswith(f"rocpd_{n}_"))
            for n in ("region", "event", "string", "info_pmc", "pmc_event", "kernel_dispatch")
        )
        guid = con.execute(f'SELECT guid FROM "{evt}" LIMIT 1').fetchone()[0]
        for pid, block, pname in (
            (0x7000000000000000, "KFD", "KFD_EVENT_QUEUE"),
            (7, "SQ", "SQ_WAVES"),
        ):
            con.execute(
                f'INSERT INTO "{info}" (id, guid, nid, pid, name, symbol, block) '
                "VALUES (?, ?, 1, ?, ?, ?, ?)",
                (pid, guid, tr.pid, pname, pname, block),
            )
        dispatch_event = con.execute(f'SELECT event_id FROM "{kd}" LIMIT 1').fetchone()[0]
        # two instances of one counter on one dispatch (a row each, as insert_pmc_event_data
        # writes them): one value, their sum, as the CSV writes it
        for value in (40, 24):
            con.execute(
                f'INSERT INTO "{pmc}" (guid, event_id, pmc_id, value) VALUES (?, ?, 7, ?)',
                (guid, dispatch_event, value),
            )
        cat, name = (con.execute(f'INSERT INTO "{strs}" (guid, string) VALUES (?, ?)',
                                 (guid, s)).lastrowid
                     for s in ("KFD_EVENT_QUEUE", "KFD_EVENT_QUEUE_EVICTION"))  # fmt: skip
        for i in range(3):
            ev = con.execute(
                f'INSERT INTO "{evt}" (guid, category_id, stack_id, parent_stack_id, '
                "correlation_id, extdata) VALUES (?, ?, 0, 0, 0, '{}')",
                (guid, cat),
            ).lastrowid
            con.execute(
                f'INSERT INTO "{reg}" (guid, nid, pid, tid, start, "end", name_id, event_id, '
                "extdata) VALUES (?, 1, ?, ?, ?, ?, ?, ?, '{}')",
                (guid, tr.pid, tr.tid, tr.t0 + 100 * i, tr.t0 + 100 * i + 50, name, ev),
            )
            con.execute(
                f'INSERT INTO "{pmc}" (guid, event_id, pmc_id, value) VALUES (?, ?, ?, 1)',
                (guid, ev, 0x7000000000000000),
            )
        con.commit()
    finally:
        con.close()
    assert main(["import", "rocprof", str(db), "--traces", str(tmp_path / "t"), "--name", "x"]) == 0
    out = capsys.readouterr().out
    assert "3 KFD event regions" in out and "their 3 values not as counters" in out, out
    counters = _counters(tmp_path / "t" / "x")
    assert counters == [("SQ_WAVES", 64.0)], counters
    assert main(["report", str(tmp_path / "t" / "x"), "--json"]) == 0
    cov = json.loads(capsys.readouterr().out)["trace"]["coverage"]
    assert cov["api_calls"] == 0 and not cov["api_functions"], cov
    assert cov["host_syncs"] is None  # no API trace: how many syncs is unknown, never 0


def _counters(run: Path) -> list[tuple[str, float]]:
    """The run's stored counters, (name, value)."""
    from mlaprof.store.reader import load

    df = load(run).table("counters")
    return [(str(a), float(b)) for a, b in zip(df["name"], df["value"], strict=True)]


def test_pftrace_and_otf2_outputs_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rocprofv3's other output formats (rocprofv3.py --output-format: pftrace, otf2) are
    refused with what they are and what to do (generatePerfetto.cpp writes
    ``<pid>_results.pftrace``; generateOTF2.cpp an ``.otf2`` anchor): never "binary, not a CSV"
    or "holds no rocprofv3 output". Beside a format mlaprof reads, that one is imported or
    named."""
    only = tmp_path / "only" / "host"
    only.mkdir(parents=True)
    (only / "4242_results.pftrace").write_bytes(b"\x0a\x8e\x01" + bytes(range(256)))
    code = main(["import", "rocprof", str(tmp_path / "only"), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and "pftrace output (--output-format pftrace)" in err, err
    assert "--output-format rocpd" in err and "Traceback" not in err
    # the OTF2 anchor given alone, a rocpd database of the same run beside it: that one is named
    from tests.conformance.rocpd import write_rocpd

    tr = graph_replays(2, 3)
    both = tmp_path / "both"
    db = write_rocpd(tr, both / f"{tr.pid}_results.db", "3")
    (both / f"{tr.pid}_results.otf2").write_bytes(b"OTF2" + bytes(64))
    code = main(["import", "rocprof", str(both / f"{tr.pid}_results.otf2"),
                 "--traces", str(tmp_path / "t")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "otf2 output" in err and str(db) in err, err
    # the folder imports the database, the OTF2 file passed over
    got, files = collect(both)
    assert (got, files) == ("rocpd", [db])
