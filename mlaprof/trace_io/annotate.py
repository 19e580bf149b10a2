"""After the raw rows are in: find MLA kernels, infer S, group replays, number layers, and derive
the ``steps`` / ``layers`` tables of an imported trace (one step per graph replay).

Works in SQL on the staged database so that a million-dispatch trace stays cheap: only the rows
of recognised MLA kernels come back into Python.
"""

from __future__ import annotations

from mlaprof.trace_io.common import ImportSummary
from mlaprof.trace_io.kernels import MAIN, KernelMatcher, assign_layers, infer_splits
from mlaprof.trace_io.staging import BulkWriter


def group_replays_by_correlation(bulk: BulkWriter) -> int:
    """rocprofv3 correlates every kernel of a graph launch to the launch call: a correlation id
    shared by several kernels is one replay. Replays are numbered by their first kernel's start."""
    ex = bulk.execute
    ex("DROP TABLE IF EXISTS temp._replay")
    ex(
        "CREATE TEMP TABLE _replay AS SELECT correlation AS corr, "
        "ROW_NUMBER() OVER (ORDER BY MIN(start_ns), correlation) - 1 AS r "
        "FROM kernels WHERE replay IS NULL AND correlation IS NOT NULL "
        "GROUP BY correlation HAVING COUNT(*) > 1"
    )
    n = ex("SELECT COUNT(*) FROM temp._replay").fetchone()[0]
    if n:
        ex("CREATE INDEX temp._replay_corr ON _replay(corr)")
        ex(
            "UPDATE kernels SET replay = (SELECT r FROM temp._replay WHERE corr = kernels.correlation) "
            "WHERE correlation IN (SELECT corr FROM temp._replay)"
        )
    ex("DROP TABLE temp._replay")
    return n


def annotate(
    bulk: BulkWriter,
    matcher: KernelMatcher,
    summary: ImportSummary,
    grid_in_workitems: bool,
    derive_steps: bool = True,
) -> None:
    ex = bulk.execute
    names = [r[0] for r in ex("SELECT DISTINCT name FROM kernels").fetchall()]
    mla = {n: matcher.match(n) for n in names}
    mla = {n: p for n, p in mla.items() if p is not None}
    if not mla:
        return
    marks = ",".join("?" * len(mla))
    rows = ex(
        f"SELECT rowid, name, replay, start_ns, end_ns, grid_x, grid_y, grid_z, block_x, block_y, "
        f"block_z, splits FROM kernels WHERE name IN ({marks}) ORDER BY replay, start_ns, rowid",
        list(mla),
    ).fetchall()
    summary.mla_kernels = sum(1 for r in rows if mla[r[1]].role == MAIN)
    in_replay = [r for r in rows if r[2] is not None]
    layers = assign_layers([r[1] for r in in_replay], [r[2] for r in in_replay], matcher)
    layer_of = {r[0]: lay for r, lay in zip(in_replay, layers, strict=True)}
    updates = []
    for r in rows:
        s = r[11]
        if s is None:
            s = infer_splits(mla[r[1]], r[5:8], r[8:11], grid_in_workitems)
        updates.append((layer_of.get(r[0]), s, r[0]))
    bulk.con.executemany("UPDATE kernels SET layer = ?, splits = ? WHERE rowid = ?", updates)
    if not derive_steps:
        return
    # steps: one per replay that holds MLA kernels; layers: one per MLA main kernel in a replay
    have_steps = ex("SELECT COUNT(*) FROM steps").fetchone()[0]
    if have_steps:
        return
    ex(
        "UPDATE kernels SET step = replay WHERE replay IN "
        f"(SELECT DISTINCT replay FROM kernels WHERE name IN ({marks}) AND replay IS NOT NULL)",
        list(mla),
    )
    steps = ex(
        "SELECT step, MIN(start_ns), MAX(end_ns) - MIN(start_ns) FROM kernels "
        "WHERE step IS NOT NULL GROUP BY step ORDER BY step"
    ).fetchall()
    bulk.insert(
        "steps",
        ("step", "t_start_ns", "duration_ns", "graph_mode", "timing"),
        ([s, t0, d, "FULL", "trace-replay"] for s, t0, d in steps),
    )
    # a layer spans its main kernel up to the end of its last reduce kernel
    lay = ex(
        f"SELECT step, layer, MIN(start_ns), MAX(end_ns) - MIN(start_ns), MAX(splits) "
        f"FROM kernels WHERE step IS NOT NULL AND layer IS NOT NULL AND name IN ({marks}) "
        "GROUP BY step, layer ORDER BY step, layer",
        list(mla),
    ).fetchall()
    bulk.insert(
        "layers",
        ("step", "layer", "t_start_ns", "duration_ns", "splits_used"),
        (list(r) for r in lay),
    )
    summary.replays = len(steps)
    summary.layers = len(lay)
    summary.add("steps", len(steps))
    summary.add("layers", len(lay))
