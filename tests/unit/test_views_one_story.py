"""One run tells one story in every view, each story decided once below the views:

1. a CPU run's capture sizes: the capture section said ``sizes: 0`` beside the padding section's
   "capture size 16"; it says the size the steps were padded to (the padding section's words)
   and that none was captured (CPU engine), with no count at all;
2. a splits row with no S and no reason: the split figure said "unknown" by itself, the
   terminal "-"; both say the rows layer's words (``no_s_text``);
3. ``step_timeline(run, steps=...)`` of a trace with drafter passes drew the passes; it draws
   the verify steps the report counts (the same evidence), and a pass asked for is an error;
   a dict of the run's frames drew every step where the steps asked for were missing: both
   take their steps by one rule (a missing step is the same error);
4. a CPU engine's route (AITER, gfx950) read as the route the run took, and the split figures'
   "on mi355x" as S measured there; the route says it is modelled for the target and what the
   run ran, in the analysis' one line every view prints, the figures say "(modelled)".

Each test failed with its rule broken. Runs are made in temporary folders."""

from __future__ import annotations

import dataclasses
import html
import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import mlaprof
from mlaprof import cpu_runner
from mlaprof.analysis.contradictions import contradictions
from mlaprof.analysis.padding import size_text
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.sections import NO_S, no_s_text
from mlaprof.errors import MlaprofError
from mlaprof.reporters.rows import not_runnable_notes
from mlaprof.scenario import Scenario
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A default (CPU engine, FULL, target mi355x) run and its summary."""
    tmp = tmp_path_factory.mktemp("cpu-run")
    sc = dataclasses.replace(Scenario(), kv_lens=[70, 130, 200], layers=1, steps=2).validate()
    writer = cpu_runner.start_run(sc, "torch", "cpu", tmp, name="cpu", threads=1)
    cpu_runner.run_cpu(sc, "torch", writer)
    writer.finish()
    with mlaprof.load(tmp / "cpu") as run:
        return tmp / "cpu", build_summary(run)


def _mine(said: list[str]) -> list[str]:
    """The contradictions of the rules these tests hold (capture sizes, route)."""
    return [c for c in said if "capture sizes" in c or "route" in c]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _views(s: Any, run_dir: Path) -> dict[str, str]:
    """Every text view of ``s``, flattened (the terminal's markup escaped as it prints)."""
    from mlaprof.figures.html_report import render_html
    from mlaprof.reporters.markdown import MarkdownRenderer
    from mlaprof.reporters.terminal import TerminalRenderer
    from mlaprof.tui.once import snapshot

    # the renderer's own text, as the CLI writes it (printed again, its "[...]" would be markup)
    console = Console(file=io.StringIO(), width=400, color_system=None)
    terminal = TerminalRenderer(console).render(s)
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)
    md = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", MarkdownRenderer().render(s).replace("**", ""))
    return {
        "terminal": _flat(terminal),
        "markdown": _flat(md),
        "html": _flat(html.unescape(re.sub(r"<[^>]+>", " ", page))),
        "tui --once": _flat(snapshot(run_dir)),
    }


# -- 1. capture sizes ---------------------------------------------------------------------------
def test_a_cpu_runs_capture_sizes_say_the_padding_size_and_that_none_was_captured(
    cpu_run: tuple[Path, Any],
) -> None:
    run_dir, s = cpu_run
    assert str(s.device) == "cpu" and s.padding.capture_sizes == [16]
    cap = s.capture
    assert cap.sizes is None and "sizes" not in s.to_json()["capture"]  # no count, never 0
    assert cap.sizes_text is not None
    assert size_text(s.padding.capture_sizes) in cap.sizes_text  # the padding section's words
    assert "capture size 16" in s.padding.text
    assert "captured: none (CPU engine: graph capture needs a GPU, not attempted)" in cap.sizes_text
    assert _mine(contradictions(s)) == []
    views = _views(s, run_dir)
    for view in views:  # the sections of every view
        assert _flat(cap.sizes_text) in views[view], view
        assert "sizes: 0" not in views[view] and "sizes 0 " not in views[view], view
    # the property every run is held to fires on each way of telling it twice
    zero = dataclasses.replace(s, capture=dataclasses.replace(cap, sizes=0))
    assert any("capture sizes 0" in c for c in contradictions(zero))
    other = cap.sizes_text.replace("capture size 16", "capture size 8")
    moved = dataclasses.replace(s, capture=dataclasses.replace(cap, sizes_text=other))
    assert any("+ padding 'capture size 16'" in c for c in contradictions(moved))
    counted = dataclasses.replace(s, capture=dataclasses.replace(cap, sizes=1))
    assert any("its sizes line" in c for c in contradictions(counted))


