"""Findings by severity, each with its evidence and suggested fix (line API: cheap repaints)."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich.segment import Segment
from textual import events
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from mlaprof.tui.text import SEV_TAG
from mlaprof.tui.widgets.styles import CachedStyles

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding

TAG_WIDTH = 7  # " CRIT " + space


class FindingsList(CachedStyles, ScrollView, can_focus=True):
    """Severity tag in its own column; wrapped lines hang under the title."""

    COMPONENT_CLASSES = {
        "findings--critical",
        "findings--warning",
        "findings--info",
        "findings--title",
        "findings--evidence",
        "findings--fix",
        "findings--none",
        "findings--unknown",
    }
    DEFAULT_CSS = """
    FindingsList > .findings--critical { background: $error; color: $text; text-style: bold; }
    FindingsList > .findings--warning { background: $warning; color: $background; text-style: bold; }
    FindingsList > .findings--info { text-style: bold reverse; }
    FindingsList > .findings--title { text-style: bold; }
    FindingsList > .findings--evidence { color: $text-muted; }
    FindingsList > .findings--fix { color: $text-success; }
    FindingsList > .findings--none { color: $text-success; }
    FindingsList > .findings--unknown { color: $text-warning; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.findings: list[Finding] = []
        self._key: list[tuple[str, ...]] | None = None
        self._lines: list[list[tuple[str, str]]] = []  # (text, component class)
        self._width = 0
        self.empty_text = "no findings"
        self.empty_ok = False

    def show(
        self, findings: list[Finding], source: str, empty: str = "no findings", ok: bool = False
    ) -> None:
        """``empty`` is what an empty list says (``analysing...`` before the first pass);
        ``ok``: it is the analysis' OK (:func:`mlaprof.tui.text.empty_findings_ok`), drawn as
        one; anything else (UNKNOWN, provisional, analysing) is never drawn as a success."""
        title = f"findings ({source})"
        if self.border_title != title:
            self.border_title = title
        key = [(f.severity, f.title, f.evidence, f.fix) for f in findings] + [(empty, str(ok))]
        if key != self._key:
            self._key = key
            self.empty_text, self.empty_ok = empty, ok
            self.findings = list(findings)
            self._wrap()

    def on_resize(self, event: events.Resize) -> None:
        self._wrap()

    def _wrap(self) -> None:
        # leave room for a vertical scrollbar (2 cells) that appears once the text is long
        width = max(20, self.scrollable_content_region.width - TAG_WIDTH - 3)
        self._width = width
        lines: list[list[tuple[str, str]]] = []
        pad = " " * TAG_WIDTH
        for f in self.findings:
            tag = f" {SEV_TAG.get(f.severity, f.severity)} "
            first = True
            for text, cls in (
                (f.title, "findings--title"),
                (f.evidence, "findings--evidence"),
                (f"fix: {f.fix}" if f.fix else "", "findings--fix"),
            ):
                for part in textwrap.wrap(text, width) if text else []:
                    if first:
                        lines.append([(tag, f"findings--{f.severity}"), (" ", ""), (part, cls)])
                        first = False
                    else:
                        lines.append([(pad, ""), (part, cls)])
            lines.append([])
        if not self.findings:  # the analysis' line (an UNKNOWN one says what is missing)
            parts = textwrap.wrap(self.empty_text, width + TAG_WIDTH - 1) or [""]
            cls = "findings--none" if self.empty_ok else "findings--unknown"
            lines = [[(f" {part}", cls)] for part in parts]
        self._lines = lines
        self.virtual_size = Size(width + TAG_WIDTH, len(lines))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        row = int(self.scroll_offset.y) + y
        base = self._style("")
        if row >= len(self._lines):
            return Strip.blank(width, base)
        segs = [Segment(text, self._style(cls)) for text, cls in self._lines[row]]
        return Strip(segs).adjust_cell_length(width, base)
