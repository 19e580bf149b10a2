"""``mlaprof tui --once``: the plain-text snapshot, and the CLI's error handling."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.synthetic.dashboard import make_run


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    make_run(tmp_path, "bug", steps=5, layers=3)
    make_run(tmp_path, "fix", steps=5, layers=3, bug=False)
    return tmp_path


def test_once_prints_every_panel(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", str(runs / "bug"), "--once"]) == 0
    out = capsys.readouterr().out
    assert "scenario dsv3-mtp3" in out and "device NVIDIA H200 (test)" in out
    assert "capture FULL -> failed (runs PIECEWISE)" in out  # asked FULL, ran PIECEWISE
    for section in ("LAYERS", "KV SPLITS", "PADDING", "\nCAPTURE\n", "FINDINGS"):
        assert section in out
    layers = out.split("LAYERS")[1].split("KV SPLITS")[0].splitlines()
    # header + 3 layers, each with 2 syncs in each of 5 watched steps (the report's count per
    # layer per step) and S 1 of 16
    rows = [r.split() for r in layers if r.strip() and r.split()[0].isdigit()]
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert all(r[2] == "2" and r[3] == "1" and r[4] == "16" for r in rows)
    assert "[CRIT]" in out
    assert "5 steps" in out


def test_once_fix_run_has_no_syncs(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", str(runs / "fix"), "--once"]) == 0
    out = capsys.readouterr().out
    assert "capture FULL -> captured (runs FULL)" in out
    layers = out.split("LAYERS")[1].split("KV SPLITS")[0].splitlines()
    rows = [r.split() for r in layers if r.strip() and r.split()[0].isdigit()]
    assert rows and all(r[2] == "0" and r[3] == "16" for r in rows)


def test_once_compare(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", str(runs / "bug"), "--once", "--compare", str(runs / "fix")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "sync / allocation sites" in x)
    assert line.split()[-4:] == ["2", "0", "-100%", "better"]  # two (op, line) sites in A
    line = next(x for x in out.splitlines() if "KV splits S used" in x)
    assert line.split()[-4:] == ["1", "16", "+1500%", "better"]


def test_once_folder_lists_runs_newest_first(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tui", str(runs), "--once"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()[2:]]
    assert set(names) == {"bug", "fix"}
    assert "dsv3-mtp3" in out and "finished" in out


@pytest.mark.parametrize(
    "args, msg",
    [
        (["does-not-exist"], "does not exist"),
        (["RUN", "--compare", "nope"], "not a run folder"),
        (["RUN", "--rank", "7", "--once"], "no rank 7"),
    ],
)
def test_bad_input_is_one_line(
    runs: Path, capsys: pytest.CaptureFixture[str], args: list[str], msg: str
) -> None:
    args = [a.replace("RUN", str(runs / "bug")) for a in args]
    if args[0] == "does-not-exist":
        args[0] = str(runs / "does-not-exist")
    assert main(["tui", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlaprof: error:") and msg in err
    assert len(err.strip().splitlines()) == 1


def test_once_folder_lists_runs_one_level_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(tmp_path / "demo", "bug", steps=2, layers=1)
    (tmp_path / "empty").mkdir()
    assert main(["tui", str(tmp_path), "--once"]) == 0
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["demo/bug"]


def test_once_needs_no_textual(runs: Path) -> None:
    """--once is for scripts: it works where the 'tui' extra (textual) is not installed."""
    code = (
        "import sys; sys.modules['textual'] = None; from mlaprof.cli import main; "
        f"sys.exit(main(['tui', {str(runs / 'bug')!r}, '--once']))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "LAYERS" in res.stdout and "FINDINGS" in res.stdout


def test_dashboard_without_textual_says_what_to_install(runs: Path) -> None:
    code = (
        "import sys; sys.modules['textual'] = None; from mlaprof.cli import main; "
        f"sys.exit(main(['tui', {str(runs / 'bug')!r}]))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert (
        res.stderr.startswith("mlaprof: error:") and "pip install -e . in the mlaprof" in res.stderr
    )


def test_cpu_timings_are_labelled_and_every_number_fits_80_columns(runs: Path) -> None:
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import latency_line

    v, _ = read_view(runs / "bug")
    assert "CPU reference timing" in latency_line(v)  # the synthetic runs time on the CPU
    narrow = latency_line(v, 78)
    assert len(narrow) <= 78 and "CPU ref" in narrow
    for word in ("last", "p50", "p90", "min", "max"):
        assert word in narrow


def test_the_dashboard_waits_for_a_run_that_does_not_exist_yet(tmp_path: Path) -> None:
    import threading

    from mlaprof.commands.tui import wait_for

    target = tmp_path / "starting"
    threading.Timer(0.3, target.mkdir).start()
    # the folder appearing is the event; the bound only guards a hang (no clock is asserted)
    assert wait_for(target, poll_s=0.05, timeout_s=600)
    assert target.is_dir()
    assert not wait_for(tmp_path / "never", poll_s=0.01, timeout_s=0.05)
