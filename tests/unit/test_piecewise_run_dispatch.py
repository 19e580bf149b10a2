"""A PIECEWISE scenario's batches are dispatched as vLLM's ``cudagraph_mode`` PIECEWISE does
(``capture_sizes.piecewise_plan``, the rule whatif uses): a batch takes the smallest kept size
holding its tokens, on its real rows, and one above the largest kept size runs eagerly.
``metadata.batch_shape`` marked every non-FULL batch PIECEWISE, so ``mlaprof run --graph-mode
PIECEWISE`` recorded a batch vLLM runs without a graph as PIECEWISE. (vLLM's own dispatch is
compared with ``piecewise_plan`` in tests/e2e/test_vllm_capture_sizes.py and
test_vllm034_source.py.)"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path

import pytest

from mlaprof.capture_sizes import capture_plan, piecewise_plan, rule_for
from mlaprof.errors import MlaprofError
from mlaprof.metadata import batch_shape, step_shape
from mlaprof.scenario import Scenario


@pytest.mark.parametrize("version", ["0.32.0", "0.34.0", "pre-51171"])
@pytest.mark.parametrize("target", ["cpu", "mi355x"])
@pytest.mark.parametrize("mnt", [0, 64, 200])
def test_scenario_steps_follow_piecewise_plan(version: str, target: str, mnt: int) -> None:
    """Every batch size of a PIECEWISE scenario: the shape is piecewise_plan's dispatch."""
    eager = 0
    for b in (1, 3, 8, 15, 16, 17, 40, 64):
        sc = Scenario(graph_mode="PIECEWISE", kv_lens=[500] * b, max_num_seqs=64,
                      max_num_batched_tokens=mnt, vllm_version=version, target=target)  # fmt: skip
        plan = piecewise_plan(rule_for(version), 64, sc.num_speculative_tokens, None,
                              mnt or None, device=target)  # fmt: skip
        d = plan.dispatch(b)
        shape = step_shape(sc, 0)
        assert (shape.graph_mode, shape.capture_size, shape.num_reqs) == (d.mode, d.size, d.rows)
        assert shape.num_padding == 0  # PIECEWISE never pads attention rows
        eager += shape.graph_mode == "NONE"
    assert eager > 0 or not mnt  # a limiting max_num_batched_tokens leaves big batches eager


def test_batch_above_largest_kept_size_runs_eagerly() -> None:
    """20 requests at qlen 4 (80 tokens) under max_num_batched_tokens 64: no PIECEWISE graph."""
    sc = Scenario(graph_mode="PIECEWISE", kv_lens=[100] * 20, max_num_seqs=32,
                  max_num_batched_tokens=64)  # fmt: skip
    shape = step_shape(sc, 0)
    assert (shape.graph_mode, shape.capture_size, shape.num_reqs) == ("NONE", None, 20)
    small = step_shape(dataclasses.replace(sc, kv_lens=[100] * 3), 0)
    assert (small.graph_mode, small.capture_size, small.num_reqs) == ("PIECEWISE", 16, 3)


def test_token_list_under_piecewise() -> None:
    """A token list under PIECEWISE: [8, 600] holds 1-2 and 3-150 requests at qlen 4; past
    600 tokens eagerly; an empty list runs everything eagerly."""
    got = [batch_shape([1] * b, 4, "PIECEWISE", [8, 600]) for b in (2, 3, 151)]
    assert [(s.graph_mode, s.capture_size, s.num_reqs) for s in got] == [
        ("PIECEWISE", 8, 2), ("PIECEWISE", 600, 3), ("NONE", None, 151)]  # fmt: skip
    none = batch_shape([1] * 2, 4, "PIECEWISE", [])
    assert (none.graph_mode, none.capture_size) == ("NONE", None)


def test_full_plan_is_refused_under_piecewise() -> None:
    """A FULL_AND_PIECEWISE plan's FULL decode graphs do not exist under PIECEWISE."""
    with pytest.raises(MlaprofError, match="piecewise_plan"):
        batch_shape([1] * 3, 4, "PIECEWISE", capture_plan("vllm-0.34", 64, 3))


def test_run_records_eager_steps_of_a_piecewise_scenario(tmp_path: Path) -> None:
    """``mlaprof run --graph-mode PIECEWISE`` on the CPU: the steps table says NONE for the
    batch above the largest kept size (it said PIECEWISE)."""
    from mlaprof.cli import main
    from mlaprof.store import load

    traces = tmp_path / "traces"
    toml = tmp_path / "pw.toml"
    toml.write_text('graph_mode = "PIECEWISE"\nmax_num_seqs = 32\nmax_num_batched_tokens = 64\n'
                    f"kv_lens = {[300] * 20}\nlayers = 1\nsteps = 2\n")  # fmt: skip
    argv = ["run", "--scenario", str(toml), "--quiet", "--check-syncs", "off", "--name", "pw",
            "--traces", str(traces)]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    with load(traces / "pw") as run:
        steps = run.table("steps")
        padding = run.table("padding")
    assert steps["graph_mode"].tolist() == ["NONE", "NONE"]
    assert padding["capture_size"].isna().all()


def test_a_gpu_runs_eager_steps_record_the_mode_vllms_dispatch_gave_them() -> None:
    """The GPU runner's steps outside a FULL graph record the step shape's mode where vLLM's
    dispatch sends the batch eager (NONE above the largest kept size), else the run's mode
    (PIECEWISE where a FULL capture failed): never the run's mode for every step."""
    from mlaprof.gpu.capture_runner import eager_step_mode

    assert eager_step_mode("PIECEWISE", "NONE") == "NONE"
    assert eager_step_mode("PIECEWISE", "PIECEWISE") == "PIECEWISE"
    assert eager_step_mode("FULL", "FULL") == "PIECEWISE"
    assert eager_step_mode("FULL", "NONE") == "NONE"
    assert eager_step_mode("NONE", "NONE") == "NONE"
