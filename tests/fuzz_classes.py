"""Fuzz classes beyond mutated bytes (``scripts/fuzz_import.py --classes``): each case builds a
hostile situation a user can meet and judges one contract.

- ``symlink``: a run name that is a symlink in the traces folder (to a folder, a file, nowhere),
  written by ``mlaprof run``, the vLLM plugin (``MLAPROF_RUN``) or ``import``: refused in one
  line, nothing written through the link.
- ``plugin-full-disk``: the vLLM plugin's writer on a 1 MiB tmpfs filled at random (root only):
  the run reads ``failed`` (or ``abandoned`` with no byte left for even that), never ``running``
  or unreadable, with exactly ``steps_written`` steps.
- ``long-html``: kernel names of up to 1 MB with random control characters through
  ``report --html``: no raw control character in the page, the page bounded.
- ``duplicate-pid``: a second kernel file of one pid (a copy, a subset, a shifted run): one rank,
  each dispatch once, or refused in one line.
- ``readonly-wal``, ``missing-views``: a rocpd database in WAL mode on a read-only filesystem
  (root only), one without a random optional table: imported, or refused in one line; never a
  traceback, never a file written beside the input.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import random
import shutil
import sqlite3
import subprocess
import traceback
from pathlib import Path

from mlaprof.cli import main

ROOT = Path(__file__).resolve().parents[1]
BUG = ROOT / "tests" / "data" / "aiter" / "gluon_v0119_bug"
KERNELS = ROOT / "tests" / "data" / "rocprof" / "rocprofiler-sdk-docs__kernel_trace.csv"
CLASSES = ("symlink", "plugin-full-disk", "long-html", "duplicate-pid", "readonly-wal",
           "missing-views")  # fmt: skip
RAW_CONTROL = {chr(c) for c in range(32) if chr(c) not in "\n\t"} | {"\x7f"}


def _cli(argv: list[str]) -> tuple[int, str, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _one_line(rc: int, err: str) -> str | None:
    """None when ``err`` is one ``mlaprof: error:`` line with exit 2, else what is wrong."""
    if rc != 2 or not err.startswith("mlaprof: error: ") or err.count("\n") != 1:
        return f"exit {rc}: {err[-300:]!r}"
    return None


def _refused(err: str) -> str:
    return "refused: " + err.strip().removeprefix("mlaprof: error: ")[:200]


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True)  # fmt: skip
    return r.returncode == 0


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


# -- the classes: each returns "ok", "skipped: why", "refused" or "broken: what" -----------------
def symlink_case(rng: random.Random, work: Path) -> str:
    traces, outside = work / "t", work / "outside"
    traces.mkdir(parents=True)
    target = rng.choice(["dir", "file", "nowhere"])
    dest = outside / "x"
    outside.mkdir()
    if target == "dir":
        dest.mkdir()
    elif target == "file":
        dest.write_text("keep")
    name = rng.choice(["victim", "a b", "v-2"])
    from mlaprof.store.runmeta import slug

    (traces / slug(name)).symlink_to(dest)
    before = sorted(p.name for p in outside.rglob("*"))
    writer = rng.choice(["run", "plugin", "import"])
    if writer == "plugin":
        from mlaprof.errors import MlaprofError
        from mlaprof.integrations import vllm_plugin

        old = {k: os.environ.get(k) for k in ("MLAPROF_TRACES", "MLAPROF_RUN")}
        os.environ.update(MLAPROF_TRACES=str(traces), MLAPROF_RUN=name)
        try:
            vllm_plugin.open_writer(rank=rng.choice([0, 1]), role=rng.choice(["", "scheduler"]))
            problem = "the plugin's writer opened through a symlink"
        except MlaprofError as e:
            problem = None if "symlink" in str(e) else f"refused for another reason: {e}"
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    else:
        argv = (["run", "--steps", "1", "--layers", "1", "--quiet", "--check-syncs", "off"]
                if writer == "run" else ["import", "rocprof", str(KERNELS)])  # fmt: skip
        rc, _, err = _cli([*argv, "--traces", str(traces), "--name", name])
        problem = _one_line(rc, err)
    after = sorted(p.name for p in outside.rglob("*"))
    if after != before:
        return f"broken: {writer} wrote {set(after) - set(before)} through the link"
    return f"broken: {writer}: {problem}" if problem else "refused"


def plugin_full_disk_case(rng: random.Random, work: Path) -> str:
    small = work / "small"
    if not _mount_tmpfs(small, "1m"):
        return "skipped: needs root to mount a 1 MiB tmpfs"
    try:
        fill = rng.choice([0, rng.randrange(0, 1024)])
        if fill:
            with contextlib.suppress(OSError):
                (small / "fill").write_bytes(b"\0" * fill * 1024)
        import pytest

        from mlaprof.integrations import vllm_patches
        from mlaprof.integrations.vllm_recorder import EngineRecorder
        from mlaprof.store import create_run
        from mlaprof.store.reader import list_runs
        from tests import vllm_fake as vf

        mp = pytest.MonkeyPatch()
        vf.install(mp)
        vllm_patches.uninstall()
        rank = rng.choice([0, 0, 1])
        rec = EngineRecorder(lambda role: create_run(small, "run", {"source": "vllm plugin"},
                                                     rank=rank, role=role),
                             markers=False, background=False)  # fmt: skip
        try:
            vllm_patches.install(rec)
            runner = vf.GPUModelRunner([vf.MLACommonMetadataBuilder()])
            rows = rng.choice([2, 16, 64])
            for i in range(rng.choice([50, 400, 3000])):
                runner.execute_model(([40 + i] * rows, [3] * rows))
                runner.sample_tokens(None)
                if rec.disabled:
                    break
            disabled = rec.disabled
            info = [r for r in list_runs(small) if r.name == "run"]
            rec.close()
        finally:
            vllm_patches.uninstall()
            mp.undo()
        if not info:
            return "ok" if not disabled else "broken: no run listed"
        r = info[0]
        if r.error:
            return f"broken: unreadable: {r.error[:200]}"
        if disabled and r.status not in ("failed", "abandoned"):
            return f"broken: status {r.status} after the disk filled"
        if r.steps != rec.steps_written:
            return f"broken: {r.steps} steps on disk, steps_written {rec.steps_written}"
        return "refused" if disabled else "ok"
    finally:
        _umount(small)


def long_html_case(rng: random.Random, work: Path) -> str:
    folder = work / "in"
    shutil.copytree(BUG, folder)
    path = folder / "4242_kernel_trace.csv"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    ki = rows[0].index("Kernel_Name")
    # no CR/LF: a line break inside a quoted CSV field is the CSV reader's matter, not the page's
    specials = [chr(c) for c in (*range(1, 32), 0x7F, 0x85, 0x9B) if chr(c) not in "\r\n"]
    for r in rows[1:]:
        if rng.random() < 0.5:
            n = rng.choice([10, 3000, 100_000, 1_000_000])
            junk = "".join(rng.choice(specials) if rng.random() < 0.01 else "k" for _ in range(
                min(n, 2000))) * max(1, n // 2000)  # fmt: skip
            where = rng.choice(["prefix", "suffix"])
            r[ki] = junk + r[ki] if where == "prefix" else r[ki] + junk
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    traces = work / "t"
    rc, _, err = _cli(["import", "rocprof", str(folder), "--traces", str(traces), "--name", "h"])
    if rc == 2:
        problem = _one_line(rc, err)
        return f"broken: import: {problem}" if problem else _refused(err)
    page = work / "r.html"
    rc, _, err = _cli(["report", "h", "--traces", str(traces), "--html", str(page)])
    if rc != 0:
        return f"broken: report --html exit {rc}: {err[-300:]!r}"
    text = page.read_text(encoding="utf-8")
    # plotly.js, inlined whole, has two in its own string literals (a PNG signature): not data
    lib_start, lib_end = text.find("<script"), text.find("</script>")
    raw = RAW_CONTROL & set(text[:lib_start] + text[lib_end:])
    if raw:
        return f"broken: raw control characters {sorted(map(ord, raw))} in the page"
    if len(text) > 12_000_000:
        return f"broken: a {len(text):,}-character page"
    return "ok"


def duplicate_pid_case(rng: random.Random, work: Path) -> str:
    folder = work / "in"
    shutil.copytree(BUG, folder)
    with open(folder / "4242_kernel_trace.csv", newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    kind = rng.choice(["copy", "subset", "shifted", "overlap"])
    s, e = head.index("Start_Timestamp"), head.index("End_Timestamp")
    if kind == "subset":
        body = [r for r in body if rng.random() < 0.5]
    elif kind in ("shifted", "overlap"):
        shift = 10**9 if kind == "shifted" else 1
        body = [[*r[:s], str(int(r[s]) + shift), str(int(r[e]) + shift), *r[e + 1:]]
                for r in body]  # fmt: skip
    with open(folder / f"4242_kernel_trace_{kind}.csv", "w", newline="") as f:
        csv.writer(f).writerows([head, *body])
    traces = work / "t"
    rc, out, err = _cli(["import", "rocprof", str(folder), "--traces", str(traces), "--name", "d"])
    if rc == 2:
        problem = _one_line(rc, err)
        if problem or (traces.exists() and any(traces.iterdir())):
            return f"broken: {kind}: {problem or 'left a run behind'}"
        return _refused(err)
    from mlaprof.store import load

    with load(traces / "d") as run:
        n, ranks = run.count("kernels"), run.ranks
    if ranks != [0] or n != len(rows) - 1:
        return f"broken: {kind}: ranks {ranks}, {n} kernels for {len(rows) - 1} dispatches"
    if "merged" not in out and kind in ("copy", "subset"):
        return f"broken: {kind}: merged without saying so"
    return "ok"


def _rocpd(work: Path) -> Path:
    traces = work / "src"
    _cli(["import", "rocprof", str(BUG), "--traces", str(traces), "--name", "b"])
    db = work / "results.db"
    rc, _, err = _cli(["export", "b", "--traces", str(traces), "--format", "rocpd", "-o", str(db)])
    if rc:
        raise RuntimeError(f"rocpd export failed: {err}")
    return db


def missing_views_case(rng: random.Random, work: Path) -> str:
    db = _rocpd(work)
    con = sqlite3.connect(db)
    optional = ("memory_copy", "memory_allocate", "info_stream", "info_thread")
    gone = rng.sample(optional, rng.randint(1, len(optional)))
    for base in gone:
        for name, typ in con.execute(
            "SELECT name, type FROM sqlite_master WHERE name = ? OR name LIKE ?",
            (f"rocpd_{base}", f"rocpd_{base}_%"),
        ).fetchall():
            con.execute(f'DROP {"VIEW" if typ == "view" else "TABLE"} IF EXISTS "{name}"')
    con.commit()
    con.close()
    rc, _, err = _cli(["import", "rocprof", str(db), "--traces", str(work / "t")])
    if rc == 2:
        problem = _one_line(rc, err)
        return f"broken: {problem}" if problem else _refused(err)
    return "ok" if rc == 0 else f"broken: exit {rc}"


def readonly_wal_case(rng: random.Random, work: Path) -> str:
    db = _rocpd(work)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    ro = work / "ro"
    if not _mount_tmpfs(ro, "64m"):
        return "skipped: needs root to mount a read-only tmpfs"
    try:
        shutil.copy(db, ro / "results.db")
        writable = rng.random() < 0.5
        if not writable:
            subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        before = sorted(p.name for p in ro.iterdir())
        rc, _, err = _cli(["import", "rocprof", str(ro / "results.db"), "--traces",
                           str(work / "t")])  # fmt: skip
        after = sorted(p.name for p in ro.iterdir())
        if after != before:
            return f"broken: wrote {set(after) - set(before)} beside the input"
        if rc == 2:
            problem = _one_line(rc, err)
            return f"broken: {problem}" if problem else _refused(err)
        return "ok" if rc == 0 else f"broken: exit {rc}"
    finally:
        _umount(ro)


CASES = {
    "symlink": symlink_case,
    "plugin-full-disk": plugin_full_disk_case,
    "long-html": long_html_case,
    "duplicate-pid": duplicate_pid_case,
    "readonly-wal": readonly_wal_case,
    "missing-views": missing_views_case,
}


def run_class(name: str, seed: int, work: Path) -> tuple[str, str]:
    """One case of class ``name``: (outcome, detail); a traceback is an outcome too."""
    work.mkdir(parents=True, exist_ok=True)
    try:
        res = CASES[name](random.Random(f"{name}-{seed}"), work)
    except BaseException as e:  # noqa: BLE001 - what the harness counts
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        return "traceback", "".join(tb[-3:])[-1000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    kind, _, detail = res.partition(": ")
    return kind, detail
