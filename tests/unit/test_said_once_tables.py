"""What the sections say once, in every view's rows and tables: a layer table repeated "deserved
by the real rows", "rank 0" and "steps 2" in each of its rows; an imported trace printed the
titles "imported trace · checks" and "· trust · counts" with nothing under them; its sync check
read "syncs: none" beside "count: unknown" (nothing was checked, so no sync was found either);
its coverage read "kernels: 153" and then "kernels by rank: 0=153" for its one rank."""

from __future__ import annotations

import dataclasses

import pytest

from mlaprof.analysis.sections import LayerRow, TraceSyncs
from mlaprof.reporters.rows import NOT_RECORDED, SHARED, SPECS, Block, _label, summary_blocks
from tests import made_runs, shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
ALL = shipped_runs.NAMES + made_runs.NAMES
ONE_RANK_TRACE = "rocprof-rocprofiler-sdk-docs__kernel_trace"  # no MLA kernel, one rank


def _summary(name: str):  # noqa: ANN202 - the typed summary
    return (made_runs if name in made_runs.NAMES else shipped_runs).summary(name)


def _declared_layer_fields() -> set[str]:
    return {n for c in SPECS["LayerRow"].cols for n in c.fields}


@pytest.mark.parametrize("name", ALL)
def test_a_layer_value_every_row_holds_is_said_once_under_the_table(name: str) -> None:
    """Each field of a layer record not in the table's declared columns is a column where the
    layers differ on it and a part of the one "in every row" note where they all hold it
    alike; the declared columns (rank, layer, syncs, S, collapse, time) are always columns."""
    s = _summary(name)
    if len(s.layers) < 2:
        pytest.skip("fewer than two layer rows")
    (table,) = [t for b in summary_blocks(s) for t in b.tables if t.key == "layers"]
    shared = [n for n in table.notes if n.startswith(f"{SHARED}: ")]
    declared = _declared_layer_fields()
    fields = [f for f in dataclasses.fields(LayerRow) if f.name not in declared]
    said = 0
    for f in fields:
        values = {repr(getattr(r, f.name)) for r in s.layers}
        if all(getattr(r, f.name) is None for r in s.layers) and f.name == "S_grid_cap":
            continue  # an optional key no record holds: no column, no note
        label = _label("LayerRow", f.name)
        if len(values) == 1:
            assert label not in table.head, (f.name, table.head)
            assert len(shared) == 1 and f"{label}: " in shared[0], (f.name, shared)
            said += 1
        else:
            assert label in table.head, (f.name, table.head)
            assert not shared or f"; {label}: " not in f"; {shared[0][len(SHARED) + 2 :]}"
    for head in ("rank", "layer", "syncs", "S used", "S reference", "collapsed"):
        assert head in table.head, (head, table.head)
    # the one note, as the rows layer words it, in every view
    if said:
        note = " ".join(shared[0].split())
        for view, text in every_view(
            (made_runs if name in made_runs.NAMES else shipped_runs).run_dir(name), s
        ).items():
            assert note in " ".join(text.split()), (view, note)


def test_a_field_the_layers_differ_on_stays_a_column() -> None:
    """Two layers judged by different references keep the reference column, and the note
    says only what both hold."""
    from mlaprof.reporters.rows import _table

    def row(layer: int, reference: str) -> LayerRow:
        return LayerRow(S_min=4, S_reference=8, S_used=4, S_steps=2, collapsed=2, layer=layer,
                        rank=0, reference=reference, steps=2, syncs=0.0,
                        time_us=10.0)  # fmt: skip

    alike = _table("layers", "layers", [row(0, "deserved by the real rows")] * 2)
    assert "reference" not in alike.head
    assert alike.notes[0] == (
        f"{SHARED}: S min: 4; steps with S: 2; reference: deserved by the real rows; steps: 2"
    )
    other = _table("layers", "layers", [row(0, "deserved by the real rows"), row(1, "unknown")])
    assert "reference" in other.head and "S min" not in other.head
    assert other.notes[0] == f"{SHARED}: S min: 4; steps with S: 2; steps: 2"
    assert [r[other.head.index("reference")] for r in other.rows] == [
        "deserved by the real rows",
        "unknown",
    ]


def _bare_titles(blocks: list[Block]) -> list[str]:
    """Blocks with no row and no table that no nested block follows (a title over nothing)."""
    out = []
    for i, b in enumerate(blocks):
        nested = i + 1 < len(blocks) and blocks[i + 1].key.startswith(b.key)
        if not b.rows and not b.tables and not nested:
            out.append(b.title)
    return out


