"""What an empty findings list says about the run: the one line every view prints under it.

No finding is a clean result only where everything a clean result rests on was judged: S
against what it deserves (a scenario's modelled splits, a trace's kernel grids under a known
rule, an engine's modelled batches), the capture, the syncs in the captured region and the
padding. Where any of it was not judged (a trace whose trust is unknown, a kernel without a known
split rule, padding not recorded, syncs not watched) the verdict is "unknown" and the line says
what was not judged and why, then what was; it never reads "OK" nor "as expected" over an
unjudged check. The views (terminal, Markdown, HTML, ``tui``, ``report --json``) print
:attr:`FindingsVerdict.line` and word nothing of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.capture_status import CaptureStatus
from mlaprof.analysis.section_base import Section, section
from mlaprof.analysis.typed_json import opt

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding
    from mlaprof.analysis.sections import (
        Capture,
        Padding,
        ShadowSection,
        SplitStep,
        SyncCounts,
        TraceSection,
    )

OK, UNKNOWN, FINDINGS = "ok", "unknown", "findings"

# what a clean result rests on, said after "no findings: "
SPLITS_AS_DESERVED = "the verify path captures and splits as deserved"
TRACE_AS_EXPECTED = "S and the kernel variants in this trace look as expected"
ENGINE_BATCHES = "the engine's verify batches and their modelled AITER splits raised none"
NO_SPLIT_METADATA = "no split metadata (S could not be compared to what it deserves)"
# the head of an UNKNOWN line, and of the list of what was judged after what was not
NOT_EVERYTHING = "no findings, but not everything was checked"
JUDGED = "judged with nothing found"
NOT_IN_SCOPE = "not judged"

# capture verdicts that say the captured region held no host sync (a capture would have failed)
_SYNC_FREE = frozenset({CaptureStatus.CAPTURED, CaptureStatus.REPLAYED})


@section
class FindingsVerdict(Section):
    """The findings list as a whole: ``verdict`` "ok" (none, and everything ``line`` names was
    judged), "unknown" (none, but a check a clean result rests on was not done: ``line`` says
    which and why, then what was judged), "findings" (the list holds some). ``label`` and
    ``line``: what every view prints under an empty list ("OK" or "UNKNOWN", then the line;
    None where the list holds findings: they speak for themselves)."""

    verdict: str
    label: str | None = opt()
    line: str | None = opt()


def findings_verdict(
    findings: list[Finding],
    splits: list[SplitStep],
    trace: TraceSection | None,
    shadow: ShadowSection | None,
    capture: Capture | None,
    padding: Padding,
    sync_counts: SyncCounts,
) -> FindingsVerdict:
    """The verdict of the findings list (see the module): each check a clean result rests on
    (S, capture, syncs, padding, the trace's trust), judged or not and why, from the run's
    sections (``capture`` None: a run with no capture section, nothing to judge there)."""
    if findings:
        return FindingsVerdict(verdict=FINDINGS)
    judged: list[str] = []
    missing: list[str] = []

    def check(name: str, why_not: str | None) -> None:
        if why_not is None:
            judged.append(name)
        else:
            missing.append(f"{name} not judged ({why_not})")

    if trace is not None:
        why = "; ".join(trace.trust.reasons) or "no reason recorded"
        check("trace trust", f"unknown: {why}" if trace.trust.verdict == UNKNOWN else None)
    basis = _basis(splits, trace, shadow)
    check("S", _s_unjudged(splits, trace, shadow))
    check("capture", _capture_unjudged(capture))
    check("syncs", _syncs_unjudged(sync_counts, capture))
    pad_why = _padding_unjudged(padding)
    # a trace's clean result names S and its kernels, never the padding (no trace format
    # records which rows are padding): said beside the OK as out of its scope, not as a gap in it
    scope = (
        f"; {NOT_IN_SCOPE}: padding ({pad_why})" if pad_why and basis == TRACE_AS_EXPECTED else ""
    )
    if not scope:
        check("padding", pad_why)
    if missing:
        if scope:  # beside the other gaps, the padding's is one of them
            check("padding", pad_why)
        line = f"{NOT_EVERYTHING}: " + "; ".join(missing)
        if judged:
            line += f". {JUDGED}: " + ", ".join(judged)
        return FindingsVerdict(verdict=UNKNOWN, label="UNKNOWN", line=line)
    return FindingsVerdict(verdict=OK, label="OK", line=f"no findings: {basis}{scope}")


def _basis(
    splits: list[SplitStep], trace: TraceSection | None, shadow: ShadowSection | None
) -> str:
    """What a clean result of this run's kind says it rests on."""
    if splits:
        return SPLITS_AS_DESERVED
    if trace is not None and trace.paths:
        return TRACE_AS_EXPECTED
    return ENGINE_BATCHES if shadow is not None and shadow.per_step else ""


def _s_unjudged(
    splits: list[SplitStep], trace: TraceSection | None, shadow: ShadowSection | None
) -> str | None:
    """Why S was not compared with what it deserves (None: it was, everywhere it ran)."""
    if splits:
        if any(r.on_device or (r.used is not None and r.deserved is not None) for r in splits):
            return None
        return "no policy row holds an S used and deserved"
    if trace is not None and trace.paths:
        checks = trace.coverage.collapse_checks
        if not checks:
            return "no split rule checked the trace's paths"
        # "not applicable": S decided on the device (never frozen), nothing to judge
        unchecked = [c for c in checks if c.status == "not checked"]
        if unchecked:
            return "; ".join(f"on {c.path} ({c.variant}): {c.why}" for c in unchecked)
        return None
    if shadow is not None and shadow.per_step:
        return None
    return NO_SPLIT_METADATA


def _capture_unjudged(capture: Capture | None) -> str | None:
    if capture is None or capture.status != CaptureStatus.UNKNOWN:
        return None
    return f"verdict unknown: {capture.why or capture.text}"


def _syncs_unjudged(sync_counts: SyncCounts, capture: Capture | None) -> str | None:
    """Why the captured region's syncs were not judged: none watched, and no capture or
    replay says the region held none (None: judged)."""
    if sync_counts.checked:
        return None
    if capture is not None and capture.status in _SYNC_FREE:
        return None
    return sync_counts.text


def _padding_unjudged(padding: Padding) -> str | None:
    if padding.steps is not None:
        return None
    return padding.text
