"""An imported rocprofv3 trace states the GPU its kernels ran on, read from the agent records
rocprofv3 writes beside them (``<pid>_agent_info.csv``, ``rocpd_info_agent``, the JSON's
``agents``; tests/conformance writes each as rocprofiler-sdk does): the agent's arch name and
marketing name, per rank, with where it was read. A trace without agent records leaves the
device unknown (never a default); ranks on different GPUs keep their own, never merged. Two
traces that state the same device compare it (the workload's device part)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from mlaprof.analysis.diff import diff
from mlaprof.analysis.run_summary import build_summary
from mlaprof.cli import main
from mlaprof.importers.common import GpuAgent, kernel_device
from mlaprof.store.reader import load
from tests.conformance import render
from tests.conformance.shapes import graph_replays
from tests.conftest import EACH_TEST

WORKER_GROUP = EACH_TEST

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

MI300X = "gfx942 (AMD Instinct MI300X)"
# the formats that write agent records
WITH_AGENTS = ["rocpd-3", "rocpd-3.0.3", "json", "csv-7", "csv-6.3", "csv-convert", "csv-7-type",
               "csv-convert-type"]  # fmt: skip


def _import(src: Path, traces: Path, name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["import", "rocprof", str(src), "--traces", str(traces), "--name", name]) == 0
    capsys.readouterr()
    assert main(["report", str(traces / name), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _rank_device(run: Path, rank: int) -> str | None:
    con = sqlite3.connect(run / f"rank{rank}.db")
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'device_name'").fetchone()
    finally:
        con.close()
    return None if row is None else row[0]


@pytest.mark.parametrize("fmt", WITH_AGENTS)
def test_the_agent_records_name_the_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    path, _ = render(graph_replays(2, 3), fmt, tmp_path / "in")
    rep = _import(path, tmp_path / "t", "x", capsys)
    assert rep["device"] == MI300X, rep["device"]
    meta = json.loads((tmp_path / "t" / "x" / "run.json").read_text())
    assert meta["device"] == MI300X
    # where it was read, named by the format's own record
    said = {"rocpd": "rocpd_info_agent", "json": "JSON agents", "csv": "agent_info.csv"}
    assert said[fmt.split("-")[0]] in meta["device_source"], meta["device_source"]
    assert _rank_device(tmp_path / "t" / "x", 0) == MI300X


@pytest.mark.parametrize("fmt", ["rocpd-3.0.3", "json", "csv-7"])
def test_no_agent_records_leave_the_device_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    tr = graph_replays(2, 3)
    tr.arch = tr.product = None
    path, _ = render(tr, fmt, tmp_path / "in")
    rep = _import(path, tmp_path / "t", "x", capsys)
    assert rep["device"].startswith("unknown"), rep["device"]
    meta = json.loads((tmp_path / "t" / "x" / "run.json").read_text())
    assert not meta.get("device") and "device_source" not in meta
    assert _rank_device(tmp_path / "t" / "x", 0) is None


@pytest.mark.parametrize("fmt", ["rocpd-3.0.1", "csv-7"])
def test_ranks_on_different_gpus_keep_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    a, b = graph_replays(2, 3), graph_replays(2, 3)
    a.pid, a.tid, a.agent, a.host = 100, 100, 1, "hostA"
    b.pid, b.tid, b.agent, b.host = 200, 200, 1, "hostB"
    b.arch, b.product = "gfx950", "AMD Instinct MI355X"
    for tr in (a, b):
        render(tr, fmt, tmp_path / "in")
    rep = _import(tmp_path / "in", tmp_path / "t", "x", capsys)
    run = tmp_path / "t" / "x"
    assert [_rank_device(run, 0), _rank_device(run, 1)] == [MI300X, "gfx950 (AMD Instinct MI355X)"]
    assert rep["device"] == f"rank 0: {MI300X}; rank 1: gfx950 (AMD Instinct MI355X)"


def test_an_agent_id_two_gpus_answer_to_names_no_device() -> None:
    """A CSV's "Agent 2" is node 2 or logical node 2: where those are two GPUs of different
    names, the kernel's device is not known (never the first one's)."""
    agents = [
        GpuAgent(frozenset({2, 1}), "gfx942", None),
        GpuAgent(frozenset({3, 2}), "gfx950", None),
    ]
    assert kernel_device([2], agents) is None
    assert kernel_device([1], agents) == "gfx942"
    assert kernel_device([7], agents) is None


def test_two_traces_stating_one_device_compare_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, steps in (("a", 2), ("b", 3)):
        path, _ = render(graph_replays(steps, 3), "csv-7", tmp_path / f"in-{name}")
        _import(path, tmp_path / "t", name, capsys)
    with load(tmp_path / "t" / "a") as ra, load(tmp_path / "t" / "b") as rb:
        sa, sb = build_summary(ra), build_summary(rb)
    d = diff(sa, sb)
    dev = {f.name: f for f in d.workload.fields}["device"]
    assert (dev.before, dev.after) == (MI300X, MI300X)
    assert "neither run states device" not in d.workload.text, d.workload.text
    assert "only" not in d.workload.text or "device" not in d.workload.text


def test_every_view_says_where_the_device_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The device a trace states carries its source in the summary (``imported.device_source``),
    so every view says which of the trace's records named it, beside where it was imported from."""
    from mlaprof.importers.rocprof import DEVICE_SOURCES
    from tests.view_texts import every_view

    path, _ = render(graph_replays(2, 3), "csv-7", tmp_path / "in")
    rep = _import(path, tmp_path / "t", "x", capsys)
    assert rep["imported"]["device_source"] == DEVICE_SOURCES["csv"]
    run = tmp_path / "t" / "x"
    with load(run) as r:
        s = build_summary(r)
    for view, text in every_view(run, s, with_json=True).items():
        flat = re.sub(r"\\(.)", r"\1", " ".join(text.split()))  # Markdown's escapes
        assert "agent_info.csv (Name, Product_Name)" in flat, view


