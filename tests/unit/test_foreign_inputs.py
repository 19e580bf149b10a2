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
