"""Which ranks of a trace belong to one engine, from what each rank runs.

One host may run several engines (two TP4 models on GPUs 0-3 and 4-7): their ranks are not
data-parallel peers of one model, and their S must never be compared or folded as one fleet.
A rank's signature is what its own kernels show: the head count on its stage-2 grids (every
rank of one model runs the same heads after TP: vLLM splits the heads evenly; AITER's stage 2
launches ``(B, H, qlen)`` for gluon, ``(B, H)`` for ASM, the persistent reduce ``(H, W, tiles)``;
vLLM's Triton stage 2 ``(batch, heads)``), its verify qlen (the speculative tokens of its
engine) and its attention path family (gluon, ASM, Triton: a route vLLM picks from the model's
heads and KV dtype). Ranks whose signatures differ are different engines; ranks that agree are
one engine as far as the trace shows (two alike engines cannot be told apart: said, not
guessed). Host and pid are shown beside each engine; they do not separate engines (one engine
spans hosts, and every rank is its own process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.sections import EngineGroup

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RankSource
    from mlaprof.store.reader import Run


@dataclass(frozen=True, slots=True)
class RankSignature:
    """What one rank's own kernels show of its engine (None / empty: not on the trace)."""

    heads: int | None  # the head count its stage-2 / reduce grids show
    qlen: list[int]  # its verify steps' qlen values
    paths: list[str]  # its steps' attention path families


_GRIDS = """
SELECT rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z, COUNT(*) AS n
FROM kernels WHERE layer IS NOT NULL
GROUP BY rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z
"""


def rank_heads(run: Run) -> dict[int, int]:
    """Per rank, the head count its stage-2 / reduce grids show most (ranks without one left
    out). Grids in work-items (rocprofv3) are divided by the workgroup size."""
    # the kernel table (its patterns compiled) loads only where a run has kernels to match:
    # a recorded run's first report does without it
    from mlaprof.kernel_table import KernelMatcher, heads_axis_of

    stored = _stored_heads(run)
    if stored is not None:
        return stored
    g = run.query(_GRIDS)
    if g.empty:
        return {}
    items = run.meta.get("grid_units") == "workitems"
    m = KernelMatcher()
    votes: dict[int, dict[int, int]] = {}
    for r in g.itertuples(index=False):
        a = heads_axis_of(m.match(r.name))
        if a is None:
            continue
        grid = (r.grid_x, r.grid_y, r.grid_z)[a]
        block = (r.block_x, r.block_y, r.block_z)[a]
        if grid is None or pd.isna(grid) or int(grid) <= 0:
            continue
        h = int(grid)
        if items:
            if block is None or pd.isna(block) or int(block) <= 0 or h % int(block):
                continue
            h //= int(block)
        v = votes.setdefault(int(r.rank), {})
        v[h] = v.get(h, 0) + int(r.n)
    return {rank: _most(v) for rank, v in votes.items()}


def _most(votes: dict[int, int]) -> int:
    """The head count with the most votes (the larger one where two tie)."""
    return max(votes, key=lambda h: (votes[h], h))


def _stored_heads(run: Run) -> dict[int, int] | None:
    """:func:`rank_heads` from the votes a fleet import stored per rank
    (:func:`mlaprof.analysis.replay_sums.layer_head_votes`: the same rule over the same kernels,
    without a scan of every one), or None where a rank with kernels has none or had other
    kernels than the store holds, or counted them in other grid units than the run's (the query
    then decides)."""
    from mlaprof.analysis import replay_sums
    from mlaprof.store import aggregates

    if not all(hasattr(run, a) for a in ("databases", "count_per_rank", "rank_meta")) or any(
        role for _, role in run.databases
    ):
        return None
    items = run.meta.get("grid_units") == "workitems"
    out: dict[int, int] = {}
    for r, n in sorted(run.count_per_rank("kernels").items()):
        if not n:
            continue
        got = aggregates.read(run, r, replay_sums.HEADS)
        # counted over these kernels, in the units the run says its grids are in
        if got is None or got[1].get("kernels") != n or got[1].get("workitems") is not items:
            return None
        votes = dict(zip(got[0]["heads"].to_pylist(), got[0]["n"].to_pylist(), strict=True))
        if votes:
            out[int(r)] = _most(votes)
    return out


def _family(path: str) -> str:
    # the persistent ASM kernel and the plain one are one route (the batch size picks)
    return path.removesuffix("-persistent")


def signatures(run: Run, steps: pd.DataFrame) -> dict[int, RankSignature]:
    """Per rank: heads (stage-2 grids), verify qlen values and path families of its steps."""
    heads = rank_heads(run)
    out: dict[int, RankSignature] = {}
    for rank in run.ranks:
        st = steps[steps["rank"] == rank] if not steps.empty else steps
        q = sorted({int(x) for x in st["qlen"].dropna()}) if not st.empty else []
        fam = (
            sorted({_family(str(b).partition(" ")[0]) for b in st["backend"].dropna()})
            if not st.empty
            else []
        )
        out[int(rank)] = RankSignature(heads=heads.get(int(rank)), qlen=q, paths=fam)
    return out


def _apart(a: RankSignature, b: RankSignature) -> bool:
    """Whether two ranks' signatures prove different engines: a KNOWN value differs (heads
    both read and unequal, qlen or path families both read and disjoint). Unknown is no
    evidence (a rank whose S is 1 launches no stage 2, so its heads are not on the trace)."""
    if a.heads is not None and b.heads is not None and a.heads != b.heads:
        return True
    return any(bool(x and y and not set(x) & set(y)) for x, y in ((a.qlen, b.qlen),
                                                                  (a.paths, b.paths)))  # fmt: skip


def engine_groups(
    sigs: dict[int, RankSignature], sources: list[RankSource] | None = None
) -> list[EngineGroup]:
    """The engines the signatures show, in the order of their first rank: ranks, heads, qlen,
    paths, hosts and pids (``sources``: run.json's rank sources, typed in
    :class:`mlaprof.analysis.evidence.model.RunMeta`). One entry when every rank agrees (or
    nothing is known)."""
    src = {s.rank: s for s in sources or []}
    groups: list[list[int]] = []
    for rank in sorted(sigs):
        g = next((g for g in groups if not any(_apart(sigs[rank], sigs[r]) for r in g)), None)
        if g is None:
            groups.append([rank])
        else:
            g.append(rank)
    out = []
    for i, ranks in enumerate(groups):
        heads = {sigs[r].heads for r in ranks} - {None}
        out.append(
            EngineGroup(
                engine=i,
                ranks=ranks,
                heads=heads.pop() if len(heads) == 1 else None,
                qlen=sorted({q for r in ranks for q in sigs[r].qlen}),
                paths=sorted({p for r in ranks for p in sigs[r].paths}),
                hosts=sorted({str(s.host) for r in ranks if (s := src.get(r)) and s.host}),
                pids=sorted({s.pid for r in ranks if (s := src.get(r)) and isinstance(s.pid, int)}),
            )
        )
    return out


__all__ = ["RankSignature", "engine_groups", "rank_heads", "signatures"]
