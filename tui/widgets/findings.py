"""Findings by severity, each with its evidence and suggested fix."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from mlaprof.analysis.findings import Finding
from tui.text import SEV_TAG

STYLE = {"critical": "bold white on red", "warning": "bold black on yellow", "info": "bold"}


def findings_text(findings: list[Finding]) -> Table | Text:
    """Severity tag in its own column so wrapped lines hang under the title."""
    if not findings:
        return Text("no findings", style="green")
    grid = Table.grid(padding=(0, 1, 1, 0))
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    for f in findings:
        body = Text(f.title, "bold")
        if f.evidence:
            body.append("\n" + f.evidence, "dim")
        if f.fix:
            body.append("\nfix: ", "green")
            body.append(f.fix)
        grid.add_row(
            Text(f" {SEV_TAG.get(f.severity, f.severity)} ", STYLE.get(f.severity, "")), body
        )
    return grid


class FindingsList(VerticalScroll):
    def compose(self):  # noqa: ANN201 - textual's ComposeResult
        yield Static(id="findings-body")

    def show(self, findings: list[Finding], source: str) -> None:
        self.border_title = f"findings ({source})"
        self.query_one("#findings-body", Static).update(findings_text(findings))
