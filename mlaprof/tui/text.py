"""Table rows shared by the widgets and the plain-text snapshot (``mlaprof tui --once``)."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING

from mlaprof.tui.fmt import fmt_bytes, fmt_count, fmt_ms, fmt_pct
from mlaprof.tui.view import FULL

if TYPE_CHECKING:
    from mlaprof.analysis.sections import LayerRow, SplitStep
    from mlaprof.tui.view import View

Table = tuple[list[str], list[list[str]]]
BLOCKS = "▁▂▃▄▅▆▇█"
SEV_TAG = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}

# (LayerRow field the column sorts by, header)
LAYER_COLUMNS = (
    ("layer", "layer"),
    ("time_us", "time ms"),
    ("syncs", "syncs"),
    ("S_used", "S used"),
    ("S_reference", "S ref"),
    ("collapsed", "collapsed"),
)
RANK_COLUMN = ("rank", "rank")  # first, where several ranks are shown (never merged)


def _s(v: object) -> str:
    return "-" if v is None else str(v)


def header_lines(v: View) -> list[str]:
    return [
        f"{v.name}  |  {v.status}  |  capture {v.capture}  |  {v.rank_label}",
        f"scenario {v.scenario}  |  device {v.device}  |  backend {v.backend}  |  "
        f"{v.steps_text}, {fmt_count(v.events)} records  |  {v.findings_source}",
    ]


def latency_line(v: View, width: int = 200) -> str:
    """Recent step times with how they were measured ("CPU reference timing" on a CPU run);
    the numbers always fit ``width`` (an 80-column terminal), the words shrink first."""
    stats = v.latency
    tries = [("  ", v.timing_label), (" ", v.timing_label), (" ", v.timing_short), (" ", "")]
    for sep, label in tries:
        nums = sep.join(f"{k} {fmt_ms(x)}" for k, x in stats)
        scope = f", {v.latency_scope}" if v.latency_scope else ""
        line = f"step ms (last {len(v.latency_ms)}{scope}{', ' + label if label else ''}): {nums}"
        if len(line) <= width:
            return line
    return line


def splits_title(v: View) -> str:
    return "KV splits (worst step per rank and policy; ranks that agree share a row)"


def capture_title(v: View) -> str:
    return v.capture_memory or f"capture ({v.findings_source})"


def sparkline(values: list[float], width: int) -> str:
    """Block-character sparkline of the last ``width`` values (min..max scaled)."""
    vals = values[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = hi - lo
    return "".join(
        BLOCKS[int((x - lo) / span * (len(BLOCKS) - 1))] if span else BLOCKS[0] for x in vals
    )


def fmt_count_or_mean(v: object) -> str:
    """A count that may be a mean (syncs per watched step): ``4``, ``2.5``; ``-``: the run did
    not watch this layer's steps (not checked), distinct from ``0`` (checked, none)."""
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def reference_cell(r: LayerRow | None) -> str:
    """The S a layer is judged against: deserved, or the fix's S for an imported trace."""
    if r is None:
        return "-"
    ref, source = r.S_reference, r.reference_source
    if ref is None:
        return "unknown" if source == "unknown" else "-"
    return f"{ref} (fix)" if source == "fix" else str(ref)


def layer_columns(v: View) -> tuple[tuple[str, str], ...]:
    return (RANK_COLUMN, *LAYER_COLUMNS) if v.per_rank_layers else LAYER_COLUMNS


def layer_table(v: View) -> Table:
    rows = [
        [_s(r.rank)] * v.per_rank_layers
        + [
            _s(r.layer),
            fmt_ms(layer_ms(r)),
            fmt_count_or_mean(r.syncs),
            _s(r.S_used) if r.S_min in (None, r.S_used) else f"{r.S_used} (min {r.S_min})",
            reference_cell(r),
            f"{_s(r.collapsed)}/{_s(r.steps)}",
        ]
        for r in v.layers
    ]
    return [h for _, h in layer_columns(v)], rows


def layer_ms(r: LayerRow | None) -> float | None:
    """A layer row's time in ms (the analysis gives µs)."""
    return None if r is None or r.time_us is None else r.time_us / 1e3


def _ranks(r: SplitStep) -> str:
    from mlaprof.analysis.ranks import rank_span

    rs = [x for x in r.ranks if x is not None]
    return rank_span(rs) if rs else _s(r.rank)


