"""The shipped demo runs beside the same runs recorded again on a GPU with today's code
(bench/gpu_call.sh): each run's verdicts side by side (capture, syncs, the run's own policy's S
used and deserved and the S its FULL graph replayed, padding rows, the findings by severity and
kind), and whether they are the same. Times and memory are measured again, so they are shown,
not compared. Usage: python bench/demo_rerecord.py SHIPPED_DIR NEW_DIR [--out results.json]."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import mlaprof
from mlaprof.analysis.run_summary import summary


def verdicts(doc: dict[str, Any]) -> dict[str, Any]:
    """What a re-recording must say again: verdicts and counts, not timings."""
    sc = doc.get("scenario") or {}
    own = [r for r in doc.get("splits") or [] if r.get("policy") == sc.get("policy")]
    worst = min(own, key=lambda r: (r.get("used") is None, r.get("used") or 0), default={})
    rep = doc.get("replayed_splits") or {}
    sync = doc.get("sync_counts") or {}
    pad = doc.get("padding") or {}
    return {
        "capture": [doc["capture"].get(k) for k in ("mode", "status", "effective_mode")],
        "syncs": [sync.get("checked"), sync.get("total"), sync.get("layers")],
        "S used, deserved (own policy, worst step)": [worst.get("used"), worst.get("deserved")],
        "S replayed": [rep.get("min"), rep.get("max")],
        "padding rows": [pad.get("real_rows"), pad.get("padding_rows")],
        "findings": sorted(
            f"{k[0]} {k[1]} x{n}"
            for k, n in Counter((f["severity"], f["kind"]) for f in doc["findings"]).items()
        ),  # fmt: skip
    }


def measured(doc: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """What was measured again (shown, not compared: another card, another day), and where."""
    t = doc.get("timing") or {}
    meta = json.loads((run_dir / "run.json").read_text())
    return {"median step": t.get("step_median_text"),
            "capture memory bytes": (doc.get("capture") or {}).get("memory_bytes"),
            "device": meta.get("device_name") or doc.get("device"),
            "versions": {k: v for k, v in (meta.get("versions") or {}).items() if v},
            "recorded": meta.get("created"), "git": meta.get("git")}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shipped", type=Path, help="the shipped runs (traces/demo)")
    ap.add_argument("new", type=Path, help="the same runs recorded again (unpacked traces.tgz)")
    ap.add_argument("--out", type=Path, help="write the comparison as JSON here")
    ap.add_argument("--note", default="", help="what the results file should say of the call")
    a = ap.parse_args(argv)
    rows, same_all = {}, True
    for new in sorted(p for p in a.new.iterdir() if (p / "run.json").exists()):
        old = a.shipped / new.name
        if not (old / "run.json").exists():
            print(f"{new.name}: no shipped run of that name", file=sys.stderr)
            continue
        docs, dirs = {}, {"shipped": old, "new": new}
        for side, d in dirs.items():
            with mlaprof.load(d) as run:
                docs[side] = summary(run)
        v = {side: verdicts(doc) for side, doc in docs.items()}
        diff = {
            k: [v["shipped"][k], v["new"][k]] for k in v["new"] if v["shipped"][k] != v["new"][k]
        }
        same_all &= not diff
        rows[new.name] = {"same_verdicts": not diff, "differs": diff, "verdicts": v["new"],
                          "measured": {s: measured(doc, dirs[s]) for s, doc in docs.items()}}  # fmt: skip
        print(f"{new.name}: {'same verdicts' if not diff else 'DIFFERS: ' + json.dumps(diff)}")
        print(f"    median step {rows[new.name]['measured']['shipped']['median step']} -> "
              f"{rows[new.name]['measured']['new']['median step']}")  # fmt: skip
    if a.out:
        # folder names only: a results file holds no machine's paths
        doc = {"shipped": a.shipped.name, "new": a.new.name, "note": a.note, "all_same": same_all,
               "runs": rows}  # fmt: skip
        a.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if same_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
