"""``mlaprof report RUN``: findings of a stored run (terminal table, --json, --html, --png)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mlaprof.commands.common import add_traces_arg, resolve_run
from mlaprof.textsafe import plain

EPILOG = """\
examples:
  mlaprof report traces/<run>            findings table
  mlaprof report latest --json           one JSON object: syncs, splits, padding, capture, findings
  mlaprof report <run> --html report.html   self-contained offline HTML with figures
  mlaprof report <bug-run> --compare <fix-run>   what changed between two runs
  mlaprof report latest --format md      Markdown for a CI comment (findings, headline, every
                                         section folded, diff)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="findings of a stored run",
        description="Analyse a stored run: syncs in the captured region, KV splits used vs "
        "deserved per policy, FULL-graph padding, capture status and memory, timing.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="run folder, run name under the traces folder, or 'latest'")
    p.add_argument("--json", action="store_true", help="print one JSON object (= --format json)")
    p.add_argument(
        "--format",
        choices=("text", "json", "md"),
        default=None,
        help="text (default: the terminal report), json, or md (Markdown, e.g. a CI comment)",
    )
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    p.add_argument("--png", metavar="DIR", help="write the figures as PNG files (needs Chromium)")
    p.add_argument("--compare", metavar="RUN2", help="compare with a second run (e.g. the fix)")
    p.add_argument("--force", action="store_true",
                   help="overwrite the --html file or the --png figures if they exist")  # fmt: skip
    p.add_argument("--verbose", "-v", action="store_true", help="also list every sync")
    p.add_argument("--shadow-device", metavar="NAME", default=None,
                   help="a recorded vLLM engine: device the AITER shadow analysis models "
                   "(mi355x, mi300x, ...; default mi355x)")  # fmt: skip
    p.add_argument("--shadow-aiter", metavar="VERSION", default=None,
                   help="a recorded vLLM engine: AITER version it models (0.1.19, "
                   "0.1.19.post2, 0.1.20; default 0.1.20)")  # fmt: skip
    p.add_argument("--no-cache", action="store_true",
                   help="analyse the run anew: neither read nor keep the JSON document the run "
                   "folder keeps for the next report (docs/store.md)")  # fmt: skip
    add_traces_arg(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from mlaprof.errors import MlaprofError
    from mlaprof.store import summary_cache
    from mlaprof.store.reader import load

    fmt = args.format or ("json" if args.json else None)
    if args.json and args.format not in (None, "json"):
        raise MlaprofError(f"--json and --format {args.format} ask for two outputs; choose one")
    shadow = _shadow(args)
    run = load(resolve_run(args.run, args.traces))
    other = load(resolve_run(args.compare, args.traces)) if args.compare else None
    # the run's JSON document as the last report left it, where nothing it came from changed
    # (the store's files, the run's status, the code): no analysis, no pandas
    kept = None if args.no_cache or other is not None else summary_cache.key(run, shadow)
    if fmt == "json" and not (args.html or args.png):
        text = summary_cache.read(run, kept)
        if text is not None:
            sys.stdout.write(text)
            return 0
    # the analysis (pandas) only once the runs open: a wrong name is an error in a blink
    from mlaprof.import_gc import uncollected

    with uncollected():
        from mlaprof.analysis import run_summary as rs
        from mlaprof.reporters.renderer import JsonRenderer, renderer

    # each run's summary is built once, here; every view below renders it and builds nothing
    # (the figures' series only for a view that draws them: the terminal, Markdown and JSON
    # views and the diff read none)
    figures = bool(args.html or args.png)
    s = rs.build_summary(run, shadow, series=figures)
    # the JSON document, encoded once: kept for the next report and, for --json, printed
    doc = JsonRenderer().render(s) if kept is not None else None
    if doc is not None:
        summary_cache.write(run, kept, doc)
    d = None
    if other is not None:
        from mlaprof.analysis.diff import diff  # its tables only where a second run is asked

        d = diff(s, rs.build_summary(other, series=figures))
    if args.html:
        from mlaprof.figures.html_report import write_html_report

        print(f"wrote {plain(write_html_report(s, Path(args.html), d, force=args.force))}")
    if args.png:
        from mlaprof.figures.png import PngRenderer

        sys.stdout.write(PngRenderer(Path(args.png), force=args.force).render(s, d))
    if fmt is None and (args.html or args.png):
        return 0
    if fmt == "json" and d is None and doc is not None:
        sys.stdout.write(doc)  # the very text JsonRenderer().render(s) gives (no diff here)
    else:
        sys.stdout.write(renderer(fmt or "text", verbose=args.verbose).render(s, d))
    return 0


def _shadow(args: argparse.Namespace) -> dict[str, str]:
    """The shadow-analysis choices, checked up front (a bad one is an error on any run)."""
    out = {k: v for k, v in (("device", args.shadow_device), ("aiter", args.shadow_aiter)) if v}
    if out:  # nothing to check where none was given (and no model's tables to import)
        from mlaprof.analysis.shadow import check_shadow

        check_shadow(**out)
    return out
