"""Names kept whole at 80 columns: broken after a separator, never inside a token."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from mlaprof.reporters.names import wrap_name
from tests import shipped_demo

SEPARATORS = " -_/:.(),"
NAMES = [
    "aiter-gluon-v0.1.19.post2",
    "aiter-gluon-gfx942-pr4582 †",
    "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1_SN_1LDSB1_GRVW8",
    "void aiter::rmsnorm_kernel<__hip_bfloat16, 256>(__hip_bfloat16*, __hip_bfloat16 const*)",
]


def breaks_only_at_separators(name: str, wrapped: str) -> bool:
    """Every line break of ``wrapped`` falls next to a separator of ``name``."""
    pos = 0
    for line in wrapped.split("\n")[:-1]:
        pos = name.index(line, pos) + len(line)
        if name[pos - 1] not in SEPARATORS and name[pos] not in SEPARATORS:
            return False
    return True


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("width", [12, 16, 20, 24, 38])
def test_a_name_breaks_after_its_separators_within_the_width(name: str, width: int) -> None:
    wrapped = wrap_name(name, width)
    assert all(len(line) <= width for line in wrapped.split("\n"))
    assert breaks_only_at_separators(name, wrapped), wrapped
    assert "".join(wrapped.split()) == "".join(name.split())  # nothing lost or added


def test_a_version_stays_whole_where_a_word_break_serves() -> None:
    assert wrap_name("aiter-gluon-v0.1.19.post2", 20) == "aiter-gluon-\nv0.1.19.post2"
    assert wrap_name("aiter-gluon-v0.1.19", 25) == "aiter-gluon-v0.1.19"  # fits: untouched


def test_only_a_token_wider_than_the_column_is_cut() -> None:
    assert wrap_name("abcdefghij", 4) == "abcd\nefgh\nij"


def _report_at(width: int, run: Path) -> str:
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.reporters.terminal import print_report
    from mlaprof.store import load

    buf = io.StringIO()
    with load(run) as r:
        print_report(build_summary(r), console=Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def test_policy_names_read_whole_in_the_report_at_80_columns() -> None:
    out = _report_at(80, shipped_demo.run("bug-padding-collapses-splits-c16"))
    assert max(len(line) for line in out.splitlines()) <= 80
    table = out.split("KV splits per policy")[1].split("* the run's policy")[0]
    cells = [line.split("  ")[0].strip() for line in table.splitlines()[3:] if line.strip()]
    # a policy broken across lines ends its first line with a separator, and no version is cut
    joined = " ".join(cells).replace("- ", "-").replace(". ", ".")
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.store import load

    with load(shipped_demo.run("bug-padding-collapses-splits-c16")) as run:
        names = {r.policy for r in build_summary(run).splits}
    # every policy the run lists (the MI355X preset: the gfx942 PR kernel is not among them)
    assert {"aiter-gluon-v0.1.19.post2", "aiter-gluon-v0.1.20.post1"} <= names
    for name in sorted(names):
        assert name in joined, (name, joined)
    assert "post\n" not in table and "v0\n" not in table
    for first, nxt in zip(cells, cells[1:], strict=False):
        if first.startswith("aiter-gluon-") and not nxt.startswith(("aiter", "vllm", "mlaprof")):
            assert first[-1] in SEPARATORS, (first, nxt)
    wide = _report_at(160, shipped_demo.run("bug-padding-collapses-splits-c16"))
    assert " aiter-gluon-v0.1.19.post2 " in wide  # room enough: one line
