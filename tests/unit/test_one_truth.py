"""One truth in every view: for every shipped run, ``report --json``, ``tui --once`` and the HTML
report show the same findings, the same S values and the same capture memory."""

from __future__ import annotations

import html
import json
import re

import pytest

from mlaprof.analysis.run_summary import build_summary
from mlaprof.cli import main
from mlaprof.figures.html_report import render_html
from mlaprof.store import load
from tests import shipped_demo
from tests.conftest import EACH_TEST

WORKER_GROUP = EACH_TEST  # the tests are independent: spread over the workers

DEMO = shipped_demo.folder()
RUNS = sorted(p.name for p in DEMO.iterdir() if (p / "run.json").exists())


def test_there_are_shipped_runs() -> None:
    assert len(RUNS) >= 5


@pytest.mark.parametrize("name", RUNS)
def test_report_json_tui_once_and_html_agree(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = DEMO / name
    assert main(["report", str(run_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["tui", str(run_dir), "--once"]) == 0
    once = capsys.readouterr().out
    with load(run_dir) as run:
        page = html.unescape(render_html(build_summary(run)))
    once_flat = " ".join(once.split())
    page_text = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    once_bare = re.sub(r"\s+", "", once)  # wrapped lines may break at hyphens

    # findings: every title of the analysis, in each view, and no other finding in the TUI
    titles = [f["title"] for f in doc["findings"]]
    assert f"Findings ({len(titles)})" in page_text
    tags = len(re.findall(r"^\s+\[(CRIT|WARN|INFO)\] ", once, flags=re.M))
    assert tags == len(titles)
    for t in titles:
        assert re.sub(r"\s+", "", t) in once_bare, (name, t)
        assert " ".join(t.split()) in page_text, (name, t)

    # S values, capture memory, capture status: the analysis' key numbers, word for word
    heads = {h["label"]: h["value"] for h in doc["headline"]}
    mem_label = "capture memory (driver free-memory delta)"
    assert mem_label in heads
    for label, value in heads.items():
        assert f"{label}: {value}" in once_flat, (name, label)
        assert f"{label} {value}" in page_text, (name, label)
    own = next((s for s in doc["splits"] if s["policy"] == doc["scenario"].get("policy")), None)
    if own is not None and own["on_device"]:  # no host S to show: said, not faked
        assert "decided on the device" in heads[f"KV splits ({own['policy']})"]
    elif own is not None and own["used"] is None:  # the policy's kernel does not run here
        assert heads[f"KV splits ({own['policy']})"].startswith("no S: ")
    elif own is not None:
        assert (
            f"S used {own['used']}, deserved {own['deserved']}"
            in heads[f"KV splits ({own['policy']}, worst step)"]
        )
    assert doc["capture"]["status"] in heads["capture"]


@pytest.mark.parametrize("name", RUNS)
def test_shipped_runs_record_no_machine_paths(name: str) -> None:
    def strings(v: object) -> list[str]:
        if isinstance(v, str):
            return [v]
        if isinstance(v, dict):
            return [s for x in v.values() for s in strings(x)]
        if isinstance(v, list):
            return [s for x in v for s in strings(x)]
        return []

    doc = json.loads((DEMO / name / "run.json").read_text())
    paths = [s for s in strings(doc) if re.search(r"(^|\s)/(root|home|work|tmp|Users)/", s)]
    assert paths == []


def test_recorded_command_has_no_machine_paths() -> None:
    from mlaprof.scenario_meta import recorded_command

    argv = ["/work/x/mlaprof/__main__.py", "run", "--traces", "/root/t", "--name", "a", "-q"]
    assert recorded_command(argv) == "mlaprof run --name a -q"
    assert recorded_command(["/a/mlaprof", "run", "--traces=/b", "--json"]) == "mlaprof run --json"


def test_the_demo_sync_lines_are_as_traces_readme_says() -> None:
    """traces/README.md names the line the demo runs blame for "sync 1" (the `.item()`): it is
    the line they record (tests/unit/test_demo_runs.py checks it holds the call today)."""
    import sqlite3

    db = DEMO / "bug-legacy-flat-syncs-break-capture" / "rank0.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        first = con.execute("SELECT location FROM syncs ORDER BY rowid LIMIT 1").fetchone()[0]
    finally:
        con.close()
    line = first.rpartition(":")[2]
    readme = " ".join(shipped_demo.README.read_text().split())
    assert f"`legacy_flat.py:{line}` for the `.item()`" in readme
