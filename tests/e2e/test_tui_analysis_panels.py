"""The TUI shows every section the analysis returns: S decided on the device, engine runs,
imported traces and imported vLLM logs (rendered from ``mlaprof.analysis.summary`` only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlaprof.store import create_run
from mlaprof.synthetic.dashboard import meta, write_captures, write_step
from mlaprof.tui.once import read_view
from mlaprof.tui.text import render_text, split_table


def _persistent_run(tmp_path: Path) -> Path:
    """A run whose splits table also holds the persistent ASM policy's (modelled) rows."""
    w = create_run(tmp_path, "ps", meta("ps", True))
    write_captures(w, True)
    for step in range(3):
        write_step(w, step, 2, True)
        with w.transaction():
            w.add("splits", step=step, capture_size=8, policy="aiter-asm-persistent", used=7,
                  deserved=16, frozen=7, min_kv_used=0, min_kv_deserved=4096,
                  occupancy_used=0.4, occupancy_deserved=0.9, target="MI355X")  # fmt: skip
    w.finish()
    return tmp_path / "ps"


def test_on_device_policy_reads_device_never_frozen(tmp_path: Path) -> None:
    v, _ = read_view(_persistent_run(tmp_path))
    head, rows = split_table(v)
    ps = [r for r in rows if r[1] == "aiter-asm-persistent"]
    assert ps and all(r[2] == "device" and r[4] == "never" for r in ps)
    assert not any("7" in cell for r in ps for cell in r[2:])  # the modelled S is not shown
    host = [r for r in rows if r[1] == "aiter-gluon"]
    assert host and all(r[2] == "1" for r in host)  # host-decided policies keep their numbers
    assert "aiter-asm-persistent" in render_text(v)


DATA = Path(__file__).parents[1] / "data"


def _imported(tmp_path: Path, kind: str, src: Path, name: str) -> str:
    from mlaprof.cli import main

    assert main(["import", kind, str(src), "--traces", str(tmp_path), "--name", name]) == 0
    v, _ = read_view(tmp_path / name)
    return render_text(v).split("ENGINE / IMPORTED")[1].split("FINDINGS")[0]


def test_imported_trace_paths_s_source_trust_and_replay_time(tmp_path: Path) -> None:
    out = _imported(tmp_path, "rocprof", DATA / "aiter" / "persistent_switch", "ps")
    rows = {r.split()[0]: r.split() for r in out.splitlines() if r.strip().startswith("aiter-")}
    assert rows["aiter-asm-persistent"][2:4] == ["3", "(3/0)"]
    assert "decided on the device" in " ".join(rows["aiter-asm-persistent"])
    assert rows["aiter-asm"][2:5] == ["2", "(2/0)", "6"]
    assert "S from grid axis z" in out and "trust: reliable" in out
    assert "time inside 5 graph replay(s)" in out
    layer0 = next(r.split() for r in out.splitlines() if r.split()[:1] == ["0"])
    assert layer0 == ["0", "13.0", "11.0", "85%", "6"]


def test_imported_unreliable_trace_says_so_with_counts(tmp_path: Path) -> None:
    out = _imported(tmp_path, "rocprof", DATA / "aiter" / "gluon_v0119_fix_dropped", "d")
    line = next(r for r in out.splitlines() if "trust:" in r)
    assert "UNRELIABLE (" in line and "missing_kernels" in line


def test_imported_vllm_log_starts_downgrades_memory(tmp_path: Path) -> None:
    out = _imported(tmp_path, "vllm-log", DATA / "vllm" / "tp2_two_starts.log", "v")
    assert "start 1: vLLM 0.30.1" in out and "FULL_AND_PIECEWISE -> PIECEWISE" in out
    assert "downgraded by TritonMLABackend" in out and "on ranks 0, 1 (log line 18)" in out
    mem = [r.split() for r in out.splitlines() if "Worker_TP" in r]
    assert [(r[0], r[1], r[2]) for r in mem] == [
        ("1", "0", "Worker_TP0"), ("1", "1", "Worker_TP1"),
        ("2", "0", "Worker_TP0"), ("2", "1", "Worker_TP1"),
    ]  # fmt: skip
    assert mem[2][3:5] == ["1.0", "GiB"] and mem[0][3:5] == ["491.5", "MiB"]


def _engine_step(w, step: int, seqs: list[int], drafts: list[int], accepted: int) -> None:
    """One verify step as the vLLM plugin records it (its event names and fields)."""
    import json

    from mlaprof.analysis.evidence.engine import ACCEPT_EVENT, STEP_EVENT

    data = {"step": step, "kind": "verify", "backend": "CPU_MLA", "builder": "CPUMLABuilder",
            "heads": 8, "graph_mode": "NONE", "num_tokens": 4 * len(seqs), "padded_tokens": None,
            "verify_rows": len(seqs), "verify_draft_tokens": sum(drafts),
            "verify_rows_as_prefill": 0, "drafter_builds": 0, "seq_lens_upper_bound": seqs,
            "draft_tokens": drafts, "max_num_seqs": 8, "num_speculative_tokens": 3,
            "spec_method": "ngram", "max_model_len": 4096}  # fmt: skip
    acc = {"seq": step, "verify_rows": len(seqs), "draft_tokens": sum(drafts),
           "accepted_tokens": accepted}  # fmt: skip
    with w.transaction():
        w.add("steps", step=step, t_start_ns=step * 1000, duration_ns=500, graph_mode="NONE")
        for kind, d in ((STEP_EVENT, data), (ACCEPT_EVENT, acc)):
            w.add("events", t_ns=step * 1000, source="vllm", kind=kind, message=kind,
                  data=json.dumps(d))  # fmt: skip