def split_table(v: View) -> Table:
    """The analysis' worst-step row per policy (ranks that agree share a row; ranks that
    disagree keep their own)."""
    head = ["ranks", "policy", "S used", "deserved", "frozen", "occ (model)"]
    rows = [
        [_ranks(r), _s(r.policy), "device", "-", "never", "-"]
        if r.on_device  # S is decided on the device at every replay: no host number
        else [
            _ranks(r),
            _s(r.policy),
            _s(r.used),
            _s(r.deserved),
            _s(r.frozen),
            f"{fmt_pct(r.occupancy)}->{fmt_pct(r.occupancy_deserved)}",
        ]
        for r in v.splits
    ]
    return head, rows


def padding_table(v: View) -> Table:
    """The analysis' padding totals over every recorded step (one definition for all views)."""
    p = v.padding
    head = ["steps", "padded", "real rows", "pad rows", "real tok", "pad tok", "waste", "pad KV"]
    if p is None or not p.steps:
        return head, []
    return head, [
        [
            # the totals sum the ranks: the steps cell says so ("80 (Σ2)": 2 ranks summed)
            _s(p.steps) + (f" (Σ{p.ranks})" if (p.ranks or 0) > 1 else ""),
            _s(p.steps_padded),
            _s(p.real_rows),
            _s(p.padding_rows),
            _s(p.real_tokens),
            _s(p.padding_tokens),
            fmt_pct(p.padding_fraction),
            fmt_bytes(p.kv_bytes_padding),
        ]
    ]


def memory_table(v: View) -> Table:
    """Capture memory and status per rank, capture size and mode, as recorded."""
    head = ["rank", "size", "mode", "pool", "allocator", "driver", "capture ms", "status"]
    rows = [
        [
            _s(r.rank),
            _s(r.capture_size),
            _s(r.graph_mode),
            fmt_bytes(r.pool_bytes),
            fmt_bytes(r.allocator_bytes),
            fmt_bytes(r.driver_bytes),
            fmt_ms(r.capture_ns / 1e6) if r.capture_ns is not None else "-",
            (r.status or "-") + (f" -> {r.fallback}" if r.fallback else ""),
        ]
        for r in v.memory
    ]
    return head, rows


def sync_table(v: View, layer: int | None, width: int | None = None) -> Table:
    """Each sync / allocation site: the source line whole and its count before the function
    (a narrow screen cuts the function name, never ``file.py:NN``); a rank column where several
    ranks show. Where the rows do not fit ``width`` columns, locations drop their folders
    (``legacy_flat.py:53``, the line number kept)."""
    many = len({s.rank for s in v.syncs}) > 1
    head = ["rank"] * many + ["kind", "op", "location", "count", "first step", "function"]
    sites = [s for s in v.syncs if layer is None or s.layer == layer]

    def rows(loc: Callable[[str], str]) -> list[list[str]]:
        return [
            [_s(s.rank)] * many
            + [_s(s.kind), _s(s.op), loc(_s(s.location)), _s(s.count), _s(s.first_step),
               _s(s.function)]
            for s in sites
        ]  # fmt: skip

    out = rows(str)
    if width is not None and _table_width((head, out), upto=head.index("count") + 1) > width:
        out = rows(lambda loc: loc.rsplit("/", 1)[-1])
    return head, out


def _table_width(table: Table, upto: int) -> int:
    """Columns the first ``upto`` columns of ``table`` take in :func:`format_table`'s layout."""
    head, rows = table
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(upto)]
    return 2 + sum(widths) + 2 * (upto - 1)


def empty_findings_text(v: View) -> str:
    """What an empty findings list says: none found (by the full pass, or so far), or why
    none are shown yet."""
    if v.findings_source == FULL:
        return "no findings"
    return "no findings so far (provisional)" if v.provisional else v.findings_source


def headline_lines(v: View) -> list[str]:
    """The analysis' key numbers (the lines ``mlaprof report`` prints)."""
    if not v.headline:
        return [f"  {v.findings_source}"]
    return [f"  {h.label}: {h.value}  ({h.provenance})" for h in v.headline]


def finding_lines(v: View, width: int = 100) -> list[str]:
    out = []
    for f in v.findings:
        tag = f"[{SEV_TAG.get(f.severity, f.severity)}] "
        pad = " " * 7
        out += textwrap.wrap(tag + f.title, width, subsequent_indent=pad)
        for text in (f.evidence, f"fix: {f.fix}" if f.fix else ""):
            if text:
                out += textwrap.wrap(text, width, initial_indent=pad, subsequent_indent=pad)
    return out or [empty_findings_text(v)]


