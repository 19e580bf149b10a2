"""Files users record that mlaprof does not read are refused with what they are and what to
import instead (mlaprof/importers/foreign.py): an Nsight Systems report (``.nsys-rep``) or its
SQLite export (``nsys export --type sqlite``: ``StringIds`` and ``CUPTI_ACTIVITY_KIND_*`` tables,
NVIDIA's "SQLite Export Schema Reference"); never "binary, not a CSV" or "not a rocpd database
(missing ...)". An input mlaprof reads given to the wrong ``import`` kind names the right one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mlaprof.cli import main


def _nsys_sqlite(path: Path) -> Path:
    """Tables as ``nsys export --type sqlite`` creates them (a subset: they are created lazily)."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    con.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, "
        "deviceId INT NOT NULL, streamId INT NOT NULL, correlationId INT, gridX INT NOT NULL, "
        "gridY INT NOT NULL, gridZ INT NOT NULL, blockX INT NOT NULL, blockY INT NOT NULL, "
        "blockZ INT NOT NULL, shortName INT NOT NULL, demangledName INT)"
    )
    con.execute("INSERT INTO StringIds VALUES (1, '_fwd_grouped_kernel_stage1')")
    con.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2, 0, 7, 1, 64, 1, 4, 64, 1, 1, 1, 1)"
    )
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("kind", ["rocprof", "kineto"])
def test_nsight_reports_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    rep = tmp_path / "report1.nsys-rep"
    rep.write_bytes(b"\x00\x01NSYS" + bytes(range(256)) * 4)
    export = _nsys_sqlite(tmp_path / "report1.sqlite")
    for path, what in ((rep, "an Nsight Systems report"),
                       (export, "an Nsight Systems SQLite export (nsys export --type sqlite)")):  # fmt: skip
        code = main(["import", kind, str(path), "--traces", str(tmp_path / "t")])
        err = capsys.readouterr().err
        assert code == 2 and f"{path} is {what}, which mlaprof does not read" in err, err
        assert "mlaprof import kineto" in err and "torch_profiler_dir" in err
        assert "binary" not in err and "missing" not in err and "Traceback" not in err


DATA = Path(__file__).resolve().parents[1] / "data"


def _inputs(tmp_path: Path) -> dict[str, Path]:
    """One input of each kind, as its writer writes it (the shipped fixtures' sources are in
    tests/data), and a rocprofv3 JSON and rocpd database rendered by the conformance writers."""
    from tests.conformance import render
    from tests.conformance.shapes import graph_replays

    return {
        "kineto": DATA / "kineto_graph_replay.json.gz",
        "vllm-log": DATA / "vllm" / "cpu_ngram_serve.log",
        "rocprof": DATA / "aiter" / "gluon_v0119_bug",
        "rocprof-json": render(graph_replays(2, 3), "json", tmp_path / "json")[0],
        "rocprof-db": render(graph_replays(2, 3), "rocpd-3", tmp_path / "db")[0],
    }


