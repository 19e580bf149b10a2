"""Capture planning: the DP is exact (brute force on small cases), costs follow vLLM's padding
rule, inputs come from runs / files / logs with provenance, and the CLI prints a ready flag."""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest

from mlaprof.capture_sizes import default_capture_sizes, padded_size, round_to_qlen
from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.synthetic.figures import write_run
from mlaprof.whatif.plan import MemoryModel, evaluate, fit_memory, make_plan, propose
from mlaprof.whatif.plan_sources import counts_from_file, memory_from_log, memory_from_spec
from tests.conftest import ROOT


def _brute(dist, qlen, weight, cap):
    """Best (eager share, padded tokens) over every subset of observed sizes within ``cap``."""
    vals = sorted(b * qlen for b in dist)
    best = None
    for k in range(1, len(vals) + 1):
        for sub in itertools.combinations(vals, k):
            if sum(weight(s) for s in sub) > cap:
                continue
            c = evaluate(list(sub), dist, qlen, None)
            key = (round(c.eager_share, 12), round(c.padded_tokens, 9))
            best = key if best is None or key < best else best
    return best


@pytest.mark.parametrize("seed", range(40))
def test_dp_is_exact_against_brute_force(seed):
    rng = random.Random(seed)
    qlen = rng.choice([1, 2, 4])
    batches = rng.sample(range(1, 40), rng.randint(2, 8))
    counts = {b: rng.randint(1, 50) for b in batches}
    total = sum(counts.values())
    dist = {b: c / total for b, c in counts.items()}
    if seed % 2:
        k = rng.randint(1, len(batches))
        sizes, _ = propose(dist, qlen, None, None, k)
        want = _brute(dist, qlen, lambda s: 1, k)
        assert len(sizes) <= k
    else:
        # integer bytes, and a budget some subset fills to the byte (half the cases): the plan
        # must find it, which a budget rounded to 1/1000 steps misses
        mem = MemoryModel(rng.randint(1, 5) * 10**6, rng.randint(1, 20) * 10**4, "test")
        vals = [b * qlen for b in batches]
        if seed % 4 == 0:
            budget = float(mem.bytes(rng.sample(vals, rng.randint(1, len(vals)))))
        else:
            budget = mem.bytes(vals) * rng.uniform(0.2, 0.9)

        def w(s):
            return mem.fixed_bytes + mem.per_token_bytes * s

        try:
            sizes, how = propose(dist, qlen, mem, budget, None)
            assert how == "to the byte"
        except MlaprofError:
            assert _brute(dist, qlen, w, budget) is None
            return
        want = _brute(dist, qlen, w, budget)
        assert mem.bytes(sizes) <= budget
    c = evaluate(sizes, dist, qlen, None)
    assert (round(c.eager_share, 12), round(c.padded_tokens, 9)) == want


def test_a_budget_filled_to_the_byte_is_used():
    """Sizes 4 and 8 (qlen 4, batches 1 and 2) cost 1,000,001 and 1,000,002 bytes; a budget of
    exactly their sum must capture both (in 1/1000 steps of the budget, each rounds up past
    half of it and only one fits)."""
    mem = MemoryModel(1_000_000.0, 0.25, "test")
    dist = {1: 0.5, 2: 0.5}
    budget = mem.bytes([4, 8])
    assert propose(dist, 4, mem, budget, None) == ([4, 8], "to the byte")
    assert propose(dist, 4, mem, budget - 1, None)[0] == [8]


def test_costs_follow_the_padding_rule():
    dist = {3: 0.5, 5: 0.25, 9: 0.25}
    c = evaluate([16, 24], dist, 4, None)  # 12 -> 16, 20 -> 24, 36 -> eager
    assert c.padded_tokens == pytest.approx(0.5 * 4 + 0.25 * 4)
    assert c.eager_batches == [9] and c.eager_share == 0.25
    assert padded_size(20, [16, 24]) == 24


def test_plan_beats_the_default_and_stays_in_budget():
    counts = {1: 500, 2: 300, 3: 200, 8: 50, 20: 10, 33: 5}
    default = default_capture_sizes("vllm-legacy", 64, 3)
    mem = memory_from_spec("20+0.25")
    plan = make_plan(counts, 4, 64, default, "vllm-legacy", "test", mem)
    assert plan.proposed.padded_tokens == 0 < plan.default.padded_tokens
    assert plan.proposed.memory_bytes <= plan.default.memory_bytes
    assert plan.proposed.sizes == [4, 8, 12, 32, 80, 132]
    assert json.loads(plan.compilation_config()) == {"cudagraph_capture_sizes": plan.proposed.sizes}
    assert any("largest observed" in n for n in plan.notes)
    covered = make_plan(
        counts, 4, 64, default, "vllm-legacy", "t", None, max_graphs=4, cover_all=True
    )
    assert covered.proposed.sizes[-1] == 256 and len(covered.proposed.sizes) == 4
    with pytest.raises(MlaprofError, match="needs capture memory"):
        make_plan(counts, 4, 64, default, "r", "t", None, budget_bytes=1e9)
    with pytest.raises(MlaprofError, match="exceed max_num_seqs"):
        make_plan({100: 1}, 4, 64, default, "r", "t", None)


