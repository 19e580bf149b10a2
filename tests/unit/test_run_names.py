"""One name rule for every command: whatever ``mlaprof runs`` prints (``demo/<run>`` one folder
down, a plain name, a name stored from one with spaces) is accepted by ``report``, ``export``,
``tui`` and ``--compare`` (mlaprof.commands.common.resolve_run, the one resolver). A newcomer
once read ``not found ... did you mean 'demo/fix-native-kernel-full-graph'?`` for that very
name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.synthetic.dashboard import make_run
from tests import shipped_demo

DEMO = "fix-native-kernel-full-graph"


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    t = tmp_path / "traces"
    shutil.copytree(shipped_demo.run(DEMO), t / "demo" / DEMO)
    make_run(t, "plain", steps=2, layers=1)
    make_run(t / "nested", "two-words", steps=2, layers=1)
    return t


def printed_names(
    traces: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> list[str]:
    """The run names ``mlaprof runs`` prints (its one-block-per-run form at 80 columns)."""
    mp.setenv("COLUMNS", "80")
    assert main(["runs", "--traces", str(traces)]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]  # after the title and the field legend
    # a name line is one word at the left edge (a field line is indented, its wrapped end has
    # spaces)
    return [line for line in lines if line and " " not in line]


def test_every_name_runs_prints_opens_in_every_command(
    traces: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = printed_names(traces, capsys, monkeypatch)
    assert sorted(names) == sorted([f"demo/{DEMO}", "plain", "nested/two-words"]), names
    monkeypatch.setenv("COLUMNS", "120")
    for name in names:
        t = ["--traces", str(traces)]
        assert main(["report", name, *t]) == 0, name
        assert main(["report", "plain", "--compare", name, *t]) == 0, name
        out = tmp_path / "out" / name.replace("/", "_")
        assert main(["export", name, *t, "--format", "perfetto", "-o", str(out)]) == 0, name
        capsys.readouterr()
    # the default traces folder (./traces) and $MLAPROF_TRACES, as `tui` takes no --traces
    monkeypatch.chdir(traces.parent)
    for name in names:
        assert main(["report", name]) == 0, name
        assert main(["tui", name, "--once"]) == 0, name
        assert main(["tui", "plain", "--compare", name, "--once"]) == 0, name
        capsys.readouterr()
    monkeypatch.chdir(tmp_path / "out")
    monkeypatch.setenv("MLAPROF_TRACES", str(traces))
    assert main(["tui", f"demo/{DEMO}", "--once"]) == 0
    assert DEMO in capsys.readouterr().out


def test_a_name_never_leaves_the_traces_folder(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``../x`` is a path, never a name under the traces folder."""
    assert main(["report", "../traces/plain", "--traces", str(traces / "demo")]) == 2
    assert "not found" in capsys.readouterr().err
