"""``mlaprof check MODULE:CALLABLE``: the capture gate for scripts and CI jobs, with exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mlaprof.errors import MlaprofError

EPILOG = """\
exit codes: 0 nothing would break capture; 1 syncs / data-dependent allocations found (listed
with layer, op and file:line); 2 bad input; 3 the callable raised, ended the process before the
check finished, or did not finish within --timeout. The check runs in a child process: only
mlaprof prints a verdict, and what the child recorded before it ended still counts.

--shapes builds random tensors: NAME=DIMxDIM[:dtype] becomes a keyword argument, DIMxDIM a
positional one (dtypes: float32, bf16, fp16, int32, int64). --setup MODULE:FN is called with them
first, OUTSIDE the region (where a metadata builder belongs), and returns the callable's
arguments (a dict, a tuple, or (tuple, dict)).

examples:
  mlaprof check mlaprof.gate.verify_case:legacy_flat --setup mlaprof.gate.verify_case:setup --shapes q=3x4x16
  mlaprof check mlaprof.gate.verify_case:native --setup mlaprof.gate.verify_case:setup --shapes q=3x4x16 --layers 4
  mlaprof check examples.toy_attn:decode --shapes q=8x16x576:bf16,kv=4096x576:bf16 --json
                                (your own function goes where examples.toy_attn:decode is)
"""

# a gated callable is one verify step's worth of ops: minutes mean it hangs (a lock, a socket)
DEFAULT_TIMEOUT_S = 300.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="fail (exit 1) if a callable would break CUDA/HIP graph capture",
        description="Run MODULE:CALLABLE inside a captured region (simulated by the sync checker "
        "on the CPU, a real capture on a GPU) and list every sync or data-dependent allocation "
        "with layer, op and file:line.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target", help="MODULE:CALLABLE to gate (importable; the working dir is on the path)"
    )
    p.add_argument("--shapes", default="", help="tensors to pass, e.g. q=8x4x16x576:bf16,4096x576")
    p.add_argument("--setup", metavar="MODULE:FN", help="builds the arguments from the tensors")
    p.add_argument(
        "--layers", type=int, default=1, help="calls, one region (layer) each (default 1)"
    )
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    p.add_argument(
        "--real-capture", choices=("auto", "never", "always"), default="auto",
        help="on a GPU, also capture for real after a clean check (default auto)",
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
        help=f"stop a callable or module that does not finish (default {DEFAULT_TIMEOUT_S:g} s)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the gate in a child (:mod:`mlaprof.gate.isolated`) and judge how it ended: the code
    under test can neither end the process into a pass nor print a verdict of its own."""
    from mlaprof.gate.isolated import ENDED, ERROR, FINISHED, RAISED, run_isolated

    try:
        if args.layers < 1:
            raise MlaprofError(f"--layers must be >= 1, got {args.layers}")
        if not args.timeout > 0:
            raise MlaprofError(f"--timeout must be > 0 seconds, got {args.timeout:g}")
        mod, sep, attr = args.target.partition(":")
        if not sep or not mod or not attr:
            raise MlaprofError(f"give MODULE:CALLABLE, got {args.target!r}")
        spec = {"target": args.target, "shapes": args.shapes, "setup": args.setup,
                "layers": args.layers, "device": args.device, "real_capture": args.real_capture}  # fmt: skip
        got = run_isolated(spec, args.timeout)
        if got.how == ERROR:
            raise MlaprofError(got.message)
    except MlaprofError as e:
        if args.json:  # --json always prints one JSON object, a refusal included
            print(json.dumps({"target": args.target, "ok": False, "error": str(e)}, indent=1))
        raise
    if got.how == RAISED:
        msg = f"mlaprof: {args.target} raised {got.message}"
        return _verdict(args, got.target, None, msg, 3)
    report = _report(got)
    if got.how == FINISHED:
        return _verdict(args, got.target, report, None, 0 if report.ok else 1)
    # ENDED or TIMED_OUT: what was recorded before still fails; nothing recorded is no pass
    msg = f"mlaprof: {got.message}"
    if got.how == ENDED and report.ok:
        return _verdict(args, got.target, report, msg, 3)
    return _verdict(args, got.target, report, msg, 3 if report.ok else 1)


def _report(got: Any) -> Any:
    from mlaprof.gate.core import GateReport
    from mlaprof.probes.sync_checker import SyncEvent

    d = got.report or {}
    events = [SyncEvent(**e) for e in got.events]
    region = d.get("region") or "ended before the check finished: events recorded until then"
    return GateReport(got.target, str(region), int(d.get("layers") or 0), events)


def _verdict(
    args: argparse.Namespace, target: str, report: Any, problem: str | None, rc: int
) -> int:
    """The one verdict: the report (text or JSON) on stdout, the problem on stderr."""
    if args.json:
        doc = report.to_dict() if report is not None else {"target": target, "findings": []}
        doc["ok"] = rc == 0
        if problem:
            doc["error"] = problem.removeprefix("mlaprof: ")
        print(json.dumps(doc, indent=1))
    elif report is not None and (rc != 3 or report.findings):
        print(report.format())
    if problem:
        print(problem, file=sys.stderr)
    return rc