def test_counts_files(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("batch,count\n# decode steps\n1,5\n4, 7\n4,1\n")
    assert counts_from_file(f)[0] == {1: 5, 4: 8}
    j = tmp_path / "c.json"
    j.write_text('{"2": 3, "16": 1}')
    assert counts_from_file(j)[0] == {2: 3, 16: 1}
    bad = tmp_path / "bad.txt"
    bad.write_text("1 5\nx y\n")
    with pytest.raises(MlaprofError, match="line 2"):
        counts_from_file(bad)


def test_memory_sources(tmp_path):
    m = fit_memory({16: 30e6, 32: 50e6, 64: 90e6}, "measured")
    assert m.fixed_bytes == pytest.approx(10e6) and m.per_token_bytes == pytest.approx(1.25e6)
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 11-30 10:00:00 [gpu_model_runner.py:1] Graph capturing finished in 12 secs, took 2.00 GiB\n"
    )
    sizes = [4, 8, 16]
    lm = memory_from_log(log, sizes, "vllm-legacy")
    assert lm.bytes(sizes) == pytest.approx(2 * 2**30) and "model" in lm.provenance
    assert "vllm-legacy default list" in lm.provenance
    # a committed two-start TP2 server log: the last start, the largest rank, its logged sizes
    real = memory_from_log(ROOT / "tests/data/vllm/tp2_two_starts.log", sizes, "vllm-legacy")
    assert "(start 2)" in real.provenance and "largest of 2" in real.provenance
    assert "config line lists (19 sizes)" in real.provenance
    assert round_to_qlen([1, 2, 6, 60], 4) == [4, 8, 60]


def test_cli_from_a_run_with_measured_memory(tmp_path, capsys):
    traces = tmp_path / "traces"
    run = write_run(traces, "r")
    assert (
        main(["plan-capture", "--from-run", str(run), "--memory-from-run", str(run), "--json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["qlen"] == 4 and "steps (qlen 4) of run r" in doc["distribution_source"]
    assert doc["memory"].startswith("fitted to") and "measured in run r" in doc["memory"]
    n, unit = re.match(r"fitted to (\d+) capture (\w+) measured", doc["memory"]).groups()
    assert unit == ("size" if n == "1" else "sizes"), doc["memory"]  # never "size(s)"
    assert doc["proposed"]["padded_tokens_per_step"] <= doc["default"]["padded_tokens_per_step"]
    # vLLM 0.34 (the default): decode graphs named by request count
    assert doc["compilation_config"].startswith('{"decode_cudagraph_capture_request_sizes": [')


def test_cli_terminal_and_errors(tmp_path, capsys):
    f = tmp_path / "c.txt"
    f.write_text("1 500\n2 300\n8 50\n")
    argv = ["plan-capture", "--counts", str(f), "--spec", "3", "--max-num-seqs", "16"]
    assert main([*argv, "--vllm-version", "0.32.0"]) == 0
    out = capsys.readouterr().out
    assert "--compilation-config '{\"cudagraph_capture_sizes\": [4, 8, 32]}'" in out
    assert main(argv) == 0  # 0.34, the default: the same graphs as request counts
    out = capsys.readouterr().out
    assert "--compilation-config '{\"decode_cudagraph_capture_request_sizes\": [1, 2, 8]}'" in out
    assert "unknown" in out  # memory: no source given, never a default that reads as measured
    for bad in (
        ["--counts", str(tmp_path / "none.txt")],
        ["--counts", str(f), "--budget-gib", "1"],
        ["--counts", str(f), "--spec", "99"],
    ):
        assert main(["plan-capture", *bad]) == 2, bad
        assert capsys.readouterr().err.startswith("mlaprof: error:")


def test_a_run_keeps_its_verify_steps_only(tmp_path):
    from mlaprof.store import create_run, load
    from mlaprof.whatif.plan_sources import counts_from_run

    w = create_run(tmp_path, "mixed", {"source": "vllm plugin"})
    for step, (reqs, q) in enumerate([(3, 4), (3, 4), (8, 4), (5, 1), (6, 1)]):
        w.add("steps", step=step, duration_ns=1, num_reqs=reqs, num_real_reqs=reqs, qlen=q)
    w.finish()
    with load(w.run_dir) as run:
        assert counts_from_run(run)[:2] == ({3: 2, 8: 1}, 4)  # the most common qlen
        assert counts_from_run(run, 1)[0] == {5: 1, 6: 1}
        with pytest.raises(MlaprofError, match="no steps with qlen 3"):
            counts_from_run(run, 3)


def test_an_imported_trace_gives_kernel_rows_labelled_as_padded(tmp_path):
    from mlaprof.store import create_run, load
    from mlaprof.whatif.plan_sources import counts_from_run

    w = create_run(tmp_path, "trace", {"imported_from": "rocprofv3 csv"})
    for step, (rows, mode) in enumerate([(4, "graph"), (4, "graph"), (8, "graph"), (70, "eager")]):
        w.add("steps", step=step, duration_ns=1, num_reqs=rows, qlen=4, graph_mode=mode)
    w.finish()
    with load(w.run_dir) as run:
        counts, qlen, src = counts_from_run(run)
    assert counts == {4: 2, 8: 1, 70: 1} and qlen == 4
    assert "kernel rows" in src and "padded" in src and "rocprofv3" in src
