"""The ``report --json`` document a run folder keeps (mlaprof.store.summary_cache): read back
byte for byte where nothing it came from changed, never where the store, the run's status, the
folder or the code did, never for a run whose writer is at work, and a folder that cannot be
written is reported on as before."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.store import summary_cache
from mlaprof.store.reader import Run, load
from tests import shipped_demo

NAME = "fix-padding-active-rows-c16"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    dst = tmp_path / "traces" / NAME
    # the process's copy of the shipped run may keep the document another test's report left
    shutil.copytree(shipped_demo.run(NAME), dst,
                    ignore=shutil.ignore_patterns(summary_cache.CACHE_NAME))  # fmt: skip
    return dst


def _report(run: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["report", str(run), "--json", *extra]) == 0
    return capsys.readouterr().out


def _plant(run: Path, text: str) -> None:
    """A kept document under the run's current key whose text no analysis would write."""
    with load(run) as r:
        assert summary_cache.write(r, summary_cache.key(r), text)


def test_a_kept_document_reads_back_byte_for_byte(run_dir, capsys) -> None:
    fresh = _report(run_dir, capsys, "--no-cache")
    assert not (run_dir / summary_cache.CACHE_NAME).exists()  # --no-cache keeps nothing
    first = _report(run_dir, capsys)
    assert (run_dir / summary_cache.CACHE_NAME).exists()
    assert _report(run_dir, capsys) == first == fresh
    assert json.loads(first)["run"] == NAME


def test_the_kept_document_is_what_a_report_prints(run_dir, capsys) -> None:
    """The read path prints the kept text and analyses nothing (a planted text comes back);
    --no-cache and any other view analyse the run."""
    _plant(run_dir, '{"planted": true}\n')
    assert _report(run_dir, capsys) == '{"planted": true}\n'
    assert json.loads(_report(run_dir, capsys, "--no-cache"))["run"] == NAME
    assert main(["report", str(run_dir)]) == 0 and "planted" not in capsys.readouterr().out


def test_a_write_to_the_store_is_never_answered_from_the_old_document(run_dir, capsys) -> None:
    before = json.loads(_report(run_dir, capsys))
    con = sqlite3.connect(run_dir / "rank0.db")
    with con:
        con.execute("DELETE FROM padding")
    con.close()
    after = _report(run_dir, capsys)
    assert after == _report(run_dir, capsys, "--no-cache")
    assert json.loads(after)["padding"] != before["padding"]


def test_a_planted_document_is_left_by_a_change_to_any_file(run_dir, capsys) -> None:
    for name in ("run.json", "rank0.db"):
        _plant(run_dir, '{"planted": true}\n')
        st = (run_dir / name).stat()
        os.utime(run_dir / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert "planted" not in _report(run_dir, capsys), name


def test_a_copy_of_the_run_does_not_read_the_originals_document(run_dir, capsys) -> None:
    _plant(run_dir, '{"planted": true}\n')
    copy = run_dir.parent / "copy"
    shutil.copytree(run_dir, copy)  # copy2: every file's modification time kept
    assert json.loads(_report(copy, capsys))["run"] == "copy"


def test_the_key_names_the_shadow_choices_the_status_and_the_code(
    run_dir, monkeypatch, tmp_path
) -> None:
    with load(run_dir) as r:
        plain = summary_cache.key(r)
        assert plain == summary_cache.key(r, {})
        assert summary_cache.key(r, {"device": "mi300x"}) != plain
        monkeypatch.setattr(Run, "status", property(lambda self: "interrupted"))
        assert summary_cache.key(r) not in (None, plain)
        for live in ("running", "importing"):  # a writer at work: nothing kept, nothing read
            monkeypatch.setattr(Run, "status", property(lambda self, s=live: s))
            assert summary_cache.key(r) is None
            assert not summary_cache.write(r, summary_cache.key(r), "{}")
            assert summary_cache.read(r, summary_cache.key(r)) is None
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    code = summary_cache.code_identity(pkg)
    (pkg / "a.py").write_text("x = 22\n")
    assert summary_cache.code_identity(pkg) != code


def test_a_folder_that_cannot_be_written_is_reported_on(run_dir, capsys, monkeypatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(summary_cache.os, "replace", refuse)
    out = _report(run_dir, capsys)
    assert json.loads(out)["run"] == NAME
    assert sorted(p.name for p in run_dir.iterdir()) == ["rank0.db", "run.json"]  # no leftover


def test_a_first_report_encodes_its_document_once(run_dir, capsys, monkeypatch) -> None:
    """The document a first ``report --json`` keeps is the text it prints, encoded once (a
    fleet's is megabytes of pure-Python indented JSON); --no-cache encodes it once too."""
    from mlaprof.reporters.renderer import JsonRenderer

    calls = []
    real = JsonRenderer.render

    def counted(self: JsonRenderer, *a: object, **k: object) -> str:
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(JsonRenderer, "render", counted)
    out = _report(run_dir, capsys)
    assert len(calls) == 1
    assert (run_dir / summary_cache.CACHE_NAME).read_text().split("\n", 1)[1] == out
    assert _report(run_dir, capsys, "--no-cache") == out and len(calls) == 2


@pytest.mark.parametrize("view", [["--json"], []])
def test_a_run_keeps_the_document_it_printed(tmp_path, capsys, view) -> None:
    """``mlaprof run`` analyses the finished run once and keeps its JSON document: the next
    ``report --json`` reads it back, equal to a fresh analysis (and to what --json printed)."""
    traces = tmp_path / "traces"
    argv = ["run", "--traces", str(traces), "--kv-lens", "70,130", "--steps", "1", "--layers", "1"]
    assert main([*argv, "--name", "r", *view]) == 0
    printed = capsys.readouterr().out
    assert (traces / "r" / summary_cache.CACHE_NAME).exists()
    kept = _report(traces / "r", capsys)
    assert kept == _report(traces / "r", capsys, "--no-cache")
    if view:
        assert printed == kept
    else:  # the terminal findings, from the same summary
        assert printed.strip() and not printed.lstrip().startswith("{")


def test_a_quiet_run_analyses_nothing(tmp_path, capsys) -> None:
    traces = tmp_path / "traces"
    argv = ["run", "--traces", str(traces), "--kv-lens", "70", "--steps", "1", "--layers", "1"]
    assert main([*argv, "--name", "q", "-q"]) == 0
    assert not (traces / "q" / summary_cache.CACHE_NAME).exists()


def test_the_benchmark_names_the_kept_file() -> None:
    """bench/vs_baseline.py times a first report by removing the kept file by its name."""
    src = (Path(__file__).resolve().parents[2] / "bench" / "vs_baseline.py").read_text()
    assert f'KEPT_REPORT = "{summary_cache.CACHE_NAME}"' in src
