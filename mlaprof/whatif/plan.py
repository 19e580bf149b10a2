"""Capture-size planning: the ``cudagraph_capture_sizes`` that minimise expected padded tokens
for a decode batch-size distribution, within a capture-memory budget (or a graph count).

Exact: an optimal list only needs sizes equal to observed batch token counts (a size between two
observed values can be lowered to the one below it without padding any batch more). Under a memory
budget a dynamic programme over the sorted observed sizes keeps, for each size as the list's
largest so far, every plan not beaten on both memory (exact bytes) and padding (its Pareto
front), so a list that fills the budget to the byte is found (``propose_exact``; the tests check
it against brute force). Only when the fronts grow past ``MAX_FRONT`` plans does it fall back to
the budget in 1/1000 steps, rounded up (never over budget), and says so. Under a graph count the
programme counts graphs. Batches with no size run without a graph; the plan first minimises that
probability, then padded tokens, then memory.

Capture memory per size ``m(s) = fixed + per_token * s`` comes from measurements (a run's memory
table, fitted), a vLLM log total (spread over the default list in proportion to size), or a user
model; each labelled. Without one, memory is unknown and the plan is bounded by a graph count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlaprof.capture_sizes import (
    CapturePlan,
    max_proposed_requests,
    padded_size,
    plan_of_sizes,
    proposal_limit_reason,
    proposal_plan,
)
from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import counted

GIB = float(1 << 30)
BUCKETS = 1000  # memory resolution of the DP: 1/1000 of the budget ...
MIN_BUCKETS = 100  # ... down to 1/100 for many distinct batch sizes (the DP is n^2 x buckets)


MAX_FRONT = 20_000  # plans kept per size before the exact programme gives way to buckets


def propose_exact(v: np.ndarray, p: np.ndarray, w: np.ndarray, budget: float) -> list[int] | None:
    """The optimal list under an exact memory budget: sizes ``v`` (ascending token counts),
    probabilities ``p``, capture bytes ``w`` per size. None when the Pareto fronts outgrow
    ``MAX_FRONT`` (the caller falls back to buckets)."""
    n = len(v)
    big = (float(v[-1]) + 1.0) / float(p.min())
    cum_p = np.concatenate([[0.0], np.cumsum(p)])
    cum_pv = np.concatenate([[0.0], np.cumsum(p * v)])
    # fronts[j]: (memory, padding cost, graphs, previous j, index in its front), memory ascending
    fronts: list[list[tuple[float, float, int, int, int]]] = []
    best: tuple[float, float, int, int, int] | None = None  # (total, memory, graphs, j, k)
    for j in range(n):
        wj = float(w[j])
        cand: list[tuple[float, float, int, int, int]] = []
        if wj <= budget:
            cand.append((wj, float(v[j] * cum_p[j + 1] - cum_pv[j + 1]), 1, -1, -1))
            for i in range(j):
                seg = float(v[j] * (cum_p[j + 1] - cum_p[i + 1]) - (cum_pv[j + 1] - cum_pv[i + 1]))
                for k, (m, c, g, _, _) in enumerate(fronts[i]):
                    if m + wj <= budget:
                        cand.append((m + wj, c + seg, g + 1, i, k))
        cand.sort(key=lambda s: (s[0], s[1], s[2]))
        front: list[tuple[float, float, int, int, int]] = []
        for s in cand:  # keep plans that pad strictly less than every cheaper one
            if not front or s[1] < front[-1][1] - 1e-12 * max(1.0, abs(front[-1][1])):
                front.append(s)
        if len(front) > MAX_FRONT:
            return None
        fronts.append(front)
        for k, (m, c, g, _, _) in enumerate(front):
            key = (c + big * (1.0 - cum_p[j + 1]), m, g, j, k)
            if best is None or _better(key, best):
                best = key
    if best is None:
        raise MlaprofError("no capture size fits the budget: raise it or capture fewer sizes")
    chosen, j, k = [], best[3], best[4]
    while j >= 0:
        chosen.append(int(v[j]))
        _, _, _, j, k = fronts[j][k]
    return sorted(chosen)


def _better(a: tuple[float, float, int, int, int], b: tuple[float, float, int, int, int]) -> bool:
    """Lower expected cost first (within rounding), then less memory, then fewer graphs."""
    tol = 1e-9 * max(1.0, abs(b[0]))
    if a[0] < b[0] - tol:
        return True
    if a[0] > b[0] + tol:
        return False
    return (a[1], a[2]) < (b[1], b[2])


def dp_buckets(n: int) -> int:
    """Memory resolution for ``n`` distinct batch sizes: 1/1000 of the budget up to ~170 sizes,
    coarser beyond so that a plan takes seconds, never finer than 1/100. Weights round up, so a
    coarser plan may waste budget but never exceeds it."""
    return int(min(BUCKETS, max(MIN_BUCKETS, 3e7 // max(1, n * n))))


FIXED_ASSUMED = "fixed cost per graph assumed 0"
TO_THE_BYTE = "to the byte"  # propose's resolution where the exact programme finished


@dataclass(frozen=True)
class MemoryModel:
    """Capture memory per size, ``fixed + per_token * size``: two parameters."""

    fixed_bytes: float
    per_token_bytes: float
    provenance: str
    # the distinct sizes (tokens) a fit to per-size measurements rests on; None: no such fit
    # (a user model, a logged total)
    measured: tuple[int, ...] | None = None
    # what the data do not determine and was assumed (None: both parameters given or fitted)
    assumed: str | None = None

    def bytes(self, sizes: list[int]) -> float:
        return float(sum(self.fixed_bytes + self.per_token_bytes * s for s in sizes))

    @property
    def exact(self) -> bool:
        """Whether a plan against this model may be said to fill a budget to the byte: never
        where the data fix fewer parameters than the model has (one size, one logged total)."""
        return self.assumed is None

    def outside(self, sizes: list[int]) -> list[int]:
        """Sizes whose memory the model extrapolates: outside the measured sizes' range, or
        any size not measured where a parameter was assumed (none for a user model)."""
        if self.measured is None:
            return [] if self.exact else list(sizes)
        lo, hi = self.measured[0], self.measured[-1]
        if not self.exact:
            return [s for s in sizes if s not in self.measured]
        return [s for s in sizes if s < lo or s > hi]

    def basis(self, sizes: list[int]) -> str:
        """What the memory of ``sizes`` rests on, in words (every output says it)."""
        if self.measured is None:
            return "modelled: " + ("a user model" if self.exact else str(self.assumed))
        n, lo, hi = len(self.measured), self.measured[0], self.measured[-1]
        what = f"{counted(n, 'measured size(s)')} ({lo}" + (f"..{hi}" if n > 1 else "")
        what += " tokens)"
        out = self.outside(sizes)
        if not out:
            return f"fitted to {what}" if sizes else "no graph"
        tail = f"; {self.assumed}" if self.assumed else ""
        return f"extrapolated: {len(out)} of {len(sizes)} sizes from {what}{tail}"


def fit_memory(points: Mapping[int, float], provenance: str) -> MemoryModel:
    """Least-squares ``fixed + per_token * size`` through measured (size, bytes). One size
    cannot fix two parameters: the fixed cost is assumed 0 (proportional to size) and the
    model says so, as it does when the line through several sizes has a negative term."""
    if not points:
        raise MlaprofError("no capture-memory measurements to fit")
    s = np.array(sorted(points), float)
    m = np.array([points[int(k)] for k in sorted(points)], float)
    sizes = tuple(int(k) for k in sorted(points))
    n = len(sizes)
    rests = f"; the fit rests on {counted(n, 'size(s)')} for 2 parameters"
    if n >= 2 and np.ptp(s) > 0:
        b, a = np.polyfit(s, m, 1)
        if a >= 0 and b >= 0:
            return MemoryModel(float(a), float(b), provenance + rests, sizes)
        how = "proportional to size: the line through them has a negative term"
        return MemoryModel(0.0, float(m.sum() / s.sum()), f"{provenance}{rests}; {how}", sizes)
    return MemoryModel(0.0, float(m.sum() / s.sum()), f"{provenance}{rests}: {FIXED_ASSUMED}",
                       sizes, FIXED_ASSUMED)  # fmt: skip


def memory_from_total(total_bytes: float, sizes: list[int], provenance: str) -> MemoryModel:
    """A logged total for ``sizes`` spread in proportion to size (a model, and labelled so):
    one total cannot fix two parameters."""
    if total_bytes <= 0 or not sizes:
        raise MlaprofError("a capture-memory total must be positive and have capture sizes")
    return MemoryModel(0.0, total_bytes / sum(sizes), provenance,
                       assumed=f"one logged total spread in proportion to size, {FIXED_ASSUMED}")  # fmt: skip


@dataclass
class ListCost:
    """What a capture list costs under the distribution."""

    sizes: list[int]
    padded_tokens: float  # expected padding tokens per decode step
    real_tokens: float  # expected real tokens per step
    eager_share: float  # probability that a step has no graph
    eager_batches: list[int]  # observed batch sizes that would run without a graph
    memory_bytes: float | None
    # batch sizes no FULL decode graph holds, run PIECEWISE on their real rows (the version's
    # dispatch: 0.32/0.33 sizes past qlen x max_num_seqs)
    piecewise_batches: list[int] = field(default_factory=list)
    # what memory_bytes rests on (MemoryModel.basis) and whether it is extrapolated
    memory_basis: str | None = None
    memory_extrapolated: bool = False

    @property
    def padding_share(self) -> float:
        total = self.padded_tokens + self.real_tokens
        return self.padded_tokens / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sizes": self.sizes,
            "graphs": len(self.sizes),
            "padded_tokens_per_step": round(self.padded_tokens, 4),
            "padding_share": round(self.padding_share, 6),
            "eager_share": round(self.eager_share, 6),
            "eager_batches": self.eager_batches,
            "piecewise_batches": self.piecewise_batches,
            "memory_bytes": None if self.memory_bytes is None else round(self.memory_bytes),
            "memory_basis": self.memory_basis,
            "memory_extrapolated": self.memory_extrapolated,
        }


def evaluate(
    sizes: list[int],
    dist: Mapping[int, float],
    qlen: int,
    mem: MemoryModel | None,
    plan: CapturePlan | None = None,
) -> ListCost:
    """Expected padding of ``sizes`` (tokens, sorted) for batch-size probabilities ``dist``;
    ``plan``: the vLLM version's graphs and dispatch (None: the first size that holds the
    batch's tokens)."""
    sizes = sorted(sizes)
    pad = real = eager = 0.0
    eager_b: list[int] = []
    piece_b: list[int] = []
    for b, p in sorted(dist.items()):
        t = b * qlen
        real += p * t
        # the same dispatch as the metadata builder (a PIECEWISE graph pads tokens too)
        d = plan.dispatch(b) if plan is not None else None
        size = d.size if d is not None else padded_size(t, sizes)
        if d is not None and d.mode == "PIECEWISE":
            piece_b.append(b)
        if size is None:
            eager += p
            eager_b.append(b)
        else:
            pad += p * (size - t)
    if mem is None:
        return ListCost(sizes, pad, real, eager, eager_b, None, piece_b)
    return ListCost(sizes, pad, real, eager, eager_b, mem.bytes(sizes), piece_b,
                    mem.basis(sizes), bool(mem.outside(sizes)))  # fmt: skip


