"""The typed summary writes the ``report --json`` document the dict-shaped summary wrote on
main, for every shipped run, trace and vLLM log (tests/summary_corpus.py wrote the golden files
once, from main ac93ad5, before the change): schema 3 only adds sections, every schema-2 key is
as it was. Rewritten since only where a change was meant: a GPU run's step time says the device
it was measured on ("measured graph replay on cuda"); a vLLM log's capture line says which
server start it is of ("... at start 2 of 2, as the log says"); a failed FULL capture's memory is
unknown, where the runner's placeholder zeros read "0 B measured on cuda" (never measured); an
imported trace's eager steps read "imported trace (eager steps)", not the key "trace-eager"; an
import no probe watched says in its sync line why its own check counted nothing; a fleet's replay
time says its kernel rows and attention share add every rank's launches (in the sections' one
wording, "sum over N ranks"); a failed capture's sizes count the sizes it attempted, as its memory
finding does; a multi-rank trace's trust finding and reasons are the unreliable rank's own; a
fleet's step counts in its capture evidence and collapse finding are per rank; a drafter's
passes name their step ids per rank (``trace.drafter.pass_steps``: the dashboard leaves them out
of its steps as the report does); a splits row whose policy's kernel cannot run the step says
why (``not_runnable``: every view says it from there, where it read "unknown", "-" or "‡"); a
scenario run's capture section says its sizes in words (``capture.sizes_text``: the size its
steps were padded to, the padding section's, beside what a capture covered); a route says
where it comes from beside what the run ran (``route.provenance``, ``route.text``: the line
every view prints); a trace's step checks are each rank's (``trace.checks.steps``: a row
per rank, ranks that read the same sharing one; it held one rank's graphs beside counts summed
over ranks), a collapse check names the ranks its steps add and each rank's steps, and every
sum over ranks is said by one function (``typed_json.over_ranks_label``: "(sum over 8 ranks)"
after the count it qualifies); a multi-rank trace's capture is each rank's (``capture.per_rank``,
its evidence per rank, where it read "24 of 24, sum over 8 ranks"), each rank's timing kind is
its own (``timing.per_rank[].timing``), and a fleet's API-call text says its sum over ranks; an
unknown trust says why (``trace.trust.reasons``: a CPU-only trace has no trace checks, where it
read "reasons none") and where it comes from (``trace.trust.provenance``); each rank's median
step per mode and layer median sit beside the pooled ones (``timing.per_rank[].by_mode``,
``.layer_median_us``), and the replay time holds each rank's own figures
(``trace.replay_time.per_rank``, ``outside_layers_text``: the range with the ranks behind each
value), its layer rows in layer order (ranks never merged where they differ); a fleet with no
rank judged for a collapse reads "not judged" (``fleet.ranks_collapsed`` / ``_not_collapsed``
null, ``fleet.ranks_not_judged`` naming them), never the verdict "none", and its line names what
the ranks disagree on ("S differs: 1 on ranks 0-3, 8 on ranks 4-7") and compares no S where no
layer holds one; a run with no layer record has no layer count of 0 (``fleet.per_rank[].layers``
and ``fleet.per_layer`` null); ``fleet.hosts_source`` says where a recorded run's or a Kineto
import's hosts come from, where it read rocprofv3's import words for every run; an imported
trace's capture says the mode that ran where the trace shows it (``capture.effective_mode``,
each rank's too: FULL where a graph-launch call confirms the replays, NONE for eager steps, each
mode with its steps where they mix), where it read null beside its own evidence "(FULL; 3 of 3
...)"; a multi-rank vLLM log's capture holds each rank's 'Graph capturing finished' memory
(``capture.per_rank``, with each rank's own status) and their sum as ``capture.memory_bytes``
(``memory_measure``: the driver free-memory delta), so the section and the headline give the
figures the memory findings give, the sum labelled "(sum over 2 ranks)" and the headline saying
which start it is of, where they read "unknown" (log-legacy_prefixes_tp2, log-tp2_two_starts); a
replay that lost a layer's stage-1 kernel has its layers placed by aligning its kernels to its
graph's complete replays (``trace.checks.replays.steps_layers_aligned``, said in the trust
reason), where they were counted from 0 over what was left: the lossy traces'
(aiter-gluon_v0119_fix_dropped, aiter-two_ranks_one_lossy) lost layers 0 and 3, not 2 and 3, so
their layer rows, layer times and time outside the layers moved to the layers that ran them;
a scenario run's splits rows say whether vLLM's route runs their policy (``splits[].on_route``)
and, where it does not, the condition their frozen S holds on (``splits[].frozen_what_if``: "if
vLLM ran <policy> (a what-if: this configuration takes <path> [vLLM <version>])"), the frozen S
itself kept (the demo runs' asm and Triton rows); every such row says the condition its S and
occupancy hold on (``splits[].what_if``, the same words, frozen S or not), and the compare's
occupancy row says where its value comes from ("model") as its S rows do (rewritten with this
test's own transform: its ADDED_IN_3 keys popped, schema 2); a run with no step recorded (the
vLLM logs) has no step count and no rank agreement (``timing.steps`` and ``.ranks_agree`` null,
``timing_label`` "no steps recorded"), where they read 0 and true (the log-* documents rewritten
with the same transform); a legacy-flat run whose vLLM route is another path says its sync,
capture and capture-memory findings on that path ("[on the legacy flat path, modelled on
purpose: not vLLM 0.32.0's route for this configuration (gluon-verify)]"), and a failed
attempt's unknown capture memory says in the headline the finding's reason ("not measured: the
attempt ran in a probe process ..."), where it read "not recorded" (the demo-bug-legacy-flat-*
and demo-bug-prefix-legacy-flat-* documents rewritten with the same transform); mlaprof's own
kernel's splits row has no ``on_route`` (vLLM runs it on no route: it read true), AITER's ASM
rows on an NVIDIA target are not runnable (``not_runnable``: the kernels ship for gfx942 and
gfx950 only, where they held an S and occupancy on sm_90), and a graph whose kernel decides S on
the device replayed its grid's cap (``replayed_splits.grid_cap``, ``min``/``max`` null: not an
S any row ran with, where it read "measured" 128) (the demo-* documents rewritten with the
same transform; c1-long's also drops its verify-buffer reservation, the working tree's
reservation rule for a route off AITER's backend); the layer records of such a run hold that
cap, not an S: its layers, S per MLA layer, ranks side by side (per rank, per layer) and DP
groups hold it as ``S_grid_cap`` with their S null, their collapse not judged (null: no S to
judge by, where they read S 128 and 0 collapsed) (demo-fix-splits-decided-on-device-c1-long
rewritten with the same transform); a replay time whose every kernel is an MLA kernel says what
its shares are of (``trace.replay_time.attention_only``: a graph of attention alone, or a trace
filtered to its MLA kernels), where its 100% read as attention's share of a decoder layer
(kineto_graph_replay rewritten with the same transform); a count's noun agrees with the count
("3 steps checked", "1 MLA layer per pass", where every text read "step(s)": the golden texts
rewritten with that rule alone, tests/unit/test_counts_agree.py)."""