def _two_gpu_node(folder: Path, tr, second: tuple[str, str]) -> None:
    """Rewrite the trace's agent_info.csv as a node of a CPU (node 0) and two GPUs of different
    names: the trace's own at node 1 (GPU 0) and ``second`` at node 2 (GPU 1)."""
    from tests.conformance.rocprof_csv import AGENT_INFO_HEADER, _write, agent_info_rows

    cpu, gpu = agent_info_rows(tr)
    first = [1, 1, *gpu[2:]]
    other = [2, 2, *gpu[2:-4], second[0], "AMD", second[1], ""]
    _write(folder / tr.host / f"{tr.pid}_agent_info.csv", AGENT_INFO_HEADER, [cpu, first, other])


@pytest.mark.parametrize("use_arrow", [True, False])
def test_a_type_relative_gpu_is_the_nodes_nth_gpu(tmp_path: Path, use_arrow: bool) -> None:
    """rocprofv3 --agent-index type-relative writes a kernel's agent as "GPU <n>", the n-th GPU
    of the node counted from 0 (rocprofiler-sdk metadata.cpp ``create_agent_index``); read as a
    node id, "GPU 1" would be node 1: the other GPU. Both CSV parsers read it alike."""
    from mlaprof.importers import rocprof_csv
    from mlaprof.importers.common import TYPE_IDS
    from mlaprof.importers.rocprof import import_rocprof
    from tests.conformance.rocprof_csv import write_csv

    tr = graph_replays(2, 3)
    write_csv(tr, tmp_path / "in" / tr.host, "7", agent_index="type-relative")
    kfile = tmp_path / "in" / tr.host / f"{tr.pid}_kernel_trace.csv"
    kfile.write_text(kfile.read_text().replace('"GPU 0"', '"GPU 1"'))
    _two_gpu_node(tmp_path / "in", tr, ("gfx950", "AMD Instinct MI355X"))
    agents = rocprof_csv.read_agent_info(tmp_path / "in" / tr.host / f"{tr.pid}_agent_info.csv")
    assert [(a.arch, a.gpu_index) for a in agents] == [("gfx942", 0), ("gfx950", 1)]
    text = kfile.read_text()
    kc = rocprof_csv.read_kernels(kfile, text, rocprof_csv._header_of(kfile, text), use_arrow)
    assert kc.agent_ids == TYPE_IDS
    assert set(kc.col("device")[0].tolist()) == {1}
    run, _ = import_rocprof(tmp_path / "in", tmp_path / "t", "x", use_arrow=use_arrow)
    assert _rank_device(run, 0) == "gfx950 (AMD Instinct MI355X)"
    meta = json.loads((run / "run.json").read_text())
    assert meta["device"] == "gfx950 (AMD Instinct MI355X)"


