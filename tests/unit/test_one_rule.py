"""One piece of code per rule: one collapse-finding builder, one path/version -> policy selection,
one AITER version parser, one importer table, one capture label table, one run status vocabulary,
and summary messages a newer one supersedes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlaprof.analysis import shadow
from mlaprof.analysis.collapse import collapse_finding
from mlaprof.commands import import_cmd
from mlaprof.importers.common import ImportSummary
from mlaprof.scenario import DEVICES
from mlaprof.splits import releases, routing

PKG = Path(__file__).resolve().parents[2] / "mlaprof"


def _sources() -> dict[str, str]:
    return {str(p.relative_to(PKG)): p.read_text() for p in PKG.rglob("*.py")}


def test_only_collapse_module_builds_a_collapse_finding() -> None:
    builders = [f for f, text in _sources().items() if '"split-collapse"' in text]
    assert builders == ["analysis/collapse.py"]


def test_the_engine_shadow_says_a_collapse_as_the_collapse_builder_does() -> None:
    from mlaprof.analysis.sections import AiterRuleSection, ShadowSection

    rule = AiterRuleSection("0.1.20", "v0.1.20", "aiter-gluon-v0.1.20", True, "v0.1.20")
    sh = ShadowSection(provenance="modelled from recorded batches (AITER 0.1.20; on mi355x)",
                       aiter_rule=rule, device="mi355x", aiter="0.1.20", paths={},
                       s_bug=[1, 2], s_fix=[8, 16], s_frozen=[8, 16], s_deserved=[None, None],
                       occupancy_fix=[0.5, 0.5], steps=5, steps_collapsed_by_bug=3,
                       steps_frozen_below_fix=0, padding_rows=0, real_rows=10,
                       capture_sizes=[4, 8], policies=["aiter-gluon-v0.1.20"], per_step=[])  # fmt: skip
    (f,) = [f for f in shadow.shadow_findings(sh) if f.kind == "split-collapse"]
    ref = collapse_finding("x", 1, 8, None, "", "", {}, modelled="m")
    # the one wording (three numbers) after the model's tag; modelled: a warning, never critical
    assert f.title.startswith(f"[{sh.provenance}] KV splits collapsed ")
    assert f.title.endswith(ref.title.split(": ", 1)[1])
    assert "on 3 of 5 steps" in f.title
    assert f.severity == ref.severity == "warning"


def test_one_path_to_policy_selection() -> None:
    # every route path's policy comes from routing.path_policy, the engine shadow's included
    for name, dev in DEVICES.items():
        for heads, qlen in ((16, 4), (128, 2), (8, 3), (16, 1)):
            path, policy, _ = shadow.route(heads, qlen, dev, "0.1.19.post2")
            want = routing.path_policy(path, "0.1.19.post2")
            assert policy == (want or "vllm-triton"), (name, path)
    assert routing.path_policy("gluon-verify", "0.1.21") == releases.policy_for("0.1.21")
    with pytest.raises(Exception, match="no route path"):
        routing.path_policy("no-such-path", "0.1.20")
    # no other module maps a route path to a split policy in a table of its own
    paths = "|".join(re.escape(p) for p in routing.PATHS)
    table = re.compile(rf'"(?:{paths})"\s*:\s*\(?\s*"(?:aiter-|vllm-)')
    owners = [f for f, text in _sources().items() if table.search(text)]
    assert owners == ["splits/routing.py"]


def test_one_aiter_version_parser() -> None:
    from mlaprof.integrations import aiter_env

    assert aiter_env.parse_version is releases.parse_version
    assert aiter_env.format_version is releases.tag
    assert releases.parse_version("0.1.7.post2.dev18") == (0, 1, 7, 2)
    assert releases.parse_release("0.1.20.dev3+g1a2b") == ((0, 1, 20, 0), False)
    assert releases.parse_version("main") is None
    # the release pattern (a "post" number) is written once
    owners = [f for f, text in _sources().items() if re.search(r"post\(\\d\+\)", text)]
    assert owners == ["splits/releases.py"]


def test_import_dispatches_through_the_importer_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple] = []

    def fake(path: Path, traces: Path, name: str | None, *rest: object) -> tuple:
        seen.append((path.name, name, len(rest)))
        return traces / "r", ImportSummary(source="fake", files=[str(path)], rows={})

    monkeypatch.setattr(import_cmd.Importer, "load", lambda self: fake)
    from mlaprof.cli import main

    (tmp_path / "x").write_text("x")  # the command refuses a missing or empty path itself
    for kind, importer in import_cmd.IMPORTERS.items():
        assert main(["import", kind, str(tmp_path / "x"), "--traces", str(tmp_path)]) == 0
        assert seen[-1] == ("x", None, 1 if importer.kernels else 0)
    assert len(seen) == len(import_cmd.IMPORTERS) == 3
    assert "args.kind ==" not in (PKG / "commands" / "import_cmd.py").read_text()
    capsys.readouterr()


def test_a_newer_summary_supersedes_a_queued_one() -> None:
    pytest.importorskip("textual")
    from mlaprof.tui.messages import DrillDown, RunProblem, SummaryUpdated

    assert SummaryUpdated(None).can_replace(SummaryUpdated(None))
    assert not SummaryUpdated(None).can_replace(DrillDown(0))
    assert RunProblem("b").can_replace(RunProblem("a"))
    assert not DrillDown(1).can_replace(DrillDown(0))  # each drill-down is the user's


def test_one_capture_label_table() -> None:
    """A capture status is worded in one table (capture_status.CAPTURE_LABELS): no other module
    writes one of its labels, and every producer's verdict carries its status's label (an
    imported trace's mixed steps included: the evidence names what was mixed)."""
    import pandas as pd

    from mlaprof.analysis.capture import step_mode_evidence
    from mlaprof.analysis.capture_status import CAPTURE_LABELS, CaptureStatus
    from mlaprof.analysis.evidence.common import capture
    from mlaprof.analysis.evidence.model import run_meta

    worded = [lbl for st, lbl in CAPTURE_LABELS.items() if lbl != str(st)]
    assert len(worded) >= 6
    owners = {f for f, text in _sources().items() for lbl in worded if f'"{lbl}' in text}
    assert owners == {"analysis/capture_status.py"}
    for st in CaptureStatus:
        cap = capture(st, "p", why="w")
        assert cap.label == (f"unknown ({cap.why})" if st is CaptureStatus.UNKNOWN
                             else CAPTURE_LABELS[st])  # fmt: skip
    steps = pd.DataFrame({"backend": ["gluon"] * 2, "graph_mode": ["graph", "eager"],
                          "rank": [0, 0], "step": [0, 1]})  # fmt: skip
    mixed = step_mode_evidence(run_meta({}), steps)
    assert mixed.label == CAPTURE_LABELS[CaptureStatus.MIXED]


def test_one_run_status_vocabulary() -> None:
    """A run's status is one StrEnum (store.liveness.RunStatus): no other module declares the
    statuses as an enum or lists two of them in a table of its own."""
    import ast

    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.store.liveness import RunStatus

    names = {str(s) for s in RunStatus}
    owners = set()
    for f, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.ClassDef)):
                body = node.keys if isinstance(node, ast.Dict) else (
                    [n.value for n in node.body if isinstance(n, ast.Assign)]
                    if isinstance(node, ast.ClassDef) else node.elts)  # fmt: skip
                said = {k.value for k in body if isinstance(k, ast.Constant)} & names
                if len(said) >= 2:
                    owners.add(f)
    assert owners == {"store/liveness.py"}
    assert RunSummary.__annotations__["status"] == "RunStatus"  # the summary's status is it


