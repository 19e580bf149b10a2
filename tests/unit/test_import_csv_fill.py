"""The Arrow route's in-memory columns are filled in place, sized from the rows per byte of the
blocks read so far: rows that run shorter than the first blocks (more rows than estimated) grow
the columns, longer ones leave them oversized; either way every value comes back in order."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from mlaprof.exporters.csv_export import KERNEL_HEADER
from mlaprof.importers import rocprof_csv


def _write(path: Path, name_lengths: list[int]) -> list[dict[str, str]]:
    """A kernel trace with one row per entry, each kernel name that long; the rows as written."""
    rows = []
    for i, length in enumerate(name_lengths):
        rows.append({
            "Kind": "KERNEL_DISPATCH", "Agent_Id": f"Agent {2 + i % 3}", "Queue_Id": "1",
            "Stream_Id": "1", "Thread_Id": "7", "Dispatch_Id": str(i + 1), "Kernel_Id": "4",
            "Kernel_Name": f"k{i % 5}_" + "x" * length, "Correlation_Id": str(1000 + i // 3),
            "Start_Timestamp": str(10**18 + 97 * i), "End_Timestamp": str(10**18 + 97 * i + 50),
            "LDS_Block_Size": "0", "Scratch_Size": "0", "VGPR_Count": "8",
            "Accum_VGPR_Count": "0", "SGPR_Count": "16", "Workgroup_Size_X": "64",
            "Workgroup_Size_Y": "1", "Workgroup_Size_Z": "1", "Grid_Size_X": str(64 * (1 + i % 4)),
            "Grid_Size_Y": "1", "Grid_Size_Z": "1",
        })  # fmt: skip
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(KERNEL_HEADER), quoting=csv.QUOTE_NONNUMERIC)
        w.writeheader()
        w.writerows(rows)
    return rows


@pytest.mark.parametrize(
    ("lengths", "shape"),
    [
        ([400] * 40 + [1] * 2000, "grown"),  # long rows first: more rows than estimated
        ([1] * 40 + [400] * 600, "oversized"),  # short rows first: fewer than estimated
        ([5] * 3, "one block"),
    ],
)
def test_columns_filled_in_place_hold_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lengths: list[int], shape: str
) -> None:
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 4096)  # ~10 long or ~20 short rows a block
    sizes: list[int] = []  # the columns' lengths each time one is (re)allocated
    real = rocprof_csv._Filled.slot

    def spy(self: rocprof_csv._Filled, col: str, *args: object) -> np.ndarray:
        before = len(self.cols.get(col, ()))
        out = real(self, col, *args)  # type: ignore[arg-type]
        if col == "start_ns" and len(self.cols[col]) != before:
            sizes.append(len(self.cols[col]))
        return out

    monkeypatch.setattr(rocprof_csv._Filled, "slot", spy)
    src = tmp_path / "kernel_trace.csv"
    rows = _write(src, lengths)
    kc = rocprof_csv.read_kernel_file(src)
    n = len(rows)
    assert kc.n == n
    if shape == "grown":
        assert len(sizes) > 1 and sizes[0] < n
    elif shape == "oversized":
        assert len(sizes) == 1 and sizes[0] > n
    want = {
        "start_ns": [int(r["Start_Timestamp"]) for r in rows],
        "end_ns": [int(r["End_Timestamp"]) for r in rows],
        "correlation": [int(r["Correlation_Id"]) for r in rows],
        "device": [int(r["Agent_Id"].split()[1]) for r in rows],
    }
    for col, values in want.items():
        got, mask = kc.col(col)
        assert mask is None and len(got) == n and got.tolist() == values, col
    assert [kc.names[i] for i in kc.name_idx.tolist()] == [r["Kernel_Name"] for r in rows]
    assert kc.name_idx.dtype == np.int32 and kc.col("device")[0].dtype == np.int32
    assert kc.col("grid_x")[0].tolist() == [int(r["Grid_Size_X"]) for r in rows]  # spilled


REAL = Path(__file__).parent.parent / "data" / "rocprof"


@pytest.mark.parametrize(
    "name",
    [
        # rocprofv3's own kernel_trace.csv layouts (tests/data/rocprof/SOURCES.md): strings quoted,
        # numbers bare (rocprofiler-sdk source/docs/data/kernel_trace.csv), and every field quoted
        # (a real decode run's trace)
        "rocprofiler-sdk-docs__kernel_trace.csv",
        "rocprof-unified-viewer__decode_kernel_trace.csv",
    ],
)
def test_filled_columns_of_real_rocprofv3_traces_match_the_csv_module(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Not only mlaprof's own layout: real rocprofv3 kernel traces, read in blocks of a few rows
    (the columns grown and filled block by block), give what Python's csv module reads."""
    monkeypatch.setattr(rocprof_csv, "BLOCK_BYTES", 1024)
    src = REAL / name
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) > 5
    kc = rocprof_csv.read_kernel_file(src)
    assert kc.n == len(rows)
    want = {
        "start_ns": [int(r["Start_Timestamp"]) for r in rows],
        "end_ns": [int(r["End_Timestamp"]) for r in rows],
        "correlation": [int(r["Correlation_Id"]) for r in rows],
        "device": [int(r["Agent_Id"].split()[1]) for r in rows],
        "grid_x": [int(r["Grid_Size_X"]) for r in rows],
    }
    for col, values in want.items():
        got, mask = kc.col(col)
        assert mask is None and got.tolist() == values, col
    assert [kc.names[i] for i in kc.name_idx.tolist()] == [r["Kernel_Name"] for r in rows]
