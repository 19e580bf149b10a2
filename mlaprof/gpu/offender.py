"""Naming the op that broke a graph capture (pure Python: tested on the CPU).

A capture attempt runs in a child process (a failed capture poisons the process that tried it).
The child watches every layer with the sync checker while capturing; the first finding inside the
capture region is the first guess about the offender, the CUDA error message says what the driver
saw. The child reports one JSON line; :func:`parse_child_output` reads it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.sync_kinds import OPS

RESULT_PREFIX = "MLAPROF_CAPTURE_RESULT "


@dataclass
class CaptureOutcome:
    status: str  # captured | failed
    layer: int | None = None  # layer being captured when it failed
    op: str | None = None
    location: str | None = None
    function: str | None = None
    message: str = ""
    capture_ns: int | None = None
    events: list[dict[str, Any]] | None = None  # every checker finding (first step)

    def to_json(self) -> str:
        return RESULT_PREFIX + json.dumps(self.__dict__)


def first_error_line(message: str) -> str:
    """The informative line of a CUDA/torch error (skips blank lines and the 'CUDA kernel errors
    might be asynchronously reported' boilerplate)."""
    for line in message.splitlines():
        s = line.strip()
        if s and not s.startswith(("CUDA kernel errors", "For debugging", "Compile with")):
            return s
    return message.strip()[:300]


def pick_offender(events: list[dict[str, Any]], failed_layer: int | None) -> dict[str, Any] | None:
    """The first sync/allocation finding of the layer that failed (else the first finding)."""
    blocking = [e for e in events if e.get("kind") in OPS]
    if failed_layer is not None:
        in_layer = [e for e in blocking if e.get("layer") == failed_layer]
        if in_layer:
            return in_layer[0]
    return blocking[0] if blocking else None


def outcome_from_failure(
    events: list[dict[str, Any]], failed_layer: int | None, error: str
) -> CaptureOutcome:
    e = pick_offender(events, failed_layer)
    return CaptureOutcome(
        status="failed",
        layer=e.get("layer") if e else failed_layer,
        op=e.get("op") if e else None,
        location=e.get("location") if e else None,
        function=e.get("function") if e else None,
        message=first_error_line(error),
        events=events,
    )


def parse_child_output(stdout: str, stderr: str = "", returncode: int = 0) -> CaptureOutcome:
    """The outcome line of a capture child; a child that died without one is a failed capture."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            try:
                doc = json.loads(line[len(RESULT_PREFIX) :])
            except json.JSONDecodeError as e:
                raise MlaprofError(f"capture child wrote a malformed result line: {e}") from None
            known = set(CaptureOutcome.__dataclass_fields__)
            return CaptureOutcome(**{k: v for k, v in doc.items() if k in known})
    tail = first_error_line(stderr.strip().splitlines()[-1]) if stderr.strip() else ""
    return CaptureOutcome(
        status="failed",
        message=f"capture child exited with code {returncode} without a result"
        + (f": {tail}" if tail else ""),
    )
