"""Files users record that mlaprof does not read are refused with what they are and what to
import instead (mlaprof/importers/foreign.py): an Nsight Systems report (``.nsys-rep``) or its
SQLite export (``nsys export --type sqlite``: ``StringIds`` and ``CUPTI_ACTIVITY_KIND_*`` tables,
NVIDIA's "SQLite Export Schema Reference"), and a rocpd database given to a reader of another
format. Never "binary, not a CSV" or "not a rocpd database (missing ...)"."""

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


def test_a_rocpd_database_given_to_another_reader_says_which_command_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.conformance.rocpd import write_rocpd
    from tests.conformance.shapes import graph_replays

    db = write_rocpd(graph_replays(2, 3), tmp_path / "1_results.db", "3")
    for kind, what in (("kineto", "Kineto JSON trace"), ("vllm-log", "vLLM log")):
        code = main(["import", kind, str(db), "--traces", str(tmp_path / "t")])
        err = capsys.readouterr().err
        assert code == 2 and f"is a rocpd database (rocprofv3), not a {what}" in err, err
        assert "mlaprof import rocprof" in err and "does not read" not in err
    assert main(["import", "rocprof", str(db), "--traces", str(tmp_path / "t")]) == 0
