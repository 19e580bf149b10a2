"""Every explicit capture size above ``max_num_batched_tokens``: vLLM runs without graphs.

Each modelled version drops the sizes above ``max_num_batched_tokens`` and logs a warning naming
the given and the kept list (``vllm/config/vllm.py`` 0.32.0 L2454-2465, L2527-2540; 0.34.0
L2459-2470, L2532-2545). With none left it still runs: ``max_cudagraph_capture_size`` 0, no
graph, every batch eager; 0.34 also sets ``cudagraph_mode`` NONE and logs so (L2733-2737).
mlaprof raised "every capture size of [...] is above max_num_batched_tokens" instead, so a
what-if or a plan vLLM would run exited 2. Checked against vLLM 0.32's own code in
``tests/e2e/test_vllm_capture_sizes.py`` and 0.34's in ``tests/e2e/test_vllm034_source.py``."""

from __future__ import annotations

import json

import pytest

from mlaprof.capture_sizes import SIZE_RULES, capture_plan, explicit_sizes, sizes_for
from mlaprof.cli import main

OVERRIDE = (
    "cudagraph_capture_sizes specified in compilation_config [600, 700] is overridden by config []"
)
NONE_LEFT = "No CUDA graph capture sizes are left; setting cudagraph_mode to NONE."
# (rule, device) -> (model runner, cudagraph_mode after sizing, vLLM's log lines)
RULES = {
    ("vllm-0.34", None): ("V2", "NONE", [("WARNING", OVERRIDE), ("INFO", NONE_LEFT)]),
    ("vllm-0.32", None): ("V2", "FULL_AND_PIECEWISE", [("WARNING", OVERRIDE)]),
    ("vllm-0.32", "cpu"): ("V1", "FULL_AND_PIECEWISE", [("WARNING", OVERRIDE)]),
    ("vllm-pr50488", None): ("V1", "FULL_AND_PIECEWISE", [("WARNING", OVERRIDE)]),
    ("vllm-legacy", None): ("V1", "FULL_AND_PIECEWISE", [("WARNING", OVERRIDE)]),
}


def test_every_rule_is_covered():
    assert {r for r, _ in RULES} == set(SIZE_RULES)


@pytest.mark.parametrize("rule, device", list(RULES))
def test_no_size_left_is_an_eager_plan(rule, device):
    runner, mode, log = RULES[rule, device]
    plan = capture_plan(rule, 64, 3, [600, 700], 512, method="mtp", device=device)
    assert (plan.tokens, plan.decode, plan.piecewise, plan.draft) == ([], [], [], [])
    assert (plan.runner, plan.mode, plan.log) == (runner, mode, log)
    assert plan.note is not None and "every batch runs eagerly" in plan.note
    assert "[600, 700] is above max_num_batched_tokens 512" in plan.note
    for b in range(1, 65):
        d = plan.dispatch(b)
        assert (d.mode, d.size, d.rows) == ("NONE", None, b)
    assert sizes_for(rule, 64, 3, [600, 700], 512, device) == []
    doc = plan.to_dict()
    assert doc["cudagraph_mode"] == mode and doc["vllm_log"][0]["message"] == OVERRIDE


@pytest.mark.parametrize("rule", list(SIZE_RULES))
def test_a_partly_dropped_list_keeps_the_rest_and_logs_the_warning(rule):
    """[4, 8, 600] under 512: [4, 8] kept, the warning names both lists, no note, mode kept."""
    plan = capture_plan(rule, 64, 3, [4, 8, 600], 512)
    assert plan.tokens and max(plan.tokens) <= 8 and plan.note is None
    assert plan.mode == "FULL_AND_PIECEWISE"
    msg = "compilation_config [4, 8, 600] is overridden by config [4, 8]"
    assert plan.log == [("WARNING", f"cudagraph_capture_sizes specified in {msg}")]
    assert capture_plan(rule, 64, 3, [4, 8], 512).log == []  # nothing dropped: nothing logged


def test_duplicates_count_as_dropped_as_vllm_compares_lengths():
    ex = explicit_sizes("vllm-0.34", [8, 8, 16], None)
    msg = "compilation_config [8, 8, 16] is overridden by config [8, 16]"
    assert ex.kept == [8, 16] and ex.log == [
        ("WARNING", f"cudagraph_capture_sizes specified in {msg}")
    ]


@pytest.mark.parametrize("version, mode", [("0.34.0", "NONE"), ("0.33.0", "FULL_AND_PIECEWISE"),
                                           ("0.32.0", "FULL_AND_PIECEWISE"),
                                           ("pre-51171", "FULL_AND_PIECEWISE")])  # fmt: skip
@pytest.mark.parametrize("graph_mode", ["FULL", "PIECEWISE"])
def test_whatif_runs_every_cell_eagerly_and_says_why(capsys, version, mode, graph_mode):
    argv = ["whatif", "--capture-sizes", "600,700", "--max-num-batched-tokens", "512",
            "--max-num-seqs", "64", "--spec", "3", "--batch", "1-4", "--context", "4k",
            "--vllm-version", version, "--graph-mode", graph_mode]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {c["graph"] for c in doc["cells"]} == {"NONE"}
    assert all(c["padding_rows"] == 0 and c["S_frozen"] == 0 for c in doc["cells"])
    prov = doc["provenance"]
    if graph_mode == "PIECEWISE" and mode != "NONE":  # the engine's mode is PIECEWISE, kept
        mode = "PIECEWISE"
    assert (
        f"cudagraph_mode {'set to' if mode == 'NONE' else 'stays'} {mode}" in prov["capture_sizes"]
    )
    assert prov["vllm_log"][0] == f"WARNING {OVERRIDE}"
    assert (f"INFO {NONE_LEFT}" in prov["vllm_log"]) is (version == "0.34.0")
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "every batch runs eagerly" in text and "4 cells NONE" in text
    assert f"vllm_log: WARNING {OVERRIDE}" in text


@pytest.mark.parametrize("version", ["0.34.0", "0.32.0"])
def test_plan_capture_compares_with_a_list_vllm_drops_whole(tmp_path, capsys, version):
    """The given default keeps no size: every batch eager, the proposal unlimited by it."""
    counts = tmp_path / "c.txt"
    counts.write_text("5 10\n2 3\n")
    argv = ["plan-capture", "--counts", str(counts), "--spec", "3", "--max-num-seqs", "64",
            "--default-sizes", "600", "--max-num-batched-tokens", "512",
            "--vllm-version", version]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["default"]["sizes"] == [] and doc["default"]["eager_share"] == 1.0
    assert doc["proposed"]["sizes"] == [8, 20] and doc["proposed"]["eager_share"] == 0.0
    assert "given list [600]: none kept" in doc["default_rule"]
    assert any("every batch runs eagerly" in n for n in doc["notes"])
    assert any(n.startswith("vLLM logs: WARNING cudagraph_capture_sizes") for n in doc["notes"])
    assert main(argv) == 0
    assert "every batch runs eagerly" in " ".join(capsys.readouterr().out.split())
