"""A data-parallel engine's acceptance is each engine's own: every EngineCore writes its own
``rank<N>.scheduler.db`` (N the global rank of its engine's first worker, which vLLM offsets by
``data_parallel_rank * world_size``), and its records pair with the drafts of the worker rank of
the same global rank. The served summary summed every EngineCore's accepted tokens against the
first rank's drafts (engine 0 accepting 3 of 6 and engine 1 6 of 6 read "9 of 6", 150%), and the
scheduler-worker check paired rank 0's verify steps with both engines' records in one order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mlaprof.analysis.consistency import scheduler_agreement
from mlaprof.analysis.served import served_findings, served_summary
from mlaprof.analysis.step_records import Acceptance, EngineStep
from mlaprof.analysis.typed_json import over_ranks_text, to_json
from mlaprof.errors import MlaprofError
from mlaprof.reporters import rows
from tests.unit.test_ranks_never_merged import _words
from tests.view_texts import every_view as _views

META = {"kind": "engine", "source": "vllm plugin", "scenario": {"name": "vllm-engine"}}
POOLED = f"({over_ranks_text('rate of the tokens pooled', 2)})"
SUMMED = f"({over_ranks_text('sum', 2)})"


def _step_data(step: int, rows: int = 2) -> dict[str, Any]:
    """An ``engine-step`` record as the plugin writes it: ``rows`` requests of 3 drafts each."""
    return {"step": step, "kind": "verify", "backend": "TRITON_MLA", "builder": "b", "heads": 16,
            "graph_mode": "FULL", "num_tokens": rows * 4, "padded_tokens": rows * 4,
            "verify_rows": rows, "verify_draft_tokens": rows * 3, "verify_rows_as_prefill": 0,
            "drafter_builds": 0, "spec_method": "mtp", "num_speculative_tokens": 3}  # fmt: skip


def _accept_data(seq: int, accepted: int, rows: int = 2) -> dict[str, Any]:
    """A ``spec-accept`` record as the EngineCore writes it."""
    return {"seq": seq, "verify_rows": rows, "draft_tokens": rows * 3, "accepted_tokens": accepted}


def _steps(*ranks: int) -> list[EngineStep]:
    return [EngineStep.of({**_step_data(0), "rank": r}) for r in ranks]


def _acc(rank: int, accepted: int) -> Acceptance:
    return Acceptance.of({**_accept_data(0, accepted), "rank": rank})


def _labels(eng: Any) -> dict[str, str]:
    """Each row's label as every view shows the engine section of a two-rank run."""
    return {r.key: r.label for b in rows._blocks("engine", "engine", eng, ranks=2) for r in b.rows}


def _rates(eng: Any) -> list[float | None]:
    return [eng.acceptance_rate, *(e.acceptance_rate for e in eng.per_engine or [])]


def test_each_engine_accepts_of_its_own_drafts() -> None:
    """Engine 0 (ranks 0) accepts 3 of its 6 drafts, engine 1 (rank 1) 6 of its 6: each rate
    is its own, the pooled one 9 of 12, and no rate reads 9 of one rank's 6."""
    eng = served_summary(_steps(0, 1), [_acc(0, 3), _acc(1, 6)])
    assert eng is not None and eng.per_engine is not None
    got = [(e.rank, e.paired_rank, e.accepted_tokens, e.draft_tokens, e.acceptance_rate)
           for e in eng.per_engine]  # fmt: skip
    assert got == [(0, 0, 3, 6, 0.5), (1, 1, 6, 6, 1.0)]
    assert [e.scheduler_matches_worker for e in eng.per_engine] == [True, True]
    assert eng.acceptance_rate == 9 / 12 and eng.accepted_tokens == 9
    assert 9 / 6 not in _rates(eng), _rates(eng)
    assert eng.verify_rank is None  # no one rank stands for both engines
    assert eng.scheduler_matches_worker is True and eng.scheduler_worker_compared == 2
    assert "rank0.scheduler.db, rank1.scheduler.db" in eng.source, eng.source
    assert "pools the tokens of the engines of ranks 0-1" in eng.source, eng.source
    (f,) = served_findings(eng)
    assert (
        "acceptance per engine: engine of rank 0: 3 of 6 draft tokens accepted (50%); "
        "engine of rank 1: 6 of 6 draft tokens accepted (100%)"
    ) in f.title, f.title
    pooled = f"acceptance of the engines of ranks 0-1: 9 of 12 draft tokens, 75% {POOLED}; "
    assert pooled in f.evidence, f.evidence
    assert "9 of 6" not in f.title + f.evidence and "150%" not in f.title + f.evidence
    assert "engine of rank 0: agree on 1 step" in f.evidence, f.evidence
    assert f.data["accepted_tokens_per_engine"] == {0: 3, 1: 6}
    # each label says what the value is made of: the two engines', pooled or added
    labels = _labels(eng)
    assert labels["engine.acceptance_rate"] == f"acceptance rate {POOLED}", labels
    assert labels["engine.accepted_tokens"] == f"accepted tokens {SUMMED}", labels
    assert labels["engine.scheduler_steps"] == f"scheduler steps {SUMMED}", labels