def test_type_relative_ranks_keep_their_gpu_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two processes of one node, each on its own GPU written type-relative: ranks in GPU
    order, each rank's agent kept as written ("GPU 1") and the fleet saying what it is."""
    from tests.conformance.rocprof_csv import write_csv

    procs = []
    for pid, n in ((300, 1), (400, 0)):  # the later pid on the first GPU
        tr = graph_replays(2, 3)
        tr.pid = tr.tid = pid
        write_csv(tr, tmp_path / "in" / tr.host, "7", agent_index="type-relative")
        k = tmp_path / "in" / tr.host / f"{pid}_kernel_trace.csv"
        k.write_text(k.read_text().replace('"GPU 0"', f'"GPU {n}"'))
        _two_gpu_node(tmp_path / "in", tr, ("gfx950", "AMD Instinct MI355X"))
        procs.append(pid)
    rep = _import(tmp_path / "in", tmp_path / "t", "x", capsys)
    meta = json.loads((tmp_path / "t" / "x" / "run.json").read_text())
    assert [(s["pid"], s["agent"]) for s in meta["rank_sources"]] == [(400, "GPU 0"),
                                                                      (300, "GPU 1")]  # fmt: skip
    assert rep["device"] == f"rank 0: {MI300X}; rank 1: gfx950 (AMD Instinct MI355X)"
    assert [r["agent"] for r in rep["fleet"]["per_rank"]] == ["GPU 0", "GPU 1"]
    assert "--agent-index type-relative" in rep["fleet"]["hosts_source"]
    assert "not a GPU index" not in rep["fleet"]["hosts_source"]


def test_mixed_agent_forms_and_non_gpu_agents_name_no_device(tmp_path: Path) -> None:
    """A rank whose kernel records write agents both ways ("Agent 1" and "GPU 0") cannot be
    mapped either way: no device (never the first reading). A type-relative agent that is no
    GPU ("CPU 0", "UNK 0") is no kernel's device: NULL, not 0."""
    from mlaprof.importers import rocprof_csv
    from mlaprof.importers.common import MIXED_IDS, agent_ids_of, agent_index, agent_ref

    assert agent_ref("GPU 3") == ("type", 3) and agent_ref("Agent 3") == ("node", 3)
    assert agent_index("CPU 0") is None and agent_index("UNK 2") is None
    assert agent_ids_of({"node", "type"}) == MIXED_IDS
    agents = [GpuAgent(frozenset({1}), "gfx942", None, 0)]
    assert kernel_device([0], agents, MIXED_IDS) is None
    tr = graph_replays(2, 3)
    write_csv_rows = tmp_path / "k.csv"
    from tests.conformance.rocprof_csv import write_csv

    write_csv(tr, tmp_path / "in", "7", agent_index="type-relative")
    k = tmp_path / "in" / f"{tr.pid}_kernel_trace.csv"
    lines = k.read_text().splitlines()
    lines[1] = lines[1].replace('"GPU 0"', '"Agent 1"')
    lines[2] = lines[2].replace('"GPU 0"', '"CPU 0"')
    write_csv_rows.write_text("\n".join(lines) + "\n")
    for use_arrow in (True, False):
        text = write_csv_rows.read_text()
        kc = rocprof_csv.read_kernels(
            write_csv_rows, text, rocprof_csv._header_of(write_csv_rows, text), use_arrow
        )
        assert kc.agent_ids == MIXED_IDS
        dev, mask = kc.col("device")
        assert mask is not None and bool(mask[1]) and not bool(mask[0])


