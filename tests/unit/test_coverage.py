"""Never a green result on missing evidence: an imported trace whose MLA kernels were not
recognised gives a WARNING (kernels read, attention-like names, the --patterns hint) and no "OK"
in any view; a user's kernel without the axes that pin rows and qlen says the collapse check was
"not checked"; an unknown sync verdict says what the API trace held; text is said once and
empty tables are left out."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from mlaprof.analysis import summary
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.syncs import SYNC_CALLS
from mlaprof.cli import main
from mlaprof.figures.html_report import render_html
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.kernel_table import KernelMatcher, KernelPattern
from mlaprof.store import load

DATA = Path(__file__).resolve().parents[1] / "data"
BUG = DATA / "aiter" / "gluon_v0119_bug"  # a CRITICAL S = 1 collapse on _mla_gluon
LLAMA = DATA / "rocprof"  # real rocprofv3 output of a llama.cpp decode: no MLA
RENAMED = "_mla_gluon_bh16_kernel"


def _renamed(dst: Path, pid: int = 4242) -> Path:
    """The collapse trace with its attention kernel under a name the table does not know."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in BUG.iterdir():
        text = f.read_text().replace('"_mla_gluon"', f'"{RENAMED}"')
        (dst / f.name.replace("4242", str(pid))).write_text(text)
    return dst


def _llama(dst: Path) -> Path:
    dst.mkdir(parents=True)
    for kind in ("kernel", "hip_api"):
        shutil.copy(LLAMA / f"rocprof-unified-viewer__decode_{kind}_trace.csv", dst)
    return dst


def _views(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The terminal report, --json, tui --once and the HTML report's text of one run."""
    out = {}
    assert main(["report", str(run_dir)]) == 0
    out["terminal"] = capsys.readouterr().out
    assert main(["report", str(run_dir), "--json"]) == 0
    out["json"] = capsys.readouterr().out
    assert main(["tui", str(run_dir), "--once"]) == 0
    out["tui"] = capsys.readouterr().out
    with load(run_dir) as run:
        page = html.unescape(render_html(build_summary(run)))
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)  # plotly.js, CSS
    out["html"] = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def said_once(text: str, what: str) -> bool:
    """``what`` said once in the report's own lines, and once in its sections (the rows layer
    says a repeated text once and points to it: mlaprof.reporters.rows.said_once)."""
    from mlaprof.reporters.rows import HEADING

    own, _, sections = text.partition(_flat(HEADING))
    return own.count(what) == 1 and sections.count(what) == 1


def test_renamed_kernel_warns_in_every_view_and_says_ok_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = import_rocprof(_renamed(tmp_path / "in"), tmp_path / "t", "ren")
    v = _views(run_dir, capsys)
    doc = json.loads(v["json"])
    (f,) = doc["findings"]
    assert (f["severity"], f["kind"]) == ("warning", "no-mla")
    assert "54 kernels read" in f["title"]  # 54 dispatches in the trace's kernel file
    assert f"{RENAMED} (x12)" in f["evidence"]  # 3 replays x 4 layers
    assert "--mla-pattern" in f["fix"] and "--patterns" in f["fix"]
    for name, text in v.items():
        assert not re.search(r"\bOK\b", text), name
        assert "no findings" not in text.lower(), name
    assert "WARNING" in v["terminal"] and "[WARN] no MLA kernel recognised" in v["tui"]
    assert "no MLA kernel recognised" in v["html"]
    term = _flat(v["terminal"])
    assert said_once(term, "no MLA kernels recognised, so no step to judge")
    for stub in ("verify path and kernel variant", "KV splits: no split metadata"):
        assert stub not in term and stub not in v["html"]
    # 9 API rows were read (3 graph launches, 6 kernel launches): said, not "no HIP/CUDA API"
    sy = doc["trace"]["syncs"]
    assert sy["status"] == "unknown"
    assert "9 API calls read (hipLaunchKernel x6, hipGraphLaunch x3)" in sy["evidence"]
    assert "none of them a host sync" in sy["evidence"] and "no HIP/CUDA API" not in term


