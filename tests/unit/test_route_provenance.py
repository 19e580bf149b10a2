"""A route says where it comes from, one way in every view, and findings are judged by it:

1. the compare's row showed a vLLM-plugin engine's modelled route as "gluon-verify (vLLM 0.32.0;
   modelled)" while its report says "not the route the engine took ... UNVERIFIED": the row
   (:func:`mlaprof.analysis.paths.route_label`) carries the route's own provenance and tag;
2. an fp8 run routed to asm-persistent (S decided on the device) raised a CRITICAL collapse
   and a frozen-S warning under the gluon policy vLLM does not run there: a policy that does not
   model the route's kernel is judged as a what-if (info), never as the run's own S;
3. an NVIDIA target's route named rocm_aiter_mla.py as its source while its reason cites
   vllm/platforms/cuda.py: source and reason come from one rule.

Each test failed with its rule broken. Runs are made in temporary folders."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import mlaprof
from mlaprof import cpu_runner
from mlaprof.analysis.diff import diff
from mlaprof.analysis.paths import route_label
from mlaprof.analysis.run_summary import build_summary
from mlaprof.scenario import Scenario
from mlaprof.splits.routing import FLASH_ATTN_MLA_KV, VERSIONS, non_rocm_route
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


@pytest.mark.parametrize(
    "name", ["engine-engine_ngram_run", "demo-bug-prefix-legacy-flat-all-rows"]
)
def test_the_compare_row_says_the_route_with_its_provenance(name: str) -> None:
    s = shipped_runs.summary(name)
    r = s.route
    assert r is not None and r.provenance and r.provenance in (r.text or ""), r
    label = route_label(r)
    assert r.provenance in label and label.startswith(f"{r.path} (vLLM {r.version}"), label
    # UNVERIFIED where the route's line says it, and only there
    assert ("UNVERIFIED" in label) == ("UNVERIFIED" in (r.text or "")) == (not r.verified)
    d = diff(s, s)
    assert d.route.before == d.route.after == label


def test_an_engine_route_it_did_not_take_says_so_in_its_provenance() -> None:
    r = shipped_runs.summary("engine-engine_ngram_run").route
    assert r is not None and not r.verified
    assert "not the route the engine took: it ran AMX_MLA" in (r.provenance or ""), r.provenance
    assert (r.text or "").count("not the route the engine took") == 1, r.text  # said once
    assert "UNVERIFIED" in route_label(r) and "AMX_MLA" in route_label(r)


def test_split_findings_are_judged_against_the_route_that_runs(tmp_path: Path) -> None:
    sc = dataclasses.replace(Scenario(), kv_lens=[70, 130, 200], layers=1, steps=2,
                             kv_cache_dtype="fp8").validate()  # fmt: skip
    writer = cpu_runner.start_run(sc, "torch", "cpu", tmp_path, name="fp8", threads=1)
    cpu_runner.run_cpu(sc, "torch", writer)
    writer.finish()
    with mlaprof.load(tmp_path / "fp8") as run:
        s = build_summary(run)
    assert s.route is not None and s.route.path == "asm-persistent" and s.route.splits_on_device
    split = [f for f in s.findings if f.kind.startswith("split-")]
    assert split, [f.kind for f in s.findings]
    # the gluon policy vLLM does not run here: a what-if, never a critical or a frozen S
    for f in split:
        assert f.severity == "info", (f.severity, f.title)
        assert f.kind != "split-frozen", f.title
        # in the splits row's words (its what_if), never route-level words of its own
        row = next(r for r in s.splits if r.policy == f.data["policy"])
        assert row.what_if and row.what_if in f.title and "asm-persistent" in f.title, f.title
        assert "decides S on the device" in f.evidence, f.evidence
    # the route finding that says the policy is not the route's stays
    assert any(f.kind == "route" and "does not run here" in f.title for f in s.findings)


@pytest.mark.parametrize("version", sorted(VERSIONS))
@pytest.mark.parametrize("kv", [*FLASH_ATTN_MLA_KV[:1], "fp8"])
@pytest.mark.parametrize("arch", ["sm_90", "sm_100"])
def test_a_non_rocm_routes_source_is_the_file_its_reason_cites(
    version: str, kv: str, arch: str
) -> None:
    r = non_rocm_route("h200", version, arch, kv)
    assert "rocm_aiter_mla.py" not in r.source, r.source
    assert "vllm/platforms/cuda.py" in r.source, r.source
    for cited in re.findall(r"vllm/[\w/]+\.py[\w ]*?(?: L\d+-\d+)?(?=\))", r.reason):
        assert cited in r.source, (cited, r.source)