def test_one_engine_reads_as_before() -> None:
    """One EngineCore beside two worker ranks: its accepted of the first rank's drafts, no
    per-engine list, no label on its own values."""
    eng = served_summary(_steps(0, 1), [_acc(0, 4)])
    assert eng is not None and eng.per_engine is None and eng.verify_rank == 0
    assert (eng.accepted_tokens, eng.acceptance_rate) == (4, 4 / 6)
    (f,) = served_findings(eng)
    assert f.title.endswith("4 of rank 0's 6 draft tokens accepted (67%)"), f.title
    assert "accepted_tokens_per_engine" not in f.data
    labels = _labels(eng)
    assert labels["engine.acceptance_rate"] == "acceptance rate", labels
    assert labels["engine.accepted_tokens"] == "accepted tokens", labels
    assert "per_engine" not in json.loads(json.dumps(to_json(eng)))


def test_one_engine_pairs_with_its_own_rank() -> None:
    """An EngineCore of rank 1 (its worker in the same process) pairs with rank 1's drafts."""
    steps = [*_steps(0), EngineStep.of({**_step_data(0, rows=3), "rank": 1})]
    eng = served_summary(steps, [Acceptance.of({**_accept_data(0, 3, rows=3), "rank": 1})])
    assert eng is not None and eng.verify_rank == 1 and eng.acceptance_rate == 3 / 9
    assert eng.scheduler_matches_worker is True


def test_scheduler_records_of_no_worker_rank_are_said_unattributed() -> None:
    """An EngineCore whose rank no worker of the run holds is named, its acceptance kept apart
    (no rate, not in the pooled one), and the section's source says so."""
    eng = served_summary(_steps(0, 1), [_acc(0, 3), _acc(5, 6)])
    assert eng is not None and eng.per_engine is not None
    (e0, e5) = eng.per_engine
    assert (e5.paired_rank, e5.draft_tokens, e5.acceptance_rate) == (None, None, None)
    assert e0.acceptance_rate == 0.5 and eng.acceptance_rate == 0.5
    assert "the scheduler records of rank 5 match no worker rank of this run" in eng.source
    (f,) = served_findings(eng)
    assert "engine of rank 5: 6 draft tokens accepted, not attributed to an engine" in f.title
    assert "pooled" not in f.evidence, f.evidence  # one attributed engine: nothing pooled
    labels = _labels(eng)
    assert labels["engine.acceptance_rate"] == "acceptance rate", labels  # engine 0's own


def test_the_agreement_check_refuses_two_engines_records() -> None:
    with pytest.raises(MlaprofError, match="scheduler records of ranks 0-1"):
        scheduler_agreement(_steps(0), [_acc(0, 3), _acc(1, 6)])
    with pytest.raises(MlaprofError, match="worker records of ranks 0-1"):
        scheduler_agreement(_steps(0, 1), [_acc(0, 3)])