def format_table(table: Table, indent: str = "  ") -> list[str]:
    head, rows = table
    if not rows:
        return [indent + "(no records)"]
    cols = list(zip(head, *rows, strict=True))
    widths = [max(len(str(c)) for c in col) for col in cols]
    # numbers right-aligned, words left-aligned
    align = [
        ">"
        if any(c != "-" for c in col[1:]) and all(c == "-" or _numeric(c) for c in col[1:])
        else "<"
        for col in cols
    ]
    fmt = indent + "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths, strict=True))
    return [fmt.format(*head).rstrip()] + [fmt.format(*r).rstrip() for r in rows]


def _numeric(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "-+." and cell[1:2].isdigit())


def render_text(v: View, width: int = 100) -> str:
    """The main screen as plain text: what ``--once`` prints."""
    lines = [*header_lines(v)]
    if v.problem:
        lines.append(f"! {v.problem}")
    lines += ["", f"SUMMARY ({v.findings_source})", *headline_lines(v)]
    lines += [f"  step median (analysis): {v.step_median}"]
    lines += [f"  syncs in region: {v.sync_text}"]
    lines += ["", latency_line(v), "  " + sparkline(v.latency_ms, width - 2)]
    lines += ["", f"LAYERS ({v.layer_scope})", *format_table(layer_table(v))]
    lines += ["", "KV SPLITS (worst step per policy and rank)"]
    lines += format_table(split_table(v))
    lines += ["", "PADDING (every recorded step)", *format_table(padding_table(v))]
    lines += ["", "CAPTURE MEMORY (per rank and capture size)", *format_table(memory_table(v))]
    details = detail_lines(v)
    if details:
        lines += ["", "ENGINE / IMPORTED (mlaprof.analysis)", *["  " + s for s in details]]
    lines += ["", f"FINDINGS ({v.findings_source})"]
    lines += ["  " + s for s in finding_lines(v, width - 2)]
    lines += section_lines(v, width)
    return "\n".join(lines) + "\n"


def section_lines(v: View, width: int = 100) -> list[str]:
    """Every section of the summary, as the rows layer lays it out (mlaprof.reporters.rows):
    the same rows, values and wording as ``mlaprof report`` in each of its formats."""
    if v.summary is None:
        return []
    from mlaprof.reporters.rows import HEADING, block_lines, summary_blocks

    body = block_lines(summary_blocks(v.summary), width - 2)
    return ["", HEADING.upper(), *["  " + s for s in body]]


# -- engine runs, imported traces, imported vLLM logs (the analysis' own sections) -------------
def _rng(r: list | None) -> str:
    """``[lo, hi]`` of the analysis as ``lo`` or ``lo-hi``."""
    if not r or r[0] is None:
        return "-"
    return str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}"


