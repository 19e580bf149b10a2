"""Errors a newcomer met that did not say what was wrong: each now names it (exit 2, one line)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mlaprof.cli import main
from tests.conftest import ROOT

# real rocprofv3 output (tests/data/rocprof/SOURCES.md says where it was recorded)
REAL = ROOT / "tests" / "data" / "rocprof" / "rocprof-unified-viewer__decode_kernel_trace.csv"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["whatif", "--context", "-5"], "--context: '-5' is negative"),
        (["whatif", "--batch", "-3"], "--batch: '-3' is negative"),
        (["whatif", "--batch", "4-"], "the range '4-' has no end"),
        (["whatif", "--context", "x"], "--context: 'x' is not an integer"),
    ],
)
def test_a_bad_number_list_says_what_is_wrong(argv, words, capsys) -> None:
    """``whatif --context -5`` said "'' is not an integer" (the minus read as a range)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "''" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize("cut", ["End_Timestamp", "Start_Timestamp", "Grid_Size_X"])
def test_a_kernel_trace_missing_a_column_names_it(cut: str, tmp_path: Path, capsys) -> None:
    """A real kernel_trace.csv with one needed column removed was refused as "not a rocprofv3
    CSV"; the error names the missing column."""
    rows = list(csv.reader(REAL.open(newline="")))
    i = rows[0].index(cut)
    src = tmp_path / "cut_kernel_trace.csv"
    with src.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(r[:i] + r[i + 1 :] for r in rows)
    assert main(["import", "rocprof", str(src), "--traces", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert f"kernel trace CSV missing column {cut} " in err and err.count("\n") == 1, err
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())