def test_every_view_names_each_engines_acceptance(tmp_path: Path) -> None:
    """Two DP engines recorded as the plugin writes them (rank<N>.db, rank<N>.scheduler.db):
    the JSON, the terminal, Markdown, HTML and the dashboard say each engine's acceptance."""
    import mlaprof
    from mlaprof.recording import event_row
    from mlaprof.store import create_run

    for rank, accepted in ((0, 3), (1, 6)):
        w = create_run(tmp_path, "dp", META, rank=rank)
        w.add("events", **event_row("vllm", "engine-step", "s", _step_data(0)))
        w.finish()
        sched = create_run(tmp_path, "dp", META, rank=rank, role="scheduler")
        sched.add("events", **event_row("vllm", "spec-accept", "a", _accept_data(0, accepted)))
        sched.finish()
    with mlaprof.load(tmp_path / "dp") as run:
        s = mlaprof.build_summary(run)
    doc = json.loads(json.dumps(s.to_json()))["engine"]
    got = [(e["rank"], e["accepted_tokens"], e["draft_tokens"], e["acceptance_rate"])
           for e in doc["per_engine"]]  # fmt: skip
    assert got == [(0, 3, 6, 0.5), (1, 6, 6, 1.0)]
    assert doc["acceptance_rate"] == 0.75 and "verify_rank" not in doc
    for name, text in _views(tmp_path / "dp", s).items():
        assert "engine of rank 0: 3 of 6 draft tokens accepted (50%)" in text, name
        assert "engine of rank 1: 6 of 6 draft tokens accepted (100%)" in text, name
        assert "9 of 6" not in text and "150%" not in text, name
        assert f"acceptance rate {POOLED}" in text, name
        # the per-engine table: EngineCore rank, paired worker rank, steps, accepted, drafts
        w = _words(text)
        assert "0 0 1 3 6 50.0%" in w and "1 1 1 6 6 100.0%" in w, (name, w)


# -- whether an engine's pairing is known: the rule its scheduler database recorded ----------
def _recorded(
    traces: Path, name: str, cores: dict[int, int], rules: dict[int, str], workers: int = 2
) -> Path:
    """A run of ``workers`` worker ranks, each verifying 6 drafts, and the EngineCores
    ``cores`` (rank -> accepted tokens), each database's rank rule (``rules``, by rank; a rank
    absent recorded none: a run before the plugin wrote it) set as the plugin sets it
    (vllm_plugin.open_writer: ``rank_source``, and the engine's layout for the engine rule)."""
    from mlaprof.integrations.vllm_plugin import ENGINE_KEY, FROM_ENGINE, RANK_SOURCE_KEY
    from mlaprof.recording import event_row
    from mlaprof.store import create_run

    for rank in range(workers):
        w = create_run(traces, name, META, rank=rank)
        w.add("events", **event_row("vllm", "engine-step", "s", _step_data(0)))
        w.finish()
    for rank, accepted in cores.items():
        sched = create_run(traces, name, META, rank=rank, role="scheduler")
        if rank in rules:
            sched.set_meta(RANK_SOURCE_KEY, rules[rank])
            if rules[rank] == FROM_ENGINE:
                sched.set_meta(ENGINE_KEY, {"data_parallel_rank": rank, "data_parallel_size": 2,
                                            "world_size": 1, "first_worker_rank": rank})  # fmt: skip
        sched.add("events", **event_row("vllm", "spec-accept", "a", _accept_data(0, accepted)))
        sched.finish()
    return traces / name


def _built(run_dir: Path) -> Any:
    import mlaprof

    with mlaprof.load(run_dir) as run:
        return mlaprof.build_summary(run)


def _live(run_dir: Path) -> Any:
    """The dashboard's provisional summary of every committed row (no full pass)."""
    from mlaprof.tui.follower import RunFollower

    f = RunFollower(run_dir)
    try:
        f.catch_up()
        return f.view().summary
    finally:
        f.close()


def _pairings(s: Any) -> list[tuple[int, str | None, str | None]]:
    return [(e.rank, e.pairing and str(e.pairing), e.rank_source) for e in s.engine.per_engine]


