"""Markdown report (``mlaprof report RUN --format md``): the run summary as GitHub-flavoured
Markdown for a CI comment. A renderer only: every line comes from the summary (and the diff) that
``mlaprof.analysis`` returns; nothing here is computed from the run's tables."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from mlaprof.textsafe import md_code, md_text

if TYPE_CHECKING:
    from mlaprof.analysis.diff import SummaryDiff
    from mlaprof.analysis.run_summary import RunSummary

ICON = {"critical": "🔴 CRITICAL", "warning": "🟠 WARNING", "info": "🔵 INFO"}


def cell(text: Any) -> str:
    """Text from the summary as Markdown (:func:`mlaprof.textsafe.md_text`): one line, nothing in it
    read as HTML, a link, an image, emphasis or a table cell's end."""
    return md_text("" if text is None else text)


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


class MarkdownRenderer:
    """``report --format md``."""

    def render(self, summary: RunSummary, diff: SummaryDiff | None = None) -> str:
        return render_markdown(summary, diff)


def render_markdown(s: RunSummary, diff: SummaryDiff | None = None) -> str:
    """The typed summary ``s`` and, with ``--compare``, its ``diff``."""
    from mlaprof.reporters.rows import fleet_line

    sc = s.scenario
    lines = [f"## mlaprof: {md_code(s.run)}", ""]
    facts = [f"status **{cell(s.status)}**", f"kind {cell(s.kind)}"]
    facts += [f"{k} {cell(v)}" for k, v in (("backend", s.backend), ("device", s.device),
              ("policy", sc.policy)) if v]  # fmt: skip
    lines += [" · ".join(facts), ""]
    if not s.state.closed:  # a run that finished and closed its record: no flag
        lines += [f"_{cell(s.state.text)}_", ""]
    if s.headline:
        lines += _table(
            ["", "value", "where it comes from"],
            [[h.label, h.value, h.provenance or ""] for h in s.headline],
        )
        lines.append("")
    lines += [f"**syncs in region**: {cell(s.sync_counts.text)}", ""]
    route = s.route
    if route:  # the analysis' line (analysis.paths.route_text), as every view prints it
        lines += [f"**vLLM route**: {cell(route.line)}", ""]
    if fleet := fleet_line(s):  # the ranks' table is the rows layer's ("ranks side by side")
        lines += [f"**{cell(fleet)}**", ""]
    findings = s.findings
    lines.append(f"### Findings ({len(findings)})")
    lines.append("")
    verdict = s.findings_verdict  # the analysis' line under an empty list ("OK" or "UNKNOWN")
    if verdict.line is not None:
        lines += [f"**{cell(verdict.label or '')}** {cell(verdict.line)}", ""]
    for f in findings:
        where = " · ".join(x for x in (f.location,
                           None if f.layer is None else f"layer {f.layer}") if x)  # fmt: skip
        flag = " _(from a trace that lost records)_" if f.unreliable else ""
        lines.append(f"- **{ICON.get(f.severity, f.severity)}** {cell(f.title)}{flag}")
        if where:
            lines.append(f"  - where: {md_code(where)}")
        if f.evidence:
            lines.append(f"  - evidence: {cell(f.evidence)}")
        if f.fix:
            lines.append(f"  - fix: {cell(f.fix)}")
    lines += ["", *sections_markdown(s)]
    if diff is not None:
        from mlaprof.reporters.diff_rows import diff_block

        b = diff_block(diff)
        lines += ["", f"### {md_code(diff.before)} → {md_code(diff.after)}", ""]
        lines += [f"- **{cell(r.label)}**: {cell(r.text)}" for r in b.rows] + [""]
        for t in b.tables:
            lines += _table(t.head, t.rows)
    return "\n".join(lines).rstrip() + "\n"


def sections_markdown(s: RunSummary) -> list[str]:
    """Every section of the summary (the rows layer, mlaprof.reporters.rows), each folded in a
    ``<details>`` block: a PR comment hides no split, path or padding row, and stays short."""
    from mlaprof.reporters.rows import HEADING, summary_blocks, table_more

    out = [f"### {HEADING}", ""]
    for b in summary_blocks(s):
        out += ["<details>", f"<summary>{html.escape(b.title)}</summary>", ""]
        if b.rows:
            out += _table(["", "value"], [[r.label, r.text] for r in b.rows])
            out.append("")
        for t in b.tables:
            if t.title != b.title:
                out += [f"**{cell(t.title)}**", ""]
            out += _table(t.head, t.rows)
            out += ["", *(f"_{cell(n)}_" for n in t.notes)]
            out += [f"_{table_more(t)}_" if t.more else "", ""]
        out += ["</details>", ""]
    return out
