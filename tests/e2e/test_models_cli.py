"""The model cells that AITER's and vLLM's code decide, from the command line (``whatif --json``,
``plan-capture --json``, ``run --json``). Each expectation cites where the code has it."""

from __future__ import annotations

import json
from pathlib import Path

from mlaprof.cli import main


def _cells(capsys, *args: str) -> list[dict]:
    assert main(["whatif", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["cells"]


def test_persistent_asm_dropped_at_batch_33(capsys):
    """AITER aiter/mla.py v0.1.20 L401-422, L585-597: gfx950 bf16 16 heads qlen 1, B >= 32."""
    (c,) = _cells(capsys, "--batch", "33", "--context", "8k", "--spec", "0", "--model",
                  "deepseek-v3-tp8", "--policy", "aiter-asm-persistent", "--device", "mi355x")  # fmt: skip
    assert (c["rows"], c["S_fix"], c["S_frozen"]) == (40, 6, 6)
    assert c["note"].startswith("persistent kernel dropped")


def test_fp8_8_heads_and_the_keyerror_width(capsys):
    """vLLM 0.32 rocm_aiter_mla.py L1732-1736 pads 8 heads to 16; AITER mla.py v0.1.20 L345."""
    (c8,) = _cells(capsys, "--batch", "2", "--context", "100", "--model", "kimi-k2-tp8",
                   "--policy", "aiter-asm-fp8", "--max-model-len", "100", "--max-num-seqs", "2")  # fmt: skip
    # buffer 2 x 100 = 200 entries over 2 rows: 16 x 4 -> block 64 -> S = 2 (8 x 4 -> 128: 1)
    assert c8["S_fix"] == 2 and c8["note"] == ""
    (bad,) = _cells(capsys, "--batch", "2", "--spec", "4", "--context", "8k", "--model",
                    "deepseek-v3-tp8", "--policy", "aiter-asm-fp8")  # fmt: skip
    assert bad["S_fix"] == 0 and "KeyError" in bad["note"]


def test_gluon_targets_and_heads(capsys):
    """mla_gluon asserts gfx950 (v0.1.19 L865); PR #4582's gfx942 gluon asserts 12 heads (bb855e4
    gfx942/attention/mla.py L621-623); v0.1.19 sends 64 heads to bh64 (L879)."""
    (h,) = _cells(capsys, "--batch", "4", "--context", "8k", "--policy", "aiter-gluon-v0.1.20",
                  "--device", "h200")  # fmt: skip
    assert h["S_fix"] == 0 and "asserts gfx950" in h["note"] and h["route"] == "flash-attn-mla"
    k8, k12 = _cells(capsys, "--batch", "4", "--context", "8k", "--model", "kimi-k2-tp8,kimi-k3-tp8",
                     "--policy", "aiter-gluon-gfx942-pr4582", "--device", "mi300x")  # fmt: skip
    assert "nhead == 12" in k8["note"] and k12["S_fix"] > 0 and k12["heads"] == 12
    (d64,) = _cells(capsys, "--batch", "64", "--context", "8k", "--spec", "0", "--model",
                    "deepseek-v3-tp2", "--policy", "aiter-gluon-v0.1.19", "--graph-mode", "NONE")  # fmt: skip
    assert d64["heads"] == 64 and d64["S_fix"] == 4 and d64["note"] == ""


def test_aiter_release_label_and_over_split(capsys):
    (c,) = _cells(capsys, "--aiter", "0.1.21.post2", "--batch", "3", "--context", "1040")
    assert c["policy"] == "aiter-gluon-v0.1.20.post1"
    assert c["aiter_rule"] == "rule of v0.1.20.post1; v0.1.21.post2 not verified"
    (t,) = _cells(capsys, "--batch", "4", "--context", "8k", "--policy", "vllm-triton",
                  "--device", "h200")  # fmt: skip
    assert (t["S_frozen"], t["S_deserved"], t["over_split"]) == (256, 16, True)


def test_plan_capture_default_list_stops_at_max_num_batched_tokens(tmp_path: Path, capsys):
    """vLLM 0.32 vllm/config/vllm.py L2445-2495: 8 seqs x qlen 4 with 50 tokens: 50 itself is
    captured; on a GPU (model runner V2, no rounding to qlen) beside 1, 2 and the FULL decode
    graphs 4..32 (the V1 runner's rounded list, stopping at 48, is test_vllm_capture_sizes's)."""
    counts = tmp_path / "c.txt"
    counts.write_text("2 10\n8 5\n")
    base = ["plan-capture", "--counts", str(counts), "--spec", "3", "--max-num-seqs", "8", "--json",
            "--vllm-version", "0.32.0"]  # fmt: skip
    assert main(base) == 0
    assert json.loads(capsys.readouterr().out)["default"]["sizes"][-1] == 64
    assert main([*base, "--max-num-batched-tokens", "50"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["default"]["sizes"] == [1, 2, 4, 8, 16, 24, 32, 40, 48, 50]
    assert "max_num_batched_tokens 50" in doc["default_rule"]
    assert "model runner V2" in doc["default_rule"]
    # vLLM 0.34 (vllm/config/vllm.py L2380-2470): no rounding to qlen, 50 itself captured
    assert main([*base[:-2], "--max-num-batched-tokens", "50"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["default"]["sizes"] == [1, 2, 4, 8, 16, 24, 32, 40, 48, 50]
    assert "vLLM 0.34.0" in doc["default_rule"]


def test_run_names_the_aiter_release_it_models(tmp_path: Path, capsys):
    args = ["run", "--steps", "1", "--layers", "1", "--traces", str(tmp_path), "--json", "-q"]
    assert main([*args, "--aiter", "0.1.21.post2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (
        doc["route"]["aiter_rule"]["label"] == "rule of v0.1.20.post1; v0.1.21.post2 not verified"
    )
    assert doc["scenario"]["policy"] == "aiter-gluon-v0.1.20.post1"
    assert main([*args, "--scenario", "kimi-k3-tp8", "--vllm-version", "0.33.0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["route"]["verified"] and doc["route"]["path"] == "gluon-verify"
    assert any("adaptive variable-length verify" in m for m in doc["route"]["not_modelled"])


def test_open_pr_rules_are_opt_in(capsys):
    """`--policy all` is the released rules; an open PR's rule runs only when named."""
    from mlaprof.splits.policies import POLICIES

    cells = _cells(capsys, "--batch", "4", "--context", "8k", "--policy", "all")
    got = {c["policy"] for c in cells}
    assert got and not any(POLICIES[p].unreleased for p in got)
    (pr,) = _cells(capsys, "--batch", "4", "--context", "8k", "--spec", "0", "--model",
                   "deepseek-v3-tp8", "--policy", "aiter-asm-persistent-pr4899")  # fmt: skip
    # PR #4899: clamp(lrint(1.2 * 4 * sqrt(ceil(8192/16) + 16)), 1, 256) = lrint(110.2) = 110
    assert pr["S_fix"] == 110 and pr["aiter_rule"] == "unreleased: an open AITER PR"
