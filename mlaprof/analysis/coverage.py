"""What an imported trace let the analysis see: were MLA kernels recognised (per rank), which
kernel names look like attention when none was, what the API trace held, and whether the split
collapse could be checked on each path. A report never reads "no findings" over a trace whose
attention it did not find: that is a warning here, with what was read and how to point the
import at the kernels (``--patterns`` / ``--mla-pattern``, docs/trace_io.md).

The question answered is "what could this trace show?"; the other analyzers answer what it shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.collapse import COLLAPSE_POLICIES, collapse_policies
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import _split_backend
from mlaprof.analysis.sections import (
    ApiFunction,
    AttentionLike,
    CollapseCheck,
    CountedKernel,
    RankRecognition,
    Recognition,
    TraceCoverage,
    TracePath,
    TraceSyncs,
)
from mlaprof.analysis.syncs import SYNC_CALLS
from mlaprof.analysis.typed_json import over_ranks_how, over_ranks_label, to_json
from mlaprof.errors import MlaprofError
from mlaprof.kernel_names import RANGE_LIKE
from mlaprof.rank_counts import counted, per_rank_count, plural, rank_list, ranks_of

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta
    from mlaprof.store.reader import Run

# a kernel name that looks like attention (case-insensitive substring): shown when none of the
# trace's kernels matched the MLA table, so the user sees which names to give --patterns
ATTENTION_LIKE = r"(?i)(mla|attn|attention|decode|flash)"
SHOWN = 8  # attention-like names listed (the most launched first)
PATTERNS_HINT = (
    "if your MLA kernel has another name, tell the import which kernel it is and which grid axis "
    "holds S: mlaprof import rocprof PATH --mla-pattern AXIS:REGEX, or --patterns FILE with "
    "rows_axis and qlen_axis as well (docs/trace_io.md, 'Kernel table')"
)

_COUNTS = """
SELECT 'rank' AS part, CAST(rank AS VARCHAR) AS key, rank, COUNT(*) AS n FROM kernels
GROUP BY rank
UNION ALL
SELECT 'api', function, rank, COUNT(*) FROM api GROUP BY function, rank
"""
_LIKE = f"""
SELECT name AS key, rank, COUNT(*) AS n FROM kernels
WHERE regexp_matches(name, '{ATTENTION_LIKE}') GROUP BY name, rank
"""
# kernel names that are roctx messages of the same rank's trace (rocprofv3 --kernel-rename:
# a rank's dispatches take its own ranges' names; another rank's markers say nothing of it), or
# the range names vLLM and mlaprof push (kernel_names.RANGE_LIKE)
_RENAMED = f"""
SELECT k.name AS key, k.rank, COUNT(*) AS n FROM kernels k
WHERE EXISTS (SELECT 1 FROM api a WHERE a.rank = k.rank AND a.function = k.name
              AND upper(a.domain) LIKE '%MARKER%')
   OR regexp_full_match(k.name, '(?i){RANGE_LIKE.pattern}')
