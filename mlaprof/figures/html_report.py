"""One self-contained offline HTML report: run summary and findings on top, figures below.

plotly.js is inlined once in ``<head>`` (``include_plotlyjs=True`` semantics; ``"cdn"`` renders
blank offline), every figure is a ``<div>`` drawn by it: no network, no companion files.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import html
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.run_summary import require_summary
from mlaprof.errors import MlaprofError, disk_message
from mlaprof.figures import _common as c
from mlaprof.rank_counts import ranks_count
from mlaprof.textsafe import plain

if TYPE_CHECKING:
    from mlaprof.analysis.diff import SummaryDiff
    from mlaprof.analysis.findings_verdict import FindingsVerdict
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import HeadlineRow

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
       color: #222; background: #fafafa; }
main { max-width: 1250px; margin: 0 auto; padding: 16px 28px 48px; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.2em; }
h2 { font-size: 1.2em; margin: 1.6em 0 0.5em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #555; margin-bottom: 1em; }
table { border-collapse: collapse; width: 100%; background: white; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta td:first-child { width: 14em; color: #555; }
.sev { font-weight: bold; border-radius: 3px; padding: 1px 6px; color: white; white-space: nowrap; }
.sev-critical { background: #c62828; } .sev-warning { background: #ef6c00; }
.sev-info { background: #1565c0; }
.better { color: #2e7d32; font-weight: bold; } .worse { color: #c62828; font-weight: bold; }
.fig { background: white; border: 1px solid #e3e3e3; margin: 14px 0; padding: 4px; }
.note { color: #666; font-style: italic; }
code { background: #f3f3f3; padding: 0 3px; }
nav a { margin-right: 1em; }
"""

FIGURE_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}


def _e(v: Any) -> str:
    """Every string of the page: shortened with its length and every control character shown
    as ``\\xNN``, as in the terminal (:func:`mlaprof.textsafe.plain`), then HTML-escaped."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return html.escape(plain(v))


def _headline_html(headline: list[HeadlineRow]) -> str:
    """The analysis' key numbers (the lines ``mlaprof report`` and the TUI print)."""
    rows = "".join(
        f"<tr><td>{_e(h.label)}</td><td><b>{_e(h.value)}</b></td><td>{_e(h.provenance)}</td></tr>"
        for h in headline
    )
    return f'<table class="meta headline">{rows}</table>'


def _findings_html(findings: list[Any], verdict: FindingsVerdict) -> str:
    if verdict.line is not None:  # the analysis' line under an empty list ("OK" or "UNKNOWN")
        return f'<p class="note"><b>{_e(verdict.label or "")}</b> {_e(verdict.line)}</p>'
    rows = []
    for f in sorted(findings, key=lambda f: f.rank):
        where = " ".join(
            x
            for x in (
                f"layer {f.layer}" if f.layer is not None else "",
                f"<code>{_e(f.location)}</code>" if f.location else "",
            )
            if x
        )
        rows.append(
            "<tr>"
            f'<td><span class="sev sev-{_e(f.severity)}">{_e(f.severity)}</span></td>'
            f"<td>{_e(f.kind)}</td><td><b>{_e(f.title)}</b>"
            + (' <span class="sev sev-warning">unreliable</span>' if f.unreliable else "")
            + f"<br>{_e(f.evidence)}</td>"
            f"<td>{where}</td><td>{_e(f.fix)}</td></tr>"
        )
    return (
        "<table><tr><th>severity</th><th>kind</th><th>finding and evidence</th>"
        "<th>where</th><th>what to do</th></tr>" + "".join(rows) + "</table>"
    )


