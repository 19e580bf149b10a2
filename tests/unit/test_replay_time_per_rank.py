"""A fleet whose ranks differ (one rank's kernels run 2x slower) keeps each rank's own figures:
the replay time's layer rows are per rank (ranks share a row only where their values read the
same), its time outside the layers is each rank's with the range said, and the timing's pooled
medians (per mode, per layer record) say the ranks they pool beside each rank's own. Every view
renders these from the sections (the rows layer, the dashboard's ``--once`` for one rank)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis import replay_time
from mlaprof.analysis.evidence.common import load_tables
from mlaprof.analysis.evidence.model import run_meta
from mlaprof.analysis.run_summary import RunSummary, build_summary
from mlaprof.analysis.sections import ReplayLayer, Timing, TraceReplayTime
from mlaprof.analysis.typed_json import over_ranks_how, over_ranks_label
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.reporters.rows import Block, Table, front_rows, front_tables, summary_blocks
from mlaprof.store import load

FLEET = Path(__file__).resolve().parents[1] / "data" / "aiter" / "fleet_dp2_tp4"
SLOW = 1  # the rank whose kernels run 2x slower (host0/5001: rank 1 of the fleet)


@pytest.fixture(scope="module")
def slow_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 8-rank fleet with rank 1's kernel timeline stretched 2x (its steps, layers and
    kernels take twice as long; ranks 0, 2, 3 run the same S and times as before)."""
    base = tmp_path_factory.mktemp("slow")
    src = base / "src"
    shutil.copytree(FLEET, src)
    path = src / "host0" / "5001_kernel_trace.csv"
    df = pd.read_csv(path)
    t0 = int(df["Start_Timestamp"].min())
    for c in ("Start_Timestamp", "End_Timestamp"):
        df[c] = t0 + 2 * (df[c] - t0)
    df.to_csv(path, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return import_rocprof(src, base, "slow")[0]


@pytest.fixture(scope="module")
def summary(slow_fleet: Path) -> RunSummary:
    with load(slow_fleet) as run:
        return build_summary(run)


def _rows_of(rt: TraceReplayTime, rank: int, layer: int) -> list[ReplayLayer]:
    return [r for r in rt.layers if rank in r.ranks and r.layer == layer]


def test_the_slow_rank_has_its_own_layer_rows(summary: RunSummary) -> None:
    assert [r.pid for r in summary.fleet.per_rank][SLOW] == 5001  # the rank the fixture slows
    rt = summary.trace.replay_time
    for layer in sorted({r.layer for r in rt.layers}):
        (slow,) = _rows_of(rt, SLOW, layer)  # one row per rank and layer
        (fast,) = _rows_of(rt, 0, layer)
        assert slow.ranks == [SLOW], slow  # never pooled with the ranks it differs from
        assert fast.ranks == [0, 2, 3], fast  # ranks whose values read the same share a row
        assert slow.median_us == pytest.approx(2 * fast.median_us)
        assert slow.attention_median_us == pytest.approx(2 * fast.attention_median_us)
    assert rt.rank_groups == ["0, 2-3", "1", "4-7"]


def test_the_layer_rows_come_layer_by_layer(summary: RunSummary) -> None:
    # every rank group's layer 0 first: a view that shows the first rows shows each rank's
    rt = summary.trace.replay_time
    first = rt.layers[: len(rt.rank_groups)]
    assert [r.layer for r in first] == [0] * len(rt.rank_groups)
    assert [r.ranks for r in first] == [[0, 2, 3], [SLOW], [4, 5, 6, 7]]


def test_the_time_outside_the_layers_is_each_rank_s(summary: RunSummary) -> None:
    rt = summary.trace.replay_time
    per = {r.rank: r for r in rt.per_rank or []}
    assert sorted(per) == list(range(8))
    assert per[SLOW].outside_layers_us == pytest.approx(2 * per[0].outside_layers_us)
    assert per[2].outside_layers_us == per[0].outside_layers_us
    assert per[SLOW].steps == per[0].steps == 3
    fast, slow = per[0].outside_layers_us, per[SLOW].outside_layers_us
    assert rt.outside_layers_text is not None
    assert rt.outside_layers_text.startswith(f"{fast:.1f}-{slow:.1f} µs across 8 ranks")
    assert f"1: {slow:.1f}" in rt.outside_layers_text, rt.outside_layers_text
    # the pooled mean keeps its label: made of which ranks' steps
    how = over_ranks_how(TraceReplayTime, "outside_layers_us")
    assert "pooled" in how


def test_the_sql_and_the_stored_sums_agree_per_rank(
    slow_fleet: Path, summary: RunSummary, monkeypatch: pytest.MonkeyPatch
) -> None:
    with load(slow_fleet) as run:
        layers = load_tables(run)["layers"]
        fast = replay_time.replay_time(run_meta(run.meta), run, layers)
        monkeypatch.setattr(replay_time, "_pre_aggregated", lambda run, jl: None)
        slow = replay_time.replay_time(run_meta(run.meta), run, layers)
    assert fast == slow
    assert fast.layers == summary.trace.replay_time.layers


def test_the_timing_by_mode_is_each_rank_s_beside_the_pooled(summary: RunSummary) -> None:
    t = summary.timing
    per = {r.rank: r for r in t.per_rank}
    assert per[SLOW].by_mode == {"graph": 2 * per[0].by_mode["graph"]}
    assert per[4].by_mode == {"graph": per[4].step_median_us}
    assert per[SLOW].layer_median_us == pytest.approx(2 * per[0].layer_median_us)
    # the pooled values say the ranks they pool
    for name in ("by_mode", "layer_median_us"):
        assert "pooled" in over_ranks_how(Timing, name)


def _block(blocks: list[Block], key: str) -> Block:
    return next(b for b in blocks if b.key == key)


def _table(blocks: list[Block], key: str) -> Table:
    return next(t for b in blocks for t in b.tables if t.key == key)


def test_every_view_says_what_the_pooled_values_pool(summary: RunSummary) -> None:
    blocks = summary_blocks(summary)
    timing = {r.key: r for r in _block(blocks, "timing").rows}
    for field in ("by_mode", "layer_median_us"):
        said = over_ranks_label(over_ranks_how(Timing, field), 8)
        assert timing[f"timing.{field}"].label.endswith(said), timing[f"timing.{field}"]
    per_rank = _table(blocks, "timing.per_rank")
    assert "by mode" in per_rank.head and "layer median" in per_rank.head
    paths = _table(blocks, "trace.paths")
    assert "layer" in paths.head  # the path's layer median: the note says the ranks it pools
    assert any(f"median layer times{over_ranks_label('pooled', 8)}" in n for n in paths.notes)
    records = _table(blocks, "layer_splits")
    assert records.head[0] == "records" + over_ranks_label("sum", 8), records.head


def test_the_front_rows_say_each_rank_s_time_outside_the_layers(summary: RunSummary) -> None:
    blocks = summary_blocks(summary)
    (rt,) = [b for b in front_rows(blocks) if b.key == "trace.replay_time"]
    by_key = {r.key: r for r in rt.rows}
    assert by_key["trace.replay_time.outside_layers_text"].text == (
        summary.trace.replay_time.outside_layers_text
    )
    assert "trace.replay_time.outside_layers_us" not in by_key  # the range says it, not a mean
    (layers,) = [t for t in front_tables(blocks) if t.key == "trace.replay_time.layers"]
    slow = summary.trace.replay_time.layers[1]
    assert layers.rows[1][:3] == ["1", "0", f"{slow.median_us:.1f} µs"], layers.rows[:3]


def test_the_dashboard_of_one_rank_shows_that_rank_s_layer_times(
    slow_fleet: Path, summary: RunSummary
) -> None:
    from mlaprof.tui.once import snapshot

    text = snapshot(slow_fleet, rank=SLOW)
    assert "rank 1 of 8" in text
    rows = summary.trace.replay_time.layers
    slow = next(r for r in rows if r.ranks == [SLOW] and not r.layer)
    fast = next(r for r in rows if 0 in r.ranks and not r.layer)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if "GPU time per layer inside graph replays" in ln)
    table = [ln.split() for ln in lines[at + 2 : at + 2 + len(rows)]]
    # rank 1's own layer 0 (twice the others'), never a row that pools it with ranks 0, 2, 3
    assert ["1", "0", f"{slow.median_us:.1f}", "µs"] in [ln[:4] for ln in table], table
    assert ["0,", "2-3", "0", f"{fast.median_us:.1f}", "µs"] in [ln[:5] for ln in table], table
    assert not any(ln[:1] == ["0-3"] for ln in table), table


