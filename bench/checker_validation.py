"""Validate the sync/capture checker against real CUDA graph capture, op by op (GPU only).

For each snippet: does ``torch.cuda.graph`` capture really fail (one child process per attempt,
since a failed capture poisons the process), and what does mlaprof's SyncChecker report? Writes
``$OUT/checker_validation.json`` (or --out) and prints a table.

    PYTHONPATH=. python3 bench/checker_validation.py --out bench/results
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

SNIPPETS = {
    "item": "x.sum().item()",
    "int(min)": "int(x.min())",
    "repeat_interleave(tensor)": "torch.repeat_interleave(x, r)",
    "repeat_interleave(output_size)": "torch.repeat_interleave(x, r, output_size=n_total)",
    "setitem scalar": "x[0] = 0",
    "fill_": "x.fill_(3)",
    "torch.tensor(py, cuda)": "torch.tensor(1.0, device='cuda')",
    "nonzero": "x.nonzero()",
    "bool mask index": "x[x > 2]",
    "tolist": "x.tolist()",
    "cpu()": "x.cpu()",
    "index_select": "x.index_select(0, idx)",
    "pinned h2d copy": "x.copy_(pinned, non_blocking=True)",
    "empty (static size)": "torch.empty(64, device='cuda')",
}

CHILD = """
import sys, json, torch
from mlaprof.probes.sync_checker import SyncChecker
code, mode = sys.argv[1], sys.argv[2]
x = torch.arange(8, device='cuda', dtype=torch.int64)
r = torch.full((8,), 2, device='cuda', dtype=torch.int64)
idx = torch.tensor([1, 2], device='cuda')
pinned = torch.arange(8, dtype=torch.int64).pin_memory()
n_total = 16
exec(code)  # warm-up, eager
torch.cuda.synchronize()
if mode == 'check':
    c = SyncChecker()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s), c.region(layer=0):
        exec(code)
    torch.cuda.synchronize()
    print(json.dumps([[e.kind, e.op] for e in c.events]))
else:
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            exec(code)
        torch.cuda.synchronize()
        print(json.dumps({'captured': True}))
    except Exception as e:
        print(json.dumps({'captured': False, 'error': str(e).splitlines()[0][:160]}))
"""


def child(code: str, mode: str) -> object:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, code, mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith(("[", "{"))]
    if not lines:
        return {"error": res.stderr.strip().splitlines()[-1][:200] if res.stderr else "no output"}
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", help="semicolon-separated snippet names (default: all)")
    args = ap.parse_args()
    only = set(args.only.split(";")) if args.only else None
    import torch

    rows = []
    for name, code in SNIPPETS.items():
        if only and name not in only:
            continue
        cap = child(code, "capture")
        chk = child(code, "check")
        flagged = isinstance(chk, list) and any(k in ("sync", "h2d") for k, _ in chk)
        captured = isinstance(cap, dict) and cap.get("captured") is True
        rows.append(
            {
                "snippet": name,
                "code": code,
                "captured": captured,
                "capture_error": cap.get("error") if isinstance(cap, dict) else None,
                "checker": chk,
                "flagged": flagged,
                "agree": flagged == (not captured),
            }
        )
        print(
            f"{name:32s} captured={captured!s:5s} flagged={flagged!s:5s} "
            f"{'OK' if flagged == (not captured) else 'DISAGREE'} {chk}"
        )
    doc = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": dt.date.today().isoformat(),
        "rows": rows,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "checker_validation.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
