"""The typed summary writes the ``report --json`` document the dict-shaped summary wrote on
main, for every shipped run, trace and vLLM log (tests/summary_corpus.py wrote the golden files
once, from main ac93ad5, before the change): schema 3 only adds sections, every schema-2 key is
as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.analysis.run_summary import SUMMARY_SCHEMA
from tests.summary_corpus import GOLDEN, NAMES, normalised, report_json

# the sections schema 3 added (docs/evidence.md); nothing else may differ from the golden files
ADDED_IN_3 = ("state", "imported", "log_spec")


def test_every_shipped_input_has_its_golden_document() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(NAMES)
    assert len(NAMES) >= 20


@pytest.mark.parametrize("name", NAMES)
def test_report_json_is_the_golden_document(name: str, tmp_path: Path) -> None:
    doc = report_json(name, tmp_path)
    assert doc["schema_version"] == SUMMARY_SCHEMA == 3
    for key in ADDED_IN_3:
        doc.pop(key)
    doc["schema_version"] = 2
    assert normalised(doc, tmp_path) == (GOLDEN / f"{name}.json").read_text()