@pytest.mark.parametrize("name", ALL)
def test_no_section_title_stands_over_nothing(name: str) -> None:
    """A nested section holding nothing to show (an import that recorded no trace checks) is
    named in its parent's "not recorded" row, never a title with nothing under it."""
    s = _summary(name)
    blocks = summary_blocks(s)
    assert not _bare_titles(blocks), _bare_titles(blocks)
    for b in blocks:
        for r in b.rows:
            if r.label == NOT_RECORDED and r.key.endswith(".not_recorded"):
                for part in r.text.split(", "):
                    assert not any(x.title.endswith(f" · {part}") for x in blocks), part


def test_an_import_without_trace_checks_names_them_not_recorded() -> None:
    s = shipped_runs.summary(ONE_RANK_TRACE)
    assert s.trace is not None and s.trace.checks is not None
    assert all(getattr(s.trace.checks, f.name) is None for f in dataclasses.fields(s.trace.checks))
    blocks = {b.key: b for b in summary_blocks(s)}
    assert "trace.checks" not in blocks
    said = {r.label: r.text for r in blocks["trace"].rows}
    assert "checks" in said[NOT_RECORDED].split(", "), said
    trust = {r.label: r.text for r in blocks["trace.trust"].rows}
    assert trust[NOT_RECORDED] == "counts", trust


@pytest.mark.parametrize("name", ALL)
def test_a_trace_sync_check_says_no_sync_list_beside_its_count(name: str) -> None:
    """The list of host syncs a trace's check found is a table where it holds any; empty, its
    row is left out (the count's row says 0, or unknown where nothing was checked), so no view
    reads "syncs: none" beside "count: unknown"."""
    s = _summary(name)
    if s.trace is None or s.trace.syncs is None:
        pytest.skip("no trace sync check")
    t: TraceSyncs = s.trace.syncs
    (block,) = [b for b in summary_blocks(s) if b.key == "trace.syncs"]
    keys = {r.key for r in block.rows}
    tables = {x.key for x in block.tables}
    assert "trace.syncs.count" in keys
    assert "trace.syncs.syncs" not in keys, "an empty list said beside its count"
    assert ("trace.syncs.syncs" in tables) == bool(t.syncs), (tables, len(t.syncs))


def test_an_unchecked_trace_reads_unknown_never_none_for_its_syncs() -> None:
    s = shipped_runs.summary(ONE_RANK_TRACE)
    assert s.trace.syncs.count is None and s.trace.syncs.syncs == []
    for view, text in every_view(shipped_runs.run_dir(ONE_RANK_TRACE), s).items():
        flat = " ".join(text.split())
        assert "syncs: none" not in flat and "syncs none" not in flat, view


@pytest.mark.parametrize("name", ALL)
def test_a_per_rank_map_is_left_out_only_where_its_sum_says_it(name: str) -> None:
    """A trace's kernels, API calls and trust verdicts per rank: a row where the ranks are
    several (each rank's own), none where the run's one rank's value is the one beside it (a
    one-rank trace read "trust by rank: none" beside its verdict "reliable")."""
    from operator import attrgetter

    from mlaprof.analysis.typed_json import EACH_RANK_OF

    s = _summary(name)
    if s.trace is None:
        pytest.skip("no imported trace")
    checked = 0
    for key, sec in (("trace", s.trace), ("trace.coverage", s.trace.coverage)):
        (block,) = [b for b in summary_blocks(s) if b.key == key]
        keys = {r.key.removeprefix(f"{key}.") for r in block.rows}
        for f in dataclasses.fields(sec):
            if EACH_RANK_OF not in f.metadata or getattr(sec, f.name) is None:
                continue
            per, own = getattr(sec, f.name), attrgetter(f.metadata[EACH_RANK_OF])(sec)
            restated = (not per and own == 0) or (
                len(s.ranks) == 1 and list(per.values()) in ([], [own])
            )
            assert (f.name in keys) == (not restated), (f.name, per, own, keys)
            checked += 1
    assert checked >= 2


def test_a_one_rank_trace_says_its_kernel_count_once() -> None:
    s = shipped_runs.summary(ONE_RANK_TRACE)
    (block,) = [b for b in summary_blocks(s) if b.key == "trace.coverage"]
    said = {r.label: r.text for r in block.rows}
    assert s.trace.coverage.kernels_by_rank == {0: s.trace.coverage.kernels}
    assert said["kernels"] == str(s.trace.coverage.kernels) and "kernels by rank" not in said


