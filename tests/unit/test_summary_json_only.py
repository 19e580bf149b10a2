"""``report --json`` (and ``run --json``) build the summary without the figures' series, which
the JSON document does not hold: the document is the same as the full summary's, and the
series are built only where a view draws them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mlaprof.analysis import run_summary
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
    real = run_summary.build_series

    def counted(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls.append("series")
        return real(*a, **k)

    monkeypatch.setattr(run_summary, "build_series", counted)
    run = tmp_path / "r"
    shutil.copytree(shipped_demo.run("fix-padding-active-rows-c16"), run)
    assert main(["report", str(run), "--json", "--no-cache"]) == 0
    assert calls == []
    assert main(["report", str(run), "--format", "md"]) == 0
    assert calls == ["series"]
    capsys.readouterr()