def engine_lines(v: View) -> list[str]:
    """A recorded vLLM engine (measured) and its shadow AITER S (modelled)."""
    e, sh = v.engine, v.shadow
    if not e:
        return []
    acc = (
        "acceptance not recorded"
        if e.accepted_tokens is None
        else f"{e.accepted_tokens} accepted ({fmt_pct(e.acceptance_rate)})"
    )
    modes = ", ".join(f"{m} x{n}" for m, n in e.graph_modes.items()) or "-"
    out = [
        f"engine (measured): {_s(e.backend)}, {_s(e.spec_method)} "
        f"k={_s(e.num_speculative_tokens)}  |  {e.steps} steps, "
        f"{e.verify_steps} verify, {e.verify_rows} verify rows",
        f"  {e.draft_tokens} draft tokens, {acc}  |  graph {modes}",
    ]
    if e.scheduler_worker_text:  # compared over the steps both processes committed
        out.append(f"  scheduler and worker records {e.scheduler_worker_text}")
    if sh:
        out.append(
            f"  shadow AITER: {sh.steps} steps, paths {', '.join(sh.paths)}, S bug "
            f"{_rng(sh.s_bug)}, S fix {_rng(sh.s_fix)}, frozen {_rng(sh.s_frozen)}; "
            f"{sh.steps_collapsed_by_bug} step(s) collapsed by the bug"
        )
        out.append(f"  ({sh.provenance})")
    return out


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def trace_lines(v: View) -> list[str]:
    """An imported trace: path and kernel variant per step, S and its source, trust, replay time."""
    t = v.trace
    if not t:
        return []
    trust = t.trust
    out = [f"imported trace: {t.source} ({t.format})"]
    if trust.verdict == "unreliable":
        counts = ", ".join(
            f"{f.name} {getattr(trust.counts, f.name)}"
            for f in dataclasses.fields(trust.counts)
            if getattr(trust.counts, f.name)
        )
        out.append(f"  trust: UNRELIABLE ({counts}): " + "; ".join(trust.reasons))
    else:
        out.append(f"  trust: {trust.verdict}")
    head = ["path", "kernel variant", "steps (graph/eager)", "S", "layer us"]
    rows = [
        [p.path, p.variant, f"{p.steps} ({p.graph_steps}/{p.eager_steps})", _s(p.S),
         _us(p.layer_median_us)]
        for p in t.paths
    ]  # fmt: skip
    out += format_table((head, rows))
    out += [f"  {p.variant}: S {p.S_source}" for p in t.paths]
    if t.drafter:
        out.append(f"  {t.drafter.text}")
    rt = t.replay_time
    if rt and rt.replays:
        out.append(f"  time inside {rt.replays} graph replay(s): attention "
                   f"{fmt_pct(rt.attention_share)}")  # fmt: skip
        grouped = len(rt.rank_groups or []) > 1  # ranks that ran different S: apart
        lhead = ["ranks"] * grouped + ["layer", "median us", "attention us", "attention", "S"]
        lrows = [
            [x.ranks_text] * grouped
            + [_s(x.layer), _us(x.median_us), _us(x.attention_median_us)]
            + [fmt_pct(x.attention_share), _s(x.S)]
            for x in rt.layers
        ]
        out += format_table((lhead, lrows))
        out.append(f"  ({rt.provenance})")
    return out


def engine_start_lines(v: View) -> list[str]:
    """An imported vLLM log: server starts, final mode, downgrades with cause, memory per rank."""
    starts = v.engine_starts
    if not starts:
        return []
    out = []
    for st in starts:
        mode = st.final_mode or "mode not logged"
        if st.requested_mode and st.requested_mode != st.final_mode:
            mode = f"{st.requested_mode} -> {mode}"
        out.append(f"start {st.start}: vLLM {_s(st.version)} (log line {st.line})"
                   f"  cudagraph {mode}")  # fmt: skip
        for d in st.downgrades:
            out.append(
                f"  downgraded by {d.backend} (support {d.support}"
                f"{', spec-decode' if d.spec_decode else ''}) -> {d.setting} on ranks "
                f"{', '.join(map(str, d.ranks))} (log line {d.line})"
            )
    head = ["start", "rank", "process", "took", "secs", "estimate"]
    rows = [
        [_s(st.start), _s(r.rank), _s(r.process), fmt_bytes(r.measured_bytes),
         "-" if r.capture_secs is None else f"{r.capture_secs:.0f}",
         fmt_bytes(r.estimated_bytes)]
        for st in starts
        for r in st.memory
    ]  # fmt: skip
    if rows:  # an eager server logs no capture: no empty table
        out += ["graph capture memory per rank and start (never summed)",
                *format_table((head, rows))]  # fmt: skip
        out.append(f"  ({starts[0].provenance})")
    return out


def fleet_lines(v: View) -> list[str]:
    """Ranks side by side (the analysis' fleet view): which collapsed, S, host and DP group."""
    f = v.fleet
    if not f or f.ranks < 2:
        return []
    rows = [["rank", "host", "DP", "S min", "S max", "collapsed"]] + [
        [str(r.rank), r.host or "-", _s(r.dp_group), _s(r.S_min), _s(r.S_max),
         f"{_s(r.collapsed_layers)}/{r.layers} layers"]
        for r in f.per_rank
    ]  # fmt: skip
    return [f.text, *format_table((rows[0], rows[1:])), f"(DP: {f.dp_groups_source})"]


def detail_lines(v: View) -> list[str]:
    """Everything the analysis says about an engine run, imported trace or imported log, and
    the ranks side by side."""
    return [*fleet_lines(v), *engine_lines(v), *trace_lines(v), *engine_start_lines(v)]
