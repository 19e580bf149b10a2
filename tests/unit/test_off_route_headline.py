"""A split policy vLLM's route does not run: its S and occupancy are a what-if wherever they are
named as the run's, said once by the analysis (``SplitStep.what_if``, ``SplitStep.on_condition``)
and rendered by every view. A CPU fp8 run routes to asm-persistent while its scenario policy is
aiter-gluon-v0.1.19: the headline read "KV splits (aiter-gluon-v0.1.19, worst step): S used 2"
and "occupancy (model): 9% with S used" as though that policy ran, the compare's provenance said
"model", the collapse findings said the route in words of their own and the split figures' titles
named the policy bare. An on-route run's labels never say what-if. Each test failed with its
rule broken. Runs are made in temporary folders."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import mlaprof
from mlaprof import cpu_runner
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.sections import WHAT_IF
from mlaprof.scenario import Scenario
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
CONDITION = (
    "if vLLM ran aiter-gluon-v0.1.19 (a what-if: this configuration takes asm-persistent "
    "[vLLM 0.34.0])"
)


def _run(tmp: Path, name: str, **kw: object):
    sc = dataclasses.replace(Scenario(), kv_lens=[70, 130, 200], layers=1, steps=2,
                             min_kv_mode="active-rows", **kw).validate()  # fmt: skip
    writer = cpu_runner.start_run(sc, "torch", "cpu", tmp, name=name, threads=1)
    cpu_runner.run_cpu(sc, "torch", writer)
    writer.finish()
    with mlaprof.load(tmp / name) as run:
        return tmp / name, build_summary(run)


@pytest.fixture(scope="module")
def fp8(tmp_path_factory: pytest.TempPathFactory):
    """Off the route: fp8 KV takes asm-persistent, the scenario models aiter-gluon-v0.1.19."""
    return _run(tmp_path_factory.mktemp("fp8"), "fp8", kv_cache_dtype="fp8")


@pytest.fixture(scope="module")
def bf16(tmp_path_factory: pytest.TempPathFactory):
    """On the route: the same scenario in bf16 takes the gluon path its policy models."""
    return _run(tmp_path_factory.mktemp("bf16"), "bf16")


def _split_rows(s):
    return [h for h in s.headline if h.label.startswith(("KV splits (", "occupancy ("))]


def test_the_analysis_decides_the_condition_once(fp8) -> None:
    _, s = fp8
    own = next(r for r in s.splits if r.policy == s.scenario.policy)
    assert own.on_route is False and own.what_if == CONDITION, own
    # the same words as the frozen S's, and kept where no frozen S stands
    assert own.frozen_what_if == own.what_if
    for r in s.splits:
        assert (r.what_if is not None) == (r.on_route is False), r
    rows = _split_rows(s)
    assert [h.label for h in rows] == [
        f"KV splits (aiter-gluon-v0.1.19, worst step, {WHAT_IF})",
        f"occupancy (model, {WHAT_IF})",
    ], rows
    assert all(h.value.startswith(f"{CONDITION}: ") for h in rows), rows
    # said once per row: the frozen S part does not repeat it
    assert all(h.value.count(CONDITION) == 1 for h in rows), rows


def test_every_view_says_the_headline_on_its_condition(fp8) -> None:
    run_dir, s = fp8
    views = every_view(run_dir, s, with_json=True)
    # Markdown's text escapes its punctuation ("\\[vLLM 0.34.0\\]"): read as the page shows it
    views["markdown"] = re.sub(r"\\(.)", r"\1", views["markdown"])
    for h in _split_rows(s):
        for name, text in views.items():
            assert h.label in text and h.value in text, (name, h.label, h.value)


def test_the_compare_says_each_side_on_its_condition(fp8) -> None:
    from mlaprof.analysis.diff import diff

    _, s = fp8
    table = {r["metric"]: r["provenance"] for r in diff(s, s).to_json()["table"]}
    for metric in (
        "KV splits S used (run's policy, worst step)",
        "S deserved by the real rows",
        "occupancy with S used (model)",
    ):
        assert CONDITION in table[metric], (metric, table[metric])


def test_the_split_figures_name_the_policy_as_a_what_if(fp8) -> None:
    from mlaprof.figures.splits import occupancy, splits_used_vs_deserved

    _, s = fp8
    for fig in (
        splits_used_vs_deserved(s, by="step"),
        splits_used_vs_deserved(s, by="capture_size"),
        splits_used_vs_deserved(s, by="layer"),
        occupancy(s, by="step"),
    ):
        title = fig.layout.title.text
        assert f"aiter-gluon-v0.1.19 ({WHAT_IF})" in title, title
        assert CONDITION in fig.layout.xaxis.title.text, fig.layout.xaxis.title.text


def test_an_on_route_run_says_no_what_if(bf16) -> None:
    from mlaprof.analysis.diff import diff
    from mlaprof.figures.splits import splits_used_vs_deserved

    run_dir, s = bf16
    own = next(r for r in s.splits if r.policy == s.scenario.policy)
    assert own.on_route is True and own.what_if is None, own
    rows = _split_rows(s)
    assert rows and all(WHAT_IF not in h.label and "if vLLM ran" not in h.value for h in rows)
    assert [h.label for h in rows][0] == "KV splits (aiter-gluon-v0.1.19, worst step)"
    views = every_view(run_dir, s)
    for h in rows:
        assert all(h.label in text for text in views.values()), h.label
    table = {r["metric"]: r["provenance"] for r in diff(s, s).to_json()["table"]}
    assert table["KV splits S used (run's policy, worst step)"] == "model", table
    title = splits_used_vs_deserved(s, by="step").layout.title.text
    assert WHAT_IF not in title, title


def test_a_headline_said_as_a_fact_is_a_contradiction(fp8) -> None:
    """The property every shipped run is held to fires where the headline drops the condition."""
    from mlaprof.analysis.contradictions import contradictions
    from mlaprof.analysis.sections import HeadlineRow

    _, s = fp8
    bare = [
        HeadlineRow(label="occupancy (model)", value=h.value, provenance=h.provenance)
        if h.label.startswith("occupancy (")
        else h
        for h in s.headline
    ]
    assert contradictions(s) == []
    said = contradictions(dataclasses.replace(s, headline=bare))
    assert any("names aiter-gluon-v0.1.19's S as the run's" in c for c in said), said