def test_engine_run_line_grows_with_the_run(tmp_path: Path) -> None:
    w = create_run(tmp_path, "eng", {"source": "vllm plugin", "device": "cpu"})
    _engine_step(w, 0, [1100, 300, 700], [3, 3, 3], 5)

    def engine_text() -> str:
        v, _ = read_view(tmp_path / "eng")
        return render_text(v).split("ENGINE / IMPORTED")[1].split("FINDINGS")[0]

    out = engine_text()
    assert "1 steps, 1 verify, 3 verify rows" in out
    assert "9 draft tokens, 5 accepted (56%)" in out and "graph NONE x1" in out
    assert "shadow AITER: 1 steps" in out and "modelled from recorded batches" in out
    _engine_step(w, 1, [2000, 90], [3, 3], 6)  # the run grows: the next read says so
    out = engine_text()
    assert "2 steps, 2 verify, 5 verify rows" in out
    assert "15 draft tokens, 11 accepted (73%)" in out and "graph NONE x2" in out
    w.finish()


async def _details_app(root: Path, size: tuple[int, int]):
    from textual.widgets import Static, Tabs

    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen

    app = MlaprofApp(root, interval=0.05)
    async with app.run_test(size=size) as pilot:
        for _ in range(200):
            s = app.screen
            if isinstance(s, DashboardScreen) and s.view and s.view.engine_starts:
                break
            await pilot.pause(0.05)
        d = app.screen
        assert isinstance(d, DashboardScreen) and d.view and d.view.engine_starts
        text = str(d.query_one("#details-text", Static).render())
        tabs = d.query_one("#panel-tabs", Tabs)
        hidden = tabs.query_one("#tab-details").display is False
        await pilot.press("6")
        return d.has_class("-details"), text, d.active_panel, hidden


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_dashboard_details_panel_for_an_imported_log(tmp_path: Path, size) -> None:
    from mlaprof.cli import main

    log = DATA / "vllm" / "tp2_two_starts.log"
    assert main(["import", "vllm-log", str(log), "--traces", str(tmp_path), "--name", "v"]) == 0
    shown, text, active, hidden = await _details_app(tmp_path / "v", size)
    assert shown and not hidden and active == "details"
    assert "downgraded by TritonMLABackend" in text and "Worker_TP1" in text


async def test_dashboard_hides_details_for_a_plain_run(tmp_path: Path) -> None:
    from textual.widgets import Tabs

    from mlaprof.synthetic.dashboard import make_run
    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen

    make_run(tmp_path, "bug", steps=3, layers=2)
    app = MlaprofApp(tmp_path / "bug", interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            if isinstance(app.screen, DashboardScreen) and app.screen.updates:
                break
            await pilot.pause(0.05)
        d = app.screen
        assert not d.has_class("-details")
        assert d.query_one("#panel-tabs", Tabs).query_one("#tab-details").display is False
        await pilot.press("6")
        assert d.active_panel == "layers"


def test_on_device_reads_device_before_the_analysis_is_in(tmp_path: Path) -> None:
    from mlaprof.tui.follower import RunFollower

    f = RunFollower(_persistent_run(tmp_path))
    try:
        f.catch_up()
        v = f.view(None)  # no analysis pass yet: the rule still holds
        assert v.findings_source != "mlaprof.analysis"
        ps = [r for r in split_table(v)[1] if r[1] == "aiter-asm-persistent"]
        assert ps and all(r[2] == "device" for r in ps)
    finally:
        f.close()


async def test_dashboard_engine_panel_follows_the_growing_run(tmp_path: Path) -> None:
    from textual.widgets import Static

    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen

    w = create_run(tmp_path, "eng", {"source": "vllm plugin", "device": "cpu"})
    _engine_step(w, 0, [1100, 300, 700], [3, 3, 3], 5)
    app = MlaprofApp(tmp_path / "eng", interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:

        async def details_say(text: str) -> str:
            for _ in range(300):
                s = app.screen
                if isinstance(s, DashboardScreen) and s.view is not None:
                    got = str(s.query_one("#details-text", Static).render())
                    if text in got:
                        return got
                await pilot.pause(0.05)
            raise AssertionError(f"the engine panel never said {text!r}")

        got = await details_say("1 steps, 1 verify, 3 verify rows")
        assert "9 draft tokens, 5 accepted (56%)" in got and "shadow AITER: 1 steps" in got
        assert app.screen.has_class("-details")
        _engine_step(w, 1, [2000, 90], [3, 3], 6)
        w.finish()  # the finished run gets its final analysis pass at once
        got = await details_say("2 steps, 2 verify, 5 verify rows")
        assert "15 draft tokens, 11 accepted (73%)" in got and "graph NONE x2" in got
