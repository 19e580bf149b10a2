"""Capture sizes vLLM keeps, in plan-capture's proposal and in the what-if's dispatch.

- plan-capture proposes only sizes vLLM keeps as given under ``max_num_batched_tokens``: vLLM
  0.32/0.33 drop every ``cudagraph_capture_sizes`` entry above it (``vllm/config/vllm.py`` 0.32.0
  L2454-2465); vLLM 0.34 captures a ``decode_cudagraph_capture_request_sizes`` count only up to
  ``min(max_num_seqs, max_num_batched_tokens // qlen)`` (``decode_cudagraph_capture_shapes``,
  ``vllm/config/compilation.py`` L54-68). mlaprof proposed 80 tokens (20 requests at qlen 4)
  under 64, a size vLLM drops, and said nothing.
- ``whatif --graph-mode PIECEWISE`` runs a batch above the largest kept size eagerly (vLLM's
  dispatch has no graph past it): mlaprof read every cell PIECEWISE.

Checked against vLLM 0.32's own code in ``tests/e2e/test_vllm_capture_sizes.py`` and 0.34's in
``tests/e2e/test_vllm034_source.py``."""

from __future__ import annotations

import json

import pytest

from mlaprof.capture_sizes import (
    capture_plan,
    max_proposed_requests,
    padded_size,
    piecewise_plan,
    proposal_plan,
)
from mlaprof.cli import main
from mlaprof.whatif.grid import GridSpec, compute
from mlaprof.whatif.plan import make_plan

VERSIONS = ["0.34.0", "0.33.0", "0.32.0", "pre-51171"]
SOURCE = {"0.34.0": "vllm/config/compilation.py L54-68"}


def _plan_capture(capsys, tmp_path, version: str, *extra: str) -> dict:
    counts = tmp_path / "c.txt"
    counts.write_text("5 10\n2 3\n20 4\n")
    argv = ["plan-capture", "--counts", str(counts), "--spec", "3", "--max-num-seqs", "64",
            "--max-num-batched-tokens", "64", "--vllm-version", version, *extra]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    doc["text"] = " ".join(capsys.readouterr().out.split())
    return doc


@pytest.mark.parametrize("version", VERSIONS)
def test_plan_capture_proposes_only_sizes_vllm_keeps_and_says_why(capsys, tmp_path, version):
    """20 requests x qlen 4 = 80 tokens > max_num_batched_tokens 64: no proposed size for them."""
    doc = _plan_capture(capsys, tmp_path, version)
    prop = doc["proposed"]
    assert prop["sizes"] == [8, 20] and max(prop["sizes"]) <= 64
    assert prop["eager_batches"] == [20]
    if version == "0.34.0":
        assert doc["compilation_config"] == '{"decode_cudagraph_capture_request_sizes": [2, 5]}'
    else:
        assert doc["compilation_config"] == '{"cudagraph_capture_sizes": [8, 20]}'
    (note,) = [n for n in doc["notes"] if n.startswith("batch sizes 20 get no proposed size")]
    assert "80 tokens is above max_num_batched_tokens 64" in note
    assert SOURCE.get(version, "vllm/config/vllm.py 0.32.0 L2454-2465") in note
    assert "get no proposed size" in doc["text"] and "max_num_batched_tokens 64" in doc["text"]


@pytest.mark.parametrize("version", VERSIONS)
def test_cover_all_covers_the_largest_batch_a_kept_size_holds(capsys, tmp_path, version):
    """--cover-all asked for max_num_seqs (64 x 4 = 256 tokens, dropped): 16 requests instead."""
    doc = _plan_capture(capsys, tmp_path, version, "--cover-all")
    assert doc["proposed"]["sizes"][-1] == 64 == 16 * 4
    assert any("--cover-all keeps a graph for 16 requests" in n for n in doc["notes"])


def test_a_limit_below_qlen_proposes_nothing():
    """max_num_batched_tokens 3 at qlen 4: no decode batch fits any size vLLM keeps."""
    assert max_proposed_requests(2, 4, 3) == 0
    default = capture_plan("vllm-0.34", 2, 3, None, 3)
    plan = make_plan({1: 5, 2: 1}, 4, 2, default.tokens, "d", "t", None, default_plan=default,
                     max_num_batched_tokens=3)  # fmt: skip
    assert plan.proposed.sizes == [] and plan.proposed.eager_batches == [1, 2]
    assert any("batch sizes 1, 2 get no proposed size" in n for n in plan.notes)


@pytest.mark.parametrize("rule, device", [("vllm-0.34", None), ("vllm-0.32", None),
                                          ("vllm-0.32", "cpu"), ("vllm-legacy", None)])  # fmt: skip