def test_real_llama_trace_warns_with_its_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = import_rocprof(_llama(tmp_path / "in"), tmp_path / "t", "ll")
    # counted here from the fixture files, not from the import
    with open(tmp_path / "in" / "rocprof-unified-viewer__decode_hip_api_trace.csv") as fh:
        funcs = [r["Function"] for r in csv.DictReader(fh)]
    with open(tmp_path / "in" / "rocprof-unified-viewer__decode_kernel_trace.csv") as fh:
        n_kernels = sum(1 for _ in csv.DictReader(fh))
    n_sync = sum(f in SYNC_CALLS for f in funcs)
    with load(run_dir) as run:
        doc = summary(run)
    (f,) = doc["findings"]
    assert f["kind"] == "no-mla" and f"{n_kernels} kernels read" in f["title"]
    assert n_kernels == 144 and "no kernel name looks like attention" in f["evidence"]
    ev = doc["trace"]["syncs"]["evidence"]
    assert f"{len(funcs)} API calls read" in ev and f"{n_sync} of them host syncs" in ev
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "OK" not in out and "findings (1)" in out
    assert said_once(_flat(out), "no MLA kernels recognised, so no step to judge")


def test_one_rank_without_mla_is_named(tmp_path: Path) -> None:
    src = tmp_path / "in"
    for f in BUG.iterdir():
        (src / "hostA").mkdir(parents=True, exist_ok=True)
        shutil.copy(f, src / "hostA" / f.name)
    _renamed(src / "hostB", pid=5151)
    run_dir, _ = import_rocprof(src, tmp_path / "t", "two")
    with load(run_dir) as run:
        doc = summary(run)
    kinds = {f["kind"]: f for f in doc["findings"]}
    assert "split-collapse" in kinds  # the recognised rank is still judged
    w = kinds["no-mla"]
    assert w["data"]["ranks"] == [1] and "on rank 1 of 2" in w["title"]
    assert "54 kernels read" in w["title"]  # that rank's kernels only


def test_user_pattern_without_rows_or_qlen_is_not_checked(tmp_path: Path) -> None:
    src = _renamed(tmp_path / "in")
    matcher = KernelMatcher().with_extra([f"y:{RENAMED}"])
    run_dir, _ = import_rocprof(src, tmp_path / "t", "user", matcher=matcher)
    with load(run_dir) as run:
        doc = summary(run)
    (f,) = doc["findings"]
    assert (f["severity"], f["kind"]) == ("warning", "not-checked")
    assert "not checked" in f["title"] and "S 1" in f["title"]
    assert "no split rule is known for path 'user'" in f["title"]
    assert "rows and qlen not on the grid" in f["title"]
    (chk,) = doc["trace"]["coverage"]["collapse_checks"]
    assert chk["status"] == "not checked"


def test_pattern_that_pins_rows_and_qlen_is_checked(tmp_path: Path) -> None:
    src = _renamed(tmp_path / "in")
    gluon = KernelPattern("aiter-gluon", RENAMED, "stage1", "y", "x", "z", RENAMED)
    run_dir, _ = import_rocprof(
        src, tmp_path / "t", "pinned", matcher=KernelMatcher().with_user([gluon])
    )
    with load(run_dir) as run:
        doc = summary(run)
    kinds = [(f["severity"], f["kind"]) for f in doc["findings"]]
    assert kinds == [("critical", "split-collapse")]  # the collapse the rename had hidden
    (chk,) = doc["trace"]["coverage"]["collapse_checks"]
    assert chk["status"] == "checked"


# rocprofiler-sdk source/lib/output/generateCSV.cpp, the counter collection's generate_csv: one
# row per counter of each dispatch, the grid and workgroup as their product (no axis)
_COUNTER_HEADER = [
    "Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id", "Thread_Id",
    "Grid_Size", "Kernel_Id", "Kernel_Name", "Workgroup_Size", "LDS_Block_Size", "Scratch_Size",
    "VGPR_Count", "Accum_VGPR_Count", "SGPR_Count", "Counter_Name", "Counter_Value",
    "Start_Timestamp", "End_Timestamp",
]  # fmt: skip


