"""Per rank and layer: S used, the S it is judged against, how many steps collapsed, and the
syncs per watched step. The TUI's layer table and drill-down, the report and ``--json`` show
these rows; the recorded ``run.layers.syncs``, filled by the analysis' rule
(:func:`mlaprof.analysis.syncs.fill_layer_syncs`), holds the same sync count."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlaprof.analysis.frame_rows import column_rows

# which S a layer's collapse is judged against: the words live with the typed row
from mlaprof.analysis.sections import REFERENCE_TEXT, LayerRow
from mlaprof.analysis.splits import collapsed
from mlaprof.analysis.syncs import watched_steps
from mlaprof.errors import MlaprofError
from mlaprof.sync_kinds import SYNC


def reference_s(layers: pd.DataFrame, fix_by_step: pd.DataFrame | None) -> pd.Series:
    """The S each layer record is judged against: what its real rows deserve where the run knows
    it, else (an imported trace, whose grid counts padding rows) the S the fix gives for the
    same rows (``fix_by_step``: rank, step, fix)."""
    ref = pd.to_numeric(layers["splits_deserved"], errors="coerce")
    if fix_by_step is not None and not fix_by_step.empty:
        if fix_by_step.duplicated(["rank", "step"]).any():  # one step per rank and number
            raise MlaprofError(
                "the run holds one step number twice on one rank (its ranks were merged when it "
                "was written?): its layers cannot be judged step by step"
            )
        fix = layers[["rank", "step"]].merge(fix_by_step, on=["rank", "step"], how="left")["fix"]
        ref = ref.fillna(pd.Series(fix.to_numpy(), index=layers.index))
    return ref


def layer_table(
    layers: pd.DataFrame,
    syncs: pd.DataFrame,
    fix_by_step: pd.DataFrame | None = None,
    capped: pd.Series | None = None,
) -> list[LayerRow]:
    """One :class:`LayerRow` per rank and layer (rank, layer, steps, time_us, S_used, S_min,
    S_reference, reference, collapsed, syncs); ``None`` where the run does not hold a value (``reference``: which S the
    collapse is judged against, one of :data:`REFERENCE_TEXT`). ``capped``: per record, whether
    its S was decided on the device (:func:`mlaprof.analysis.splits.grid_caps`): its
    ``splits_used`` is the grid's cap, kept as ``S_grid_cap``, never as an S (nor judged)."""
    if layers.empty:
        return []
    used = pd.to_numeric(layers["splits_used"], errors="coerce")
    cap = used.where(capped) if capped is not None else pd.Series(np.nan, index=layers.index)
    if capped is not None:
        used = used.mask(capped)
    ref = reference_s(layers, fix_by_step)
    # the columns the table reads, as one frame without copying the records (a fleet's layer
    # records are ~10^6 rows); ``pos``: each record's place, so a group's last one is found by
    # its largest place (what ``groupby().tail(1)`` gave, at a tenth of its cost)
    ly = pd.DataFrame(
        {
            "rank": layers["rank"],
            "layer": layers["layer"],
            "step": layers["step"],
            "duration_ns": layers["duration_ns"],
            "used": used,
            "cap": cap,
            "ref": ref,
            "collapsed": collapsed(used, ref),
            "has_deserved": layers["splits_deserved"].notna(),
            "pos": np.arange(len(layers)),
        },
        copy=False,
    )
    watched = syncs[syncs["kind"] == SYNC] if not syncs.empty else syncs
    per_step = watched_steps(layers, syncs).groupby("rank")["step"].nunique()
    n_sync = watched.groupby(["rank", "layer"]).size() if not watched.empty else pd.Series()
    # one vectorised pass per column over all (rank, layer) groups; the last record of a group is
    # its last row as recorded (NaN included, as a last value can be unknown)
    keys = ["rank", "layer"]
    grouped = ly.groupby(keys, sort=True)
    # column by column: the same aggregates as one named .agg(), whose own overhead (~5 ms)
    # was most of this table's cost on a small run
    agg = pd.DataFrame(
        {
            "steps": grouped["step"].size(),
            "time_ns": grouped["duration_ns"].mean(),
            "s_min": grouped["used"].min(),
            "s_steps": grouped["used"].count(),
            "collapsed": grouped["collapsed"].sum(),
            "deserved": grouped["has_deserved"].any(),
            "any_ref": grouped["ref"].count(),
            "cap": grouped["cap"].max(),
        }
    )
    # each group's last record, in the groups' order (one row per group: keys are unique)
    last = grouped["pos"].max().to_numpy()
    last = pd.DataFrame(
        {"splits_used": used.to_numpy()[last], "ref": ref.to_numpy()[last]},
        index=agg.index,
    )
    out = []
    both = agg.assign(used=last["splits_used"], ref=last["ref"])  # the same index
    rows = column_rows(both, "steps", "time_ns", "s_min", "s_steps", "collapsed", "deserved",
                       "any_ref", "used", "ref", "cap")  # fmt: skip
    for (rank, layer), row in zip(agg.index, rows, strict=True):
        steps, time_ns, s_min, s_steps, n_collapsed, deserved, any_ref, used, ref, cap_s = row
        # a layer whose every S is the grid's cap: no S to judge its collapse by
        device_only = not s_steps and not pd.isna(cap_s)
        source = "deserved" if deserved else "fix" if any_ref else "unknown"
        steps_watched = per_step.get(rank)
        out.append(
            LayerRow(
                rank=int(rank),
                layer=int(layer),
                steps=int(steps),
                time_us=None if pd.isna(time_ns) else float(time_ns) / 1e3,
                S_used=_i(used),
                S_steps=int(s_steps),
                S_min=_i(s_min),
                S_reference=_i(ref),
                reference=REFERENCE_TEXT[source],
                # no step of the layer has an S to judge against: not judged (never 0)
                collapsed=int(n_collapsed) if any_ref and not device_only else None,
                syncs=None
                if not steps_watched
                else float(n_sync.get((rank, layer), 0)) / steps_watched,
                S_grid_cap=_i(cap_s),
            )
        )
    return out


def _i(v: object) -> int | None:
    return None if v is None or pd.isna(v) else int(v)