def test_proposal_plan_keeps_every_proposed_size(rule, device):
    """What vLLM captures from the flag: each proposed batch its own FULL decode graph."""
    plan = proposal_plan(rule, [8, 20, 64], 64, 3, 64, device)
    for b in (2, 5, 16):
        d = plan.dispatch(b)
        assert (d.mode, d.size, d.rows) == ("FULL", 4 * b, b)
    assert plan.dispatch(17).mode == "NONE"  # 68 tokens: above every size within 64
    assert not plan.log


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("device", ["mi355x", "cpu"])
def test_piecewise_whatif_runs_batches_past_the_largest_kept_size_eagerly(version, device):
    """[8, 600] under 512 keeps [8]: 1-2 requests (4-8 tokens) run PIECEWISE in the 8-token graph
    on their real rows, 3-4 requests (12-16 tokens) eagerly."""
    spec = GridSpec(batches=[1, 2, 3, 4], contexts=[4096], specs=[3], max_num_seqs=64,
                    devices=[device], policies=["aiter-gluon-v0.1.20"], graph_mode="PIECEWISE",
                    capture_sizes=[8, 600], max_num_batched_tokens=512, vllm_version=version)  # fmt: skip
    c = compute(spec).columns
    got = list(zip(c["batch"].tolist(), c["graph"].tolist(), c["capture_size"].tolist(),
                   c["rows"].tolist(), strict=True))  # fmt: skip
    assert got == [(1, "PIECEWISE", 8, 1), (2, "PIECEWISE", 8, 2), (3, "NONE", 0, 3),
                   (4, "NONE", 0, 4)]  # fmt: skip
    assert int(c["padding_rows"].sum()) == 0 and int(c["S_frozen"].sum()) == 0
    prov = compute(spec).provenance["capture_sizes"]
    assert "PIECEWISE graphs up to 8 tokens at qlen 4: a batch of more tokens runs eagerly" in prov


@pytest.mark.parametrize("version", VERSIONS)
def test_piecewise_whatif_default_list_stops_at_max_num_batched_tokens(version):
    """The default list under 64 tokens: 16 requests (64 tokens) PIECEWISE, 17 (68) eagerly."""
    spec = GridSpec(batches=[15, 16, 17, 40], contexts=[4096], specs=[3], max_num_seqs=64,
                    policies=["aiter-gluon-v0.1.20"], graph_mode="PIECEWISE",
                    max_num_batched_tokens=64, vllm_version=version)  # fmt: skip
    c = compute(spec).columns
    assert c["graph"].tolist() == ["PIECEWISE", "PIECEWISE", "NONE", "NONE"]
    assert c["capture_size"].tolist() == [64, 64, 0, 0]


@pytest.mark.parametrize("version", VERSIONS)
def test_full_whatif_with_a_partly_kept_list_runs_larger_batches_eagerly(version):
    """FULL (vLLM's FULL_AND_PIECEWISE) with [8, 600] under 512: 3-4 requests have no graph."""
    spec = GridSpec(batches=[1, 2, 3, 4], contexts=[4096], specs=[3], max_num_seqs=64,
                    policies=["aiter-gluon-v0.1.20"], capture_sizes=[8, 600],
                    max_num_batched_tokens=512, vllm_version=version)  # fmt: skip
    c = compute(spec).columns
    assert c["graph"].tolist()[2:] == ["NONE", "NONE"]
    assert c["graph"].tolist()[1] == "FULL" and c["capture_size"].tolist()[1] == 8


@pytest.mark.parametrize("rule", ["vllm-0.34", "vllm-0.32", "vllm-legacy", "vllm-pr50488"])
@pytest.mark.parametrize("device", [None, "cpu"])
def test_piecewise_plan_is_the_padding_rule_over_the_kept_sizes(rule, device):
    for explicit, mnt in (([8, 600], 512), (None, 64), ([3, 5, 9], None), (None, None)):
        plan = piecewise_plan(rule, 64, 3, explicit, mnt, device)
        assert plan.decode == [] and plan.tokens == plan.piecewise
        assert mnt is None or max(plan.tokens) <= mnt
        for b in range(1, 65):
            size = padded_size(4 * b, plan.tokens)
            d = plan.dispatch(b)
            assert (d.mode, d.size, d.rows) == ("NONE" if size is None else "PIECEWISE", size, b)


@pytest.mark.parametrize("rule, device, want", [("vllm-0.34", None, ([], [5])),
                                                ("vllm-0.32", None, ([5], [])),
                                                ("vllm-0.32", "cpu", ([5], []))])  # fmt: skip
def test_the_proposal_is_evaluated_as_the_version_captures_it(rule, device, want):
    """A budget that fits 8 tokens only: batch 5 (20 tokens) has no proposed graph. vLLM 0.34
    takes the proposal as decode request counts and keeps its default prefill token sizes
    (``_split_cudagraph_capture_sizes``), so batch 5 runs PIECEWISE in the 24-token graph;
    0.32/0.33 capture only the given list: eager. mlaprof read both eager."""
    from mlaprof.whatif.plan import MemoryModel

    mem = MemoryModel(1e6, 1e5, "test")
    default = capture_plan(rule, 64, 3, None, None, device=device)
    plan = make_plan({2: 10, 5: 1}, 4, 64, default.tokens, "d", "t", mem,
                     budget_bytes=mem.bytes([8]), default_plan=default, device=device)  # fmt: skip
    assert plan.proposed.sizes == [8]
    assert (plan.proposed.eager_batches, plan.proposed.piecewise_batches) == want
