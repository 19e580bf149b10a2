"""Sync and capture findings of a backend whose path is not the route its vLLM version takes
(the legacy flat demo, modelled on purpose) say that condition in their titles, in the words
the pre-fix collapse finding already used ("[..., modelled on purpose]": one note,
mlaprof.analysis.findings.on_purpose): true of the path the run ran, not of what vLLM runs.
Where the route is that path (vLLM before #51171), no condition."""

from __future__ import annotations

from pathlib import Path

from mlaprof.analysis.findings import PATH_KINDS, on_purpose
from mlaprof.cli import main
from tests import made_runs, shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"

NOTE = (
    "[on the legacy flat path, modelled on purpose: not vLLM {v}'s route for this "
    "configuration (gluon-verify)]"
)


def _path_findings(s: object) -> list:
    found = [f for f in s.findings if f.kind in PATH_KINDS]  # type: ignore[attr-defined]
    if not any(f.kind == "sync" for f in found) or not any(f.kind == "capture" for f in found):
        raise AssertionError(f"no sync and capture finding: {[f.title for f in found]}")
    return found


def test_the_legacy_flat_demos_findings_hold_on_its_path_in_every_view() -> None:
    name = "demo-bug-legacy-flat-syncs-break-capture"
    s = shipped_runs.summary(name)
    note = NOTE.format(v=s.route.version)
    for f in _path_findings(s):
        assert f.title.endswith(" " + note), f.title
    # the pre-fix collapse finding's note is the same piece of code
    assert on_purpose("the pre-#51171 rule") == " [the pre-#51171 rule, modelled on purpose]"
    for view, text in every_view(shipped_runs.run_dir(name), s, with_json=True).items():
        said = text.replace("\\[", "[").replace("\\]", "]")
        assert said.count(note) >= len(_path_findings(s)), view


def test_a_cpu_legacy_flat_run_says_its_predicted_capture_on_its_path() -> None:
    s = made_runs.summary("cpu-legacy-flat")
    capture = [f for f in _path_findings(s) if f.kind == "capture"]
    assert any("would" in f.title for f in capture), [f.title for f in capture]
    for f in _path_findings(s):
        assert f.title.endswith(NOTE.format(v=s.route.version)), f.title


def test_where_the_route_is_the_legacy_path_no_condition(tmp_path: Path) -> None:
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary

    argv = ["run", "--traces", str(tmp_path), "--name", "pre", "--quiet", "--backend",
            "legacy-flat", "--layers", "2", "--steps", "2", "--vllm-version", "pre-51171"]  # fmt: skip
    assert main(argv) == 0
    with mlaprof.load(tmp_path / "pre") as run:
        s = build_summary(run, series=False)
    assert s.route is not None and s.route.path == "legacy-flat"
    for f in _path_findings(s):
        assert "modelled on purpose" not in f.title, f.title
