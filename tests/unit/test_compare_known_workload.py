"""A compare judges a change (better/worse) only where the two runs are known to have run the same
workload. ``report asm_16heads --compare gluon_v0119_fix`` printed "KV splits 16 -> 4 worse" and
"step time +12% worse" for two kernels whose workloads the report could not tie ("not stated by
both: model, kv, qlen, heads, device"). A part either run's kind records but a run does not state
leaves the workload unknown; what a trace itself shows (heads in the kernel's name or stage-2
grid, its verify kernel family, MLA layers per step) is its workload; what no trace records
(model preset, KV lengths) is said as not compared. The compare names which layer time it
compares: the layer records' MLA attention span and the whole layer's GPU time are two rows."""

from __future__ import annotations

import dataclasses

from mlaprof.analysis.diff import METRICS, Verdict, diff
from mlaprof.analysis.timing import GPU_LAYER_TIME, MLA_LAYER_TIME
from mlaprof.reporters.diff_rows import diff_block
from mlaprof.tui.compare import compare_table
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary
JUDGED = (Verdict.BETTER, Verdict.WORSE, Verdict.SAME, Verdict.WITHIN_SPREAD)
DEPENDENT = {m.name for m in METRICS if m.workload}


def _verdicts(d) -> dict[str, Verdict]:  # noqa: ANN001
    return {r.metric: r.verdict for r in d.table if r.change is not None}


def test_an_unknown_workload_gets_no_verdict_and_says_which_parts_are_unstated() -> None:
    d = diff(_summary("aiter-gluon_v0119_bug"), _summary("aiter-gluon_v0119_fix"))
    assert d.workload.same is None
    text = d.workload.text
    assert text.startswith("workload unknown ("), text
    # the bug's S 1 ran no stage 2 (no head axis shown); the fix's stage-2 grids show 8 heads
    assert "neither run states device" in text and "only B states heads (8)" in text
    assert "not compared: a trace records no model, KV lengths" in text
    got = _verdicts(d)
    assert {m for m in got if m in DEPENDENT} >= {"median step time", f"median {MLA_LAYER_TIME}"}
    for metric, v in got.items():
        if metric in DEPENDENT:
            assert v is Verdict.UNKNOWN_WORKLOAD, (metric, v)
    # the rows layer and the dashboard's table carry the same decision and the same line
    block = diff_block(d)
    said = {r.label: r.text for r in block.rows}
    assert said["workload"] == text
    assert {row[4] for row in block.tables[0].rows if row[3]} >= {"not judged"}
    rows, legend = compare_table(
        _summary("aiter-gluon_v0119_bug"), _summary("aiter-gluon_v0119_fix")
    )
    assert f"workload: {text}" in legend.splitlines()
    assert not {"better", "worse"} & {r[4] for r in rows if r[0].startswith("median")}


def test_two_kernels_whose_traces_show_different_workloads_are_not_judged() -> None:
    """The audit's pair: the ASM kernel's name says 16 heads, the gluon fix's stage-2 grid 8;
    and they are two kernel families."""
    d = diff(_summary("aiter-asm_16heads"), _summary("aiter-gluon_v0119_fix"))
    assert d.workload.same is False
    differ = {f.name: (f.before, f.after) for f in d.workload.fields if f.differs}
    assert differ["heads"] == ("16", "8")
    assert differ["kernel"] == ("aiter-asm", "aiter-gluon")
    got = _verdicts(d)
    s_row = "KV splits per MLA layer (trace grids, median)"
    assert (
        got[s_row] is Verdict.OTHER_WORKLOAD and got["median step time"] is Verdict.OTHER_WORKLOAD
    )
    assert not any(v in (Verdict.BETTER, Verdict.WORSE) for m, v in got.items() if m in DEPENDENT)


def test_two_traces_that_show_the_same_workload_keep_their_verdicts() -> None:
    """Where both traces state every part a trace records (here the device, which these
    rocprofv3 files do not name, set as a trace that names it would), the compare judges."""
    fix = dataclasses.replace(_summary("aiter-gluon_v0119_fix"), device="MI300X")
    slower = dataclasses.replace(
        fix, timing=dataclasses.replace(fix.timing, step_median_us=fix.timing.step_median_us * 2)
    )
    d = diff(fix, slower)
    assert d.workload.same is True, d.workload.text
    assert d.workload.text.startswith("same workload (batch, qlen, heads, MLA layers per step")
    assert d.workload.text.endswith("; not compared: a trace records no model, KV lengths")
    got = _verdicts(d)
    assert got["median step time"] is Verdict.WORSE
    assert got[f"median {MLA_LAYER_TIME}"] is Verdict.SAME


def test_two_demo_runs_of_one_workload_keep_their_verdicts() -> None:
    d = diff(_summary("demo-bug-padding-collapses-splits-c16"),
             _summary("demo-fix-padding-active-rows-c16"))  # fmt: skip
    assert d.workload.same is True and "MLA layers per step" in d.workload.text
    assert "not compared" not in d.workload.text  # a scenario records every part
    assert _verdicts(d)["median step time"] is Verdict.BETTER


def test_the_compare_names_which_layer_time_it_compares() -> None:
    """The gluon bug against its fix: the layer records' MLA span went 30 -> 13.5 µs, the whole
    layer's GPU time 41 -> 22.5 µs; one row each, named, with what each spans."""
    d = diff(_summary("aiter-gluon_v0119_bug"), _summary("aiter-gluon_v0119_fix"))
    rows = {r.metric: r for r in d.table}
    mla, gpu = rows[f"median {MLA_LAYER_TIME}"], rows[f"median {GPU_LAYER_TIME}"]
    assert (mla.a, mla.b) == (30.0, 13.5)
    assert (gpu.a, gpu.b) == (41.0, 22.5)
    assert "the layer's MLA kernels in the trace, stage 1 start" in mla.provenance
    assert "kernels from one MLA layer to the next" in gpu.provenance
    assert not any(r.metric == "median layer time" for r in d.table)


def test_a_part_neither_run_states_is_not_compared_and_blocks_no_verdict() -> None:
    """Two traces that both leave the device unstated cannot differ in it: the line names it as
    not compared (never as checked) and the changes keep their verdicts; a part only one of
    them states still leaves the workload unknown (above)."""
    fix = _summary("aiter-gluon_v0119_fix")
    d = diff(fix, fix)
    assert d.workload.same is True, d.workload.text
    assert d.workload.text.startswith("same workload (")
    assert "not compared: neither run states device" in d.workload.text
    assert "device" not in d.workload.text.split(";")[0]
    got = _verdicts(d)
    assert got and all(v in JUDGED for m, v in got.items() if m in DEPENDENT), got


def test_a_fleets_gpu_time_per_layer_says_its_ranks_are_pooled() -> None:
    """The GPU time per layer of a trace of several ranks is one median over every rank's
    replay-time rows: the compare row says so, never a bare per-layer time."""
    fleet = _summary("aiter-fleet_dp2_tp4")
    row = next(r for r in diff(fleet, fleet).table if r.metric == f"median {GPU_LAYER_TIME}")
    assert row.a is not None and "every rank's pooled" in row.provenance, row
    one = _summary("aiter-gluon_v0119_fix")
    row = next(r for r in diff(one, one).table if r.metric == f"median {GPU_LAYER_TIME}")
    assert "pooled" not in row.provenance, row