def _counters_only(dst: Path) -> tuple[Path, int, int]:
    """The collapse trace's dispatches as rocprofv3 --pmc SQ_WAVES GRBM_COUNT writes them with no
    kernel trace; also the number of dispatches and of _mla_gluon dispatches."""
    dst.mkdir(parents=True)
    with open(BUG / "4242_kernel_trace.csv") as fh:
        rows = list(csv.DictReader(fh))
    with open(dst / "4242_counter_collection.csv", "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(_COUNTER_HEADER)
        for r in rows:
            grid = int(r["Grid_Size_X"]) * int(r["Grid_Size_Y"]) * int(r["Grid_Size_Z"])
            wg = (int(r["Workgroup_Size_X"]) * int(r["Workgroup_Size_Y"])
                  * int(r["Workgroup_Size_Z"]))  # fmt: skip
            for name, value in (("GRBM_COUNT", 1000.0), ("SQ_WAVES", float(grid // 64))):
                w.writerow([int(r["Correlation_Id"]), int(r["Dispatch_Id"]), r["Agent_Id"],
                            int(r["Queue_Id"]), 4242, int(r["Thread_Id"]), grid,
                            int(r["Kernel_Id"]), r["Kernel_Name"], wg,
                            int(r["LDS_Block_Size"]), 0, int(r["VGPR_Count"]), 0,
                            int(r["SGPR_Count"]), name, value, int(r["Start_Timestamp"]),
                            int(r["End_Timestamp"])])  # fmt: skip
    mla = sum(r["Kernel_Name"] == "_mla_gluon" for r in rows)
    return dst, len(rows), mla


def test_counters_without_a_kernel_trace_say_so_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rocprofv3 --pmc alone writes a counter collection and no kernel trace: the finding says
    the import holds counters but no kernels, names the kernels the counters were sampled on
    (the MLA one among them), and tells how to record them; never "no kernel looks like
    attention" of a trace whose counters name the MLA kernel."""
    src, n, mla = _counters_only(tmp_path / "in")
    assert mla == 12  # 3 replays x 4 layers
    run_dir, _ = import_rocprof(src, tmp_path / "t", "pmc")
    v = _views(run_dir, capsys)
    doc = json.loads(v["json"])
    (f,) = doc["findings"]
    assert f["kind"] == "no-mla" and "0 kernels read" in f["title"]
    assert "hardware counters but no kernel trace" in f["title"]
    assert f"_mla_gluon (x{2 * mla}, in the MLA kernel table)" in f["evidence"]
    assert "no kernel name looks like attention" not in f["evidence"]
    assert "--kernel-trace" in f["fix"] and "rocpd" in f["fix"]
    counted = {k["name"]: k for k in doc["trace"]["coverage"]["counters_only"]}
    assert sum(k["values"] for k in counted.values()) == 2 * n
    assert [k for k, c in counted.items() if c["mla"]] == ["_mla_gluon"]
    for name in ("terminal", "tui", "html"):
        assert "no kernel trace" in _flat(v[name]), name
        assert not re.search(r"\bOK\b", v[name]), name


def test_counters_beside_a_kernel_trace_are_not_counters_only(tmp_path: Path) -> None:
    src, _, _ = _counters_only(tmp_path / "in")
    _renamed(tmp_path / "in")  # a kernel trace of the same process beside the counters
    run_dir, _ = import_rocprof(src, tmp_path / "t", "both")
    with load(run_dir) as run:
        doc = summary(run)
    (f,) = doc["findings"]
    assert "no kernel trace" not in f["title"] and "counters_only" not in f["data"]
    assert doc["trace"]["coverage"].get("counters_only") is None


def test_json_counter_collection_without_a_kernel_trace(tmp_path: Path) -> None:
    """The same in rocprofv3's JSON (-f json --pmc, no kernel trace): ``callback_records.
    counter_collection`` holds each dispatch's ``dispatch_data`` and one value per counter
    instance (``counter_info.hpp`` ``tool_counter_record_t::save``; the counters named by id in
    the process's ``counters`` list). Read into the counters as the CSV writes them (per
    dispatch, one row per counter, its instances summed), so the warning names the kernels."""
    from tests.conformance import render
    from tests.conformance.shapes import STAGE1, graph_replays

    tr = graph_replays(3, 4)
    path, _ = render(tr, "json", tmp_path / "in")
    doc = json.loads(path.read_text())
    proc = doc["rocprofiler-sdk-tool"][0]
    ids = {"SQ_WAVES": 0x10, "GRBM_COUNT": 0x11}
    proc["counters"] = [
        {"agent_id": {"handle": 0x5F01}, "id": {"handle": h}, "is_constant": 0,
         "is_derived": 0, "name": n, "description": "", "block": "SQ", "expression": "",
         "dimension_ids": []}
        for n, h in ids.items()
    ]  # fmt: skip
    proc["callback_records"]["counter_collection"] = [
        {"thread_id": k["thread_id"],
         "dispatch_data": {"size": 64, "correlation_id": k["correlation_id"],
                           "start_timestamp": k["start_timestamp"],
                           "end_timestamp": k["end_timestamp"],
                           "dispatch_info": k["dispatch_info"]},
         # two instances (shader engines) of SQ_WAVES, one of GRBM_COUNT
         "records": [{"counter_id": {"handle": 0x10}, "value": 3.0},
                     {"counter_id": {"handle": 0x11}, "value": 1000.0},
                     {"counter_id": {"handle": 0x10}, "value": 5.0}],
         "stream_id": {"handle": 0}}
        for k in proc["buffer_records"]["kernel_dispatch"]
    ]  # fmt: skip
    n = len(proc["buffer_records"]["kernel_dispatch"])
    proc["buffer_records"]["kernel_dispatch"] = []
    path.write_text(json.dumps(doc))
    run_dir, _ = import_rocprof(path, tmp_path / "t", "pmc")
    with load(run_dir) as run:
        counters = run.table("counters")
        doc = summary(run)
    assert len(counters) == 2 * n
    sq = counters[counters["name"] == "SQ_WAVES"]
    assert set(sq["value"]) == {8.0} and len(sq) == n  # each dispatch's instances summed
    assert set(counters["name"]) == set(ids)
    (f,) = doc["findings"]
    assert "hardware counters but no kernel trace" in f["title"]
    assert f"{STAGE1} (x{2 * 3 * 4}, in the MLA kernel table)" in f["evidence"]


def test_counters_only_kernels_are_marked_by_the_imports_own_table(tmp_path: Path) -> None:
    """A kernel the user's --mla-pattern names is an MLA kernel of that import: the counters-only
    list marked the counters' kernels by the default table alone, so a user's own MLA kernel read
    as no MLA kernel. The run keeps its import's table (run.json ``kernel_table``, only where it
    is not the default one) and the list is marked by it."""
    from mlaprof.kernel_table import KernelMatcher, matcher_of, matcher_record

    src, _, _ = _counters_only(tmp_path / "in")
    plain, _ = import_rocprof(src, tmp_path / "t", "plain")
    mine = KernelMatcher().with_extra(["z:void aiter::rmsnorm_kernel.*"])
    ours, _ = import_rocprof(src, tmp_path / "t", "mine", mine)
    marked = {}
    for run_dir in (plain, ours):
        with load(run_dir) as run:
            got = summary(run)["trace"]["coverage"]["counters_only"]
        marked[run_dir.name] = sorted(k["name"].split("<")[0] for k in got if k["mla"])
    assert marked["plain"] == ["_mla_gluon"]
    assert marked["mine"] == ["_mla_gluon", "void aiter::rmsnorm_kernel"]
    assert "kernel_table" not in json.loads((plain / "run.json").read_text())
    kept = json.loads((ours / "run.json").read_text())["kernel_table"]
    assert kept["before"] == [] and [r["regex"] for r in kept["after"]] == [
        "void aiter::rmsnorm_kernel.*"
    ]
    assert matcher_of(kept).patterns == mine.patterns  # the import's table, row for row
    assert matcher_record(KernelMatcher()) is None
    from mlaprof.errors import MlaprofError

    with pytest.raises(MlaprofError, match="kernel_table is not a kernel table record"):
        matcher_of({"after": [{"regex": "x", "bogus": 1}]})  # a damaged run.json: said, no trace


def test_a_kineto_import_keeps_its_table_too(tmp_path: Path) -> None:
    """Both kernel importers keep the user's rows of their table the same way."""
    from mlaprof.importers.kineto import import_kineto
    from mlaprof.kernel_table import KernelMatcher, matcher_of

    trace = DATA / "kineto_graph_replay.json.gz"
    plain, _ = import_kineto(trace, tmp_path, "plain")
    mine = KernelMatcher().with_extra(["z:my_own_mla_kernel"])
    ours, _ = import_kineto(trace, tmp_path, "mine", mine)
    assert "kernel_table" not in json.loads((plain / "run.json").read_text())
    kept = json.loads((ours / "run.json").read_text())["kernel_table"]
    assert matcher_of(kept).patterns == mine.patterns
