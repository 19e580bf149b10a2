"""``report`` and ``run`` build the summary without the figures' series unless a view draws
them (``--html``, ``--png``): the JSON document, which does not hold them, is the same as the
full summary's, and the terminal and Markdown views read none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mlaprof.analysis import run_summary, series
from mlaprof.cli import main
from mlaprof.store.reader import load
from tests import shipped_demo


@pytest.mark.parametrize("name", shipped_demo.NAMES)
def test_the_json_document_is_the_same_without_the_series(name: str) -> None:
    with load(shipped_demo.run(name)) as run:
        full = run_summary.build_summary(run)
        doc = run_summary.build_summary(run, series=False)
    assert full.series is not None and doc.series is None
    assert doc.to_json() == full.to_json()


def test_only_a_view_that_draws_builds_the_series(tmp_path: Path, capsys, monkeypatch) -> None:
    calls: list[str] = []
    real = series.build_series

    def counted(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls.append("series")
        return real(*a, **k)

    monkeypatch.setattr(series, "build_series", counted)  # run_summary imports it at the call
    run = tmp_path / "r"
    shutil.copytree(shipped_demo.run("fix-padding-active-rows-c16"), run)
    for view in (["--json", "--no-cache"], ["--format", "md"], []):
        assert main(["report", str(run), *view]) == 0
    assert calls == []
    assert main(["report", str(run), "--html", str(tmp_path / "r.html")]) == 0
    assert calls == ["series"]
    capsys.readouterr()