from __future__ import annotations

import pytest

from mlaprof.analysis.run_summary import SUMMARY_SCHEMA
from tests import shipped_runs
from tests.summary_corpus import GOLDEN, NAMES, normalised

# each input imported and summarised once per worker (tests/shipped_runs.py), shared with the
# figure, renderer and SQL-vs-pandas tests
WORKER_GROUP = "shipped-runs"

# the sections schema 3 added (docs/evidence.md; findings_verdict: the line under an empty
# findings list, mlaprof.analysis.findings_verdict); nothing else may differ from the golden files
ADDED_IN_3 = ("state", "imported", "log_spec", "dp_groups", "full_graph_splits", "findings_verdict")
# fields schema 3 added to the rows of a section (the steps a layer's S is known on, the ranks
# a verify-path check stands for)
ADDED_IN_3_ROWS = {"layers": ("S_steps",), "paths": ("ranks",)}


def test_every_shipped_input_has_its_golden_document() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(NAMES)
    assert len(NAMES) >= 20


@pytest.mark.parametrize("name", NAMES)
def test_report_json_is_the_golden_document(name: str) -> None:
    # what ``report --json`` prints: mlaprof.analysis.summary(run) = build_summary(run).to_json()
    doc = shipped_runs.summary(name).to_json()
    assert doc["schema_version"] == SUMMARY_SCHEMA == 3
    for key in ADDED_IN_3:
        doc.pop(key)
    for section, keys in ADDED_IN_3_ROWS.items():
        for row in doc.get(section) or []:
            for key in keys:
                row.pop(key, None)
    doc["schema_version"] = 2
    assert normalised(doc, shipped_runs.folder()) == (GOLDEN / f"{name}.json").read_text()


def test_the_typed_diff_is_main_s_compare_object() -> None:
    """``diff`` of two typed summaries writes main's ``--compare`` object for every ordered
    pair of bug/fix runs, traces and a log (compare.json.txt, written from main; rewritten
    where a run no probe watched had a sync-site count of 0, and where two workloads got a
    verdict on their critical findings' count; the workload gained the rank count; the S and
    capture-memory rows say their sources; a route says it is modelled, and then where it comes
    from and UNVERIFIED as its line does: ``route_label``, the route's own provenance; a workload
    not known to be the same gets no verdict ("not judged", the line naming the parts a
    run does not state; a trace's heads, kernel family and MLA layers per step are its workload,
    its model and KV lengths ``not_held``), and the layer time is two named rows, the MLA
    attention span and the whole layer's GPU time: rewritten from this test's own ``got``)."""
    import itertools
    import json

    from mlaprof.analysis.diff import SummaryDiff, diff
    from tests.summary_corpus import COMPARED

    typed = {n: shipped_runs.summary(n) for n in COMPARED}
    got = {}
    for a, b in itertools.permutations(COMPARED, 2):
        d = diff(typed[a], typed[b])
        assert isinstance(d, SummaryDiff)
        got[f"{a}..{b}"] = d.to_json()
    want = json.loads((GOLDEN / "compare.json.txt").read_text())
    assert json.loads(json.dumps(got, default=str)) == want