GROUP BY k.name, k.rank
"""
# the kernels the counter collection's rows name (their key), where a rank has no kernel record
_COUNTED = """
SELECT key, rank, COUNT(*) AS n FROM counters
WHERE key IS NOT NULL AND key <> '' AND source IN ('rocprof-counters', 'rocpd-pmc')
GROUP BY key, rank
"""
COUNTERS_HINT = (
    "record the kernels as well: rocprofv3 --kernel-trace beside --pmc (a counter collection's "
    "CSV and JSON rows are no kernel trace: no grid per axis, so no S), or import the same run's "
    "rocpd output (--output-format rocpd), whose kernel dispatches rocprofv3 writes from the "
    "counter collection where no kernel trace was asked for"
)
RENAME_HINT = (
    "the kernel trace was recorded with rocprofv3 --kernel-rename, which names each dispatch "
    "after the roctx range around it, so no kernel's own name (nor the MLA kernels) is in it: "
    "record again without --kernel-rename (the default names, or --truncate-kernels / -T for "
    "short ones; keep --marker-trace for the ranges), or import the same run's -f json / rocpd "
    "output, whose kernel symbols keep the real names"
)


def read_counts(run: Run, without: list[int]) -> dict[str, Any]:
    """Kernels per rank and API calls by function (one query over every rank's rows, where they
    lie); the attention-like kernel names of ``without``, the ranks with no MLA kernel (a scan
    of every name of those ranks alone: the no-MLA finding counts their kernels and their
    names over the same ranks, never a rank whose MLA kernels were recognised)."""
    res = run.query(_COUNTS)
    parts = {p: g for p, g in res.groupby("part")}
    per_rank = {int(r.key): int(r.n) for r in parts.get("rank", res.iloc[:0]).itertuples()}
    by_fn = parts.get("api", res.iloc[:0])
    api = by_fn.groupby("key", as_index=False)["n"].sum()
    api = api.sort_values(["n", "key"], ascending=[False, True])
    like = _names(run, _LIKE, without)
    return {
        "kernels_by_rank": per_rank,
        "kernels": sum(per_rank.values()),
        "attention_like": like[:SHOWN],
        "attention_like_names": len(like),
        # looked for only where a rank has no MLA kernel (the key is left out otherwise)
        **({"renamed": _names(run, _RENAMED, without)[:SHOWN]} if without else {}),
        **_counted(run, [r for r in without if not per_rank.get(r)]),
        "api_calls": int(api["n"].sum()) if len(api) else 0,
        # the ranks with an API trace, each one's calls (a rank without one is not a 0 here)
        "api_calls_by_rank": {int(r): int(n) for r, n in by_fn.groupby("rank")["n"].sum().items()},
        "api_functions": [
            ApiFunction(function=str(r.key), calls=int(r.n)) for r in api.itertuples() if r.key
        ],
        # no API call read (no API trace): how many were host syncs is unknown, never 0
        "host_syncs": int(api[api["key"].isin(SYNC_CALLS)]["n"].sum()) if len(api) else None,
    }


def _names(run: Run, sql: str, ranks: list[int]) -> list[AttentionLike]:
    """The kernel names ``sql`` finds on ``ranks`` (none: nothing asked), the most launched
    first, each with the ranks its launches add."""
    if not ranks:
        return []
    got = run.query(sql, ranks=ranks)
    out = [
        AttentionLike(name=str(name), launches=int(g["n"].sum()),
                      ranks=sorted(int(r) for r in g["rank"].unique()))
        for name, g in got.groupby("key")
    ]  # fmt: skip
    return sorted(out, key=lambda x: (-x.launches, x.name))


def _counted(run: Run, ranks: list[int]) -> dict[str, list[CountedKernel]]:
    """``counters_only``: the kernels the counters of ``ranks`` (ranks with no kernel record)
    were sampled on, the most counted first (no key where no rank lacks kernels); MLA by the
    kernel table the import used."""
    if not ranks:
        return {}
    from mlaprof.kernel_table import matcher_of

    # the kernel table the import matched names with (its --patterns / --mla-pattern rows)
    match = matcher_of(run.written_meta.get("kernel_table")).match
    got = run.query(_COUNTED, ranks=ranks)
    out = [
        CountedKernel(name=str(name), values=int(g["n"].sum()),
                      ranks=sorted(int(r) for r in g["rank"].unique()),
                      mla=match(str(name)) is not None)
        for name, g in got.groupby("key")
    ]  # fmt: skip
    return {"counters_only": sorted(out, key=lambda x: (-x.values, x.name))}


def _list(items: list[str], total: int) -> str:
    return ", ".join(items) + (f" and {total - len(items)} more" if total > len(items) else "")


def api_text(c: dict[str, Any], ranks: Sequence[int] = (0,)) -> str:
    """What the API trace held, in words (the sync line says it when it cannot judge); the
    counts add the calls of the run's ``ranks`` that have an API trace, said so where they are
    several, and the ranks that have none are named (their calls are unknown, not 0)."""
    if not c["api_calls"]:
        return "no HIP/CUDA API calls in the import"
    top = [f"{f.function} x{f.calls}" for f in c["api_functions"][:4]]
    syncs = c["host_syncs"]
    how = over_ranks_how(TraceCoverage, "api_calls")
    have = sorted(c.get("api_calls_by_rank") or ranks)
    lack = sorted(set(ranks) - set(have))
    if lack:
        whose = f"{how} over {rank_list(have)}" if len(have) > 1 else rank_list(have)
        verb = "has" if len(lack) == 1 else "have"
        scope = f" ({whose}; {rank_list(lack)} {verb} no API trace)"
    else:
        scope = over_ranks_label(how, have)
    listed = _list(top, len(c["api_functions"]))
    return f"{counted(c['api_calls'], 'API call(s)')} read{scope} ({listed}); " + (
        f"{syncs} of them host syncs" if syncs else "none of them a host sync"
    )


def recognition(per_rank: dict[int, int], layers: pd.DataFrame, ranks: list[int]) -> Recognition:
    """Per rank: kernels read and MLA layer records recognised; the ranks with none."""
    mla = layers.groupby("rank").size().to_dict() if not layers.empty else {}
    per = [
        RankRecognition(rank=int(r), kernels=per_rank.get(int(r), 0), mla_layers=int(mla.get(r, 0)))
        for r in ranks
    ]
    return Recognition(per_rank=per, without_mla=[p.rank for p in per if not p.mla_layers])


def path_steps_per_rank(steps: pd.DataFrame) -> dict[tuple[str, str], dict[int, int]]:
    """Per (path, kernel variant): each rank's steps (the steps a :class:`TracePath` row adds
    over its ranks, as :func:`mlaprof.analysis.variants.trace_paths` groups them)."""
    if steps.empty or "backend" not in steps:
        return {}
    st = _split_backend(steps[steps["backend"].notna()])
    out: dict[tuple[str, str], dict[int, int]] = {}
    for (path, variant, rank), n in st.groupby(["path", "variant", "rank"]).size().items():
        out.setdefault((str(path), str(variant)), {})[int(rank)] = int(n)
    return out


def collapse_checks(
    meta: RunMeta, paths: list[TracePath], steps: pd.DataFrame
) -> list[CollapseCheck]:
    """Per path the trace ran: whether the split collapse was checked, and why not. Checked on
    the paths whose S the host chooses from grid-visible rows and qlen (COLLAPSE_POLICIES), when
    the grid gives both; a user's kernel without a known rule, or without rows and qlen on its
    grid, is "not checked" (never a silent pass). Each row names the ranks its steps add, and
    each rank's (``steps``: the trace's verify steps the paths were made of)."""
    per = path_steps_per_rank(steps)
    out = []
    for p in paths:
        axes = meta.stage1_axes.get(p.path)
        missing = [what for what, v in (("rows", p.rows), ("qlen", p.qlen)) if v is None]
        mine = {r: n for r, n in per.get((p.path, p.variant), {}).items() if r in p.ranks}
        if sum(mine.values()) != p.steps:
            raise MlaprofError(
                f"internal: the {p.path} {p.variant} row adds {counted(p.steps, 'step(s)')}, its "
                "ranks' "
                f"steps add {sum(mine.values())}"
            )
        base = {"path": p.path, "variant": p.variant, "steps": p.steps, "S": p.S,
                "ranks": list(p.ranks), "steps_per_rank": mine}  # fmt: skip
        if axes is not None and axes.split_axis == "device":
            out.append(CollapseCheck(**base, status="not applicable",
                        why="S is decided on the device at every replay, never frozen"))  # fmt: skip
            continue
        if p.path in COLLAPSE_POLICIES and not missing:
            out.append(
                CollapseCheck(**base, status="checked", why=f"rule {collapse_policies(p.path)[0]}")
            )
            continue
        why = []
        if p.path not in COLLAPSE_POLICIES:
            why.append(
                f"no split rule is known for path {p.path!r} (the trace-side check knows "
                + ", ".join(COLLAPSE_POLICIES)
                + ")"
            )
        if missing:
            why.append(
                f"{' and '.join(missing)} not on the grid of {p.variant} (no "
                + " / ".join(f"{m}_axis" for m in missing)
                + " in its pattern)"
            )
        # said as a finding where a check was expected: a host-chosen path, or a user's kernel
        warn = p.path in COLLAPSE_POLICIES or p.path not in _known_paths()
        out.append(CollapseCheck(**base, status="not checked", why="; ".join(why), warn=warn))
    return out


@cache
def _known_paths() -> frozenset[str]:
    """The kernel table's paths (loaded where a trace's path is checked, not with this module:
    a recorded run's first report does without the table)."""
    from mlaprof.kernel_table import DEFAULT_PATTERNS

    return frozenset(p.path for p in DEFAULT_PATTERNS)


