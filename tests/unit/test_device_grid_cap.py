"""Where the run's kernel decides S on the device (the mlaprof-triton policy on the triton
backend), a layer record's S is the launch grid's split axis, the cap, not an S any row ran
with. The analysis decides it once (splits.grid_caps: the sections' ``S_grid_cap``, their S
None) and every place that reads a layer record's S as the S used says the cap instead: the
layers table, S per MLA layer, the ranks side by side (per rank, per layer, DP groups), the
dashboard's layer cell and the S-per-layer figure (the cap is not drawn as an S; a note says
why)."""

from __future__ import annotations

import re

import pandas as pd

from mlaprof.analysis.layers import layer_table
from mlaprof.analysis.sections import device_cap_text
from mlaprof.analysis.splits import grid_caps
from tests import shipped_runs
from tests.view_texts import every_view

NAME = "demo-fix-splits-decided-on-device-c1-long"  # policy mlaprof-triton, grid cap 128
CAP = device_cap_text(128)


def test_the_sections_hold_the_cap_never_as_an_s() -> None:
    s = shipped_runs.summary(NAME)
    if s.replayed_splits is None or s.replayed_splits.grid_cap != 128:
        raise AssertionError(s.replayed_splits)
    records = [*s.layers, *s.layer_splits, *s.fleet.per_rank, *s.fleet.per_layer, *s.dp_groups]
    if not s.layers or not s.fleet.per_layer:
        raise AssertionError("the demo run holds no layer rows")
    for r in records:
        held = [getattr(r, n) for n in ("S_used", "S_min", "S_max", "splits") if hasattr(r, n)]
        if r.S_grid_cap != 128 or any(v is not None for v in held):
            raise AssertionError(r)
    for r in s.layers:  # no S of its own: its collapse is not judged (never "0 collapsed")
        if r.collapsed is not None or r.none_reads("S_used") != CAP:
            raise AssertionError(r)


def test_every_view_says_the_cap_where_it_showed_an_s() -> None:
    s = shipped_runs.summary(NAME)
    for view, text in every_view(shipped_runs.run_dir(NAME), s).items():
        if text.count(CAP) < len(s.layers):
            raise AssertionError((view, text.count(CAP)))
        # a bare 128 after a header of S (the layers' and ranks' tables) is gone: the
        # splits table's modelled S (its own "dev" mark) and the grid cap column stay
        for head in re.finditer(r"S (?:min|max|used)[^.]{0,80}", text):
            bare = head.group(0).split("grid cap")[0]
            # each 128 in the window, read on in the whole text (the window may end at it)
            for n in re.finditer(r"\b128\b", bare):
                after = text[head.start() + n.end() :]
                if not after.startswith(" (S decided") and "dev" not in head.group(0):
                    raise AssertionError((view, bare))


def test_the_s_per_layer_figure_does_not_draw_the_cap_as_an_s() -> None:
    from mlaprof.figures.splits import splits_used_vs_deserved

    s = shipped_runs.summary(NAME)
    fig = splits_used_vs_deserved(s, by="layer")
    if any(t.name == "S used" for t in fig.data):
        raise AssertionError([t.name for t in fig.data])
    if CAP not in (fig.layout.xaxis.title.text or ""):
        raise AssertionError(fig.layout.xaxis.title.text)


def test_a_host_s_is_kept_and_the_rule_reads_each_steps_backend() -> None:
    """Records of a step whose backend does not decide S on the device keep their S."""
    layers = pd.DataFrame({"rank": [0, 0, 0, 0], "step": [0, 0, 1, 1], "layer": [0, 1, 0, 1],
                           "t_start_ns": [0, 1, 2, 3], "duration_ns": [1, 1, 1, 1],
                           "syncs": [0, 0, 0, 0], "splits_used": [128, 128, 4, 4],
                           "splits_deserved": [8, 8, 8, 8]})  # fmt: skip
    steps = pd.DataFrame({"rank": [0, 0], "step": [0, 1], "backend": ["triton", "torch"]})
    capped = grid_caps(steps, layers, "mlaprof-triton")
    if capped.tolist() != [True, True, False, False]:
        raise AssertionError(capped.tolist())
    if grid_caps(steps, layers, "vllm-triton").any():  # a host policy: every S is an S
        raise AssertionError("a host policy's S read as a cap")
    syncs = pd.DataFrame(columns=["rank", "step", "layer", "kind"])
    rows = layer_table(layers, syncs, None, capped)
    if [(r.S_min, r.S_used, r.S_grid_cap) for r in rows] != [(4, 4, 128), (4, 4, 128)]:
        raise AssertionError(rows)


def test_the_timeline_hover_says_the_cap_not_an_s_used() -> None:
    """The timeline's layer bars carry the S used for their hover ("KV splits used ..."): a
    device-decided run's layer records hold the cap, so the hover says the cap's words."""
    s = shipped_runs.summary(NAME)
    tl = s.series.ranks[0].timeline
    layers = [b for b in (tl.bars if tl else ()) if b.lane == "layers"]
    if not layers:
        raise AssertionError("the demo run's timeline holds no layer bars")
    used = {b.detail[3] for b in layers}
    if used != {CAP}:
        raise AssertionError(used)


def test_the_fleets_collapse_is_not_judged_for_the_cap_never_for_a_missing_reference() -> None:
    """The S reference is there; the S is not (the records hold the cap): the fleet's collapse
    reads as the layers' does, in every view."""
    from mlaprof.analysis.sections import DEVICE_NOT_JUDGED

    s = shipped_runs.summary(NAME)
    if s.fleet.ranks_collapsed is not None:
        raise AssertionError(s.fleet)
    if s.fleet.none_reads("ranks_collapsed") != DEVICE_NOT_JUDGED:
        raise AssertionError(s.fleet.none_reads("ranks_collapsed"))
    for view, text in every_view(shipped_runs.run_dir(NAME), s).items():
        if "no layer has an S reference" in text:
            raise AssertionError(view)