def _meta_html(s: RunSummary, info: Any) -> str:
    """The run's facts, from its summary (``info``: the series section's run.json facts)."""
    sc = s.scenario
    has_sc = any(v is not None for v in (sc.graph_mode, sc.policy, sc.min_kv_mode))
    ver = info.versions if info is not None else {}
    # an import's run.json holds the importing machine's libraries and revision: said so, apart
    # from the trace's facts, where the analysis says they are the importer's (RunInfo)
    imported = bool(info and info.importer_versions)
    mine = ", ".join(f"{k} {v}" for k, v in ver.items() if v and k in ("mlaprof", "python"))
    n = len(s.ranks or [])
    items = [
        ("run", s.run),
        ("status", s.status),
        ("ended because", info and info.reason),
        (info.created_label if info else "created", info and info.created),
        ("source", info and info.source),
        ("scenario", sc.name),
        ("model", sc.model),
        (
            "verify shape",
            f"qlen {1 + int(sc.num_speculative_tokens)}, KV lengths {sc.kv_lens}"
            if sc.num_speculative_tokens is not None
            else None,
        ),
        (
            "graph mode asked for / min_kv",
            f"{sc.graph_mode} / {sc.min_kv_mode}" if has_sc else None,
        ),
        ("vLLM route", s.route.line if s.route else None),  # analysis.paths.route_text
        ("syncs in region", s.sync_counts.text),  # "not checked" is never "0"
        ("padding", s.padding.text),
        (
            "split policy / target",
            f"{sc.policy} / {c.target_label(sc.target)}" if has_sc else None,
        ),
        (
            "backend / device",
            f"{s.backend or '?'} / {s.device or '?'}" if s.backend or s.device else None,
        ),
        ("ranks", ranks_count(s.ranks) if n else None),
        ("versions", None if imported else ", ".join(f"{k} {v}" for k, v in ver.items() if v)),
        ("git", None if imported else info and info.git),
        (
            "imported with",
            f"{mine}{f' (git {info.git})' if info and info.git else ''} on the importing "
            "machine, not the trace's libraries"
            if imported and mine
            else None,
        ),
    ]
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in items if v)
    return f'<table class="meta">{rows}</table>'


def _front_html(s: RunSummary) -> str:
    """What every view shows before the findings, as the rows layer declares it once
    (mlaprof.reporters.rows.front_rows / front_tables): an engine's and a log's lines, an
    imported trace's paths and replay time, the ranks side by side, a log's server starts."""
    from mlaprof.reporters.rows import fleet_line, front_rows, front_tables, summary_blocks

    blocks = summary_blocks(s)
    out = []
    if fleet := fleet_line(s):  # ranks side by side, never merged: the verdict first
        out.append(f"<p><b>{_e(fleet)}</b></p>")
    for b in front_rows(blocks):
        out.append(f"<h3>{_e(b.title)}</h3>" + _rows_html(b.rows))
    out += [_table_html(t) for t in front_tables(blocks)]
    return '<h2 id="front">Paths, ranks, starts</h2>' + "".join(out) if out else ""


def _trace_html(s: RunSummary) -> str:
    """An imported trace's capture and sync verdicts, as far as its evidence supports them
    (its paths and replay time are the rows layer's tables: :func:`_front_html`)."""
    tr = s.trace
    if not tr:
        return ""
    from mlaprof.analysis.capture import trace_capture_text
    from mlaprof.analysis.syncs import trace_sync_text

    trust = tr.trust
    warn = (
        '<p><span class="sev sev-warning">unreliable trace</span> '
        + _e("; ".join(trust.reasons))
        + "</p>"
        if trust.verdict == "unreliable"
        else ""
    )
    notes = "".join(f"<p class='dim'>trace: {_e(n)}</p>" for n in trust.notes or [])
    return (
        '<h2 id="trace">Imported trace</h2>'
        + warn
        + notes
        + f"<p>capture: <b>{_e(trace_capture_text(tr.capture))}</b>"
        + f"; syncs: <b>{_e(trace_sync_text(tr.syncs, s.ranks))}</b>"
        + f"; {_e(tr.capture.provenance)}</p>"
    )


def sections_html(s: Any) -> list[str]:
    """Every section of the summary (the rows layer, mlaprof.reporters.rows), each folded in a
    ``<details>`` element: the same rows and wording as the terminal, Markdown and ``tui``."""
    from mlaprof.reporters.rows import HEADING, summary_blocks

    out = [f'<h2 id="sections">{_e(HEADING)}</h2>']
    for b in summary_blocks(s):
        out.append(f"<details><summary>{_e(b.title)}</summary>")
        out.append(_rows_html(b.rows))
        out += [_table_html(t, t.title != b.title) for t in b.tables]
        out.append("</details>")
    return out


def _rows_html(rows: list[Any]) -> str:
    """A block's rows (mlaprof.reporters.rows.Row) as a two-column table."""
    if not rows:
        return ""
    body = "".join(f"<tr><td>{_e(r.label)}</td><td>{_e(r.text)}</td></tr>" for r in rows)
    return f'<table class="meta">{body}</table>'