def test_a_captured_and_a_failed_runs_sizes_are_their_counts() -> None:
    ok = shipped_runs.summary("demo-fix-native-kernel-full-graph").capture
    assert ok.sizes == 1 and ok.sizes_text is not None
    assert ok.sizes_text.endswith("captured: 1 (16)"), ok.sizes_text
    failed = shipped_runs.summary("demo-bug-legacy-flat-syncs-break-capture").capture
    assert failed.sizes == 1 and failed.sizes_text is not None
    assert "captured: none; attempted: 1 (16), FULL capture failed" in failed.sizes_text


# -- 2. a splits row with no S ----------------------------------------------------------------------
def test_a_policy_with_no_s_reads_the_rows_layers_words_in_the_figure_and_the_terminal() -> None:
    from mlaprof.figures.splits import splits_used_vs_deserved

    name = "demo-bug-padding-collapses-splits-c16"  # two policies cannot run its batch / heads
    s = shipped_runs.summary(name)
    assert s.series is not None
    rk = s.series.ranks[0]
    last = max(p.step for p in rk.splits if p.step is not None)
    # a runnable policy whose last step holds no S and no reason (an import's unmodelled one)
    gone = next(p.policy for p in rk.splits if p.not_runnable is None and p.used is not None)
    pts = tuple(
        dataclasses.replace(p, used=None, deserved=None, frozen=None)
        if p.policy == gone and p.step == last
        else p
        for p in rk.splits
    )
    ser = dataclasses.replace(s.series, ranks=(dataclasses.replace(rk, splits=pts),))
    fig = splits_used_vs_deserved(dataclasses.replace(s, series=ser), by="policy")
    notes = {a.x: a.text.replace("<br>", " ") for a in fig.layout.annotations}
    want = {p.policy: no_s_text(p) for p in pts if p.step == last and no_s_text(p)}
    assert notes == want and notes[gone] == NO_S, notes
    assert "unknown" not in notes.values()
    # the terminal says the same words for such a row, under its splits table
    row = next(r for r in s.splits if r.policy == gone)
    bare = dataclasses.replace(row, used=None, deserved=None, frozen=None)
    assert f"{gone}: {NO_S}" in "\n".join(not_runnable_notes([bare]))
    views = _views(dataclasses.replace(s, splits=[bare if r is row else r for r in s.splits]),
                   shipped_runs.run_dir(name))  # fmt: skip
    for view in ("terminal", "markdown", "html"):
        assert f"{gone}: {NO_S}" in views[view], view


# -- 3. the timeline's steps --------------------------------------------------------------------
def test_a_runs_timeline_window_draws_the_verify_steps_the_report_counts() -> None:
    from mlaprof.figures.timeline import step_timeline

    name = "aiter-asm_mtp_drafter"  # 3 verify steps, 9 drafter passes between them
    s = shipped_runs.summary(name)
    verify = sorted(t.step for t in s.trace.steps if t.rank == 0)
    assert verify == [0, 4, 8] and s.trace.drafter.pass_steps[0] == [1, 2, 3, 5, 6, 7, 9, 10, 11]
    with mlaprof.load(shipped_runs.run_dir(name)) as run:
        for kw in ({"max_kernels": 50}, {"default_steps": 2}, {"steps": [0, 4]}):
            title = step_timeline(run, **kw).layout.title.text
            shown = [int(x) for x in re.findall(r"\d+", title.split("step id")[1].split(")")[0])]
            assert set(shown) <= set(verify), (kw, title)
            assert "verify steps" in title, (kw, title)
        # a drafter pass asked for is said to be one, never drawn as a step
        with pytest.raises(MlaprofError, match=r"1–3: the drafter's passes, not verify steps"):
            step_timeline(run, steps=[0, 1, 2, 3])


