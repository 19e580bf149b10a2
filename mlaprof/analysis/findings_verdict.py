"""What an empty findings list says about the run: the one line every view prints under it.

No finding is a clean result only where the evidence the line names was there: the modelled
splits of a scenario run, the paths of an imported trace whose trust is known, an engine's
modelled batches. Where any of it is missing (a trace whose trust is unknown, a run with no split
metadata) the verdict is "unknown" and the line says what is missing; it never reads "OK". The
views (terminal, Markdown, HTML, ``tui``, ``report --json``) print :attr:`FindingsVerdict.line`
and word nothing of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.capture_status import CaptureStatus
from mlaprof.analysis.section_base import Section, section
from mlaprof.analysis.typed_json import opt

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding
    from mlaprof.analysis.sections import Capture, ShadowSection, SplitStep, TraceSection

OK, UNKNOWN, FINDINGS = "ok", "unknown", "findings"

# what a clean result rests on, said after "no findings: "
SPLITS_AS_DESERVED = "the verify path captures and splits as deserved"
TRACE_AS_EXPECTED = "S and the kernel variants in this trace look as expected"
ENGINE_BATCHES = "the engine's verify batches and their modelled AITER splits raised none"
NO_SPLIT_METADATA = "no split metadata (S could not be compared to what it deserves)"


@section
class FindingsVerdict(Section):
    """The findings list as a whole: ``verdict`` "ok" (none, and the evidence ``line`` names
    was there), "unknown" (none, but evidence a clean result would rest on is missing: ``line``
    says what), "findings" (the list holds some). ``label`` and ``line``: what every view prints
    under an empty list ("OK" or "UNKNOWN", then the line; None where the list holds findings:
    they speak for themselves)."""

    verdict: str
    label: str | None = opt()
    line: str | None = opt()


def findings_verdict(
    findings: list[Finding],
    splits: list[SplitStep],
    trace: TraceSection | None,
    shadow: ShadowSection | None,
    capture: Capture | None = None,
) -> FindingsVerdict:
    """The verdict of the findings list (see the module): what a clean result would rest on
    (the splits, the trace's paths, the engine's modelled batches) and what of it is missing.
    ``capture``: the run's capture verdict, which "captures ... as deserved" rests on (a run
    that watched no step for syncs and captured nothing has none)."""
    if findings:
        return FindingsVerdict(verdict=FINDINGS)
    missing: list[str] = []
    if trace is not None and trace.trust.verdict == UNKNOWN:
        why = "; ".join(trace.trust.reasons) or "no reason recorded"
        missing.append(f"trace trust unknown ({why})")
    if splits:
        basis = SPLITS_AS_DESERVED
        if capture is not None and capture.status == CaptureStatus.UNKNOWN:
            missing.append(f"capture verdict unknown ({capture.why or capture.text})")
    elif trace is not None and trace.paths:
        basis = TRACE_AS_EXPECTED
    elif shadow is not None and shadow.per_step:
        basis = ENGINE_BATCHES
    else:
        basis = ""
        missing.append(NO_SPLIT_METADATA)
    if missing:
        line = "no findings, but not everything was checked: " + "; ".join(missing)
        return FindingsVerdict(verdict=UNKNOWN, label="UNKNOWN", line=line)
    return FindingsVerdict(verdict=OK, label="OK", line=f"no findings: {basis}")