VERDICT_CLASS = ("better", "worse")  # a cell that says one of these is coloured


def _table_html(t: Any, titled: bool = True) -> str:
    """A table of the rows layer (mlaprof.reporters.rows.Table), its notes and what was cut."""
    from mlaprof.reporters.rows import table_more

    title = f"<h3>{_e(t.title)}</h3>" if titled else ""
    head = "".join(f"<th>{_e(h)}</th>" for h in t.head)

    def td(c: str) -> str:
        return f"<td class='{c}'>{_e(c)}</td>" if c in VERDICT_CLASS else f"<td>{_e(c)}</td>"

    body = "".join("<tr>" + "".join(td(c) for c in r) + "</tr>" for r in t.rows)
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in t.notes)
    more = f'<p class="note">{_e(table_more(t))}</p>' if t.more else ""
    return f"{title}<table><tr>{head}</tr>{body}</table>{notes}{more}"


def _diff_html(diff: SummaryDiff) -> str:
    """The run diff as the rows layer lays it out (mlaprof.reporters.diff_rows)."""
    from mlaprof.reporters.diff_rows import diff_block

    b = diff_block(diff)
    return (
        f"<p>A = <b>{_e(diff.before)}</b> (this run, before), B = <b>{_e(diff.after)}</b> "
        "(after). Below, the figures are this run's.</p>"
        + _rows_html(b.rows)
        + "".join(_table_html(t, titled=False) for t in b.tables)
    )


def render_html(s: RunSummary, diff: SummaryDiff | None = None) -> str:
    """The report as one HTML string (see :func:`write_html_report`): the run summary ``s``
    and, with a second run, the analysis' ``diff`` to it. The page reads nothing but those."""
    c.go()
    from plotly.offline import get_plotlyjs

    from mlaprof.figures import run_figures

    s = require_summary(s, "the HTML report")
    findings = s.findings
    figs = run_figures(s, diff=diff)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>mlaprof report: {_e(s.run)}</title>",
        f"<style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body><main>",
        f"<h1>mlaprof report: {_e(s.run)}</h1>",
        f'<div class="sub">written {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC '
        f"by mlaprof; works offline (plotly.js is inside this file).</div>",
        "<nav>"
        + " ".join(
            f'<a href="#{a}">{t}</a>'
            for a, t in (("findings", "Findings"), ("run", "Run"), ("figures", "Figures"))
        )
        + "</nav>",
        '<h2 id="summary">Summary</h2>',
        _headline_html(s.headline),
        f'<h2 id="findings">Findings ({len(findings)})</h2>',
        _findings_html(findings, s.findings_verdict),
        '<h2 id="run">Run</h2>',
        _meta_html(s, s.series.info if s.series is not None else None),
        _trace_html(s),
        _front_html(s),
    ]
    parts += sections_html(s)
    if diff is not None:
        parts += ['<h2 id="diff">Compared with another run</h2>', _diff_html(diff)]
    parts.append(f'<h2 id="figures">Figures ({len(figs)})</h2>')
    if not figs:
        parts.append('<p class="note">This run recorded nothing to plot.</p>')
    for stem, fig in figs:
        parts.append(_fig_div(fig, stem))
    parts.append("</main></body></html>")
    return "\n".join(parts)


class HtmlRenderer:
    """``report --html``: the self-contained page of a summary (and its diff), behind the same
    ``render`` protocol as text, JSON and Markdown (mlaprof.reporters.renderer)."""

    def render(self, summary: RunSummary, diff: SummaryDiff | None = None) -> str:
        return render_html(summary, diff)


def write_html_report(
    s: RunSummary, path: Path | str, diff: SummaryDiff | None = None, force: bool = False
) -> Path:
    """Write the self-contained report of the run summary ``s`` to ``path``; ``diff`` (the
    analysis' diff to another run, e.g. the fix) adds what changed, as a table and a figure
    (``mlaprof report BUG --compare FIX``). Returns the path written."""
    path = Path(path)
    if path.is_dir():
        raise MlaprofError(f"{path} is a folder: give the HTML file to write")
    refuse_overwrite(path, force)
    return _write(path, HtmlRenderer().render(s, diff), force)