def _engine_text(s: Any) -> str:
    (f,) = [f for f in s.findings if f.kind == "engine"]
    return f.title + " " + f.evidence


@pytest.mark.parametrize("rule", ["engine-data-parallel-rank", "torch.distributed",
                                  "vllm-world-group", "engine-data-parallel-index"])  # fmt: skip
def test_an_engines_own_rank_makes_its_pairing_known(tmp_path: Path, rule: str) -> None:
    """Both EngineCores' databases took their engine's rank (its layout, or the process's own
    distributed rank): each pairing is known, and nothing says assumed."""
    run_dir = _recorded(tmp_path, "dp", {0: 3, 1: 6}, {0: rule, 1: rule})
    s = _built(run_dir)
    assert _pairings(s) == [(0, "known", rule), (1, "known", rule)]
    assert (s.engine.pairing, s.engine.rank_source) == (None, None)  # each engine's own
    doc = json.loads(json.dumps(s.to_json()))["engine"]
    assert [(e["pairing"], e["rank_source"]) for e in doc["per_engine"]] == [("known", rule)] * 2
    assert "pairing" not in doc and "rank_source" not in doc
    assert "assumed" not in _engine_text(s) + s.engine.source
    assert _pairings(_live(run_dir)) == _pairings(s)  # the dashboard's fold reads the same
    for name, text in _views(run_dir, s).items():
        assert "pairing by rank rank named by" in _words(text), name
        row = _words(f"0 0 1 3 6 50.0% yes 1 agree on 1 step both committed known {rule}")
        assert row in _words(text.replace("\\", "")), name  # Markdown's escapes


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ("RANK", "its scheduler database's rank came from RANK, not from its engine"),
        ("LOCAL_RANK", "its scheduler database's rank came from LOCAL_RANK, not from its engine"),
        ("default", "its scheduler database's rank is the default 0: no rule named it"),
    ],
)
def test_a_rank_from_the_environment_or_the_default_makes_its_pairing_assumed(
    tmp_path: Path, rule: str, why: str
) -> None:
    """Engine 0's database took its engine's rank, engine 1's the environment's (or none): its
    pairing with worker rank 1 is assumed, in its row, the engine finding and the source."""
    run_dir = _recorded(tmp_path, "dp", {0: 3, 1: 6}, {0: "torch.distributed", 1: rule})
    s = _built(run_dir)
    assert _pairings(s) == [(0, "known", "torch.distributed"), (1, "assumed", rule)]
    said = f"engine of rank 1: 6 of 6 draft tokens accepted (100%), pairing assumed ({why})"
    assert said in _engine_text(s), _engine_text(s)
    assert "engine of rank 0: 3 of 6 draft tokens accepted (50%); " in _engine_text(s)
    assert f"; the engine of rank 1: pairing assumed ({why})" in s.engine.source, s.engine.source
    assert "engine of rank 0: pairing" not in s.engine.source
    assert _pairings(_live(run_dir)) == _pairings(s)
    for name, text in _views(run_dir, s).items():
        text = text.replace("\\", "")  # Markdown's escapes
        assert said in text, name
        row = _words(f"6 6 100.0% yes 1 agree on 1 step both committed assumed {rule}")
        assert row in _words(text), name


def test_one_engine_whose_rank_is_the_default_says_its_pairing_assumed(tmp_path: Path) -> None:
    """One EngineCore (rank 0 by default) beside two worker ranks: the section's own pairing
    (no per-engine list) is assumed, said after its rate and in the source."""
    run_dir = _recorded(tmp_path, "one", {0: 4}, {0: "default"})
    s = _built(run_dir)
    eng = s.engine
    assert eng.per_engine is None and eng.verify_rank == 0
    assert (str(eng.pairing), eng.rank_source) == ("assumed", "default")
    why = "its scheduler database's rank is the default 0: no rule named it"
    (f,) = [f for f in s.findings if f.kind == "engine"]
    assert f.title.endswith(
        f"4 of rank 0's 6 draft tokens accepted (67%), pairing assumed ({why})"
    ), f.title
    assert f"the pairing of the scheduler's records with rank 0's is assumed ({why})" in eng.source
    doc = json.loads(json.dumps(s.to_json()))["engine"]
    assert (doc["pairing"], doc["rank_source"]) == ("assumed", "default")
    for name, text in _views(run_dir, s).items():
        w = _words(text)
        assert "scheduler records paired by rank assumed scheduler rank named by default" in w, name


