"""One answer per question, for every run kind: each shipped demo run (scenario), every committed
AITER trace, a multi-rank fleet trace, the Kineto replay trace and the vLLM logs go through the
terminal report, ``--json``, the HTML report and ``tui --once``; the numbers the views share must
be equal, no view prints ``None``, and ranks are never merged."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from mlaprof.analysis.evidence import CaptureStatus, collect
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.syncs import fill_layer_syncs
from mlaprof.cli import main
from mlaprof.figures.html_report import render_html
from mlaprof.rank_counts import counted
from mlaprof.store import load
from mlaprof.store.runkind import RunKind, infer_kind, run_kind
from tests import shipped_demo

ROOT = Path(__file__).resolve().parents[2]
DEMO = shipped_demo.folder()
AITER = ROOT / "tests" / "data" / "aiter"
VLLM = ROOT / "tests" / "data" / "vllm"
KINETO = ROOT / "tests" / "data" / "kineto_graph_replay.json.gz"

DEMOS = sorted(p.name for p in DEMO.iterdir() if (p / "run.json").exists())
TRACES = sorted(p.name for p in AITER.iterdir() if p.is_dir())
LOGS = sorted(p.name for p in VLLM.glob("*.log"))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every committed trace and log, imported once into one traces folder."""
    out = tmp_path_factory.mktemp("runs")
    for name in TRACES:
        assert main(["import", "rocprof", str(AITER / name), "--traces", str(out),
                     "--name", name]) == 0  # fmt: skip
    for name in LOGS:
        assert main(["import", "vllm-log", str(VLLM / name), "--traces", str(out),
                     "--name", name]) == 0  # fmt: skip
    assert main(["import", "kineto", str(KINETO), "--traces", str(out), "--name", "kineto"]) == 0
    return out


_VIEWS: dict[Path, tuple[dict, str, str, str]] = {}


def _views(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str, str, str]:
    """The four views of a run, rendered once per module (the fleet's and the legacy demo's
    are read by several tests; the documents are returned as copies)."""
    if run_dir not in _VIEWS:
        _VIEWS[run_dir] = _render_views(run_dir, capsys)
    doc, term, once, page = _VIEWS[run_dir]
    return json.loads(json.dumps(doc)), term, once, page


