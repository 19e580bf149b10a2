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
    # the S the device decides for the step, said as the device's, as every view says it
    assert ps and all(r[2] == "7 dev" and r[4] == "never" for r in ps)
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
    # each path row leads with the ranks it pools ("1 (rank 0)"), then the path
    lines = [r for r in out.splitlines() if r.strip().startswith("1 (rank 0)") and "aiter-" in r]
    rows = {t[0]: t for t in (r.split()[3:] for r in lines)}
    assert set(rows) >= {"aiter-asm-persistent", "aiter-asm"}, out
    assert rows["aiter-asm-persistent"][2:4] == ["3", "(3/0)"]
    assert "decided on the device" in " ".join(rows["aiter-asm-persistent"])
    assert rows["aiter-asm"][2:5] == ["2", "(2/0)", "6"]
    assert "S from grid axis z" in out and "trust: verdict reliable" in out
    assert "replay time: replays 5;" in out
    # the rows layer's replay-time table: ranks, layer, median, attention, its share, S
    layer0 = next(r.split() for r in out.splitlines() if r.split()[:2] == ["0", "0"])
    assert layer0 == ["0", "0", "13.0", "µs", "11.0", "µs", "84.6%", "6"]


def test_imported_unreliable_trace_says_so_with_counts(tmp_path: Path) -> None:
    out = _imported(tmp_path, "rocprof", DATA / "aiter" / "gluon_v0119_fix_dropped", "d")
    line = next(r for r in out.splitlines() if "trust:" in r)
    assert "verdict unreliable" in line and "graph replays miss kernels" in line
    counts = next(r for r in out.splitlines() if "trust · counts:" in r)
    assert "missing kernels 12" in counts


def test_imported_vllm_log_starts_downgrades_memory(tmp_path: Path) -> None:
    out = _imported(tmp_path, "vllm-log", DATA / "vllm" / "tp2_two_starts.log", "v")
    start = next(r.split() for r in out.splitlines() if r.split()[:2] == ["1", "0.30.1"])
    assert " ".join(start[-5:-2]) == "FULL_AND_PIECEWISE -> PIECEWISE"
    down = next(r.split() for r in out.splitlines() if r.split()[:1] == ["TritonMLABackend"])
    assert down[-4:] == ["2", "(ranks", "0-1)", "18"]  # on 2 ranks, 0 and 1; log line 18
    # memory per rank, one table per start (never summed)
    assert out.index("server starts 1 of 2 · memory") < out.index("server starts 2 of 2 · memory")
    mem = [r.split() for r in out.splitlines() if "Worker_TP" in r]
    assert [(r[0], r[1]) for r in mem] == [
        ("0", "Worker_TP0"), ("1", "Worker_TP1"), ("0", "Worker_TP0"), ("1", "Worker_TP1"),
    ]  # fmt: skip
    assert mem[2][2:4] == ["1.02", "GiB"] and mem[0][2:4] == ["491.52", "MiB"]


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
    assert "steps 1; verify steps 1; verify rows 3;" in out
    assert "draft tokens 9; accepted tokens 5; acceptance rate 55.6%" in out
    assert "graph modes NONE=1" in out
    assert "shadow AITER (modelled): provenance modelled from recorded batches" in out
    assert "; steps 1;" in out.split("shadow AITER (modelled):")[1]
    _engine_step(w, 1, [2000, 90], [3, 3], 6)  # the run grows: the next read says so
    out = engine_text()
    assert "steps 2; verify steps 2; verify rows 5;" in out
    assert "draft tokens 15; accepted tokens 11; acceptance rate 73.3%" in out
    assert "graph modes NONE=2" in out
    w.finish()


async def _details_app(root: Path, size: tuple[int, int]):
    from textual.widgets import Static, Tabs

    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen

    app = MlaprofApp(root, interval=0.05)
    async with app.run_test(size=size) as pilot:
        for _ in range(200):
            s = app.screen
            if isinstance(s, DashboardScreen) and s.view and s.view.summary:
                break
            await pilot.pause(0.05)
        d = app.screen
        assert isinstance(d, DashboardScreen) and d.view and d.view.summary
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
    assert "downgrades (as the log says)" in text and "TritonMLABackend" in text
    assert "Worker_TP1" in text


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
        assert ps and all(r[2].endswith(" dev") for r in ps)
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

        got = await details_say("steps 1; verify steps 1; verify rows 3;")
        assert "draft tokens 9; accepted tokens 5" in got and "shadow AITER (modelled)" in got
        assert app.screen.has_class("-details")
        _engine_step(w, 1, [2000, 90], [3, 3], 6)
        w.finish()  # the finished run gets its final analysis pass at once
        got = await details_say("steps 2; verify steps 2; verify rows 5;")
        assert "draft tokens 15; accepted tokens 11" in got and "graph modes NONE=2" in got
