"""Every shipped run and trace as a stored run, and its ``report --json`` document normalised for
comparison (the temporary folders the imports were written to replaced by ``<tmp>``). The
golden documents under tests/data/summary_golden/ were written by ``python -m
tests.summary_corpus`` from main before the summary became typed (``compare.json.txt``: the
``--compare`` objects of :data:`COMPARED`, ``python -m tests.summary_corpus compare``);
test_summary_golden.py asserts the typed summary still writes them byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests import shipped_demo

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
GOLDEN = DATA / "summary_golden"
DEMO = shipped_demo.NAMES
ROCPROF = sorted(p.name for p in (DATA / "aiter").iterdir() if p.is_dir())
KINETO = {
    "kineto_graph_replay": DATA / "kineto_graph_replay.json.gz",
    "vllm_cpu_mla_profile": DATA / "vllm" / "cpu_mla_profile",
    "vllm_cpu_mtp_profile": DATA / "vllm" / "cpu_mtp_profile",
}
LOGS = sorted(p.name for p in (DATA / "vllm").glob("*.log"))
NAMES = (
    [f"demo-{n}" for n in DEMO]
    + [f"aiter-{n}" for n in ROCPROF]
    + list(KINETO)
    + [f"log-{n.removesuffix('.log')}" for n in LOGS]
)


def run_dir(name: str, tmp: Path) -> Path:
    """The stored run ``name`` (a demo run as shipped; a trace or log imported into ``tmp``)."""
    if name.startswith("demo-"):
        return shipped_demo.run(name.removeprefix("demo-"))
    if name.startswith("aiter-"):
        from mlaprof.importers.rocprof import import_rocprof

        return import_rocprof(DATA / "aiter" / name.removeprefix("aiter-"), tmp, name)[0]
    if name in KINETO:
        from mlaprof.importers.kineto import import_kineto

        return import_kineto(KINETO[name], tmp, name)[0]
    from mlaprof.importers.vllm_log import import_vllm_log

    return import_vllm_log(DATA / "vllm" / (name.removeprefix("log-") + ".log"), tmp, name)[0]


# the pairs whose ``report --json --compare`` object is kept (every ordered pair of these)
COMPARED = (
    "demo-bug-padding-collapses-splits-c16",
    "demo-fix-padding-active-rows-c16",
    "aiter-gluon_v0119_bug",
    "aiter-gluon_v0119_fix",
    "log-cpu_mla_serve",
)


def compare_document(tmp: Path) -> str:
    """Every ordered pair of :data:`COMPARED`: the ``compare`` object of its report."""
    import itertools

    from mlaprof.analysis.diff import diff_summaries

    docs = {n: report_json(n, tmp) for n in COMPARED}
    out = {
        f"{a}..{b}": diff_summaries(docs[a], docs[b])
        for a, b in itertools.permutations(COMPARED, 2)
    }
    return normalised(out, tmp)


def normalised(doc: dict[str, Any], tmp: Path) -> str:
    text = json.dumps(doc, indent=1, default=str, sort_keys=True)
    return text.replace(str(tmp.resolve()), "<tmp>").replace(str(tmp), "<tmp>") + "\n"


def report_json(name: str, tmp: Path) -> dict[str, Any]:
    from mlaprof.analysis import summary
    from mlaprof.store import load

    with load(run_dir(name, tmp)) as run:
        return summary(run)


def document(name: str, tmp: Path) -> str:
    return normalised(report_json(name, tmp), tmp)


if __name__ == "__main__":
    import tempfile

    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        for n in sys.argv[1:] or NAMES:
            if n == "compare":
                (GOLDEN / "compare.json.txt").write_text(compare_document(Path(d)))
            else:
                (GOLDEN / f"{n}.json").write_text(document(n, Path(d)))
            print(n)
