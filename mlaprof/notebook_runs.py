"""Runs for the notebooks: a shipped one from ``traces/demo/`` when it matches, otherwise a CPU run
made once with ``mlaprof run`` into a cache folder (so five notebooks share two runs).

Where they look, in order: ``$MLAPROF_DEMO_TRACES``, ``traces/demo`` above the working folder;
where made runs go: ``$MLAPROF_NOTEBOOK_TRACES``, else ``<tmp>/mlaprof-notebook-runs``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError


def demo_folders() -> list[Path]:
    """Folders that may hold shipped runs (existing ones only)."""
    out = []
    env = os.environ.get("MLAPROF_DEMO_TRACES")
    if env:
        out.append(Path(env))
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        cand = d / "traces" / "demo"
        if cand.is_dir():
            out.append(cand)
            break
    return [p for p in out if p.is_dir()]


def _get(meta: Mapping[str, Any], key: str) -> Any:
    if key in meta:
        return meta[key]
    sc = meta.get("scenario")
    return sc.get(key) if isinstance(sc, Mapping) else None


def find_shipped(
    match: Mapping[str, Any],
    need: str | None = None,
    where: Callable[[dict[str, Any]], bool] | None = None,
) -> Path | None:
    """Newest finished shipped run whose run.json (or scenario) has every ``match`` value;
    ``need`` names a table that must have rows (e.g. ``memory`` for a GPU capture run) and
    ``where`` is a further test on run.json."""
    from mlaprof.store import list_runs, load

    for folder in demo_folders():
        for info in list_runs(folder):
            if info.error or info.status != "finished":
                continue
            with load(info.path) as run:
                if (
                    all(_get(run.meta, k) == v for k, v in match.items())
                    and (need is None or run.count(need) > 0)
                    and (where is None or where(run.meta))
                ):
                    return info.path
    return None


def cache_folder() -> Path:
    env = os.environ.get("MLAPROF_NOTEBOOK_TRACES")
    return Path(env) if env else Path(tempfile.gettempdir()) / "mlaprof-notebook-runs"


def make_run(
    label: str, args: Sequence[str], in_process: bool = True, timeout: float = 300
) -> Path:
    """``mlaprof run ARGS`` into the cache folder, once per (label, args). In process by default
    (the notebook kernel has torch imported already); ``in_process=False`` runs
    ``python -m mlaprof run`` in a child process."""
    from mlaprof.store import load

    digest = hashlib.sha1("\0".join(args).encode()).hexdigest()[:8]
    name = f"{label}-{digest}"
    folder = cache_folder()
    path = folder / name
    if path.is_dir():
        try:
            with load(path) as run:
                if run.status == "finished":
                    return path
                why = f"it is {run.status}"
        except MlaprofError as e:  # the reader's words, as `mlaprof report` says them
            why = str(e)
        raise MlaprofError(
            f"{path} exists but is not a finished run ({why}): remove it and run again"
        )
    argv = ["run", "--traces", str(folder), "--name", name, *args, "--quiet"]
    if in_process:
        from mlaprof.cli import main

        code = main(argv)
        if code != 0:
            raise MlaprofError(f"'mlaprof {' '.join(argv)}' failed (exit {code}; see above)")
        return path
    cmd = [sys.executable, "-m", "mlaprof", *argv]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise MlaprofError(f"'mlaprof {' '.join(argv)}' failed: {res.stderr.strip()[-500:]}")
    return path


def bug_and_fix(layers: int = 2, steps: int = 3) -> tuple[Path, Path]:
    """The pre-fix run (legacy-flat, min_kv over all rows) and the fixed one (min_kv over active
    rows): both shipped on the same device when ``traces/demo`` has them, else both made here."""
    a = find_shipped({"backend": "legacy-flat", "min_kv_mode": "all-rows"})
    if a is not None:
        from mlaprof.store import load

        with load(a) as ra:
            bug = ra.meta
        sc = bug.get("scenario", {})

        def same_case(m: dict[str, Any]) -> bool:  # the native path on the same requests
            other = m.get("scenario", {})
            return (
                m.get("backend") != "legacy-flat"
                and m.get("device") == bug.get("device")
                and all(other.get(k) == sc.get(k) for k in ("model", "kv_lens", "policy"))
            )

        b = find_shipped({"min_kv_mode": "active-rows"}, where=same_case)
        if b is not None:
            return a, b
    size = ["--layers", str(layers), "--steps", str(steps)]
    return (
        make_run("bug-legacy", ["--backend", "legacy-flat", *size]),
        make_run("fix-native", ["--backend", "torch", "--min-kv-mode", "active-rows", *size]),
    )
