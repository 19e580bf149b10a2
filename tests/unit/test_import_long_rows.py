"""A kernel trace whose row is longer than the CSV reader's block (a 10 MB mangled kernel name)
imports whole: read again in blocks that hold the longest row."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mlaprof.importers import rocprof_csv
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from tests.trace_io_helpers import fixture

NAME = "_Z" + "x" * (10 << 20)  # 10 MiB


def _trace_with_long_name(path: Path) -> str:
    with open(fixture("rocprofiler-sdk-docs__kernel_trace.csv"), newline="") as f:
        rows = list(csv.reader(f))
    col = [c.lower() for c in rows[0]].index("kernel_name")
    rows[2][col] = NAME
    with open(path, "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_NONNUMERIC).writerows(rows)
    return rows[1][col]


def test_ten_megabyte_kernel_name_imports(tmp_path: Path) -> None:
    src = tmp_path / "kernel_trace.csv"
    other = _trace_with_long_name(src)
    assert rocprof_csv.longest_line(src) > rocprof_csv.BLOCK_BYTES
    run, summary = import_rocprof(src, tmp_path / "t", "long")
    with load(run) as r:
        names = r.kernels["name"].tolist()
    assert summary.rows["kernels"] == len(names) == src.read_bytes().count(b"\n") - 1
    assert names[1] == NAME and names[0] == other


@pytest.mark.parametrize(
    "text", [b"", b"a", b"ab\ncd", b"abc\n", b"\n\nabcd\nab", b"x" * 70_000 + b"\nab"]
)
def test_longest_line(text: bytes, tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(text)
    want = max((len(line) for line in text.split(b"\n")), default=0)
    assert rocprof_csv.longest_line(p) == want
