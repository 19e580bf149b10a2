"""Incremental aggregates of a followed run, and the view model the dashboard draws.

The follower (``tui.reader``) feeds already-grouped rows per rank (SQLite does the grouping over
each new rowid range), so the cost of a refresh depends on what arrived, not on the run's size.
Everything here is plain Python: the dashboard, ``--once`` and the benchmark share it.
"""

from __future__ import annotations

import statistics
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlaprof.analysis.findings import SEVERITIES, Finding

WINDOW = 512  # recent steps kept for the sparkline and the recent-latency percentiles
GRAPH_MODES = ("FULL", "PIECEWISE")


@dataclass
class LayerAgg:
    rows: int = 0
    total_ns: int = 0
    syncs: int = 0
    collapsed: int = 0  # layer-steps whose S used < S deserved
    used: int | None = None  # latest
    deserved: int | None = None


@dataclass
class SplitAgg:
    rows: int = 0
    collapsed: int = 0
    min_used: int | None = None
    max_used: int | None = None
    last: dict[str, Any] = field(default_factory=dict)


@dataclass
class RankState:
    """Aggregates of one rank's database."""

    steps: int = 0
    step_ns_sum: int = 0
    step_ns_min: int | None = None
    step_ns_max: int | None = None
    recent: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    step_ids: array = field(default_factory=lambda: array("q"))
    modes: dict[str, int] = field(default_factory=dict)
    last_step: dict[str, Any] = field(default_factory=dict)
    layers: dict[int, LayerAgg] = field(default_factory=dict)
    layer_rowids: dict[int, tuple[int, int]] = field(default_factory=dict)  # step -> rowid range
    syncs: dict[tuple[Any, ...], list[Any]] = field(
        default_factory=dict
    )  # key -> [n, step, detail]
    splits: dict[tuple[int, str], SplitAgg] = field(default_factory=dict)
    padding: dict[int, list[int]] = field(default_factory=dict)  # capture size -> sums
    memory: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    captures: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # rows per table
    status: str = "waiting"

    # -- merging grouped rows ------------------------------------------------------------------
    def add_steps(self, agg: tuple[int, int, int, int], tail: list[tuple[Any, ...]]) -> None:
        n, total, lo, hi = agg
        if not n:
            return
        self.steps += n
        self.step_ns_sum += total or 0
        if lo is not None:
            self.step_ns_min = lo if self.step_ns_min is None else min(self.step_ns_min, lo)
            self.step_ns_max = hi if self.step_ns_max is None else max(self.step_ns_max, hi)
        for step, dur, *_ in tail:
            self.recent.append((step, dur or 0))
        if tail:
            s, d, mode, reqs, real, padded, backend, timing = tail[-1]
            self.last_step = {
                "step": s,
                "duration_ns": d,
                "graph_mode": mode,
                "num_reqs": reqs,
                "num_real_reqs": real,
                "padded_tokens": padded,
                "backend": backend,
                "timing": timing,
            }

    def add_modes(self, rows: list[tuple[str, int]]) -> None:
        for mode, n in rows:
            key = mode or "?"
            self.modes[key] = self.modes.get(key, 0) + n

    def add_layers(self, rows: list[tuple[Any, ...]], last: list[tuple[Any, ...]]) -> None:
        for layer, n, total, syncs, collapsed in rows:
            a = self.layers.setdefault(layer, LayerAgg())
            a.rows += n
            a.total_ns += total or 0
            a.syncs += syncs or 0
            a.collapsed += collapsed or 0
        for layer, used, deserved in last:
            a = self.layers.setdefault(layer, LayerAgg())
            a.used, a.deserved = used, deserved

    def add_layer_rowids(self, rows: list[tuple[int, int, int]]) -> None:
        for step, lo, hi in rows:
            old = self.layer_rowids.get(step)
            self.layer_rowids[step] = (
                (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
            )

    def add_syncs(self, rows: list[tuple[Any, ...]]) -> None:
        for layer, kind, op, loc, fn, n, first, detail in rows:
            key = (layer, kind, op, loc, fn)
            cur = self.syncs.get(key)
            if cur is None:
                self.syncs[key] = [n, first, detail]
            else:
                cur[0] += n
                cur[1] = min(cur[1], first) if cur[1] is not None and first is not None else cur[1]

    def add_splits(self, rows: list[tuple[Any, ...]], last: list[dict[str, Any]]) -> None:
        for size, policy, n, collapsed, lo, hi in rows:
            a = self.splits.setdefault((size, policy), SplitAgg())
            a.rows += n
            a.collapsed += collapsed or 0
            if lo is not None:
                a.min_used = lo if a.min_used is None else min(a.min_used, lo)
                a.max_used = hi if a.max_used is None else max(a.max_used, hi)
        for row in last:
            self.splits.setdefault((row["capture_size"], row["policy"]), SplitAgg()).last = row

    def add_padding(self, rows: list[tuple[Any, ...]]) -> None:
        for size, *sums in rows:
            cur = self.padding.setdefault(size, [0] * len(sums))
            for i, v in enumerate(sums):
                cur[i] += v or 0


PADDING_SUMS = (
    "steps",
    "real_rows",
    "padding_rows",
    "real_tokens",
    "padding_tokens",
    "kv_bytes_real",
    "kv_bytes_padding",
)


# -- view model ------------------------------------------------------------------------------
@dataclass
class View:
    """Everything one frame of the dashboard shows (already filtered to a rank or aggregated)."""

    name: str
    scenario: str
    device: str
    backend: str
    status: str
    rank_label: str
    ranks: list[int]
    graph_mode: str
    capture: str
    steps: int
    events: int
    latency_ms: list[float]
    latency: dict[str, float | None]
    layers: list[dict[str, Any]]
    layer_scope: str  # "all steps" or "step N"
    splits: list[dict[str, Any]]
    padding: list[dict[str, Any]]
    padding_total: dict[str, Any]
    memory: list[dict[str, Any]]
    captures: list[dict[str, Any]]
    syncs: list[dict[str, Any]]
    findings: list[Finding]
    findings_source: str
    policy: str = ""
    problem: str | None = None


def _opt(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    """``pick(a, b)`` where both are known, else whichever is."""
    return b if a is None else a if b is None else pick(a, b)


def _merge_ranks(states: list[RankState]) -> RankState:
    """Aggregate several ranks into one (sums; latest values from the highest rank wins)."""
    if len(states) == 1:
        return states[0]
    out = RankState()
    for s in states:
        out.steps += s.steps
        out.step_ns_sum += s.step_ns_sum
        out.step_ns_min = _opt(min, out.step_ns_min, s.step_ns_min)
        out.step_ns_max = _opt(max, out.step_ns_max, s.step_ns_max)
        out.add_modes(list(s.modes.items()))
        out.last_step = s.last_step or out.last_step
        for k, a in s.layers.items():
            b = out.layers.setdefault(k, LayerAgg())
            b.rows += a.rows
            b.total_ns += a.total_ns
            b.syncs += a.syncs
            b.collapsed += a.collapsed
            b.used = a.used if b.used is None else min(b.used, a.used or b.used)
            b.deserved = a.deserved if b.deserved is None else max(b.deserved, a.deserved or 0)
        for k, v in s.syncs.items():
            cur = out.syncs.setdefault(k, [0, v[1], v[2]])
            cur[0] += v[0]
        for k, a in s.splits.items():
            b = out.splits.setdefault(k, SplitAgg())
            b.rows += a.rows
            b.collapsed += a.collapsed
            b.min_used = _opt(min, b.min_used, a.min_used)
            b.max_used = _opt(max, b.max_used, a.max_used)
            b.last = a.last or b.last
        out.add_padding([(k, *v) for k, v in s.padding.items()])
        out.memory.update(s.memory)
        out.captures.update(s.captures)
        for k, n in s.counts.items():
            out.counts[k] = out.counts.get(k, 0) + n
    # the step series of the aggregate: rank 0's (steps are lock-step across ranks)
    out.recent = states[0].recent
    out.step_ids = states[0].step_ids
    return out


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def capture_summary(caps: dict[tuple[int, str], dict[str, Any]]) -> str:
    if not caps:
        return "no capture recorded"
    rows = list(caps.values())
    ok = [r for r in rows if r.get("status") == "captured"]
    bad = [r for r in rows if r.get("status") in ("failed", "predicted-fail")]
    if bad:
        first = min(bad, key=lambda r: r.get("capture_size") or 0)
        where = (
            f" (layer {first['layer']}: {first.get('op') or '?'})"
            if first.get("layer") is not None
            else ""
        )
        fb = f" -> {first['fallback']}" if first.get("fallback") else ""
        return f"FAILED {len(bad)}/{len(rows)}{fb}{where}"
    if ok:
        modes = sorted({str(r.get("graph_mode")) for r in ok})
        return f"captured {len(ok)}/{len(rows)} ({'/'.join(modes)})"
    return f"{rows[0].get('status', '?')} ({len(rows)} sizes)"


def build_view(
    meta: dict[str, Any],
    states: dict[int, RankState],
    rank: int | None,
    step_layers: list[dict[str, Any]] | None = None,
    step: int | None = None,
    findings: list[Finding] | None = None,
    findings_source: str = "built-in rules",
    problem: str | None = None,
    layer_sort: tuple[str, bool] = ("layer", False),
) -> View:
    """Build one frame; ``rank=None`` aggregates every rank."""
    ranks = sorted(states)
    chosen = [states[r] for r in ranks if rank is None or r == rank]
    st = _merge_ranks(chosen) if chosen else RankState()
    scen = meta.get("scenario") if isinstance(meta.get("scenario"), dict) else {}
    lat = [d / 1e6 for _, d in st.recent]
    mean = st.step_ns_sum / st.steps / 1e6 if st.steps else None
    latency = {
        "last": lat[-1] if lat else None,
        "p50": statistics.median(lat) if lat else None,
        "p90": _pct(lat, 0.9),
        "mean": mean,
        "min": st.step_ns_min / 1e6 if st.step_ns_min is not None else None,
        "max": st.step_ns_max / 1e6 if st.step_ns_max is not None else None,
    }
    policy = str(scen.get("policy") or "")
    # syncs per layer from the syncs table: runs that watch only some steps leave layers.syncs empty
    site_syncs: dict[Any, int] = {}
    for key, val in st.syncs.items():
        site_syncs[key[0]] = site_syncs.get(key[0], 0) + val[0]
    if step_layers is not None:
        layers = step_layers
        scope = f"step {step}"
    else:
        layers = [
            {
                "layer": k,
                "time_ms": a.total_ns / a.rows / 1e6 if a.rows else None,
                "syncs": max(a.syncs, site_syncs.get(k, 0)),
                "used": a.used,
                "deserved": a.deserved,
                "occupancy": _layer_occupancy(st, a, policy),
                "collapsed": a.collapsed,
                "rows": a.rows,
            }
            for k, a in st.layers.items()
        ]
        scope = "mean over all steps"
    key, rev = layer_sort
    layers = sorted(layers, key=lambda r: _sort_key(r.get(key)), reverse=rev)
    splits = [
        {
            "capture_size": size,
            "policy": policy,
            "used": a.last.get("used"),
            "deserved": a.last.get("deserved"),
            "frozen": a.last.get("frozen"),
            "occ_used": a.last.get("occupancy_used"),
            "occ_deserved": a.last.get("occupancy_deserved"),
            "min_used": a.min_used,
            "max_used": a.max_used,
            "collapsed": a.collapsed,
            "steps": a.rows,
            "target": a.last.get("target"),
        }
        for (size, policy), a in sorted(st.splits.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    padding = []
    tot = dict.fromkeys(PADDING_SUMS, 0)
    for size, sums in sorted(st.padding.items(), key=lambda kv: _sort_key(kv[0])):
        row = dict(zip(PADDING_SUMS, sums, strict=True))
        for k in PADDING_SUMS:
            tot[k] += row[k]
        padding.append({"capture_size": size, **row, "waste": _waste(row)})
    tot["waste"] = _waste(tot)
    memory = [
        {"capture_size": size, "graph_mode": mode, **{k: v for k, v in row.items()}}
        for (size, mode), row in sorted(st.memory.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    syncs = [
        {
            "layer": k[0],
            "kind": k[1],
            "op": k[2],
            "location": k[3],
            "function": k[4],
            "count": v[0],
            "first_step": v[1],
            "detail": v[2],
        }
        for k, v in sorted(st.syncs.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    mode = (
        max(st.modes, key=lambda m: st.modes[m])
        if st.modes
        else str(meta.get("graph_mode") or scen.get("graph_mode") or "?")
    )
    view = View(
        name=str(meta.get("name", "?")),
        scenario=str(scen.get("name") or meta.get("source") or "?"),
        device=str(meta.get("device") or "?"),
        backend=str(meta.get("backend") or st.last_step.get("backend") or "?"),
        status=_status(chosen),
        rank_label="all ranks" if rank is None and len(ranks) > 1 else f"rank {rank or 0}",
        ranks=ranks,
        graph_mode=mode,
        capture=capture_summary(st.captures),
        steps=st.steps,
        events=sum(st.counts.values()),
        latency_ms=lat,
        latency=latency,
        layers=layers,
        layer_scope=scope,
        splits=splits,
        padding=padding,
        padding_total=tot,
        memory=memory,
        captures=sorted(st.captures.values(), key=lambda r: _sort_key(r.get("capture_size"))),
        syncs=syncs,
        findings=[],
        findings_source=findings_source,
        policy=policy,
        problem=problem,
    )
    view.findings = sorted(
        findings if findings is not None else builtin_findings(view), key=lambda f: f.rank
    )
    return view


def _status(states: list[RankState]) -> str:
    got = {s.status for s in states}
    for s in ("failed", "running", "incomplete", "waiting"):
        if s in got:
            return s
    return "finished" if got else "waiting"


def _layer_occupancy(st: RankState, a: LayerAgg, policy: str) -> float | None:
    """Occupancy that goes with the layer's latest S: the splits row of the run's own policy
    (any policy's row with the same S when the run names none)."""
    rows = [agg.last for (_, p), agg in st.splits.items() if p == policy] or [
        agg.last for agg in st.splits.values()
    ]
    for row in rows:
        if row.get("used") == a.used and row.get("occupancy_used") is not None:
            return row["occupancy_used"]
    return None


def _waste(row: dict[str, Any]) -> float | None:
    total = (row.get("real_tokens") or 0) + (row.get("padding_tokens") or 0)
    return (row.get("padding_tokens") or 0) / total if total else None


def _sort_key(v: Any) -> tuple[int, Any]:
    if v is None:
        return (1, 0)
    if isinstance(v, tuple):
        return (0, tuple(_sort_key(x) for x in v))
    return (0, v) if isinstance(v, (int, float)) else (0, str(v))


# -- built-in findings (used until / unless mlaprof.analysis.analyze is available) -----------
def builtin_findings(v: View) -> list[Finding]:
    out: list[Finding] = []
    graph = v.graph_mode in GRAPH_MODES
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in v.syncs:
        groups.setdefault((s["kind"], s["op"], s["location"], s["function"]), []).append(s)
    for (kind, op, loc, fn), rows in groups.items():
        layers = sorted({r["layer"] for r in rows if r["layer"] is not None})
        where = f"layers {_ranges(layers)}" if layers else "outside layers"
        out.append(
            Finding(
                kind="alloc" if kind == "alloc" else "sync",
                severity="critical" if graph else "warning",
                title=f"{kind} in {'captured' if graph else 'watched'} region: {op} ({where})",
                evidence=f"{sum(r['count'] for r in rows)}x at {loc or '?'}"
                + (f" in {fn}" if fn else ""),
                fix="compute this value on the device or in the metadata builder before capture; "
                "a host read of a device tensor breaks graph capture",
                layer=layers[0] if layers else None,
                location=loc,
                data={"layers": layers},
            )
        )
    failed = [c for c in v.captures if c.get("status") in ("failed", "predicted-fail")]
    if failed:
        c = failed[0]
        sizes = _ranges(sorted(x.get("capture_size") or 0 for x in failed))
        out.append(
            Finding(
                kind="capture",
                severity="critical",
                title=f"{c.get('graph_mode')} capture {c['status']} at sizes {sizes}",
                evidence=f"{c.get('op') or '?'} at {c.get('location') or '?'}"
                + (f" (layer {c['layer']})" if c.get("layer") is not None else "")
                + (f": {c['message']}" if c.get("message") else ""),
                fix=f"remove the offending op from the captured region; meanwhile the engine "
                f"falls back to {c.get('fallback') or 'eager'}",
                layer=c.get("layer"),
                location=c.get("location"),
            )
        )
    for s in v.splits:
        used, deserved = s["used"], s["deserved"]
        if used is not None and deserved is not None and used < deserved:
            severe = used * 4 <= deserved
            occ = (
                f", occupancy {_fmt_pct(s['occ_used'])} vs {_fmt_pct(s['occ_deserved'])}"
                if s["occ_used"] is not None
                else ""
            )
            out.append(
                Finding(
                    kind="split-collapse",
                    severity="critical" if severe else "warning",
                    title=f"KV splits collapsed at size {s['capture_size']} ({s['policy']}): "
                    f"S={used}, deserved {deserved}",
                    evidence=f"{s['collapsed']}/{s['steps']} steps{occ}",
                    fix="derive num_kv_splits from the real (active) rows, not padding rows or "
                    "the capture-time dummy batch",
                )
            )
    w = v.padding_total.get("waste")
    if w:
        out.append(
            Finding(
                kind="padding",
                severity="warning" if w >= 0.25 else "info",
                title=f"padding rows are {_fmt_pct(w)} of verify tokens",
                evidence=f"{v.padding_total['padding_rows']} padding vs "
                f"{v.padding_total['real_rows']} real rows; "
                f"{fmt_bytes(v.padding_total['kv_bytes_padding'])} KV read by padding",
                fix="add capture sizes closer to the real batch sizes, or pin padding rows to "
                "zero KV length",
            )
        )
    mem = sum((m.get("pool_bytes") or 0) for m in v.memory)
    if mem:
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=f"capture memory {fmt_bytes(mem)} over {len(v.memory)} capture sizes",
                evidence=", ".join(
                    f"{m['capture_size']}: {fmt_bytes(m.get('pool_bytes'))}" for m in v.memory[:6]
                ),
                fix="drop capture sizes the workload never uses",
            )
        )
    return out


def _ranges(xs: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    out: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


# -- formatting shared by widgets and --once --------------------------------------------------
def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


fmt_pct = _fmt_pct


def fmt_bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} GiB"


def fmt_count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    return str(n)


def severity_order(f: Finding) -> int:
    return SEVERITIES.index(f.severity) if f.severity in SEVERITIES else len(SEVERITIES)
