"""The one protocol every view of a run's summary implements: ``render(summary, diff)`` returns
the view's text (terminal, JSON, Markdown, the HTML page; the PNG renderer writes its files
and names them). A renderer formats; it computes nothing (``mlaprof.analysis`` does) and reads
neither the run nor its store. ``mlaprof report`` builds each summary once and hands it to
every renderer it was asked for; the sections every view shows come from one rows layer
(:mod:`mlaprof.reporters.rows`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from mlaprof.analysis.diff import SummaryDiff
    from mlaprof.analysis.run_summary import RunSummary


class Renderer(Protocol):
    def render(self, summary: RunSummary, diff: SummaryDiff | None = None) -> str:
        """The view of ``summary`` (and, with ``--compare``, of its ``diff`` to a second run)."""
        ...


class JsonRenderer:
    """``report --json``: the summary's JSON document, the diff under ``compare``."""

    def render(self, summary: RunSummary, diff: SummaryDiff | None = None) -> str:
        doc = summary.to_json()
        if diff is not None:
            doc["compare"] = diff.to_json()
        return json.dumps(doc, indent=2, default=str) + "\n"


def renderer(fmt: str, verbose: bool = False) -> Renderer:
    """The renderer of a ``--format`` (text: the terminal report). The HTML page and the PNG
    figures implement the same protocol in ``mlaprof.figures`` (``HtmlRenderer``,
    ``PngRenderer``), which draw on this package's rows layer."""
    if fmt == "json":
        return JsonRenderer()
    if fmt == "md":
        from mlaprof.reporters.markdown import MarkdownRenderer

        return MarkdownRenderer()
    from mlaprof.reporters.terminal import TerminalRenderer

    return TerminalRenderer(verbose=verbose)
