"""Findings by severity, each with its evidence and suggested fix."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from mlaprof.analysis.findings import Finding
from tui.text import SEV_TAG

STYLE = {"critical": "bold white on red", "warning": "bold black on yellow", "info": "bold"}


def findings_text(findings: list[Finding]) -> Text:
    if not findings:
        return Text("no findings", style="green")
    t = Text()
    for i, f in enumerate(findings):
        if i:
            t.append("\n")
        t.append(f" {SEV_TAG.get(f.severity, f.severity)} ", STYLE.get(f.severity, ""))
        t.append(f" {f.title}\n", "bold")
        if f.evidence:
            t.append(f"  {f.evidence}\n", "dim")
        if f.fix:
            t.append("  fix: ", "green")
            t.append(f"{f.fix}\n")
    return t


class FindingsList(VerticalScroll):
    def compose(self):  # noqa: ANN201 - textual's ComposeResult
        yield Static(id="findings-body")

    def show(self, findings: list[Finding], source: str) -> None:
        self.border_title = f"findings ({source})"
        self.query_one("#findings-body", Static).update(findings_text(findings))