def test_one_engine_of_its_own_rank_is_known_and_reads_as_before(tmp_path: Path) -> None:
    run_dir = _recorded(tmp_path, "one", {0: 4}, {0: "engine-data-parallel-rank"})
    s = _built(run_dir)
    assert (str(s.engine.pairing), s.engine.rank_source) == ("known", "engine-data-parallel-rank")
    (f,) = [f for f in s.findings if f.kind == "engine"]
    assert f.title.endswith("4 of rank 0's 6 draft tokens accepted (67%)"), f.title
    assert "assumed" not in f.title + f.evidence + s.engine.source


def test_an_engine_paired_with_another_rank_is_assumed_whatever_its_rule(tmp_path: Path) -> None:
    """One EngineCore of rank 2 (its engine's layout) and workers 0-1 only: its records pair
    with rank 0's drafts, a guess (no worker of its rank), never read as known."""
    run_dir = _recorded(tmp_path, "other", {2: 4}, {2: "engine-data-parallel-rank"})
    s = _built(run_dir)
    assert s.engine.verify_rank == 0 and str(s.engine.pairing) == "assumed"
    assert "no worker rank of this run has its scheduler database's rank" in s.engine.source


def test_a_run_that_recorded_no_rule_says_not_recorded_never_known(tmp_path: Path) -> None:
    """A run before the plugin recorded the rule: every text reads as before, the pairing
    field "not recorded" (one engine: written null; several: each engine's row)."""
    one = _recorded(tmp_path, "one", {0: 4}, {})
    s = _built(one)
    assert (s.engine.pairing, s.engine.rank_source) == (None, None)
    (f,) = [f for f in s.findings if f.kind == "engine"]
    assert f.title.endswith("4 of rank 0's 6 draft tokens accepted (67%)"), f.title
    assert "pairing" not in f.title + f.evidence + s.engine.source
    doc = json.loads(json.dumps(s.to_json()))["engine"]
    assert (doc["pairing"], doc["rank_source"]) == (None, None)  # written null, not left out
    assert _live(one).engine.null_keys == s.engine.null_keys
    for name, text in _views(one, s).items():
        w = _words(text)
        assert "scheduler records paired by rank not recorded" in w, name
        assert "scheduler rank named by not recorded" in w, name
        assert " known " not in f" {w} ", name
    dp = _recorded(tmp_path, "dp", {0: 3, 1: 6}, {})
    s = _built(dp)
    assert _pairings(s) == [(0, None, None), (1, None, None)]
    assert "pairing" not in _engine_text(s) + s.engine.source
    for name, text in _views(dp, s).items():
        assert "both committed not recorded not recorded" in _words(text), name
        assert " known " not in f" {_words(text)} ", name


def test_no_engine_record_has_no_pairing_row(tmp_path: Path) -> None:
    """Without any EngineCore record nothing is paired: no pairing key, no row."""
    run_dir = _recorded(tmp_path, "none", {}, {})
    s = _built(run_dir)
    assert s.engine.accepted_tokens is None and s.engine.null_keys == frozenset()
    assert "pairing" not in json.loads(json.dumps(s.to_json()))["engine"]
    for name, text in _views(run_dir, s).items():
        assert "paired by rank" not in text, name


def test_unattributed_records_are_unpaired() -> None:
    eng = served_summary(_steps(0, 1), [_acc(0, 3), _acc(5, 6)], {0: "RANK", 5: "RANK"})
    assert eng is not None and eng.per_engine is not None
    assert [str(e.pairing) for e in eng.per_engine] == ["assumed", "unpaired"]
    assert "engine of rank 5: pairing" not in eng.source
