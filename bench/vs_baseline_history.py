"""Every side-by-side run of ``bench/vs_baseline.py`` as one Markdown table, a row a results file.

The figures are read from the files as written (``ratios``, and each figure's per-tree
``summary``); a figure a run did not measure is left empty. docs/performance.md embeds this
table (section "Every side-by-side run"): regenerate it there after committing a new results
file, so the document and the files cannot tell different stories.

    python bench/vs_baseline_history.py [bench/results] > table.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _num(x: Any) -> str:
    return "" if x is None else f"{x:.3f}"


def _head(doc: dict[str, Any], fig: str, key: str, part: str | None = None) -> float | None:
    """HEAD's median of ``key`` (cpu_s, wall_s, peak_rss_mib) in figure ``fig``, of its
    ``part`` (a fleet's import or report) where given."""
    f = doc.get("figures", {}).get(fig)
    if not f or "summary" not in f:
        return None
    s = f["summary"]["head"]
    if part is not None:
        s = s.get(part) or {}
    v = s.get(key)
    return None if v is None else v["median"]


def _pair(cpu: float | None, wall: float | None) -> str:
    if cpu is None:
        return ""
    return f"{cpu:.3f}" + ("" if wall is None else f" ({wall:.3f})")


def _pairs(doc: dict[str, Any]) -> str:
    ns = {f.get("n_pairs") for f in doc.get("figures", {}).values() if isinstance(f, dict)}
    ns.discard(None)
    return "/".join(str(n) for n in sorted(ns)) if ns else ""


def _startup(doc: dict[str, Any], label: str) -> float | None:
    s = doc.get("figures", {}).get("startup", {}).get(label)
    return None if not s or "summary" not in s else s["summary"]["head"]["cpu_s"]["median"]


def row(path: Path) -> tuple[str, list[str]]:
    """(date, cells) of one results file."""
    doc = json.loads(path.read_text())
    r = doc.get("ratios", {})
    fleet = doc.get("fleet") or {}
    size = f"{fleet.get('ranks', '?')} x {fleet.get('dispatches', 0) / 1e6:g}M"
    csv_peak = _head(doc, "fleet_csv", "peak_rss_mib")
    rocpd_peak = _head(doc, "fleet_rocpd", "peak_rss_mib", "import")
    # half up, as the docs round MiB (634.5 is written 635)
    peaks = " / ".join("-" if p is None else str(int(p + 0.5)) for p in (csv_peak, rocpd_peak))
    date = str(doc.get("date", ""))[:16].replace("T", " ")
    cells = [
        date,
        str(doc.get("head", ""))[:7] + ("+" if doc.get("head_dirty") else ""),
        str(doc.get("baseline", ""))[:7],
        _pairs(doc),
        _pair(r.get("import_1m_ratio"), r.get("import_1m_ratio_wall")),
        _pair(r.get("fleet_csv_ratio"), r.get("fleet_csv_ratio_wall")),
        _pair(r.get("fleet_rocpd_ratio"), r.get("fleet_rocpd_ratio_wall")),
        size if "fleet_csv" in doc.get("figures", {}) else "",
        _pair(r.get("import_1m_per_read_csv_head"), r.get("import_1m_per_read_csv_head_wall")),
        _pair(r.get("read_arrow_per_read_csv"), r.get("read_arrow_per_read_csv_wall")),
        _num(_startup(doc, "report_json_demo")),
        _num(_startup(doc, "run_default")),
        _num(_startup(doc, "version")),
        "" if peaks == "- / -" else peaks,
        " / ".join(_num(r.get(f"{m}_import_cpu_s")) for m in ("pandas", "torch")).strip(" /"),
        f"`{path.name}`",
    ]
    return date, cells


HEADER = (
    "| date (UTC) | HEAD | baseline | pairs | 1M import, CPU (wall) | CSV fleet | rocpd fleet"
    " | fleet | 1M import / `read_csv` | Arrow's own read / `read_csv` | first `report --json` s"
    " | default `run` s"
    " | `--version` s | fleet peaks MiB, CSV / rocpd | bare `import pandas` / `torch` s | file |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    "| goal / floor | | | | 0.8 / 1.0 | 0.7 / 1.0 | 0.7 / 1.0 | | 0.5 / 1.0 | | 0.2 / 0.4"
    " | 1 / 2 | 0.1 / 0.2 | 1,024 / 2,048 | | |\n"
)


def table(folder: Path = RESULTS) -> str:
    """The Markdown table of every ``vs_baseline_*.json`` under ``folder``, newest first."""
    rows = sorted((row(p) for p in folder.glob("vs_baseline_*.json")), reverse=True)
    return HEADER + "".join("| " + " | ".join(cells) + " |\n" for _, cells in rows)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("folder", nargs="?", type=Path, default=RESULTS,
                    help="folder of vs_baseline_*.json files (default: bench/results)")  # fmt: skip
    folder = ap.parse_args().folder
    if not any(folder.glob("vs_baseline_*.json")):
        raise SystemExit(
            f"{folder}: no vs_baseline_*.json results file (bench/vs_baseline.py writes them)"
        )
    sys.stdout.write(table(folder))


if __name__ == "__main__":
    main()
