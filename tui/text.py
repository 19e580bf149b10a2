"""Table rows shared by the widgets and the plain-text snapshot (``mlaprof tui --once``)."""

from __future__ import annotations

import textwrap

from tui.fmt import fmt_bytes, fmt_count, fmt_ms, fmt_pct
from tui.view import View

Table = tuple[list[str], list[list[str]]]
BLOCKS = "▁▂▃▄▅▆▇█"
SEV_TAG = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}

LAYER_COLUMNS = (
    ("layer", "layer"),
    ("time_ms", "time ms"),
    ("syncs", "syncs"),
    ("used", "S used"),
    ("deserved", "S deserved"),
    ("occupancy", "occ (model)"),
)


def _s(v: object) -> str:
    return "-" if v is None else str(v)


def header_lines(v: View) -> list[str]:
    return [
        f"{v.name}  |  scenario {v.scenario}  |  device {v.device}  |  backend {v.backend}",
        f"graph {v.graph_mode}  |  capture {v.capture}  |  {v.rank_label}  |  {v.status}  |  "
        f"{fmt_count(v.steps)} steps, {fmt_count(v.events)} events",
    ]


def latency_line(v: View, width: int = 200) -> str:
    """Recent step times with how they were measured ("CPU reference timing" on a CPU run);
    the numbers always fit ``width`` (an 80-column terminal), the words shrink first."""
    lat = v.latency
    stats = [("last", lat["last"]), ("p50", lat["p50"]), ("p90", lat["p90"])]
    stats += [("min", lat["min"]), ("max", lat["max"])]
    tries = [("  ", v.timing_label), (" ", v.timing_label), (" ", v.timing_short), (" ", "")]
    for sep, label in tries:
        nums = sep.join(f"{k} {fmt_ms(x)}" for k, x in stats)
        line = f"step ms (last {len(v.latency_ms)}{', ' + label if label else ''}): {nums}"
        if len(line) <= width:
            return line
    return line


def headline_value(v: View, label_start: str) -> str | None:
    """``label: value`` of the analysis headline whose label starts with ``label_start``."""
    h = next((h for h in v.headline if h["label"].startswith(label_start)), None)
    return None if h is None else f"{h['label']}: {h['value']}"


def splits_title(v: View) -> str:
    """``KV splits | <policy>, worst step: S used 1, deserved 16`` (the analysis' numbers)."""
    h = next((h for h in v.headline if h["label"].startswith("KV splits (")), None)
    if h is None:
        return "KV splits (latest step)"
    what = h["label"].removeprefix("KV splits (").removesuffix(")")
    return f"KV splits  |  {what}: {h['value']}"


def capture_title(v: View) -> str:
    return headline_value(v, "capture memory") or f"capture ({v.findings_source})"


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


def layer_table(v: View) -> Table:
    rows = [
        [
            _s(r["layer"]),
            fmt_ms(r.get("time_ms")),
            _s(r.get("syncs")),
            _s(r.get("used")),
            _s(r.get("deserved")),
            fmt_pct(r.get("occupancy")),
        ]
        for r in v.layers
    ]
    return [h for _, h in LAYER_COLUMNS], rows


def split_table(v: View) -> Table:
    # occupancy "used->deserved" in one column keeps the table inside half a 160-column screen
    head = ["size", "policy", "S used", "deserved", "frozen", "occ (model)", "collapsed"]
    rows = [
        [_s(r["capture_size"]), _s(r["policy"]), "device", "-", "never", "-", "-"]
        if r.get("on_device")  # S is decided on the device at every replay: no host number
        else [
            _s(r["capture_size"]),
            _s(r["policy"]),
            _s(r["used"])
            if r["min_used"] == r["max_used"]
            else f"{r['used']} ({r['min_used']}-{r['max_used']})",
            _s(r["deserved"]),
            _s(r["frozen"]),
            f"{fmt_pct(r['occ_used'])}->{fmt_pct(r['occ_deserved'])}",
            f"{r['collapsed']}/{r['steps']}",
        ]
        for r in v.splits
    ]
    return head, rows


def padding_table(v: View) -> Table:
    head = ["size", "steps", "real rows", "pad rows", "real tok", "pad tok", "waste", "pad KV"]

    def row(label: str, r: dict) -> list[str]:
        return [
            label,
            _s(r["steps"]),
            _s(r["real_rows"]),
            _s(r["padding_rows"]),
            _s(r["real_tokens"]),
            _s(r["padding_tokens"]),
            fmt_pct(r["waste"]),
            fmt_bytes(r["kv_bytes_padding"]),
        ]

    rows = [row(_s(r["capture_size"]), r) for r in v.padding]
    if len(v.padding) > 1:
        rows.append(row("total", v.padding_total))
    return head, rows


def memory_table(v: View) -> Table:
    head = ["size", "mode", "pool", "allocator", "driver", "capture ms", "status"]
    status = {(c.get("capture_size"), c.get("graph_mode")): c for c in v.captures}
    rows = []
    keys = [(m["capture_size"], m["graph_mode"]) for m in v.memory]
    keys += [k for k in status if k not in set(keys)]
    mem = {(m["capture_size"], m["graph_mode"]): m for m in v.memory}
    for k in keys:
        m, c = mem.get(k, {}), status.get(k, {})
        st = c.get("status") or "-"
        if c.get("fallback"):
            st += f" -> {c['fallback']}"
        ns = m.get("capture_ns")
        rows.append(
            [
                _s(k[0]),
                _s(k[1]),
                fmt_bytes(m.get("pool_bytes")),
                fmt_bytes(m.get("allocator_bytes")),
                fmt_bytes(m.get("driver_bytes")),
                fmt_ms(ns / 1e6) if ns is not None else "-",
                st,
            ]
        )
    return head, rows


def sync_table(v: View, layer: int | None) -> Table:
    head = ["kind", "op", "location", "function", "count", "first step", "detail"]
    rows = [
        [
            _s(s["kind"]),
            _s(s["op"]),
            _s(s["location"]),
            _s(s["function"]),
            _s(s["count"]),
            _s(s["first_step"]),
            _s(s["detail"]),
        ]
        for s in v.syncs
        if layer is None or s["layer"] == layer
    ]
    return head, rows


def empty_findings_text(v: View) -> str:
    """What an empty findings list says: none found, or why none are shown yet."""
    return "no findings" if v.findings_source == "mlaprof.analysis" else v.findings_source


def headline_lines(v: View) -> list[str]:
    """The analysis' key numbers (the lines ``mlaprof report`` prints)."""
    if not v.headline:
        return [f"  {v.findings_source}"]
    return [f"  {h['label']}: {h['value']}  ({h['provenance']})" for h in v.headline]


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
    lines += ["", "SUMMARY (mlaprof.analysis)", *headline_lines(v)]
    lines += ["", latency_line(v), "  " + sparkline(v.latency_ms, width - 2)]
    lines += ["", f"LAYERS ({v.layer_scope})", *format_table(layer_table(v))]
    lines += ["", "KV SPLITS (per capture size and policy, latest step)"]
    lines += format_table(split_table(v))
    lines += ["", "PADDING (real vs padding rows)", *format_table(padding_table(v))]
    lines += ["", "CAPTURE MEMORY (per capture size)", *format_table(memory_table(v))]
    lines += ["", f"FINDINGS ({v.findings_source})"]
    lines += ["  " + s for s in finding_lines(v, width - 2)]
    return "\n".join(lines) + "\n"
