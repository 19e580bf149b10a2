"""Markdown report (``mlaprof report RUN --format md``): the run summary as GitHub-flavoured
Markdown for a CI comment. A renderer only: every line comes from the summary (and the diff) that
``mlaprof.analysis`` returns; nothing here is computed from the run's tables."""

from __future__ import annotations

from typing import Any

from mlaprof.analysis.diff import fmt_change, fmt_value

ICON = {"critical": "🔴 CRITICAL", "warning": "🟠 WARNING", "info": "🔵 INFO"}


def cell(text: Any) -> str:
    """One table cell: no line breaks, pipes escaped, control characters dropped."""
    s = "" if text is None else str(text)
    s = "".join(ch if ch.isprintable() or ch == " " else " " for ch in s.replace("\n", " "))
    return s.replace("\\", "\\\\").replace("|", "\\|").strip()


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def render_markdown(s: dict[str, Any], diff: dict[str, Any] | None = None) -> str:
    """The summary ``s`` (``mlaprof.analysis.summary``) and, with ``--compare``, its ``diff``."""
    sc = s.get("scenario") or {}
    lines = [f"## mlaprof: `{cell(s['run'])}`", ""]
    facts = [f"status **{cell(s.get('status'))}**", f"kind {cell(s.get('kind'))}"]
    facts += [f"{k} {cell(v)}" for k, v in (("backend", s.get("backend")),
              ("device", s.get("device")), ("policy", sc.get("policy"))) if v]  # fmt: skip
    lines += [" · ".join(facts), ""]
    if s.get("headline"):
        lines += _table(
            ["", "value", "where it comes from"],
            [[h["label"], h["value"], h.get("provenance") or ""] for h in s["headline"]],
        )
        lines.append("")
    route = s.get("route")
    if route:
        tag = "" if route.get("verified") else " (UNVERIFIED)"
        lines += [f"**vLLM route**: `{cell(route['path'])}` ({cell(route['kernel'])}): "
                  f"{cell(route['reason'])} [vLLM {cell(route['version'])}{tag}]", ""]  # fmt: skip
    fleet = s.get("fleet") or {}
    if fleet.get("ranks", 0) > 1:
        lines += [f"**{cell(fleet['text'])}**", ""]
        lines += _table(
            ["rank", "host", "DP", "trust", "S min", "S max", "collapsed layers"],
            [[r["rank"], r.get("host") or "-", _unknown(r.get("dp_group")),
              _unknown(r.get("trust")), _unknown(r.get("S_min")), _unknown(r.get("S_max")),
              r.get("collapsed_layers")] for r in fleet.get("per_rank", [])],
        )  # fmt: skip
        lines += ["", f"DP: {cell(fleet.get('dp_groups_source'))}", ""]
    findings = s.get("findings") or []
    lines.append(f"### Findings ({len(findings)})")
    lines.append("")
    if not findings:
        lines += ["No findings: nothing in this run's evidence raised one.", ""]
    for f in findings:
        where = " · ".join(x for x in (f.get("location"),
                           None if f.get("layer") is None else f"layer {f['layer']}") if x)  # fmt: skip
        flag = " _(from a trace that lost records)_" if f.get("unreliable") else ""
        lines.append(f"- **{ICON.get(f['severity'], f['severity'])}** {cell(f['title'])}{flag}")
        if where:
            lines.append(f"  - where: `{cell(where)}`")
        if f.get("evidence"):
            lines.append(f"  - evidence: {cell(f['evidence'])}")
        if f.get("fix"):
            lines.append(f"  - fix: {cell(f['fix'])}")
    if diff is not None:
        lines += ["", f"### `{cell(diff['before'])}` → `{cell(diff['after'])}`", ""]
        lines += _table(
            ["metric", "before", "after", "change", "verdict", "where it comes from"],
            [[f"{r['metric']} ({r['unit']})", fmt_value(r["a"]), fmt_value(r["b"]),
              fmt_change(r), r["verdict"], r.get("provenance") or ""]
             for r in diff.get("table", [])],
        )  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"


def _unknown(v: Any) -> str:
    return "unknown" if v is None else str(v)
