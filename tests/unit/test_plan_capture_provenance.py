"""plan-capture says which vLLM it models and what its memory rests on:

- ``--from-run`` of a vLLM 0.32.0 scenario was compared with vLLM 0.34.0's defaults and given
  the 0.34-only flag ``decode_cudagraph_capture_request_sizes``: the version a run names is
  used (``--vllm-version`` wins), and the output says which and where it came from; with none
  named, the default is used and said as such.
- a memory fit over one measured size was extrapolated to 51 sizes and "planned to the byte":
  the output says how many sizes the fit rests on, labels extrapolated memory with its basis,
  and never says "to the byte" where the data fix fewer parameters than the model has.
- ``--help`` named a device ("the demo run's H200") its run.json does not hold.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from mlaprof.capture_sizes import capture_plan, modelled_version
from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.store import runmeta
from mlaprof.synthetic.figures import write_run
from mlaprof.whatif.plan import MemoryModel, fit_memory, make_plan, memory_from_total


def _run(tmp_path: Path, **meta: Any) -> Path:
    """A synthetic run (default scenario, qlen 4, measured memory at two sizes) whose run.json
    names the vLLM version as ``meta`` says (a scenario key None: removed)."""
    run = write_run(tmp_path / "traces", "r")
    doc = runmeta.read(run)
    sc = dict(doc["scenario"])
    for k, v in meta.pop("scenario", {}).items():
        if v is None:
            sc.pop(k, None)
        else:
            sc[k] = v
    runmeta.update(run, scenario=sc, **meta)
    return run


def _plan(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan-capture", *argv])
    return code, out.getvalue(), err.getvalue()


def _doc(*argv: str) -> dict[str, Any]:
    code, out, err = _plan(*argv, "--json")
    if code != 0:
        raise AssertionError(err)
    return json.loads(out)


def test_the_runs_vllm_version_is_modelled(tmp_path: Path) -> None:
    run = str(_run(tmp_path, scenario={"vllm_version": "0.32.0"}))
    doc = _doc("--from-run", run, "--memory-from-run", run)
    assert doc["vllm_version"]["version"] == "0.32.0"
    assert doc["vllm_version"]["from"] == "run r (its scenario's vllm_version)"
    assert doc["default_rule"].startswith("vLLM 0.32.0 (vllm-0.32")
    want = capture_plan("vllm-0.32", 256, 3, device="mi355x").tokens
    assert doc["default"]["sizes"] == want
    assert doc["compilation_config"].startswith('{"cudagraph_capture_sizes": [')
    _, text, _ = _plan("--from-run", run)
    assert "vLLM: 0.32.0, from run r (its scenario's vllm_version)" in text


def test_the_flag_wins_and_the_run_is_noted(tmp_path: Path) -> None:
    run = str(_run(tmp_path, scenario={"vllm_version": "0.32.0"}))
    doc = _doc("--from-run", run, "--vllm-version", "0.34.0")
    assert doc["vllm_version"] == {"version": "0.34.0", "from": "--vllm-version"}
    assert doc["compilation_config"].startswith('{"decode_cudagraph_capture_request_sizes"')
    assert any("names vLLM 0.32.0; the plan models 0.34.0" in n for n in doc["notes"])


@pytest.mark.parametrize(
    "meta, version, said",
    [
        ({"scenario": {"vllm_version": None}, "route": {"version": "0.33.0"}}, "0.33.0",
         "run r (its recorded route)"),
        ({"scenario": {"vllm_version": None}, "vllm": "0.32.0+cpu"}, "0.32.0",
         "run r (the engine's vLLM) (names 0.32.0+cpu: modelled as 0.32.0, its minor release)"),
        ({"scenario": {"vllm_version": None}, "vllm_version": "0.34.1"}, "0.34.0",
         "run r (the vLLM of the imported trace or log) (names 0.34.1: modelled as 0.34.0, its minor "
         "release)"),
    ],
)  # fmt: skip
def test_every_place_a_run_names_its_version(tmp_path: Path, meta: dict, version: str,
                                              said: str) -> None:  # fmt: skip
    doc = _doc("--from-run", str(_run(tmp_path, **meta)))
    assert doc["vllm_version"] == {"version": version, "from": said}


def test_no_version_named_is_the_default_said_as_such(tmp_path: Path) -> None:
    run = str(_run(tmp_path, scenario={"vllm_version": None}))
    doc = _doc("--from-run", run)
    assert doc["vllm_version"]["version"] == "0.34.0"
    assert doc["vllm_version"]["from"].startswith("the default, the newest modelled release")
    counts = tmp_path / "c.txt"
    counts.write_text("1 5\n3 2\n")
    doc = _doc("--counts", str(counts), "--spec", "3")
    assert doc["vllm_version"]["from"].startswith("the default")


def test_an_unmodelled_version_is_not_taken_for_the_default(tmp_path: Path) -> None:
    run = str(_run(tmp_path, scenario={"vllm_version": None}, vllm="0.11.0"))
    doc = _doc("--from-run", run)
    assert doc["vllm_version"]["from"].startswith("the default")
    assert any("names vLLM 0.11.0, which mlaprof does not model" in n for n in doc["notes"])


def test_the_memory_runs_version_counts_without_a_batch_run(tmp_path: Path) -> None:
    run = str(_run(tmp_path, scenario={"vllm_version": "0.33.0"}))
    counts = tmp_path / "c.txt"
    counts.write_text("1 5\n3 2\n")
    doc = _doc("--counts", str(counts), "--spec", "3", "--memory-from-run", run)
    assert doc["vllm_version"] == {"version": "0.33.0",
                                   "from": "memory run r (its scenario's vllm_version)"}  # fmt: skip


def test_modelled_version() -> None:
    assert [modelled_version(v) for v in ("0.32.0", "0.33.2", "v0.34.0rc1", "pre-51171",
                                          "0.3.0", "0.320.0", "main", "")] == [
        "0.32.0", "0.33.0", "0.34.0", "pre-51171", None, None, None, None]  # fmt: skip


# -- memory --------------------------------------------------------------------------------


def test_fits_over_no_and_one_size() -> None:
    with pytest.raises(MlaprofError, match="no capture-memory measurements"):
        fit_memory({}, "m")
    one = fit_memory({16: 2 * 2**20}, "m")
    assert not one.exact and one.assumed == "fixed cost per graph assumed 0"
    assert "rests on 1 size for 2 parameters" in one.provenance
    assert one.basis([16]) == "fitted to 1 measured size (16 tokens)"
    assert one.basis([8, 16, 32]) == (
        "extrapolated: 2 of 3 sizes from 1 measured size (16 tokens); fixed cost per graph "
        "assumed 0"
    )
    two = fit_memory({16: 30e6, 64: 90e6}, "m")
    assert two.exact and "rests on 2 sizes" in two.provenance
    assert two.basis([16, 32]) == "fitted to 2 measured sizes (16..64 tokens)"
    assert (
        two.basis([8, 32, 128])
        == "extrapolated: 2 of 3 sizes from 2 measured sizes (16..64 tokens)"
    )
    assert not memory_from_total(2**30, [4, 8], "log").exact
    assert MemoryModel(1.0, 1.0, "user").basis([4]) == "modelled: a user model"


def _budget(mem: MemoryModel) -> str:
    dist = {1: 50, 2: 30, 5: 7}
    sizes = capture_plan("vllm-0.34", 8, 3).tokens
    return make_plan(dist, 4, 8, sizes, "d", "t", mem).budget


def test_never_to_the_byte_on_an_underdetermined_fit() -> None:
    one = _budget(fit_memory({16: 2 * 2**20}, "m"))
    assert "to the byte" not in one.replace("not to the byte", "")
    assert "not to the byte (fixed cost per graph assumed 0)" in one
    assert "extrapolated" in one and "1 measured size (16 tokens)" in one
    assert _budget(fit_memory({4: 1e6, 32: 3e6}, "m")).endswith("planned to the byte")
    log = _budget(memory_from_total(2**30, [4, 8, 16], "log"))
    assert "not to the byte" in log


def test_cli_labels_extrapolated_memory(tmp_path: Path) -> None:
    run = str(_run(tmp_path))
    doc = _doc("--from-run", run, "--memory-from-run", run)
    assert "rests on 3 sizes for 2 parameters" in doc["memory"]  # the synthetic run's three
    d = doc["default"]
    assert d["memory_extrapolated"] is True and d["memory_basis"].startswith("extrapolated: ")
    assert doc["budget"].endswith("planned to the byte")  # three sizes fix both parameters
    _, text, _ = _plan("--from-run", run, "--memory-from-run", run)
    assert "extrapolated" in text and "memory basis" in text


def test_help_names_no_device_the_data_does_not_hold() -> None:
    """run.json records ``device: cuda`` (and a target preset), never a card model."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["plan-capture", "--help"])
    text = out.getvalue()
    for card in ("H200", "H100", "MI300", "MI355"):
        assert card not in text.upper()
    assert "on the device its" in text and "run.json names" in text


def test_a_vllm_logs_version_is_the_runs(tmp_path: Path) -> None:
    """A vLLM log's run names the version of its last server start (0.32.0 after 0.30.1 in
    the committed log) where every run.json reader finds it, as an imported trace's does."""
    from mlaprof.commands.plan_capture import run_vllm_version

    log = Path(__file__).parents[1] / "data" / "vllm" / "tp2_two_starts.log"
    assert main(["import", "vllm-log", str(log), "--traces", str(tmp_path), "--name", "v"]) == 0
    meta = runmeta.read(tmp_path / "v")
    assert meta["vllm_version"] == "0.32.0"
    assert run_vllm_version(meta, "run v") == [
        ("0.32.0", "run v (the vLLM of the imported trace or log)")
    ]