def test_a_pooled_time_stays_beside_words_that_say_more(summary: RunSummary) -> None:
    """The ranks' times differ: the words give the range with the ranks behind each value, so
    the pooled value keeps its own row beside them (only a value its words repeat is dropped)."""
    blocks = {b.key: b for b in summary_blocks(summary)}
    rt = {r.key.rsplit(".", 1)[-1]: r.text for r in blocks["trace.replay_time"].rows}
    assert "across 8 ranks" in rt["outside_layers_text"]
    assert (
        rt["outside_layers_us"].endswith("µs")
        and rt["outside_layers_us"] != rt["outside_layers_text"]
    )
    timing = {r.key.rsplit(".", 1)[-1]: r.text for r in blocks["timing"].rows}
    assert "across" in timing["step_median_text"]
    assert "step_median_us" in timing


def test_the_rank_groups_read_as_groups(summary: RunSummary) -> None:
    """Three groups of ranks read as three ("{0, 2-3} {1} {4-7}"), not as one run-on list of
    ranks ("0, 2-3, 1, 4-7"), nor, for one rank, as a count ("rank groups: 0")."""
    (block,) = [b for b in summary_blocks(summary) if b.key == "trace.replay_time"]
    (row,) = [r for r in block.rows if r.key.endswith(".rank_groups")]
    assert row.text == "{0, 2-3} {1} {4-7}"
    assert "alike layer rows" in row.label
    from mlaprof.reporters.fmt import field_text

    assert field_text("rank_groups", ["0"]) == "{0}"
