"""Make small, path-free copies of a real vLLM recording for tests/data/vllm/.

    python scripts/trim_vllm_recording.py log SRC.log DST.log
    python scripts/trim_vllm_recording.py trace SRC.pt.trace.json.gz DST.pt.trace.json.gz [--steps N]

Logs, and traces without ``--steps``: absolute paths (the worktree, the profiler folder,
site-packages, /tmp names) become relative or ``<...>`` placeholders; every other byte is kept
(the trace keeps Kineto's own layout). Traces with ``--steps N``: the events of the first N
vLLM step annotations (``execute_context_...``) with everything inside their window, plus every
metadata event; string values lose their absolute paths the same way. A trace with no step
annotation (vLLM's front-end trace) keeps its metadata and its first 200 events.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

_PATHS = (
    (re.compile(r"/[\w.+-]+(?:/[\w.+-]+)*/site-packages/"), "<site-packages>/"),
    (re.compile(r"/root/\.pyenv/versions/[\d.]+/lib/python[\d.]+/"), "<python>/"),
    (re.compile(r"/work/wt/[\w-]+/"), ""),
    (re.compile(r"/tmp/31vllm-rec/"), ""),
    (re.compile(r"/tmp/(?=[\w.-])"), "<tmp>/"),
)


def scrub(text: str) -> str:
    for rx, new in _PATHS:
        text = rx.sub(new, text)
    return text


def _scrub_value(v: Any) -> Any:
    if isinstance(v, str):
        return scrub(v)
    if isinstance(v, list):
        return [_scrub_value(x) for x in v]
    if isinstance(v, dict):
        return {k: _scrub_value(x) for k, x in v.items()}
    return v


def trim_trace(doc: dict[str, Any], steps: int) -> dict[str, Any]:
    ev = doc["traceEvents"]
    ann = sorted(
        (
            e
            for e in ev
            if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("execute_")
        ),
        key=lambda e: e["ts"],
    )
    meta = [e for e in ev if e.get("ph") == "M"]
    if ann:
        t0 = ann[0]["ts"]
        last = ann[min(steps, len(ann)) - 1]
        t1 = last["ts"] + last.get("dur", 0)
        keep = [e for e in ev if e.get("ph") != "M" and "ts" in e and t0 <= e["ts"] <= t1]
    else:
        keep = [e for e in ev if e.get("ph") != "M"][:200]
    out = {k: v for k, v in doc.items() if k != "traceEvents"}
    out["traceEvents"] = meta + keep
    return _scrub_value(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("log", "trace"))
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--steps", type=int, help="keep only the first N vLLM steps")
    args = ap.parse_args()
    src, dst = Path(args.src), Path(args.dst)
    if args.kind == "log":
        dst.write_text(scrub(src.read_text()))
        return 0
    raw = src.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    if args.steps is None:
        data = scrub(text).encode()
    else:
        data = json.dumps(trim_trace(json.loads(text), args.steps), separators=(",", ":")).encode()
    dst.write_bytes(gzip.compress(data, 9, mtime=0) if dst.name.endswith(".gz") else data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