@pytest.mark.parametrize(
    ("used", "deserved", "want"),
    [(1, 4, True), (2, 4, True), (3, 4, False), (16, 16, False), (None, 4, False),
     (float("nan"), 4, False), (4, None, False), (0, 4, False), (1, 0, False)],
)  # fmt: skip
def test_one_scalar_collapse_guard(used: float | None, deserved: float | None, want: bool) -> None:
    """A recorded pair is judged by one guard (splits.policies.collapsed_known): an unknown S or
    an S of 0 (no split count) is never a collapse, and a step's splits, a layer's row and the
    analysis' collapse builder all ask it (they once kept their own guards, one reading S 0 as a
    collapse, another not)."""
    from mlaprof.analysis.collapse import is_collapsed
    from mlaprof.splits.policies import collapsed_known
    from mlaprof.step_splits import StepSplits

    assert collapsed_known(used, deserved) is want
    assert is_collapsed(used, deserved) is want
    step = StepSplits(policy="p", used=used, deserved=deserved, frozen=None, all_rows=None,
                      active_rows=None, min_kv_used=0, min_kv_deserved=0, occupancy_used=None,
                      occupancy_deserved=None)  # fmt: skip
    assert step.collapsed is want
    # the summary's rows ask the same guard: a policy's worst-step row, a shadow step
    from dataclasses import fields

    from mlaprof.analysis.sections import ShadowStep, SplitStep

    for cls, (u, d) in ((SplitStep, ("used", "deserved")), (ShadowStep, ("s_bug", "s_fix"))):
        row = cls(**{f.name: None for f in fields(cls)} | {u: used, d: deserved})
        assert row.collapsed is want, cls.__name__
