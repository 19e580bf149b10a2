"""Cost of the figure library and the HTML report on a DeepSeek-sized run (61 layers).

Writes a run shaped like a legacy-flat profile (per layer: 2 syncs, 2 kernels; every step: 3
split policies and a padding record), then measures on this machine:

- each report figure's build time (median of --repeat builds) and its JSON size;
- ``write_html_report`` time and file size (plotly.js inline, about 4.6 MB of it);
- when ``/usr/bin/chromium`` exists: headless Chromium opening the report offline until every
  figure is drawn (``--dump-dom``), and the number of drawn figures.

Usage: python bench/figures_bench.py [--steps 60] [--layers 61] [--repeat 3]
Results: bench/results/figures_bench.json (and the section in docs/performance.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mlaprof  # noqa: E402
from mlaprof.analysis.diff import diff  # noqa: E402
from mlaprof.analysis.run_summary import build_summary  # noqa: E402
from mlaprof.figures import RUN_FIGURES, run_diff  # noqa: E402
from mlaprof.figures.html_report import write_html_report  # noqa: E402
from mlaprof.figures.png import CHROMIUM, render_dom  # noqa: E402
from mlaprof.synthetic.figures import write_run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "figures_bench.json"))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mlaprof-figbench-"))
    t = time.perf_counter()
    bug = write_run(tmp, "bug", steps=a.steps, layers=a.layers, fallback_steps=(a.steps - 1,))
    fix = write_run(tmp, "fix", fixed=True, steps=a.steps, layers=a.layers, fallback_steps=())
    write_s = time.perf_counter() - t
    run, other = mlaprof.load(bug), mlaprof.load(fix)
    counts = {tbl: run.count(tbl) for tbl in ("steps", "layers", "syncs", "kernels", "splits")}

    figs: dict[str, dict[str, float]] = {}
    # the figures draw the summary's series (a view builds no summary of its own)
    s, so = build_summary(run), build_summary(other)
    builders = [*RUN_FIGURES, ("diff", lambda x: run_diff(x, so))]
    for stem, build in builders:
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            fig = build(s if stem in ("diff", "whatif") else s.series)
            times.append(time.perf_counter() - t)
        figs[stem] = {
            "build_ms": round(1e3 * statistics.median(times), 1),
            "json_kb": round(len(fig.to_json()) / 1024, 1),
        }
    t = time.perf_counter()
    path = write_html_report(s, tmp / "report.html", diff(s, so))
    html_s = time.perf_counter() - t
    doc: dict = {
        "bench": "figures_bench",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "run": {"steps": a.steps, "layers": a.layers, "rows": counts, "write_s": round(write_s, 1)},
        "figures": figs,
        "html": {"write_s": round(html_s, 2), "size_mb": round(path.stat().st_size / 2**20, 2)},
    }
    if CHROMIUM.exists():
        t = time.perf_counter()
        res = render_dom(path, tmp / "profile", timeout=300)
        doc["html"]["chromium_render_s"] = round(time.perf_counter() - t, 1)
        doc["html"]["figures_drawn"] = res.stdout.count('class="plot-container plotly"')
        doc["html"]["figures_expected"] = len(builders)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
