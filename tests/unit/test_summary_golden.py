"""The typed summary writes the same ``report --json`` document the dict-shaped summary wrote on
main, for every shipped run, trace and vLLM log (tests/summary_corpus.py wrote the golden files
once, from main, before the change)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.summary_corpus import GOLDEN, NAMES, document


def test_every_shipped_input_has_its_golden_document() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(NAMES)
    assert len(NAMES) >= 20


@pytest.mark.parametrize("name", NAMES)
def test_report_json_is_the_golden_document(name: str, tmp_path: Path) -> None:
    assert document(name, tmp_path) == (GOLDEN / f"{name}.json").read_text()
