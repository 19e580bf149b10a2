"""``mlaprof run`` ends its report on the findings and names the command that shows every
section; ``mlaprof report`` shows every section (the rows layer) after them."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from mlaprof.reporters.rows import HEADING
from mlaprof.reporters.terminal import print_report
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"  # the shipped runs summarised once per worker


def _text(sections: bool) -> str:
    s = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    out = io.StringIO()
    print_report(s, Console(file=out, width=100), sections=sections)
    return out.getvalue()


@pytest.mark.parametrize("sections", [True, False])
def test_sections_only_where_asked(sections: bool) -> None:
    text = _text(sections)
    assert "findings" in text
    assert (HEADING in text) is sections
    hint = "every section of the summary: mlaprof report "
    assert (hint in text) is not sections