def test_a_timeline_of_frames_and_of_its_run_take_the_steps_by_one_rule(tmp_path: Path) -> None:
    """A dict of the run's frames drew every step where the steps asked for were not there
    (and a partial window as the one asked for); the Run refused. Both go through one rule
    (analysis.series.window_steps, in series.timeline): the same error naming the step, the
    same window where the steps are there."""
    from mlaprof.figures.timeline import step_timeline
    from mlaprof.synthetic.figures import write_run

    path = write_run(tmp_path, "bug", steps=5)
    with mlaprof.load(path) as run:
        frames = {n: run.table(n) for n in ("steps", "layers", "syncs", "splits", "padding")}
        for data in (run, frames):
            for asked in ([99], [0, 99]):
                with pytest.raises(MlaprofError, match=r"^no step 99 among rank 0's steps the "
                                   r"report counts \(0–4\)$"):  # fmt: skip
                    step_timeline(data, steps=asked)
        titles = [step_timeline(d, steps=[1, 2]).layout.title.text for d in (run, frames)]
    assert all(t.startswith("Step timeline: 2 of 5 steps (step ids 1, 2)") for t in titles), titles


# -- 4. route and device ------------------------------------------------------------------------
def test_a_cpu_runs_route_is_said_modelled_in_every_view(cpu_run: tuple[Path, Any]) -> None:
    run_dir, s = cpu_run
    r = s.route
    assert _mine(contradictions(s)) == []
    assert r is not None and r.path == "gluon-verify" and "gfx950" in r.reason
    assert r.provenance is not None and r.text is not None
    assert r.provenance.startswith("modelled for the mi355x target")
    assert "torch backend on the CPU, not this route" in r.provenance
    assert f"[vLLM {r.version}] ({r.provenance})" in r.text
    views = _views(s, run_dir)
    for view in ("terminal", "markdown", "html"):  # the front line: the analysis' one line
        assert f"vLLM route: {_flat(r.text)}" in views[view] or (
            f"vLLM route {_flat(r.text)}" in views[view]), view  # fmt: skip
    assert _flat(r.text) in views["tui --once"]  # its sections, the rows layer's
    # the compare's row, with no room for the line, says it is modelled too
    from mlaprof.analysis.diff import diff

    d = diff(s, s)
    assert d.route.before == d.route.after == f"{r.path} (vLLM {r.version}; {r.provenance})"
    bare = dataclasses.replace(r, provenance=None)
    assert any("without where it comes from" in c
               for c in contradictions(dataclasses.replace(s, route=bare)))  # fmt: skip
    # a route with no line of its own (run.json's, as recorded) still says nothing said where
    # it comes from, in every view: never its bare path read as a result
    unsaid = dataclasses.replace(s, route=dataclasses.replace(r, provenance=None, text=None))
    for view, text in _views(unsaid, run_dir).items():
        if view != "tui --once":  # the dashboard's snapshot reads the run folder, not ``unsaid``
            assert "gluon-verify" in text and "(provenance not recorded)" in _flat(text), view
    said = dataclasses.replace(r, provenance="from vLLM's routing", text=r.text.replace(
        r.provenance, "from vLLM's routing"))  # fmt: skip
    assert any("not said to be modelled" in c
               for c in contradictions(dataclasses.replace(s, route=said)))  # fmt: skip


def test_a_cpu_runs_split_figures_say_their_s_are_modelled(cpu_run: tuple[Path, Any]) -> None:
    from mlaprof.figures.splits import splits_used_vs_deserved
    from mlaprof.reporters.rows import splits_scope_of

    _, s = cpu_run
    assert splits_scope_of(s) == "modelled"
    for by in ("step", "policy", "capture_size"):
        title = splits_used_vs_deserved(s, by=by).layout.title.text
        assert "on mi355x (256 CUs) (modelled)" in title, (by, title)
    gpu = shipped_runs.summary("demo-fix-native-kernel-full-graph")
    title = splits_used_vs_deserved(gpu).layout.title.text
    assert f"({splits_scope_of(gpu)})" in title, title
