"""``mlaprof whatif`` end to end: the seed's collapse from the command line, JSON, HTML, errors."""

from __future__ import annotations

import json

from mlaprof.cli import main
from tests.conftest import mlaprof_cli

SEED = ["--batch", "8", "--context", "1088", "--capture-sizes", "60", "--model", "kimi-k2-tp8"]
POLS = ["--policy", "aiter-gluon-v0.1.19,aiter-gluon-v0.1.20", "--device", "mi355x"]


def test_seed_from_the_cli_json(capsys):
    assert main(["whatif", *SEED, *POLS, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {c["policy"]: c for c in doc["cells"]}
    bug, fix = by["aiter-gluon-v0.1.19"], by["aiter-gluon-v0.1.20"]
    assert (bug["batch"], bug["padding_rows"], bug["qlen"]) == (8, 7, 4)
    assert (bug["S_bug"], bug["S_fix"], bug["S_frozen"]) == (1, 4, 1)
    assert (fix["S_bug"], fix["S_fix"]) == (4, 4)
    assert doc["provenance"]["kind"] == "modelled" and doc["collapsed_cells"] == 1


def test_terminal_table_names_the_collapse(capsys):
    assert main(["whatif", *SEED, *POLS]) == 0
    out = capsys.readouterr().out
    assert "1 collapse with the padding bug" in out and "modelled" in out
    assert "8+7" in out and "not measured on mi355x" in out


def test_html_has_heatmaps_and_provenance(tmp_path, capsys):
    out = tmp_path / "w.html"
    assert (
        main(["whatif", "--batch", "1-16", "--policy", "aiter-gluon-v0.1.19", "--html", str(out)])
        == 0
    )
    text = out.read_text()
    assert text.count("Plotly.newPlot(") == 1 and "Provenance" in text
    assert "S with the padding bug" in text and "predicted slowdown" in text
    assert "modelled for" in text


def test_bad_input_is_one_line_exit_2():
    for args in (["--batch", "x"], ["--policy", "nope"], ["--context", "2", "--spec", "3"]):
        p = mlaprof_cli("whatif", *args, timeout=120)
        assert p.returncode == 2, args
        assert p.stderr.startswith("mlaprof: error:") and p.stderr.count("\n") == 1, p.stderr


def test_the_cli_table_needs_neither_pandas_nor_torch():
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys; from mlaprof.cli import main; "
        "main(['whatif', '--batch', '1-8', '--context', '4k']); "
        "print(sorted(m for m in ('pandas', 'torch') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]"  # startup cost is numpy + rich only


def test_request_length_mix_from_a_file(tmp_path, capsys):
    mix = tmp_path / "lengths.txt"
    mix.write_text("# KV length [count]\n1088\n1088 3\n40000\n")
    args = ["whatif", "--kv-mix", str(mix), "--batch", "3,8", "--draws", "4", "--json"]
    assert main([*args, "--policy", "aiter-gluon-v0.1.19"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["points"] == 8 and "4 batches per batch size drawn" in doc["provenance"]["kv"]
    assert {c["kv_min"] for c in doc["cells"]} <= {1088, 40000}
    assert all(c["S_bug"] == 1 for c in doc["cells"] if c["padding_rows"])  # 3 real + 1 padding
    bad = tmp_path / "bad.txt"
    bad.write_text("2\n")  # shorter than qlen 4
    assert main(["whatif", "--kv-mix", str(bad)]) == 2
    assert "at least qlen" in capsys.readouterr().err


def test_at_80_columns_every_key_column_and_number_stays_whole() -> None:
    """The README's what-if at 80 columns: policy and device columns present, no cell cut with
    an ellipsis, no line past 80 characters; the report's policy table keeps its headers."""
    import io

    from rich.console import Console

    from mlaprof.reporters.whatif import print_whatif
    from mlaprof.whatif.grid import GridSpec, compute

    spec = GridSpec(policies=["aiter-gluon-v0.1.19", "aiter-gluon-v0.1.20", "aiter-asm"],
                    devices=["mi355x", "h200"], batches=list(range(1, 9)))  # fmt: skip
    buf = io.StringIO()
    print_whatif(compute(spec), console=Console(file=buf, width=80, color_system=None))
    out = buf.getvalue()
    table = out.split("worst")[1]
    assert "policy" in table and "device" in table and "S b/f/z" in table and "x b/z" in table
    assert "…" not in table
    assert max(len(line) for line in out.splitlines()) <= 80
    # 128k, not a cut 131,0...
    assert "128k" in table or "64k" in table or "k " in table