@pytest.mark.parametrize("given", ["kineto", "vllm-log", "rocprof", "rocprof-json", "rocprof-db"])
@pytest.mark.parametrize("kind", ["rocprof", "kineto", "vllm-log"])
def test_an_input_given_to_the_wrong_kind_names_the_right_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, kind: str
) -> None:
    """The reader's own error stays first; after it, what the input looks like and the command
    that reads it. Given to its own kind, it imports."""
    path = _inputs(tmp_path)[given]
    right = given.split("-json")[0].split("-db")[0]
    code = main(["import", kind, str(path), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    if right == kind:
        assert code == 0, err
        return
    assert code == 2 and "Traceback" not in err, err
    assert f"import it with mlaprof import {right}" in err, err
    assert err.index(str(path)) < err.index("it looks like"), err  # the reader's error first


@pytest.mark.parametrize("kind", ["rocprof", "kineto", "vllm-log"])
def test_a_missing_or_empty_input_reads_alike_for_every_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    empty = tmp_path / "trace.json"
    empty.write_bytes(b"")
    for path, said in ((tmp_path / "gone", "does not exist"), (empty, "is empty")):
        code = main(["import", kind, str(path), "--traces", str(tmp_path / "t")])
        err = capsys.readouterr().err
        assert code == 2 and err.strip() == f"mlaprof: error: {path} {said}", err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


# the legacy rocprof's (v1) kernel trace as its --stats / --hip-trace runs write results.csv
# (rocprofiler's bin/tblextr.py): the grid's total work-items (grd), no axis
LEGACY_CSV = (
    '"Index","KernelName","gpu-id","queue-id","queue-index","pid","tid","grd","wgr","lds",'
    '"scr","arch_vgpr","accum_vgpr","sgpr","wave_size","sig","obj","DispatchNs","BeginNs",'
    '"EndNs","CompleteNs","DurationNs"\n'
    '0,"_fwd_grouped_kernel_stage1.kd",2,1,0,3495164,3495164,1024,64,512,0,4,4,16,64,'
    '"0x153e64afca00","0x153d64770ec0",5323868593531200,5323868593552306,5323868593554226,'
    "5323868593566416,1920\n"
)


def test_the_legacy_rocprof_kernel_trace_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "legacy"
    folder.mkdir()
    (folder / "results.csv").write_text(LEGACY_CSV)
    for path in (folder / "results.csv", folder):
        code = main(["import", "rocprof", str(path), "--traces", str(tmp_path / "t")])
        err = capsys.readouterr().err
        assert code == 2 and "results.csv is a legacy rocprof (v1) kernel trace" in err, err
        assert "rocprofv3 --kernel-trace" in err and "empty trace" not in err
    # beside a rocprofv3 trace it is passed over, the trace imported
    from tests.conformance import render
    from tests.conformance.shapes import graph_replays

    src, _ = render(graph_replays(2, 3), "csv-7", tmp_path / "v3")
    kernels = next(src.rglob("*_kernel_trace.csv"))
    (kernels.parent / "results.csv").write_text(LEGACY_CSV)
    assert main(["import", "rocprof", str(src), "--traces", str(tmp_path / "t")]) == 0
    # and where that trace is broken, the error is about it, not the legacy file
    kernels.write_text(kernels.read_text() + '"KERNEL_DISPATCH","Agent 2",1\n')
    assert main(["import", "rocprof", str(src), "--traces", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert kernels.name in err and "legacy rocprof" not in err, err


# the legacy rocprof's (v1) JSON trace as its writer lays it out (rocprofiler's bin/sqlitedb.py:
# open_json's '{ "traceEvents":[{}' with its empty first event, label_json's process_name
# records with a sort_index, dump_json's "X" events with every value a string, metadata_json's
# otherData block, close_json's '}')
LEGACY_JSON = (
    '{ "traceEvents":[{}\n'
    ',{"args":{"name":"GPU0"},"ph":"M","pid":6,"name":"process_name","sort_index":0}\n'
    ',{"ph":"X","Name":"_fwd_grouped_kernel_stage1.kd","pid":"6","tid":"1","ts":"21",'
    '"dur":"1",\n  "args":{\n    "BeginNs":"5323868593552306",\n    "EndNs":"5323868593554226"'
    "\n  }\n}\n"
    '],\n"otherData": {\n    "ROCm version": "6.1"\n  }\n}'
)


def test_the_legacy_rocprof_json_trace_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given to ``import kineto`` it read "no kernel or runtime events found"; given to ``import
    rocprof`` it was sent to ``import kineto`` as a PyTorch profiler trace."""
    folder = tmp_path / "legacy"
    folder.mkdir()
    (folder / "results.json").write_text(LEGACY_JSON)
    for kind in ("kineto", "rocprof"):
        for path in (folder / "results.json", folder):
            code = main(["import", kind, str(path), "--traces", str(tmp_path / "t")])
            err = capsys.readouterr().err
            assert code == 2, err
            assert "results.json is a legacy rocprof (v1) JSON trace" in err, (kind, path, err)
            assert "rocprofv3 --kernel-trace" in err and "import kineto" not in err, err
    # a Kineto trace keeps its own reading: the empty first event is the legacy writer's alone
    from mlaprof.importers.foreign import foreign, kind_of

    kineto = Path(__file__).resolve().parents[1] / "data" / "kineto_graph_replay.json.gz"
    assert foreign(kineto) is None and kind_of(kineto) == "kineto"


# per-dispatch columns with the grid as one total: rocprofv2's kernel trace, rocprof-compute's
# pmc_perf.csv (whose counters follow as columns of their own)
TOTAL_GRID_CSV = (
    "Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Grid_Size,Workgroup_Size,LDS_Per_Workgroup,"
    "Scratch_Per_Workitem,Arch_VGPR,Accum_VGPR,SGPR,Wave_Size,Kernel_Name,Start_Timestamp,"
    "End_Timestamp,Correlation_ID\n"
    '1,2,0,100,100,8192,256,0,0,4,4,16,64,"_fwd_grouped_kernel_stage1",2525223085264657,'
    "2525223085267980,1\n"
)
# rocprofv3's counter collection (generateCSV.cpp): the same total grid, with its counters
COUNTER_CSV = (
    '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size",'
    '"Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count",'
    '"Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp",'
    '"End_Timestamp"\n'
    '1,1,"Agent 2",1,100,100,8192,10,"_fwd_grouped_kernel_stage1",256,0,0,4,0,16,"SQ_WAVES",'
    "128,2525223085264657,2525223085267980\n"
)


def test_a_total_grid_kernel_trace_is_named_and_a_counter_collection_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v2 = tmp_path / "v2" / "results_100.csv"
    v2.parent.mkdir()
    v2.write_text(TOTAL_GRID_CSV)
    for path in (v2, v2.parent):
        code = main(["import", "rocprof", str(path), "--traces", str(tmp_path / "t")])
        err = capsys.readouterr().err
        assert code == 2 and "grid is one total (Grid_Size, no axis)" in err, err
        assert "rocprofv3 --kernel-trace" in err
    pmc = tmp_path / "pmc" / "100_counter_collection.csv"
    pmc.parent.mkdir()
    pmc.write_text(COUNTER_CSV)
    assert main(["import", "rocprof", str(pmc.parent), "--traces", str(tmp_path / "t")]) == 0
    # a broken counter collection keeps its reader's own error: it is no total-grid trace
    pmc.write_text(COUNTER_CSV.replace('"SQ_WAVES",128', '"SQ_WAVES",many'))
    assert main(["import", "rocprof", str(pmc), "--traces", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "Counter_Value" in err and "one total" not in err, err


# another profiler's trace-event file, laid out as TensorFlow's timeline writes one
# (tensorflow/python/client/timeline.py, _ChromeTraceFormatter: format_to_string dumps
# {"traceEvents": metadata + events} with compact separators; emit_pid / emit_tid write the
# process and thread names, emit_region an "X" event of category "Op" whose args name the node
# and op, emit_flow_start / emit_flow_end "s" / "t" events of category "DataFlow"): a
# "traceEvents" key, none of Kineto's header keys, no category the kineto reader reads
OTHER_CHROME_TRACE = (
    '{"traceEvents":['
    '{"name":"process_name","ph":"M","pid":0,"args":{"name":"/job:localhost/replica:0/task:0'
    '/device:GPU:0 Compute"}},'
    '{"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"stream:all"}},'
    '{"ph":"X","cat":"Op","name":"MatMul","pid":0,"tid":0,"ts":1700000000000,"dur":42,'
    '"args":{"name":"dense/MatMul","op":"MatMul"}},'
    '{"ph":"s","cat":"DataFlow","name":"dense/MatMul:0","pid":0,"tid":0,"ts":1700000000042,'
    '"id":0}]}'
)


def test_a_chrome_trace_no_pytorch_profiler_wrote_is_not_sent_to_import_kineto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its ``traceEvents`` key alone used to tell it as a Kineto trace: ``import rocprof`` sent
    it to ``import kineto``, which then found no kernel event in it."""
    from mlaprof.importers.foreign import kind_of

    other = tmp_path / "trace.json"
    other.write_text(OTHER_CHROME_TRACE)
    assert kind_of(other) is None
    code = main(["import", "rocprof", str(other), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "import kineto" not in err and "Kineto" not in err, err
    # given to import kineto itself: it says it lacks the profiler's header keys too
    code = main(["import", "kineto", str(other), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and "no kernel or runtime events found" in err, err
    assert "nor the keys the PyTorch profiler opens every trace with" in err, err
    # Kineto's own: its header keys (libkineto's writer puts schemaVersion first), or, where a
    # tool kept only the events, an event of a category the kineto reader reads
    events_only = tmp_path / "events_only.json"
    events_only.write_text(
        '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,'
        '"args":{"device":0,"stream":7,"correlation":3,"grid":[1,1,1],"block":[64,1,1]}}]}'
    )
    assert kind_of(events_only) == "kineto"
    # real ones, as torch's profiler wrote them in vLLM CPU runs (tests/data/vllm): still Kineto's
    real = sorted((DATA / "vllm").glob("cpu_*_profile/*.pt.trace.json.gz"))
    assert len(real) >= 4 and all(kind_of(p) == "kineto" for p in real), real
    header_only = tmp_path / "header_only.json"
    header_only.write_text('{"schemaVersion": 1, "traceEvents": []}')
    assert kind_of(header_only) == "kineto"
    # a PyTorch profiler trace with no GPU or runtime event: the reader's own words alone
    code = main(["import", "kineto", str(header_only), "--traces", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 2 and "no kernel or runtime events found" in err, err
    assert "another profiler" not in err, err