def refuse_overwrite(path: Path, force: bool) -> None:
    """Every writer's rule: an existing file is kept unless ``--force`` says otherwise."""
    if not force and os.path.lexists(path):
        raise MlaprofError(f"{path} already exists: give --force to overwrite it")


def _write(path: Path, text: str, force: bool = False) -> Path:
    """Atomic write (temporary file, then a link that fails if the file appeared meanwhile, or
    a rename with ``force``): a reader never sees half a report, nothing is overwritten unasked."""
    if path.is_dir():
        raise MlaprofError(f"{path} is a folder: give the HTML file to write")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        if force:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except FileExistsError:
        raise MlaprofError(f"{path} already exists: give --force to overwrite it") from None
    except OSError as e:
        raise MlaprofError(f"cannot write {path}: {disk_message(e)}") from None
    finally:
        with contextlib.suppress(OSError):  # a full disk must not leave half a report behind
            tmp.unlink(missing_ok=True)
    return path


def _fig_div(fig: Any, stem: str) -> str:
    import plotly.io as pio

    div = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        config=FIGURE_CONFIG,
        div_id=f"fig-{stem}",
        default_width="100%",
    )
    return f'<div class="fig" id="{stem}">{div}</div>'


WHATIF_COLUMNS = (
    ("model", "model"),
    ("policy", "policy"),
    ("device", "device"),
    ("qlen", "qlen"),
    ("batch", "batch"),
    ("context", "KV tokens"),
    ("rows", "rows"),
    ("padding_rows", "padding rows"),
    ("S_bug", "S bug"),
    ("S_fix", "S fix"),
    ("S_frozen", "S frozen"),
    ("occupancy_bug", "occupancy bug"),
    ("occupancy_fix", "occupancy fix"),
    ("t_fix_us", "t fix (us)"),
    ("slowdown_bug", "slowdown bug"),
    ("slowdown_frozen", "slowdown frozen"),
)
MAX_WHATIF_FIGURES = 12


def _num(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    return _e(v)


def render_whatif_html(whatif: Any, top: int = 25) -> str:
    """A what-if grid (:class:`mlaprof.whatif.WhatIf`) as one offline HTML page: provenance, the
    worst cells and a heatmap per (model, spec tokens, policy, device) slice."""
    c.go()
    from plotly.offline import get_plotlyjs

    from mlaprof.figures.whatif import whatif_heatmap

    cells = whatif.cells
    slices = cells[["model", "spec_tokens", "policy", "device"]].drop_duplicates()
    prov = whatif.provenance
    prov_rows = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v if not isinstance(v, dict) else '; '.join(f'{a}: {b}' for a, b in v.items()))}</td></tr>"
        for k, v in prov.items()
    )
    head = "".join(f"<th>{_e(t)}</th>" for _, t in WHATIF_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td class='num'>{_num(r[k])}</td>" for k, _ in WHATIF_COLUMNS) + "</tr>"
        for r in whatif.worst_rows(top)
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>mlaprof what-if</title>",
        f"<style>{CSS}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>',
        "</head><body><main>",
        f"<h1>mlaprof what-if: {len(cells):,} modelled cells</h1>",
        f'<div class="sub">written {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC by mlaprof; '
        "modelled, nothing was run; works offline.</div>",
        '<h2 id="provenance">Provenance</h2>',
        f'<table class="meta">{prov_rows}</table>',
        f'<h2 id="worst">Worst {min(top, len(whatif))} cells</h2>',
        f"<table><tr>{head}</tr>{body}</table>",
        f'<h2 id="figures">Heatmaps ({min(len(slices), MAX_WHATIF_FIGURES)} of {len(slices)} slices)</h2>',
    ]
    for i, r in enumerate(slices.head(MAX_WHATIF_FIGURES).itertuples()):
        fig = whatif_heatmap(whatif, r.model, r.policy, r.device, r.spec_tokens)
        parts.append(_fig_div(fig, f"whatif-{i}"))
    parts.append("</main></body></html>")
    return "\n".join(parts)


def write_whatif_html(whatif: Any, path: Path | str, top: int = 25, force: bool = False) -> Path:
    """Write :func:`render_whatif_html` to ``path`` (atomically). Returns the path."""
    refuse_overwrite(Path(path), force)
    return _write(Path(path), render_whatif_html(whatif, top), force)
