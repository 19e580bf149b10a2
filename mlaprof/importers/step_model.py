"""Where the steps of an imported trace begin and end, told from the trace's structure.

The annotation (:mod:`mlaprof.importers.annotate`) makes one step of every graph replay that holds
MLA layers (a FULL graph: the target's verify pass, or a drafter pass) and one of every run of
eagerly launched MLA layers. What bounds such a run, best evidence first:

1. **roctx / NVTX ranges** (``--marker-trace``): a kernel belongs to the range its launch call
   (joined by correlation id) was made in; the step ranges are the shallowest level of ranges that
   holds the launches of MLA kernels in two ranges or more (layer ranges nest inside them).
2. **The kernels vLLM runs at the end of every step**: the rejection sampler
   (``rejection_greedy_sample_kernel``, ``rejection_random_sample_kernel``,
   ``sample_recovered_tokens_kernel``: vLLM 0.32 ``v1/sample/rejection_sampler.py`` L726, L829,
   L1004) and argmax (``at::native::reduce_kernel<..., ArgMaxOps<...>>``: greedy sampling, and each
   drafter pass's ``logits.argmax(dim=-1)`` in ``v1/spec_decode/llm_base_proposer.py`` L446-458).
   Before the first and after the last of them nothing closes a step, so idle gaps may still
   split there (counted). Host syncs never bound a step on their own: the end-of-step read of the
   sampled tokens and a read-back inside a layer (what breaks capture, and what the sync analysis
   looks for) are the same calls, and a sync inside a layer must not cut the step in two.
3. **Idle gaps** between MLA kernels (a pitch over :data:`EAGER_STEP_GAP` x the median): the last
   resort, and the report says the steps were told apart that way.

Graph launches are told by the correlation ids of graph-launch calls in the API trace as well as by
a correlation id shared by several kernels (a one-kernel graph piece has only the former). A
replay's graph is its ``graph_exec_id`` where the schema has it (rocpd >= 3.0.2, Kineto
``graph id``), else its kernel sequence: a sequence that is a proper subsequence of a longer one
seen more often (or seen once) is that graph with dispatches lost (a tracer loses dispatches and
never adds any); one seen as often as the longer one is a graph of its own (an MTP drafter's
one-layer first pass runs the target's kernels in its own graph, once per step like the target).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlaprof.formats.arrow_numpy import run_heads
from mlaprof.step_sources import SOURCE_GAPS, SOURCE_GRAPHS, SOURCE_RANGES, SOURCE_SAMPLER

NULL = -1
# an eager step ends where the pitch between two stage-1 kernels exceeds this many times the
# median pitch: the last resort, where neither ranges nor step-closing kernels nor syncs tell
EAGER_STEP_GAP = 3.0

# the kernels that close a vLLM step or a drafter pass (see the module's doc)
CLOSING = re.compile(
    r"rejection_greedy_sample_kernel|rejection_random_sample_kernel|"
    r"sample_recovered_tokens_kernel|ArgMaxOps"
)
GRAPH_LAUNCH_SQL = "function LIKE '%GraphLaunch%'"
RUNTIME_API_SQL = (
    "(lower(domain) LIKE '%hip%' OR lower(domain) LIKE '%cuda%') AND lower(domain) NOT LIKE "
    "'%marker%'"
)
RANGE_SQL = (
    "(lower(domain) LIKE '%marker%' OR lower(domain) LIKE '%nvtx%' OR lower(domain) LIKE "
    "'%roctx%') AND end_ns > start_ns"
)


def _ints(rows: list[tuple[Any, ...]], k: int) -> list[np.ndarray]:
    """The rows without a NULL field, as ``k`` int64 columns (one pass over the rows)."""
    kept = [r for r in rows if not any(v is None for v in r)]
    if not kept:
        return [np.zeros(0, np.int64) for _ in range(k)]
    return [np.array(c, np.int64) for c in zip(*kept, strict=True)]


@dataclass
class HostTrace:
    """What the API trace of one process says about its steps (empty arrays: not traced):
    graph-launch correlation ids, roctx/NVTX ranges, and the launch calls that place kernels in
    them."""

    graph_launches: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    range_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    range_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    launch_corr: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted
    launch_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def read(cls, bulk: Any) -> HostTrace:
        """From the ``api`` table the format reader filled (rocprofv3 CSV, JSON, rocpd)."""
        q = bulk.execute
        (gl,) = _ints(q(f"SELECT correlation FROM api WHERE {GRAPH_LAUNCH_SQL}").fetchall(), 1)
        rs, re_ = _ints(q(f"SELECT start_ns, end_ns FROM api WHERE {RANGE_SQL}").fetchall(), 2)
        lc = ls = np.zeros(0, np.int64)
        if len(rs):  # the launch calls place kernels in ranges: read only where ranges exist
            lc, ls = _ints(
                q(f"SELECT correlation, start_ns FROM api WHERE {RUNTIME_API_SQL}").fetchall(), 2
            )
            order = np.argsort(lc, kind="stable")
            lc, ls = lc[order], ls[order]
        return cls(np.unique(gl), rs, re_, lc, ls)


@dataclass
class Plan:
    """Per kernel, the segment (step) it lies in, and how the segments were found. ``seg`` is
    None where idle gaps decide (the annotation's own rule); ``open_first`` / ``open_last``: per
    device code, whether the first / last segment may be cut by the window (no closing evidence
    on that side)."""

    source: str
    seg: np.ndarray | None = None
    # per kernel: in a segment no closing evidence bounds (before the first cut, after the
    # last): idle gaps may still split it there, and the checks count how often they did
    gap_ok: np.ndarray | None = None
    gap_breaks: int = 0
    open_first: dict[int, bool] = field(default_factory=dict)
    open_last: dict[int, bool] = field(default_factory=dict)
    outside_ranges: dict[str, int] = field(default_factory=dict)


def closing_names(names: list[str | None]) -> np.ndarray:
    """Per distinct name: whether it is a step-closing kernel."""
    return np.array([bool(n and CLOSING.search(n)) for n in names] or [False], bool)


def range_depths(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of each range among ``start``/``end`` (ranges nest on a host thread)."""
    order = np.lexsort((-end, start))
    depth = np.zeros(len(start), np.int64)
    stack: list[int] = []
    for i in order.tolist():
        s = int(start[i])
        while stack and stack[-1] < s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(int(end[i]))
    return depth


def _launch_times(kc: Any, host: HostTrace) -> np.ndarray:
    """Per kernel: the start of its launch call (NULL where the API trace has none)."""
    out = np.full(kc.n, NULL, np.int64)
    if "correlation" not in kc.ints or not len(host.launch_corr):
        return out
    corr, m = kc.col("correlation")
    pos = np.clip(np.searchsorted(host.launch_corr, corr), 0, len(host.launch_corr) - 1)
    hit = host.launch_corr[pos] == corr
    if m is not None:
        hit &= ~m
    out[hit] = host.launch_start[pos[hit]]
    return out


def _by_ranges(kc: Any, s1: np.ndarray, host: HostTrace) -> Plan | None:
    """Segments from the step ranges (None: the ranges do not mark two steps or more)."""
    if not len(host.range_start):
        return None
    lt = _launch_times(kc, host)
    t1 = np.sort(lt[s1][lt[s1] != NULL])
    if not len(t1):
        return None
    rs, re_ = host.range_start, host.range_end
    holds = np.searchsorted(t1, re_, side="right") - np.searchsorted(t1, rs, side="left")
    keep = np.flatnonzero(holds > 0)
    if len(keep) < 2:
        return None
    depth = range_depths(rs[keep], re_[keep])
    level = next((d for d in np.unique(depth) if (depth == d).sum() >= 2), None)
    if level is None:
        return None
    steps = keep[depth == level]
    steps = steps[np.argsort(rs[steps], kind="stable")]
    s0, e0 = rs[steps], re_[steps]
    seg = np.full(kc.n, NULL, np.int64)
    ok = lt != NULL
    i = np.searchsorted(s0, lt[ok], side="right") - 1
    inside = (i >= 0) & (lt[ok] <= e0[np.clip(i, 0, None)])
    idx = np.flatnonzero(ok)
    seg[idx[inside]] = i[inside]
    # MLA kernels launched outside every step range: before the first, after the last
    out1 = s1[seg[s1] == NULL]
    before = int((lt[out1] < s0[0]).sum()) if len(out1) else 0
    after = int((lt[out1] > e0[-1]).sum()) if len(out1) else 0
    plan = Plan(SOURCE_RANGES, seg)
    plan.outside_ranges = {"before": before, "after": after}
    return plan


def plan_steps(
    kc: Any,
    role: np.ndarray,
    replay: np.ndarray,
    in_layer: np.ndarray,
    host: HostTrace | None,
    codes: np.ndarray,
    ndev: int,
) -> Plan:
    """How the eager MLA kernels of a trace group into steps (see the module's doc)."""
    s1 = np.flatnonzero(role == 1)
    eager1 = s1[replay[s1] < 0]
    if not len(eager1):
        return Plan(SOURCE_GRAPHS)
    host = host or HostTrace()
    by_ranges = _by_ranges(kc, s1, host)
    if by_ranges is not None:
        return by_ranges
    start, end = kc.ints["start_ns"], kc.ints["end_ns"]
    closing = closing_names(kc.names)[kc.name_idx] if kc.n else np.zeros(0, bool)
    if not closing.any():
        return Plan(SOURCE_GAPS)
    seg = np.full(kc.n, NULL, np.int64)
    plan = Plan(SOURCE_SAMPLER, seg, np.zeros(kc.n, bool))
    for d in range(ndev):
        on = np.flatnonzero(codes == d) if ndev > 1 else np.arange(kc.n)
        # a cut after each step-closing kernel (kernels that start after its end lie beyond)
        cuts = np.sort(end[on[closing[on]]])
        local = np.searchsorted(cuts, start[on], side="left")
        seg[on] = local * ndev + d if ndev > 1 else local
        plan.gap_ok[on] = (local == 0) | (local == len(cuts))
        mla = on[in_layer[on]]
        if len(mla):
            plan.open_first[d] = not len(cuts) or bool(cuts[0] > start[mla].min())
            plan.open_last[d] = not len(cuts) or bool(cuts[-1] < start[mla].max())
    return plan


@dataclass
class Graphs:
    """Per replay: its graph (``canon``), the kernel count its graph's complete replays show
    (``usual``); per graph: MLA layers of a complete replay, replays, and how its identity is
    known. Per replay also its kernels (``count``) and stage-1 kernels (``s1``), which the
    annotation's checks read again."""

    canon: np.ndarray
    usual: np.ndarray
    layers: dict[int, int]
    replays: dict[int, int]
    identity: str
    count: np.ndarray
    s1: np.ndarray


def graph_identity(
    kc: Any, replay: np.ndarray, role: np.ndarray, nrep: int, s1: np.ndarray | None = None
) -> Graphs:
    """Which graph each replay replays (see the module's doc). ``s1``: the stage-1 kernels'
    indices (``role == 1``), where the caller has them."""
    canon = np.full(nrep, NULL, np.int64)
    usual = np.zeros(nrep, np.int64)
    valid = replay >= 0
    if not valid.any():
        return Graphs(canon, usual, {}, {}, "none", np.zeros(nrep, np.int64),
                      np.zeros(nrep, np.int64))  # fmt: skip
    # every kernel in a replay: the columns as they are, no kernel indices unless sorted
    whole = bool(valid.all())
    reps = None if whole else np.flatnonzero(valid)
    del valid
    r = replay if reps is None else replay[reps]
    # stage-1 kernels per replay, counted among the stage-1 kernels only
    r1 = replay[role == 1] if s1 is None else replay[s1]
    s1n = np.bincount(r1[r1 >= 0], minlength=nrep).astype(np.int64)
    del r1
    gid, gm = kc.col("graph_id") if "graph_id" in kc.ints else (None, None)
    if gid is not None and (gm is None or not (gm if reps is None else gm[reps]).all()):
        reps = np.arange(len(replay)) if reps is None else reps
        count = np.bincount(r, minlength=nrep)
        ok = reps if gm is None else reps[~gm[reps]]
        key = np.full(nrep, NULL, np.int64)
        np.maximum.at(key, replay[ok], gid[ok])
        uniq, inv = np.unique(key, return_inverse=True)
        canon = inv.astype(np.int64)
        identity = "graph ids in the trace"
    else:
        start = kc.ints["start_ns"]
        first = _ordered_runs(replay, start) if reps is None else None
        if first is not None:  # every kernel, in order: the columns are the ordered kernels
            r_o, names = replay, kc.name_idx
        else:
            reps = np.arange(len(replay)) if reps is None else reps
            order, r_o, first = replay_runs(reps, replay, start, r)
            names = kc.name_idx[order]
            del order
        del r
        bounds = np.r_[first, len(r_o)]
        # a replay's kernels are one run of the ordered kernels: its count is the run's length
        count = np.zeros(nrep, np.int64)
        count[r_o[first]] = np.diff(bounds)
        sigs, k_of = replay_sequences(names, bounds)
        del names
        seen_n = np.bincount(k_of, minlength=len(sigs)).tolist()
        sig_idx = np.full(nrep, NULL, np.int64)
        sig_idx[r_o[first]] = k_of
        root = _roots(sigs, seen_n)
        canon = np.where(sig_idx >= 0, np.array(root or [0], np.int64)[np.clip(sig_idx, 0, None)],
                         NULL)  # fmt: skip
        identity = "kernel sequences"
    seen = count > 0
    graphs = np.unique(canon[seen])
    layers, replays = {}, {}
    for g in graphs.tolist():
        sel = seen & (canon == g)
        usual[sel] = int(count[sel].max())
        layers[int(g)] = int(s1n[sel].max())
        replays[int(g)] = int(sel.sum())
    return Graphs(canon, usual, layers, replays, identity, count, s1n)


REPEAT_BLOCK = 1 << 18  # kernels compared at a time by the repeat check (:func:`_repeats`)


def replay_sequences(names: np.ndarray, bounds: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """The distinct kernel sequences of the replays ``names[bounds[i]:bounds[i + 1]]``, in
    order of first appearance, and per replay the index of its own. A replay that repeats the
    last one of its length takes that one's; only the others (a graph's first replay, a lossy
    one) are looked up by their bytes, so a trace of repeated replays costs one pass over its
    kernels, not a dictionary lookup of every replay's sequence."""
    earlier = _repeats(names, bounds)
    sig_of: dict[bytes, int] = {}
    sigs: list[np.ndarray] = []
    head_k = np.zeros(len(earlier), np.int64)
    for i in np.flatnonzero(earlier < 0).tolist():
        s = names[bounds[i] : bounds[i + 1]]
        k = head_k[i] = sig_of.setdefault(s.tobytes(), len(sigs))
        if k == len(sigs):
            sigs.append(s)
    return sigs, head_k[_first_of_chain(earlier)]


def _repeats(names: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per replay (``names[bounds[i]:bounds[i + 1]]``, the replays in order): the last replay
    before it of the same length when the two hold the same kernel sequence, else -1. One pass
    over the kernels: each is compared with its place in that earlier replay."""
    starts, lens = bounds[:-1], np.diff(bounds)
    m = len(lens)
    by_len = np.lexsort((np.arange(m), lens))  # by length, then in order
    prev = np.full(m, NULL, np.int64)
    if m > 1:
        same_len = lens[by_len[1:]] == lens[by_len[:-1]]
        prev[by_len[1:][same_len]] = by_len[:-1][same_len]
    has = prev >= 0
    if not has.any():
        return prev
    shift = np.where(has, starts - starts[np.where(has, prev, 0)], 0)
    same = np.zeros(m, bool)
    # the replays a block of about REPEAT_BLOCK kernels at a time: the per-kernel temporaries
    # stay a few MB whatever the rank's size
    cuts = np.unique(np.r_[0, np.searchsorted(bounds, np.arange(1, 1 + len(names) // REPEAT_BLOCK)
                                              * REPEAT_BLOCK), m])  # fmt: skip
    for i0, i1 in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        a, b = int(bounds[i0]), int(bounds[i1])
        src = np.arange(a, b, dtype=np.int64)
        src -= np.repeat(shift[i0:i1], lens[i0:i1])
        eq = names[src] == names[a:b]
        same[i0:i1] = np.logical_and.reduceat(eq, starts[i0:i1] - a)
    return np.where(same & has, prev, NULL)


def _first_of_chain(earlier: np.ndarray) -> np.ndarray:
    """Per replay, the first of the chain of repeats it ends (``earlier[i]`` < i or -1)."""
    root = np.where(earlier >= 0, earlier, np.arange(len(earlier)))
    while True:  # pointer jumping: a chain of k repeats settles in log2(k) rounds
        nxt = root[root]
        if (nxt == root).all():
            return root
        root = nxt


ORDER_BLOCK = 1 << 16  # neighbours compared at a time by :func:`_ordered_runs`


def replay_runs(
    reps: np.ndarray, replay: np.ndarray, start: np.ndarray, r: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``reps`` (ascending kernel indices) ordered by (replay, start, index), or by any other
    group number in ``replay`` (a step, a layer group); the group number of each kernel in
    that order; and where each group's run of kernels begins in it (ascending, from 0; empty
    where ``reps`` is). A trace lists a replay's kernels together and in start order, so one
    pass over neighbours usually finds them ordered already, and the 1M-row sort is left for
    traces that interleave replays. ``r``: ``replay[reps]`` where the caller has it. ``reps``
    holding every kernel reads the columns as they are (no copies)."""
    whole = len(reps) == len(replay)
    if r is None:
        r = replay if whole else replay[reps]
    # the starts are read a block at a time for the neighbour check (no copy of them all)
    first = _ordered_runs(r, start, None if whole else reps)
    if first is not None:
        return reps, r, first
    s = start if whole else start[reps]
    perm = np.lexsort((reps, s, r))
    del s
    r_o = r[perm]
    first = run_heads(r_o)
    return reps[perm], r_o, first


def ascending_runs(keys: np.ndarray) -> np.ndarray | None:
    """Where the runs of equal ``keys`` begin (ascending, from 0), when ``keys`` never
    decreases; None where it does."""
    return _ordered_runs(keys, None)


def _ordered_runs(
    r: np.ndarray, s: np.ndarray | None, rows: np.ndarray | None = None
) -> np.ndarray | None:
    """Where the runs of equal ``r`` begin, when (r, s) never decreases (None: it does; ``s``
    None: r alone; ``rows``: s is ``s[rows]``, read a block at a time). The neighbours are
    compared a block at a time, so the comparisons' temporaries stay small and an unordered
    trace stops at its first unordered block."""
    m = len(r)
    if m == 0:
        return np.zeros(0, np.intp)
    firsts = [np.zeros(1, np.intp)]
    for a in range(0, m - 1, ORDER_BLOCK):
        b = min(m - 1, a + ORDER_BLOCK)
        r0, r1 = r[a:b], r[a + 1 : b + 1]
        # (r1 > r0) | ((r1 == r0) & (s1 >= s0)), as: r1 >= r0, and r1 != r0 or s1 >= s0
        if not (r1 >= r0).all():
            return None
        brk = r1 != r0
        if s is not None:
            sb = s[a : b + 1] if rows is None else s[rows[a : b + 1]]
            ok = sb[1:] >= sb[:-1]
            ok |= brk
            if not ok.all():
                return None
        firsts.append(np.flatnonzero(brk) + (a + 1))
    return np.concatenate(firsts)


def _subsequence(a: np.ndarray, b: np.ndarray) -> bool:
    it = iter(b.tolist())
    return all(x in it for x in a.tolist())


def _roots(sigs: list[np.ndarray], seen: list[int]) -> list[int]:
    """Per distinct kernel sequence, the graph it replays: its own, or the shortest longer one
    it is a lossy copy of (a proper subsequence seen less often than it, or seen once)."""
    order = sorted(range(len(sigs)), key=lambda i: (-len(sigs[i]), -seen[i], i))
    root = list(range(len(sigs)))
    roots: list[int] = []
    for i in order:
        best = None
        for j in roots:
            if len(sigs[j]) <= len(sigs[i]) or not (seen[j] > seen[i] or seen[i] == 1):
                continue
            # the closest graph that holds it (a lossy drafter pass is the drafter's, not the
            # target's, whose longer sequence holds it too)
            closer = best is None or (len(sigs[j]), -seen[j]) < (len(sigs[best]), -seen[best])
            if closer and _subsequence(sigs[i], sigs[j]):
                best = j
        if best is None:
            roots.append(i)
        else:
            root[i] = best
    return root


def graph_kinds(layers: dict[int, int]) -> dict[int, str]:
    """Per graph: ``verify`` (the most MLA layers: the target model), ``drafter`` (fewer MLA
    layers: a speculative drafter's passes, its first pass included) or ``other`` (no MLA
    kernel: PIECEWISE graph pieces, samplers)."""
    deepest = max(layers.values(), default=0)
    return {
        g: "other" if n == 0 else ("verify" if n == deepest else "drafter")
        for g, n in layers.items()
    }