def test_a_type_relative_gpu_exports_as_a_gpu_agent(tmp_path: Path) -> None:
    """A type-relative trace's kernels on "GPU 0" are stored with device 0, the number that
    rocprofv3's default numbering gives the host CPU's node: the rocpd export still writes
    their agent as a GPU (a kernel's agent is one), and a transfer's "CPU 0" as a CPU."""
    from mlaprof.exporters.rocpd_export import export_rocpd
    from mlaprof.importers.rocprof import import_rocprof
    from tests.conformance.rocprof_csv import write_csv

    tr = graph_replays(2, 3)
    write_csv(tr, tmp_path / "in" / tr.host, "7", agent_index="type-relative")
    copy = tmp_path / "in" / tr.host / f"{tr.pid}_memory_copy_trace.csv"
    copy.write_text(
        '"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id",'
        '"Correlation_Id","Start_Timestamp","End_Timestamp"\n'
        f'"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0,"CPU 0","GPU 0",1,{tr.t0},{tr.t0 + 9}\n'
    )
    run, _ = import_rocprof(tmp_path / "in", tmp_path / "t", "x")
    with load(run) as r:
        export_rocpd(r, tmp_path / "x.db")
    con = sqlite3.connect(tmp_path / "x.db")
    try:
        kernel_agents = {row[0] for row in con.execute(
            "SELECT A.type FROM rocpd_kernel_dispatch K JOIN rocpd_info_agent A "
            "ON A.id = K.agent_id AND A.guid = K.guid")}  # fmt: skip
        copy_ends = con.execute(
            "SELECT S.type, D.type FROM rocpd_memory_copy M "
            "JOIN rocpd_info_agent S ON S.id = M.src_agent_id AND S.guid = M.guid "
            "JOIN rocpd_info_agent D ON D.id = M.dst_agent_id AND D.guid = M.guid"
        ).fetchall()
    finally:
        con.close()
    assert kernel_agents == {"GPU"}
    assert copy_ends == [("CPU", "GPU")]


def test_a_type_relative_trace_exports_its_kernels_type_relative(tmp_path: Path) -> None:
    """run.json keeps how each rank's kernels number their GPU (``kernel_agent_ids``): a CSV
    export writes a type-relative trace's kernels as "GPU N" again (written "Agent N", a reader
    of rocprofv3's CSV takes N for a node id: "Agent 0" is the host CPU's node), and reads back
    type-relative; a trace numbered by node keeps "Agent N" and has no such key."""
    from mlaprof.exporters.csv_export import export_csv
    from mlaprof.importers.common import TYPE_IDS
    from mlaprof.importers.rocprof import import_rocprof
    from tests.conformance.rocprof_csv import write_csv

    for index, written in (("type-relative", "GPU"), ("absolute", "Agent")):
        tr = graph_replays(2, 3)
        src = tmp_path / index / "in" / tr.host
        if index == "type-relative":
            write_csv(tr, src, "7", agent_index="type-relative")
        else:
            write_csv(tr, src, "7")
        run, _ = import_rocprof(src.parent, tmp_path / index / "t", "x")
        kept = json.loads((run / "run.json").read_text()).get("kernel_agent_ids")
        assert kept == ({"0": TYPE_IDS} if written == "GPU" else None), kept
        with load(run) as r:
            export_csv(r, tmp_path / index / "out")
        (kfile,) = (tmp_path / index / "out").rglob("*kernel_trace.csv")
        agents = {line.split(",")[1] for line in kfile.read_text().splitlines()[1:]}
        assert agents and all(a.startswith(f'"{written} ') for a in agents), agents
        back, _ = import_rocprof(tmp_path / index / "out", tmp_path / index / "t", "back")
        again = json.loads((back / "run.json").read_text()).get("kernel_agent_ids")
        assert again == kept
