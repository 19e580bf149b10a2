"""A summary as every view renders it, flattened to words: the terminal report, Markdown, the
HTML page (scripts and styles out, tags to spaces), ``tui --once`` and, where asked, the JSON
document, for tests that hold every view to one story."""

from __future__ import annotations

import dataclasses
import html
import io
import re
from pathlib import Path
from typing import Any


def flat(text: str) -> str:
    return " ".join(text.split())


def every_view(run_dir: Path, s: Any, with_json: bool = False) -> dict[str, str]:
    """``s`` (the summary of the run at ``run_dir``) in every view, each view's text flat."""
    from rich.console import Console

    from mlaprof.figures.html_report import render_html
    from mlaprof.reporters.markdown import render_markdown
    from mlaprof.reporters.renderer import JsonRenderer
    from mlaprof.reporters.terminal import TerminalRenderer
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text

    # the report as rendered (printing its text through rich again read "[vLLM 0.34.0]" as markup)
    terminal = TerminalRenderer(Console(file=io.StringIO(), width=400, color_system=None)).render(s)
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)
    view, _ = read_view(run_dir)
    got = {
        "terminal": flat(terminal),
        "markdown": flat(html.unescape(render_markdown(s))),
        "html": flat(html.unescape(re.sub(r"<[^>]+>", " ", page))),
        "tui": flat(render_text(dataclasses.replace(view, summary=s), width=400)),
    }
    if with_json:
        got["json"] = flat(JsonRenderer().render(s))
    return got