@dataclass
class Plan:
    qlen: int
    max_num_seqs: int
    steps: float
    source: str
    default: ListCost
    proposed: ListCost
    memory: str
    budget: str
    default_rule: str
    notes: list[str] = field(default_factory=list)
    # vLLM 0.34 deprecates cudagraph_capture_sizes: decode graphs are named by request count
    # (decode_cudagraph_capture_request_sizes, vllm/config/vllm.py L2558-2680)
    request_sizes: bool = False
    # the vLLM version modelled and where it came from (a flag, a run, the default)
    vllm_version: tuple[str, str] | None = None

    def compilation_config(self) -> str:
        if self.request_sizes:
            reqs = ", ".join(str(s // self.qlen) for s in self.proposed.sizes)
            return '{"decode_cudagraph_capture_request_sizes": [' + reqs + "]}"
        return '{"cudagraph_capture_sizes": [' + ", ".join(map(str, self.proposed.sizes)) + "]}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "qlen": self.qlen,
            "max_num_seqs": self.max_num_seqs,
            "steps": self.steps,
            "distribution_source": self.source,
            "default_rule": self.default_rule,
            "vllm_version": None
            if self.vllm_version is None
            else {"version": self.vllm_version[0], "from": self.vllm_version[1]},
            "memory": self.memory,
            "budget": self.budget,
            "default": self.default.to_dict(),
            "proposed": self.proposed.to_dict(),
            "compilation_config": self.compilation_config(),
            "provenance": "modelled: expected padding from the distribution and vLLM's padding "
            "rule; memory as labelled",
            "notes": self.notes,
        }


def propose(
    dist: Mapping[int, float],
    qlen: int,
    mem: MemoryModel | None,
    budget_bytes: float | None,
    max_graphs: int | None,
) -> tuple[list[int], str]:
    """The optimal capture list (tokens) for ``dist`` (batch size -> probability), and the
    resolution it was planned at ("to the byte", "in 1/N steps of the budget", "by graphs")."""
    batches = sorted(b for b, p in dist.items() if p > 0)
    if not batches:
        raise MlaprofError("the batch-size distribution is empty")
    v = np.array([b * qlen for b in batches], float)
    p = np.array([dist[b] for b in batches], float)
    n = len(v)
    if mem is not None and budget_bytes is not None:
        exact = propose_exact(v, p, mem.fixed_bytes + mem.per_token_bytes * v, budget_bytes)
        if exact is not None:
            return exact, TO_THE_BYTE
        cap = dp_buckets(n)
        how = f"in 1/{cap} steps of the budget, rounded up (too many plans to keep exact)"
        unit = budget_bytes / cap
        w = np.ceil((mem.fixed_bytes + mem.per_token_bytes * v) / unit - 1e-9).astype(int)
    else:
        w = np.ones(n, int)
        cap = max_graphs if max_graphs is not None else n
        how = "by graph count"
    # lexicographic: the least likely eager batch costs more than all padding can
    big = (float(v[-1]) + 1.0) / float(p.min())
    cum_p = np.concatenate([[0.0], np.cumsum(p)])
    cum_pv = np.concatenate([[0.0], np.cumsum(p * v)])
    inf = np.inf
    f = np.full((n, cap + 1), inf)
    parent = np.full((n, cap + 1), -2, int)
    for j in range(n):
        wj = int(w[j])
        if wj > cap:
            continue
        # row 0: v_j is the smallest size (it pads every batch up to it); row 1 + i: the size
        # below v_j is v_i, which covers every batch up to v_i at cost f[i]
        seg = v[j] * (cum_p[j + 1] - cum_p[: j + 1]) - (cum_pv[j + 1] - cum_pv[: j + 1])
        cand = np.full((j + 1, cap + 1), inf)
        cand[0, wj:] = seg[0]
        cand[1:, wj:] = f[:j, : cap + 1 - wj] + seg[1:, None]
        k = np.argmin(cand, axis=0)  # the first (smallest i) of equal costs
        f[j] = cand[k, np.arange(cap + 1)]
        parent[j] = k - 1
    total = f + big * (1.0 - cum_p[1:])[:, None]  # batches above the top size run eager
    if not np.isfinite(total).any():
        raise MlaprofError("no capture size fits the budget: raise it or capture fewer sizes")
    lowest = total.min()
    # least memory among the optimal plans, then the fewest graphs
    js, cs = np.nonzero(total <= lowest + 1e-9 * max(1.0, abs(lowest)))
    k = int(np.argmin(cs * (n + 1) + js))
    j, c = int(js[k]), int(cs[k])
    chosen: list[int] = []
    while j >= 0:
        chosen.append(int(v[j]))
        i = int(parent[j, c])
        c -= int(w[j])
        j = i
    return sorted(chosen), how


def _few(batches: list[int], n: int = 8) -> str:
    return ", ".join(map(str, batches[:n])) + (
        f", ... ({len(batches)})" if len(batches) > n else ""
    )


def make_plan(
    dist_counts: Mapping[int, float],
    qlen: int,
    max_num_seqs: int,
    default_sizes: list[int],
    default_rule: str,
    source: str,
    mem: MemoryModel | None,
    budget_bytes: float | None = None,
    max_graphs: int | None = None,
    cover_all: bool = False,
    default_plan: CapturePlan | None = None,
    max_num_batched_tokens: int | None = None,
    device: str | None = None,
    vllm_version: tuple[str, str] | None = None,
) -> Plan:
    """Propose a list and compare it with ``default_sizes`` (the vLLM version's default;
    ``default_plan``: its graphs and the version's dispatch, which also evaluates the proposal
    as vLLM would capture it on ``device``). The proposal holds only sizes vLLM keeps as given
    under ``max_num_batched_tokens`` (None: not limiting; capture_sizes.max_proposed_requests):
    larger batches get none and the notes say why."""
    if any(b < 1 for b in dist_counts) or any(c < 0 for c in dist_counts.values()):
        raise MlaprofError("batch sizes must be >= 1 and counts >= 0")
    over = sorted(b for b in dist_counts if b > max_num_seqs)
    if over:
        raise MlaprofError(f"batch sizes {over[:5]} exceed max_num_seqs {max_num_seqs}")
    steps = float(sum(dist_counts.values()))
    if steps <= 0:
        raise MlaprofError("the batch-size distribution has no steps")
    dist = {int(b): c / steps for b, c in dist_counts.items() if c > 0}
    notes: list[str] = []
    # sizes vLLM would drop (or clip) are never proposed: their batches run eagerly either way,
    # so the optimum over the batches that fit is the optimum over all
    top = max_proposed_requests(max_num_seqs, qlen, max_num_batched_tokens)
    plan_dist = {b: p for b, p in dist.items() if b <= top}
    left_out = sorted(b for b in dist if b > top)
    rule = default_plan.rule if default_plan is not None else "vllm-0.32"
    if left_out:
        notes.append(
            f"batch sizes {_few(left_out)} get no proposed size: {left_out[0]} x qlen {qlen} = "
            f"{left_out[0] * qlen} tokens is above max_num_batched_tokens "
            f"{max_num_batched_tokens}, and "
            + proposal_limit_reason(rule, max_num_seqs, qlen, max_num_batched_tokens)
            + "; they run without a graph"
        )
    if cover_all and top >= 1:  # a vanishing weight on the largest batch a kept size holds
        plan_dist[top] = plan_dist.get(top, 0.0) + 1e-9
        if top < max_num_seqs:
            notes.append(
                f"--cover-all keeps a graph for {top} requests, not max_num_seqs "
                f"{max_num_seqs}: the largest batch a size vLLM keeps holds"
            )
    elif plan_dist and max(plan_dist) < top:
        notes.append(
            f"batches above {max(plan_dist)} (the largest observed) get no graph from the "
            "proposed list; --cover-all keeps one for "
            + ("max_num_seqs" if top == max_num_seqs else f"{top} requests")
        )
    if budget_bytes is not None and max_graphs is not None:
        raise MlaprofError("give a memory budget or a graph count, not both")
    if default_plan is not None and default_plan.note:  # vLLM keeps no size of the given list
        notes.append(default_plan.note)
    notes += [f"vLLM logs: {lv} {m}" for lv, m in (default_plan.log if default_plan else [])]
    if not default_sizes and budget_bytes is None and max_graphs is None:
        # nothing to take a budget from: one graph per observed batch size at most
        budget = "not limited (the default list captures no graph)"
    elif mem is not None and budget_bytes is None and max_graphs is None:
        budget_bytes = mem.bytes(default_sizes)
        budget = (
            f"the default list's memory, {budget_bytes / GIB:.3f} GiB ({mem.basis(default_sizes)})"
        )
    elif budget_bytes is not None:
        if mem is None:
            raise MlaprofError(
                "a memory budget needs capture memory per size: give --memory-from-run, --memory-log or --memory-model"
            )
        budget = f"{budget_bytes / GIB:.3f} GiB (given)"
    else:
        max_graphs = max_graphs or len(default_sizes)
        budget = f"at most {max_graphs} graphs (capture memory unknown)"
    if plan_dist:
        sizes, how = propose(
            plan_dist, qlen, mem, budget_bytes if max_graphs is None else None, max_graphs
        )
    else:  # no observed batch fits a size vLLM keeps
        sizes, how = [], "with nothing to capture"
    if mem is not None and max_graphs is None:
        if how == TO_THE_BYTE and not mem.exact:  # exact against a model the data do not fix
            how = f"exactly against the modelled memory, not to the byte ({mem.assumed})"
        budget += f"; planned {how}"
    split = default_plan is not None and default_plan.rule == "vllm-0.34"
    notes.append(
        "vLLM 0.34 captures these request counts as FULL decode graphs only; mixed "
        "prefill-decode batches keep the prefill token sizes"
        if split
        else "the list also serves mixed prefill-decode (PIECEWISE) batches: sizes not in it pad "
        "those batches further"
    )
    return Plan(
        qlen,
        max_num_seqs,
        steps,
        source,
        evaluate(default_sizes, dist, qlen, mem, default_plan),
        # the proposal as the version captures and dispatches it (every proposed size is a
        # uniform-decode size within qlen x max_num_seqs: a FULL graph)
        evaluate(
            sizes,
            dist,
            qlen,
            mem,
            plan_of_sizes(sizes, qlen, max_num_seqs)
            if default_plan is None
            else proposal_plan(rule, sizes, max_num_seqs, qlen - 1, max_num_batched_tokens, device),
        ),
        mem.provenance if mem else "unknown (no measurement, log or model given)",
        budget,
        default_rule,
        notes,
        request_sizes=split,
        vllm_version=vllm_version,
    )
