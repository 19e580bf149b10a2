"""bench/demo_rerecord.py, which holds a GPU re-recording of the demo runs to the shipped
runs' verdicts: the same run reads the same, and a run that says another verdict (the fix
beside the bug: another S, no collapse finding) is told apart, with what differs named; its
results file holds folder names, never a machine's paths."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

from tests import shipped_demo

ROOT = Path(__file__).resolve().parents[2]
BUG, FIX = "bug-padding-collapses-splits-c16", "fix-padding-active-rows-c16"


def _script():  # noqa: ANN202 - a module loaded from bench/
    spec = importlib.util.spec_from_file_location(
        "demo_rerecord", ROOT / "bench" / "demo_rerecord.py"
    )
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def test_the_same_runs_read_the_same_and_another_verdict_is_named(tmp_path: Path) -> None:
    mod = _script()
    shipped, new = tmp_path / "shipped", tmp_path / "new"
    for name in (BUG, FIX):
        shutil.copytree(shipped_demo.run(name), shipped / name)
    shutil.copytree(shipped_demo.run(BUG), new / BUG)
    out = tmp_path / "same.json"
    assert mod.main([str(shipped), str(new), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["all_same"] and doc["runs"][BUG]["differs"] == {}
    assert (doc["shipped"], doc["new"]) == ("shipped", "new") and str(
        tmp_path
    ) not in out.read_text()
    # the fix recorded under the bug's name: its verdicts differ, and the S is among them
    shutil.rmtree(new / BUG)
    shutil.copytree(shipped_demo.run(FIX), new / BUG)
    assert mod.main([str(shipped), str(new), "--out", str(out)]) == 1
    differs = json.loads(out.read_text())["runs"][BUG]["differs"]
    assert differs["S used, deserved (own policy, worst step)"] == [[1, 4], [4, 4]], differs
    assert "findings" in differs
