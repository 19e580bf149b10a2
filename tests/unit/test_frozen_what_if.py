"""A frozen S of a policy vLLM's route does not run is a what-if, said so in every view.

An fp8 CPU run routes to asm-persistent (S decided on the device) while its scenario policy is
aiter-gluon-v0.1.19: the findings judged that policy as a what-if, yet the splits table, the
headline ("a FULL graph captured by vLLM's dummy run would replay S = 1"), full_graph_splits and
the split figures showed its modelled frozen S as what the run's graph froze. The splits rows
now carry the condition (``on_route``, ``frozen_what_if``: analysis.splits.frozen_what_if), set
once, and every view renders from it; the frozen S itself is kept (the GPU demos' asm and
Triton rows keep their what-if column). Each test failed with the rule broken. Runs are made in
temporary folders."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

import mlaprof
from mlaprof import cpu_runner
from mlaprof.analysis.contradictions import contradictions
from mlaprof.analysis.run_summary import build_summary
from mlaprof.scenario import Scenario
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
ROUTE = "asm-persistent"


@pytest.fixture(scope="module")
def fp8(tmp_path_factory: pytest.TempPathFactory):
    """The fp8 run: active rows, so the dummy run's frozen S (1) differs from S used (2) and
    the headline says it."""
    tmp = tmp_path_factory.mktemp("fp8")
    sc = dataclasses.replace(Scenario(), kv_lens=[70, 130, 200], layers=1, steps=2,
                             kv_cache_dtype="fp8", min_kv_mode="active-rows").validate()  # fmt: skip
    writer = cpu_runner.start_run(sc, "torch", "cpu", tmp, name="fp8", threads=1)
    cpu_runner.run_cpu(sc, "torch", writer)
    writer.finish()
    with mlaprof.load(tmp / "fp8") as run:
        return build_summary(run)


def _own(s):
    return next(r for r in s.splits if r.policy == s.scenario.policy)


def test_the_rows_say_an_off_route_frozen_s_is_a_what_if(fp8) -> None:
    s = fp8
    assert s.route is not None and s.route.path == ROUTE
    own = _own(s)
    assert own.policy == "aiter-gluon-v0.1.19" and own.on_route is False
    # kept, never blanked: said on its condition
    assert own.frozen == 1 and own.used == 2
    assert own.frozen_what_if == (
        "if vLLM ran aiter-gluon-v0.1.19 (a what-if: this configuration takes asm-persistent "
        "[vLLM 0.34.0])"
    ), own.frozen_what_if
    for r in s.splits:
        if r.policy == "aiter-asm-persistent":  # the route's
            assert r.on_route is True and r.frozen_what_if is None, r
        elif r.policy == "mlaprof-triton":  # mlaprof's kernel: on no route of vLLM's, no what-if
            assert r.on_route is None and r.frozen_what_if is None and r.what_if is None, r
        else:
            assert r.on_route is False, r
            assert (r.frozen_what_if is not None) == (r.frozen is not None), r
            if r.frozen is not None:
                assert r.frozen_what_if.startswith(f"if vLLM ran {r.policy} (a what-if"), r
    assert contradictions(s) == []
    doc = s.to_json()
    (row,) = [r for r in doc["splits"] if r["policy"] == own.policy]
    assert row["on_route"] is False and row["frozen_what_if"] == own.frozen_what_if


def test_every_view_says_the_what_if(fp8) -> None:
    from mlaprof.analysis.diff import diff
    from mlaprof.reporters.renderer import renderer
    from mlaprof.reporters.rows import WHAT_IF, split_cells
    from mlaprof.tui.text import split_notes, split_table

    s = fp8
    own = _own(s)
    assert split_cells(own).frozen == f"1 {WHAT_IF}"
    line = (
        f"{WHAT_IF} (aiter-gluon-v0.1.19, aiter-gluon-v0.1.19.post2, aiter-gluon-v0.1.20, "
        "aiter-gluon-v0.1.20.post1, aiter-asm, aiter-asm-fp8, vllm-triton, vllm-triton-verify): "
        "S and occupancy hold only if vLLM ran that policy (a what-if: this configuration takes "
        "asm-persistent [vLLM 0.34.0])"
    )
    text = " ".join(renderer("text").render(s).split())  # the terminal folds long lines
    assert line in text and "1 what-if" in text
    # the headline's graph S: on its condition, never as what the run's graph replays
    (head,) = [h.value for h in s.headline if h.label.startswith("KV splits")]
    assert head.startswith(f"{own.frozen_what_if}: S used 2") and "; a FULL graph captured by " \
        "vLLM's dummy run would replay S = 1 (modelled)" in head, head  # fmt: skip
    from mlaprof.figures.html_report import HtmlRenderer

    for out in (renderer("md").render(s), HtmlRenderer().render(s)):
        assert "1 what-if" in out and "hold only if vLLM ran that policy" in out, out[:200]
    g = s.full_graph_splits
    assert g.modelled == 1 and g.modelled_what_if == own.frozen_what_if
    (row,) = [r for r in diff(s, s).to_json()["table"]
              if r["metric"].startswith("S a FULL graph replays")]  # fmt: skip
    assert own.frozen_what_if in row["provenance"], row
    view = SimpleNamespace(splits=s.splits)  # the dashboard's panel reads the view's rows
    _, rows = split_table(view)
    assert [f"1 {WHAT_IF}"] == [r[4] for r in rows if r[1].startswith("aiter-gluon-v0.1.19")][:1]
    assert " ".join(split_notes(view)[-1].split()) == line


def test_the_split_figures_draw_a_what_if_frozen_s_as_one(fp8) -> None:
    from mlaprof.figures.splits import WHAT_IF_FROZEN, splits_used_vs_deserved

    s = fp8
    own = _own(s)
    pts = [p for p in s.series.ranks[0].splits if p.policy == own.policy]
    assert pts and all(p.frozen_what_if == own.frozen_what_if for p in pts if p.frozen is not None)
    by_step = splits_used_vs_deserved(s)
    (frozen,) = [t for t in by_step.data if "frozen" in t.name]
    assert own.frozen_what_if in frozen.name, frozen.name
    bars = splits_used_vs_deserved(s, by="policy")
    names = [t.name for t in bars.data]
    # no bar reads as the S the run's graph froze: every frozen S here is a what-if
    assert not any(n.startswith("S frozen into a FULL graph") for n in names), names
    (what_if,) = [t for t in bars.data if t.name == WHAT_IF_FROZEN]
    said = dict(zip(what_if.x, what_if.customdata, strict=True))
    assert said[own.policy] == own.frozen_what_if and what_if.marker.pattern.shape == "/"
    assert "%{customdata}" in what_if.hovertemplate


def test_a_bare_what_if_frozen_s_is_a_contradiction(fp8) -> None:
    """The property every shipped run is held to fires where a view would show it as a fact."""
    s = fp8
    bare = dataclasses.replace(
        s, splits=[dataclasses.replace(r, frozen_what_if=None) for r in s.splits]
    )
    assert any("what-if frozen S in the splits table" in c for c in contradictions(bare))
    g = dataclasses.replace(s.full_graph_splits, modelled_what_if=None)
    assert any("full_graph_splits" in c
               for c in contradictions(dataclasses.replace(s, full_graph_splits=g)))  # fmt: skip


@pytest.mark.parametrize(
    "name", ["demo-bug-padding-collapses-splits-c16", "demo-fix-padding-active-rows-c16"]
)
def test_the_gpu_demos_keep_their_what_if_column(name: str) -> None:
    """A GPU demo runs gluon-verify: its own policy's frozen S reads as now; the asm and Triton
    rows keep their frozen S, said as a what-if (a blanket blank of off-route cells lost them)."""
    from mlaprof.reporters.rows import WHAT_IF, split_cells

    s = shipped_runs.summary(name)
    assert s.route is not None and s.route.path == "gluon-verify"
    own = _own(s)
    assert own.on_route is True and own.frozen_what_if is None
    assert WHAT_IF not in split_cells(own).frozen
    rows = {r.policy: r for r in s.splits}
    for pol, frozen in (("aiter-asm", 16), ("aiter-asm-fp8", 16), ("vllm-triton", 256)):
        r = rows[pol]
        assert r.frozen == frozen and r.on_route is False, r
        assert r.frozen_what_if == (
            f"if vLLM ran {pol} (a what-if: this configuration takes gluon-verify [vLLM 0.32.0])"
        )
        assert split_cells(r).frozen == f"{frozen} {WHAT_IF}"