def coverage_summary(
    run: Run, meta: RunMeta, paths: list[TracePath], layers: pd.DataFrame, steps: pd.DataFrame
) -> TraceCoverage:
    # the distinct ranks of a fleet's layers, not a Python int per layer row
    with_mla = set(pd.unique(layers["rank"]).astype(int).tolist()) if not layers.empty else set()
    c = read_counts(run, without=sorted(set(run.ranks) - with_mla))
    return TraceCoverage(
        **c,
        api=api_text(c, run.ranks),
        recognition=recognition(c["kernels_by_rank"], layers, run.ranks),
        collapse_checks=collapse_checks(meta, paths, steps),
        provenance=meta.origin,
    )


def explain_syncs(syncs: TraceSyncs, cov: TraceCoverage) -> TraceSyncs:
    """An "unknown" sync verdict says what the API trace held and why it cannot be judged."""
    if syncs.status != "unknown" or not cov.api_calls:
        return syncs
    why = (
        "no MLA kernel recognised, so no MLA layer to place them in"
        if not any(p.mla_layers for p in cov.recognition.per_rank)
        else syncs.evidence
    )
    return dataclasses.replace(syncs, evidence=f"{cov.api}; {why}")


def coverage_findings(cov: TraceCoverage | None, has_grid: bool = True) -> list[Finding]:
    """Kernels the import did not recognise (``cov`` None: the run holds no kernel trace).
    ``has_grid`` False (:attr:`mlaprof.analysis.claims.Claims.has_grid`: a CPU op): no split
    count exists to check, so no "describe the kernel's grid" advice."""
    if cov is None:
        return []
    out = []
    rec = cov.recognition
    none = rec.without_mla
    if none:
        n_ranks = len(rec.per_rank)
        kernels = sum(p.kernels for p in rec.per_rank if p.rank in none)
        names = [f"{x.name} (x{x.launches})" for x in cov.attention_like]
        where = "" if n_ranks == 1 else f" on {ranks_of(none, n_ranks)}"
        # names looked for on the same ranks as the kernels counted (read_counts), their
        # launches adding those ranks': said as the sections' label says it
        launches = over_ranks_label(
            over_ranks_how(AttentionLike, "launches"),
            {r for x in cov.attention_like for r in x.ranks},
        )
        looks = (
            "names that look like attention (mla/attn/attention/decode/flash): "
            + _list(names, cov.attention_like_names)
            + (f"; launches{launches}" if launches else "")
            if names
            else "no kernel name looks like attention (mla/attn/attention/decode/flash)"
        )
        renamed = [x.name for x in cov.renamed or []]
        if renamed:
            n_ren = sum(x.launches for x in cov.renamed or [])
            looks = (
                f"{n_ren} of {counted(kernels, 'dispatch(es)')} carry a roctx range's name instead "
                "of a "
                f"kernel's: {', '.join(renamed)}; " + looks
            )
        counters = cov.counters_only or []
        if counters:
            shown = [f"{x.name} (x{x.values}{', in the MLA kernel table' if x.mla else ''})"
                     for x in counters[:SHOWN]]  # fmt: skip
            looks = (
                f"hardware counter values on {counted(len(counters), 'kernel(s)')} "
                f"({', '.join(shown)}"
                + (f" and {len(counters) - SHOWN} more" if len(counters) > SHOWN else "")
                + f"){over_ranks_label('sum', {r for x in counters for r in x.ranks})}"
                # no kernel record to name: the trace's names are the counters'
                + (f"; {looks}" if names else "")
            )
        out.append(
            Finding(
                kind="no-mla",
                severity="warning",
                title=(
                    f"no MLA kernel recognised{where}: "
                    + (
                        "the kernel names look renamed after roctx ranges (rocprofv3 "
                        "--kernel-rename), so the kernels are not in the trace; "
                        if renamed
                        else ""
                    )
                    + (
                        "the import holds hardware counters but no kernel trace (rocprofv3 "
                        "--pmc without --kernel-trace); "
                        if counters
                        else ""
                    )
                    + f"{kernels}{over_ranks_label('sum', none)} {plural('kernel(s)', kernels)} "
                    "read, none matched "
                    "the MLA kernel table; nothing "
                    "below judges attention (no S, capture or collapse verdict)"
                ),
                evidence=f"{looks}; {cov.api} ({cov.provenance})",
                fix=RENAME_HINT if renamed else COUNTERS_HINT if counters else PATTERNS_HINT,
                data={
                    "ranks": none,
                    "kernels": kernels,
                    "attention_like": to_json(cov.attention_like),
                    **({"renamed": renamed} if renamed else {}),
                    **({"counters_only": to_json(counters)} if counters else {}),
                },  # fmt: skip
            )
        )
    for chk in cov.collapse_checks:
        if chk.status != "not checked" or not chk.warn or not has_grid:
            continue
        out.append(
            Finding(
                kind="not-checked",
                severity="warning",
                # each rank's steps, never their sum unsaid (the sections' row says both)
                title=(
                    f"KV-split collapse not checked on the {chk.path} path ({chk.variant}, "
                    f"{per_rank_count(chk.steps_per_rank, 'step(s)')}, S {chk.S}): {chk.why}"
                ),
                evidence=(
                    f"S is read from the grid, but whether it collapsed needs the path's split rule "
                    f"and the rows and qlen it ran with ({cov.provenance})"
                ),
                fix=(
                    "describe the kernel with --patterns FILE: path (aiter-gluon for a gluon "
                    "kernel under another name), split_axis, rows_axis and qlen_axis "
                    "(docs/trace_io.md)"
                ),
                data=to_json(chk),
            )
        )
    return out


__all__ = ["coverage_findings", "coverage_summary", "explain_syncs"]
