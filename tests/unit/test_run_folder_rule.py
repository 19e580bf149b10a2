"""One rule judges a run folder, whichever command opens it: a folder of rank databases without
run.json, a run missing a rank it names, and a run that says it ended but lost its databases are
refused with the same one line by ``report`` (text and JSON), ``report --compare``, ``export``,
``tui --once``, ``tui`` (before the dashboard opens), ``tui --compare``, the notebook's
``mlaprof.load`` and the dashboard's follower; ``runs`` and the folder listing name them
unreadable with that reason. Nothing in the folder is changed."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mlaprof import load as notebook_load
from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.store import runmeta
from mlaprof.synthetic.dashboard import make_run
from mlaprof.tui.follower import FollowError, RunFollower
from tests import shipped_demo

GOOD = shipped_demo.run("fix-native-kernel-full-graph")


def _no_run_json(tmp: Path) -> Path:
    run = make_run(tmp, "r", steps=2, layers=2)
    (run / "run.json").unlink()
    return run


def _missing_rank(tmp: Path) -> Path:
    run = make_run(tmp, "r", steps=2, layers=2, ranks=2)
    runmeta.update(run, ranks=[0, 1])  # as `run --ranks 2` records the ranks it wrote
    (run / "rank1.db").unlink()
    return run


def _emptied(tmp: Path) -> Path:
    run = make_run(tmp, "r", steps=2, layers=2)
    runmeta.update(run, status="finished")
    (run / "rank0.db").unlink()
    return run


DAMAGED: dict[str, tuple[Callable[[Path], Path], str]] = {
    "no run.json": (_no_run_json, "no run.json"),
    "a rank missing": (_missing_rank, "missing rank1.db"),
    "databases gone": (_emptied, "holds no rank database"),
}


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    if rc != 2 or "Traceback" in err or len(err.splitlines()) != 1:
        raise AssertionError(f"{argv}: rc {rc}, {err!r}")
    return err.removeprefix("mlaprof: error: ")


@pytest.mark.parametrize("case", list(DAMAGED))
def test_every_entry_point_refuses_a_damaged_run_folder_with_the_readers_words(
    case: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlaprof.tui import app as tui_app

    make, words = DAMAGED[case]
    run = make(tmp_path / "t")
    before = _state(run)
    with pytest.raises(MlaprofError) as got:  # the notebook's one-line open
        notebook_load(run)
    said = str(got.value)
    assert words in said, said
    # the dashboard must be refused before it opens: opening it counts as drawing the run
    monkeypatch.setattr(tui_app, "run_app", lambda *a, **k: 0)
    out = tmp_path / "out"
    argvs = [
        ["report", str(run)],
        ["report", str(run), "--json"],
        ["report", str(GOOD), "--compare", str(run)],
        ["export", str(run), "--format", "csv", "-o", str(out / "c")],
        ["export", str(run), "--format", "rocpd", "-o", str(out / "r.db")],
        ["tui", str(run), "--once"],
        ["tui", str(run)],
        ["tui", str(GOOD), "--once", "--compare", str(run)],
        ["tui", str(GOOD), "--compare", str(run)],
    ]
    for argv in argvs:
        assert _error(argv, capsys) == said, argv
    # the dashboard's follower, polled on its own, says the same
    f = RunFollower(run)
    with pytest.raises(FollowError) as followed:
        f.poll()
    f.close()
    assert str(followed.value) == said
    assert _state(run) == before  # nothing recorded was changed or lost
    assert not out.exists()


@pytest.mark.parametrize("case", list(DAMAGED))
def test_the_listings_name_a_damaged_run_unreadable_with_the_reason(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, words = DAMAGED[case]
    traces = tmp_path / "t"
    make(traces)
    assert main(["runs", str(traces)]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "unreadable" in listed and words in listed, listed
    assert main(["tui", str(traces), "--once"]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "unreadable" in listed and words in listed, listed


def test_a_folder_with_neither_run_json_nor_databases_is_waited_for_by_the_dashboard(
    tmp_path: Path,
) -> None:
    # a run about to write its run.json: the follower waits, it refuses nothing yet
    (tmp_path / "r").mkdir()
    f = RunFollower(tmp_path / "r")
    assert f.poll() == 0 and f.problem == "waiting for the first records"
    f.close()
    shutil.rmtree(tmp_path / "r")


def test_the_notebooks_run_cache_says_the_readers_words_for_a_damaged_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    from mlaprof import notebook_runs

    monkeypatch.setenv("MLAPROF_NOTEBOOK_TRACES", str(tmp_path / "cache"))
    args = ["--steps", "1"]
    name = f"nb-{hashlib.sha1(chr(0).join(args).encode()).hexdigest()[:8]}"
    run = make_run(tmp_path / "cache", name, steps=1, layers=1)
    (run / "run.json").unlink()
    with pytest.raises(MlaprofError) as got:
        notebook_runs.make_run("nb", args)
    assert "holds rank0.db but no run.json" in str(got.value)
    assert (run / "rank0.db").is_file()  # nothing made over it