@pytest.mark.parametrize("name", ALL)
def test_a_timing_without_steps_says_no_none_beside_its_no_steps(name: str) -> None:
    """A run with no step recorded read "by mode: none" and "per rank: none" beside seven rows
    of "no steps recorded": a list or map of what its count counts (``counted_by``) is left out
    where that count is unknown or 0, and kept where it holds anything."""
    from mlaprof.analysis.typed_json import COUNTED_BY

    s = _summary(name)
    if s.timing is None:
        pytest.skip("no timing section")
    (block,) = [b for b in summary_blocks(s) if b.key == "timing"]
    keys = {r.key.removeprefix("timing.") for r in block.rows} | {
        t.key.removeprefix("timing.") for t in block.tables
    }
    counted = [f for f in dataclasses.fields(s.timing) if COUNTED_BY in f.metadata]
    assert {f.name for f in counted} == {"by_mode", "per_rank"}
    for f in counted:
        held = getattr(s.timing, f.name)
        shown = f.name in keys
        if held:
            # shown, or a one-rank run's per-rank table its own rows restate
            assert shown or f.name == "per_rank", (f.name, keys)
        else:
            assert shown == bool(s.timing.steps), (f.name, s.timing.steps, keys)
    if s.timing.steps is None:
        flat = " ".join(" ".join(r.text for r in block.rows).split())
        assert "none" not in flat.split(), flat


def test_an_empty_list_beside_a_count_it_contradicts_keeps_its_row() -> None:
    """Only a count of 0 or unknown says an empty list: a count of 3 beside no records (a
    document an older import wrote) keeps its "none" row, where the two disagree openly."""
    from mlaprof.reporters.rows import _blocks

    s = shipped_runs.summary(ONE_RANK_TRACE)
    for count, kept in ((None, False), (0, False), (3, True)):
        syncs = dataclasses.replace(s.trace.syncs, count=count, syncs=[])
        (block,) = _blocks("trace.syncs", "syncs", syncs)
        assert ("trace.syncs.syncs" in {r.key for r in block.rows}) == kept, count


@pytest.mark.parametrize("name", ALL)
def test_a_trace_without_replays_lists_no_replay_kernels_or_layers(name: str) -> None:
    """A trace with no graph replay read "kernels: none" and "layers: none" under "replays: 0"."""
    s = _summary(name)
    if s.trace is None:
        pytest.skip("no imported trace")
    rt = s.trace.replay_time
    (block,) = [b for b in summary_blocks(s) if b.key == "trace.replay_time"]
    keys = {r.key for r in block.rows} | {t.key for t in block.tables}
    for part in ("kernels", "layers"):
        held = bool(getattr(rt, part))
        assert (f"trace.replay_time.{part}" in keys) == (held or bool(rt.replays)), (part, keys)


@pytest.mark.parametrize("name", ALL)
def test_a_sync_count_of_no_layer_lists_no_layers(name: str) -> None:
    """A check that found no sync read "layers: 0" then "per layer: none"."""
    s = _summary(name)
    (block,) = [b for b in summary_blocks(s) if b.key == "sync_counts"]
    keys = {r.key for r in block.rows} | {t.key for t in block.tables}
    held = s.sync_counts.per_layer
    if held is None:  # not checked: said unknown, as every count of the section
        assert "sync_counts.per_layer" in keys
    else:
        assert ("sync_counts.per_layer" in keys) == bool(held), (held, keys)


@pytest.mark.parametrize("name", ALL)
def test_a_device_trace_reads_no_cpu_rank_never_unknown(name: str) -> None:
    """ "imported trace · cpu: unknown" stood beside "capture · cpu: no": a trace whose import
    recorded no CPU-only rank (or no drafter pass) says so."""
    from mlaprof.analysis.sections import TRACE_NO_CPU, TRACE_NO_DRAFTER

    s = _summary(name)
    if s.trace is None:
        pytest.skip("no imported trace")
    said = {r.key: r.text for b in summary_blocks(s) for r in b.rows}
    if s.trace.cpu is None:
        assert said["trace.cpu"] == TRACE_NO_CPU
    if s.trace.drafter is None:
        assert said["trace.drafter"] == TRACE_NO_DRAFTER
    assert "unknown" not in (said.get("trace.cpu"), said.get("trace.drafter"))
