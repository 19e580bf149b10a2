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


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mlaprof.importers.rocprof import import_rocprof
    from tests.conftest import ROOT

    traces = tmp_path_factory.mktemp("names") / "traces"
    for name in ("gluon_v0119_bug", "gluon_v0119_fix", "fleet_dp2_tp4"):
        import_rocprof(ROOT / "tests" / "data" / "aiter" / name, traces, name)
    return traces


def _cli_at(width: int, argv: list[str], capsys: pytest.CaptureFixture[str],
            mp: pytest.MonkeyPatch) -> str:  # fmt: skip
    from mlaprof.cli import main

    mp.setenv("COLUMNS", str(width))
    assert main(argv) == 0
    return capsys.readouterr().out


def test_compare_at_80_columns_keeps_metric_names_to_two_lines(
    imported: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two imported traces compared at 80 columns: the diff table fits, and a metric's name
    takes at most 2 lines (3 with its provenance line): beside A and B texts as long as
    "not recorded (the trace's kernels: ...)" the name column once shrank to 17 characters
    and a name wrapped over 4 lines."""
    out = _cli_at(80, ["report", "gluon_v0119_bug", "--compare", "gluon_v0119_fix", "--traces",
                       str(imported)], capsys, monkeypatch)  # fmt: skip
    table = out[out.index("A gluon_v0119_bug  ->  B gluon_v0119_fix") :]
    lines = table.splitlines()
    assert all(len(line) <= 80 for line in lines), table
    head = next(line for line in lines if "metric" in line)
    assert "B is" in head and len(head.split("┃")[1]) >= 24, table
    # the rows with a verdict: from one to the next, at most 3 lines
    starts = [i for i, line in enumerate(lines)
              if line.startswith("│") and line.split("│")[-2].strip() in ("better", "worse", "same", "not judged")]  # fmt: skip
    assert len(starts) >= 5, table
    assert max(b - a for a, b in zip(starts, starts[1:], strict=False)) <= 3, table


def test_the_fleet_table_reads_trust_whole_at_80_columns(
    imported: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _cli_at(80, ["report", "fleet_dp2_tp4", "--traces", str(imported)], capsys, monkeypatch)
    import re

    start = re.search(r"^ranks side by side · per rank *$", out, re.M)  # the table's title
    table = out[start.start() :].split("\nfindings")[0]  # the last table before the findings
    ranks = [line.split() for line in table.splitlines() if line.strip()[:1].isdigit()]
    assert len(ranks) == 8 and all(len(line) <= 80 for line in table.splitlines()), table
    assert all(cells[5] in ("reliable", "unreliable", "unknown") for cells in ranks), table
    assert all(cells[1].startswith("host") for cells in ranks), table  # the host not squeezed out