def _render_views(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str, str, str]:
    capsys.readouterr()
    assert main(["report", str(run_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["report", str(run_dir)]) == 0
    term = capsys.readouterr().out
    assert main(["tui", str(run_dir), "--once"]) == 0
    once = capsys.readouterr().out
    with load(run_dir) as run:
        page = re.sub(
            r"<(script|style)\b.*?</\1>", " ", render_html(build_summary(run)), flags=re.S
        )
        page = html.unescape(re.sub(r"<[^>]+>", " ", page))  # what a reader sees
    return doc, term, once, page


def _flat(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _check_views_agree(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    doc, term, once, page = _views(run_dir, capsys)
    # no view shows a gap as None
    for view, text in (("report", term), ("tui --once", once), ("html", page)):
        assert not re.search(r"\bNone\b", text), (run_dir.name, view)
    # the capture verdict: one text, in every view
    cap = doc["capture"]
    assert cap["status"] in {s.value for s in CaptureStatus}
    assert _flat(cap["text"]) in _flat(once), run_dir.name
    assert _flat(cap["text"]) in _flat(page), run_dir.name
    if cap["status"] == "unknown":
        assert cap["why"] and cap["label"].startswith("unknown (")
    # the device: said, or unknown with why
    assert f"device {doc['device']}" in " ".join(once.split())
    assert doc["device"] and doc["device"] != "None"
    # every headline number, word for word, in the TUI and the HTML
    for h in doc["headline"]:
        assert _flat(f"{h['label']}: {h['value']}") in _flat(once), (run_dir.name, h)
        assert _flat(f"{h['label']} {h['value']}") in _flat(page), (run_dir.name, h)
    # syncs per layer: the TUI's layer table shows the analysis' count for every layer
    layers = once.split("LAYERS")[1].split("KV SPLITS")[0].splitlines()
    head = next(
        (r.split() for r in layers if r.split()[:2] in (["layer", "time"], ["rank", "layer"])),
        ["layer", "syncs"],  # no layer rows (a vLLM log): no table
    )
    col = head.index("syncs") - 1  # "time ms" is two words of the head, one cell of a row
    key = head.index("layer") + 1 if head[0] == "rank" else 1  # (rank, layer) or (layer,)
    rows = {tuple(map(int, r.split()[:key])): r.split() for r in layers if r.strip()[:1].isdigit()}
    by_layer: dict[tuple[int, ...], list[float]] = {}
    for r in doc["layers"]:
        if r["syncs"] is not None:
            k = (r["rank"], r["layer"]) if key == 2 else (r["layer"],)
            by_layer.setdefault(k, []).append(r["syncs"])
    for k, counts in by_layer.items():
        assert rows[k][col] == f"{max(counts):g}", (run_dir.name, k)
    # ... and what the report and run.layers.syncs count
    n = doc["sync_counts"]
    host = (doc.get("trace") or {}).get("syncs") or {}
    if not doc["syncs"] and host.get("status") in ("none", "found"):
        # an imported trace's host-sync check is the one count (never "not checked" beside it)
        assert n["checked"] and n["total"] == host["count"]
    elif not n["checked"]:  # no step watched: no count at all, never a 0 that reads "none"
        assert n["total"] is None and not doc["syncs"]
    else:
        assert n["total"] == len(doc["syncs"])
        if n["total"]:
            line = f"syncs in region: {n['total']} on {counted(n['layers'], 'layer(s)')}"
            assert line in " ".join(term.split())
    with load(run_dir) as run:  # the store gives the rows as recorded; the rule is analysis'
        recorded = fill_layer_syncs(run.layers, run.syncs)["syncs"].dropna()
        if n["total"] and doc["syncs"]:
            assert int(recorded.sum()) == n["total"]
        assert run_kind(run.meta).value == doc["kind"]
    # collapse: the TUI's per-layer counts are the analysis' (one rule, one reference)
    collapsed = {r["layer"]: 0 for r in doc["layers"]}
    for r in doc["layers"]:
        collapsed[r["layer"]] += r["collapsed"] or 0  # None: not judged (no S to judge by)
    per_rank = doc["fleet"]["per_rank"]
    assert sum(collapsed.values()) == sum(r["collapsed_steps"] or 0 for r in per_rank)
    # a rank no layer of which could be judged is on neither side, never "not collapsed"
    for r in per_rank:
        unjudged = all(x["collapsed"] is None for x in doc["layers"] if x["rank"] == r["rank"])
        assert (r["collapsed_steps"] is None) == unjudged, (run_dir.name, r["rank"])
        # None: no rank was judged (never an empty list that reads "none collapsed")
        not_collapsed = doc["fleet"]["ranks_not_collapsed"] or []
        assert (r["rank"] in not_collapsed) == (r["collapsed_layers"] == 0)
    if any(
        f["kind"] == "split-collapse" and f.get("data", {}).get("path") for f in doc["findings"]
    ):
        assert sum(collapsed.values()) > 0, run_dir.name
    # per rank: the splits rows and the fleet name every rank
    assert doc["fleet"]["ranks"] == len(doc["ranks"])
    assert {r["rank"] for r in doc["fleet"]["per_rank"]} == set(doc["ranks"])
    return doc


@pytest.mark.parametrize("name", DEMOS)
def test_demo_runs_read_the_same_everywhere(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _check_views_agree(DEMO / name, capsys)
    assert doc["kind"] == "scenario"
    # no machine path in any recorded location the report prints
    for r in doc["syncs"] + doc["allocations"] + doc["h2d_copies"] + doc["capture_errors"]:
        assert not str(r["location"]).startswith("/"), r


@pytest.mark.parametrize("name", TRACES)
def test_imported_traces_read_the_same_everywhere(
    name: str, imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _check_views_agree(imported / name, capsys)
    assert doc["kind"] == "trace"
    assert not doc["trace"]["source"].startswith("/")


@pytest.mark.parametrize("name", [*LOGS, "kineto"])
def test_imported_logs_and_kineto_read_the_same_everywhere(
    name: str, imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _check_views_agree(imported / name, capsys)
    assert doc["kind"] == ("trace" if name == "kineto" else "log")


def test_legacy_flat_demo_counts_four_syncs_per_layer(capsys: pytest.CaptureFixture[str]) -> None:
    doc, term, once, _ = _views(DEMO / "bug-legacy-flat-syncs-break-capture", capsys)
    per_layer = {r["layer"]: r["syncs"] for r in doc["layers"]}
    assert set(per_layer.values()) == {4.0} and len(per_layer) == 8
    # allocations, host->device copies and the capture error are counted apart, never added in
    assert doc["sync_counts"]["by_kind"] == {"sync": 32, "alloc": 32, "h2d": 8, "capture-error": 1}
    assert "syncs in region: 32 on 8 layers" in " ".join(term.split())


def test_fleet_reports_per_rank_and_finds_the_collapse_on_its_ranks(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DP2 x TP4 on two hosts: host 0's 4 ranks collapsed (S = 1), host 1's did not (S = 8)."""
    doc, term, once, page = _views(imported / "fleet_dp2_tp4", capsys)
    assert doc["ranks"] == list(range(8))
    fleet = doc["fleet"]
    assert fleet["ranks_collapsed"] == [0, 1, 2, 3]
    assert fleet["ranks_not_collapsed"] == [4, 5, 6, 7]
    assert fleet["agree"] is False
    assert [r["S_min"] for r in fleet["per_rank"]] == [1, 1, 1, 1, 8, 8, 8, 8]
    (f,) = [f for f in doc["findings"] if f["kind"] == "split-collapse"]
    assert f["data"]["ranks"] == [0, 1, 2, 3]
    assert "on ranks 0-3 of 8" in f["title"]
    disagree = "DISAGREE: collapsed on 4 (ranks 0-3), not on 4 (ranks 4-7)"
    for text in (term, once, page):  # the fleet view in the report, the TUI and the HTML
        assert disagree in " ".join(text.split())
    # where each rank came from (host folder, pid) and its data-parallel group (inferred)
    per = fleet["per_rank"]
    assert [r["host"] for r in per] == ["host0"] * 4 + ["host1"] * 4
    assert [r["pid"] for r in per] == [5000, 5001, 5002, 5003, 5100, 5101, 5102, 5103]
    assert [r["dp_group"] for r in per] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert fleet["dp_groups"] == 2
    # each rank's own rocprofv3 Agent_Id (CPU agents first: a host's GPUs from 2), per rank
    assert [r["agent"] for r in per] == [2, 3, 4, 5, 2, 3, 4, 5]
    assert "agent: rocprofv3's Agent_Id" in " ".join(term.split())
    # per rank in the TUI: each rank's layers carry that rank's collapse count
    by_rank = {r["rank"]: r["collapsed"] for r in doc["layers"] if r["layer"] == 0}
    assert by_rank == {0: 3, 1: 3, 2: 3, 3: 3, 4: 0, 5: 0, 6: 0, 7: 0}
    # the trace's evidence counts add up over the ranks (each rank counted once)
    checks = doc["trace"]["checks"]
    assert checks["launches"]["mla_replays_with_launch"] == 24
    assert checks["launches"]["graph_launches"] == 24
    assert checks["stage2"]["aiter-gluon"]["s1_without_stage2"] == 48
    assert checks["replays"]["replays"] == 24
    # steps are per rank: every rank's 3 steps are there, none merged away
    assert len(doc["trace"]["steps"]) == 24
    assert {(s["rank"], s["step"]) for s in doc["trace"]["steps"]} == {
        (r, s) for r in range(8) for s in range(3)
    }


def test_fleet_views_keep_ranks_that_ran_different_s_apart(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ranks 0-3 run S = 1, ranks 4-7 S = 8: no table or headline shows one value for both
    (the replay-time table said S 1 on every layer and attention 20.8 us, between 30 and 11.5;
    the headline a median step of 161 us, which no rank ran)."""
    doc, term, once, page = _views(imported / "fleet_dp2_tp4", capsys)
    rt = doc["trace"]["replay_time"]
    assert rt["rank_groups"] == ["0-3", "4-7"]
    by_group = {(x["ranks_text"], x["layer"]): x for x in rt["layers"]}
    assert {x["S"] for (g, _), x in by_group.items() if g == "0-3"} == {1}
    assert {x["S"] for (g, _), x in by_group.items() if g == "4-7"} == {8}
    assert by_group[("0-3", 1)]["attention_median_us"] == 30.0
    assert by_group[("4-7", 1)]["attention_median_us"] == 11.5
    layer1 = doc["fleet"]["per_layer"][1]
    assert (layer1["S_min"], layer1["S_max"]) == (1, 8) and "S_median" not in layer1
    assert layer1["S_by_ranks"] == [{"S": 1, "ranks": "0-3"}, {"S": 8, "ranks": "4-7"}]
    t = doc["timing"]
    assert not t["ranks_agree"]
    assert {r["step_median_us"] for r in t["per_rank"]} == {194.0, 128.0}
    median = "128.0-194.0 µs across 8 ranks (ranks 0-3: 194.0, 4-7: 128.0)"
    assert {h["label"]: h["value"] for h in doc["headline"]}["median step"] == median
    for text in (term, once, page):
        assert median in " ".join(text.split())
    # the TUI's recent step times: one rank's, said so (they mixed 194 and 128 us steps)
    lat = next(line for line in once.splitlines() if line.startswith("step ms"))
    assert "rank 0 of 8" in lat and "min 0.194" in lat and "0.128" not in lat, lat
    # the TUI's layer table over all ranks: one row per rank and layer (ranks never merged):
    # layer 1 runs S 1 on ranks 0-3 and S 8 on ranks 4-7, each rank's own
    table = once.split("LAYERS (")[1].split("KV SPLITS")[0]
    # columns: rank, layer, time ms, syncs, S used, S ref, collapsed (tui/text.py)
    rows = [line.split() for line in table.splitlines()[1:] if line.split()[:1] != ["rank"]]
    s_of = {int(r[0]): r[4] for r in rows if len(r) > 4 and r[1] == "1"}
    assert s_of == {**dict.fromkeys(range(4), "1"), **dict.fromkeys(range(4, 8), "8")}, table


def test_duplicate_step_numbers_across_ranks_never_raise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two ranks with API records (step numbers repeat per rank): the report used to raise on
    the duplicate step index."""
    assert main(["import", "rocprof", str(AITER / "fleet_dp2_tp4" / "host0"), "--traces",
                 str(tmp_path), "--name", "two"]) == 0  # fmt: skip
    for args in (["report", str(tmp_path / "two")], ["report", str(tmp_path / "two"), "--json"]):
        capsys.readouterr()
        assert main(args) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_run_kind_is_written_when_the_run_is_made(imported: Path) -> None:
    for name, kind in (("gluon_v0119_bug", "trace"), (LOGS[0], "log"), ("kineto", "trace")):
        meta = json.loads((imported / name / "run.json").read_text())
        assert meta["kind"] == kind
    for name in DEMOS:
        assert json.loads((DEMO / name / "run.json").read_text())["kind"] == "scenario"


def test_old_runs_are_inferred_once() -> None:
    assert infer_kind({"source": "vllm plugin"}) is RunKind.ENGINE
    assert infer_kind({"source": "vllm-log"}) is RunKind.LOG
    assert infer_kind({"source": "rocprof"}) is RunKind.TRACE
    assert infer_kind({"source": "kineto"}) is RunKind.TRACE
    # an mlaprof export carried back through an importer keeps its scenario
    assert infer_kind({"source": "rocprof", "scenario": {"name": "x"}}) is RunKind.SCENARIO
    assert infer_kind({"source": "mlaprof run"}) is RunKind.SCENARIO
    # a recorded kind wins over the source; an unknown one is inferred
    assert run_kind({"kind": "log", "source": "rocprof"}) is RunKind.LOG
    assert run_kind({"kind": "bogus", "source": "rocprof"}) is RunKind.TRACE


def test_every_kind_has_one_adapter(imported: Path) -> None:
    with load(imported / "gluon_v0119_bug") as run:
        ev = collect(run)
    assert ev.kind is RunKind.TRACE and ev.trace is not None and ev.reference is not None
    assert ev.device.startswith("unknown (")
    with load(DEMO / DEMOS[0]) as run:
        ev = collect(run)
    assert ev.kind is RunKind.SCENARIO and ev.trace is None


async def _pilot_view(run_dir: Path, layer: int) -> tuple[str, str, dict]:
    """The live dashboard on ``run_dir`` once its analysis is in: the header's text, the
    drill-down summary of ``layer`` and the dashboard's view row of that layer."""
    from rich.text import Text

    from mlaprof.tui.app import MlaprofApp
    from mlaprof.tui.screens.dashboard import DashboardScreen
    from mlaprof.tui.screens.layer import LayerScreen
    from mlaprof.tui.widgets.header import RunHeader

    app = MlaprofApp(run_dir, interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(400):
            s = app.screen
            if (
                isinstance(s, DashboardScreen)
                and s.view is not None
                and s.view.findings_source == ("mlaprof.analysis")
            ):
                break
            await pilot.pause(0.05)
        d = app.screen
        assert isinstance(d, DashboardScreen) and d.view.findings_source == "mlaprof.analysis"
        header = d.query_one(RunHeader)
        head = header._plain  # what the header widget drew
        row = next(r for r in d.view.layers if r.layer == layer)
        app.push_screen(LayerScreen(d.follower, d.sel, layer))
        for _ in range(100):
            if isinstance(app.screen, LayerScreen):
                break
            await pilot.pause(0.05)
        await pilot.pause(0.1)
        summary_widget = app.screen.query_one("#layer-summary")
        drill = Text.from_markup(str(summary_widget.render())).plain
    return head, drill, row


@pytest.mark.parametrize(
    ("where", "name"),
    [("demo", "bug-legacy-flat-syncs-break-capture"), ("demo", "bug-padding-collapses-splits-c16"),
     ("imported", "gluon_v0119_bug"), ("imported", "fleet_dp2_tp4")],
)  # fmt: skip
async def test_the_live_dashboard_shows_the_analysis_numbers(
    where: str, name: str, imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = (DEMO if where == "demo" else imported) / name
    assert main(["report", str(run_dir), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    head, drill, row = await _pilot_view(run_dir, 0)
    flat = " ".join(head.split())
    assert doc["capture"]["text"] in flat
    assert f"device {doc['device']}" in flat
    # the dashboard's row is one rank's (ranks are never summed into one row)
    mine = [r for r in doc["layers"] if r["layer"] == 0 and r["rank"] == row.rank]
    assert len(mine) == 1 and row.collapsed == mine[0]["collapsed"]
    assert f"collapsed {row.collapsed}/{row.steps}" in drill
    syncs = [r["syncs"] for r in mine if r["syncs"] is not None]
    if syncs:
        assert f"syncs {max(syncs):g}" in drill


def test_comparing_two_traces_names_no_backend_none(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An imported trace records no backend: the TUI compare screen printed "backend None None"."""
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.tui.compare import compare_rows

    with load(imported / "gluon_v0119_bug") as a, load(imported / "gluon_v0119_fix") as b:
        rows = compare_rows(build_summary(a), build_summary(b))
    assert not [r for r in rows if "None" in r], rows
    backend = next(r for r in rows if r[0] == "backend")
    assert backend[1].startswith("not recorded (the trace's kernels: aiter-gluon")
    capsys.readouterr()
    assert main(["report", str(imported / "gluon_v0119_bug"), "--compare",
                 str(imported / "gluon_v0119_fix")]) == 0  # fmt: skip
    out = " ".join(capsys.readouterr().out.split())
    assert "None" not in out and "backend" in out


def test_an_imported_traces_summary_says_its_s_in_every_view(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The HTML summary of an imported trace left S out (it had capture, memory and timing)."""
    doc, term, once, page = _views(imported / "asm_16heads", capsys)
    heads = {h["label"]: h["value"] for h in doc["headline"]}
    s = heads["KV splits (from the trace)"]
    path = doc["trace"]["paths"][0]
    assert s.startswith(f"S {path['S']} on {path['path']} ({path['variant']})")
    assert f"KV splits (from the trace) {s}" in " ".join(page.split())
    assert f"KV splits (from the trace): {s}" in " ".join(once.split())
