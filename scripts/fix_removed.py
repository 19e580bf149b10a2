"""Each reliability fix of round four removed, one at a time, in a scratch copy of the tree: the
tests that reproduce its harm must then fail (a test that still passes does not hold the fix).

A fix is removed by a textual change to the package (the pre-fix code where it was replaced
whole, e.g. the rocpd reader's ``readable`` taken verbatim from the commit before its fix, or
the check that makes the fix switched off), then the harm's tests run on that copy. The tree
itself is never changed. Each removal is listed in ``REMOVALS`` with the harm it brings back.

Usage::

    python scripts/fix_removed.py --json bench/results/fix_removed.json   # every removal
    python scripts/fix_removed.py "gate"                                   # names holding "gate"

Exit status 1 if any removal leaves its tests passing.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIVE_FIX = "79f0ae1"  # live rocpd inputs read as one committed state


def _readable_before_fix() -> str:
    """``rocpd_sqlite.readable`` as it was before the live-input fix: opened ``immutable`` when
    the ``-wal`` is missing or empty, else the database and then its ``-wal`` copied."""
    src = subprocess.run(
        ["git", "show", f"{LIVE_FIX}^:mlaprof/importers/rocpd_sqlite.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    m = re.search(r"@contextlib\.contextmanager\ndef readable\(.*?\n\n\n", src, re.S)
    if m is None:
        raise SystemExit(f"readable() not found in {LIVE_FIX}^")
    return m.group()


_WHOLE_KINETO = '''def scan(path: Path, events: bool = True) -> Scanned:
    """(removed fix) the whole text through json.loads, every event a dict at once."""
    if events:
        from mlaprof.importers.common import read_text
        from mlaprof.importers.kineto_steps import cpu_activity

        doc = parse(path, read_text(path, "Kineto JSON trace"))
        base = _base(doc)
        top = {k: v for k, v in doc.items() if k != "traceEvents"}
        return Scanned(top, load_events(path, doc), cpu_activity(doc, base, str(path)))
'''

_SCAN_MODE = (
    "        downs = [r for r in self.records\n"
    "                 if r['start'] == start and r['kind'] == 'cudagraph-downgrade']\n"
    "        if downs:\n            return str(downs[-1]['setting'])\n"
)

LIVE = "tests/unit/test_rocpd_live.py"
INTEGRITY = "tests/unit/test_run_integrity.py::"
GATE = "tests/e2e/test_gate_cli.py::"
BOUNDED = "tests/unit/test_bounded_inputs.py::"
INJECTION = "tests/unit/test_output_injection.py::"
RECORDS = "tests/unit/test_rocpd_records.py::"
STREAMING = "tests/unit/test_export_streaming.py::"

# harm: ([(file, regex, replacement)], [tests], timeout in s); the replacement is a template
# (re.sub's), a callable's result is taken as is
REMOVALS: dict[str, tuple[list[tuple[str, str, object]], list[str], int]] = {
    "torn import: readable() of the commit before the fix (immutable, two-step copy)": (
        [("mlaprof/importers/rocpd_sqlite.py",
          r"@contextlib\.contextmanager\ndef readable\(.*?\n\n\n(?=def _changing\()",
          lambda: _readable_before_fix())],
        [LIVE], 600),
    "torn import: the -shm (writer open) snapshot taken as the other cases": (
        [("mlaprof/importers/rocpd_sqlite.py", r"if shm\.exists\(\):", "if False:")],
        [LIVE], 600),
    "run folder: a rank database's rows and files not checked against its number": (
        [("mlaprof/store/integrity.py", r"(def check_rows\(.*?\"\"\"\n)", r"\1    return\n"),
         ("mlaprof/store/integrity.py", r"(def check_sides\(.*?\"\"\"\n)", r"\1    return\n")],
        [INTEGRITY + "test_a_rank_database_copied_under_another_number_is_refused",
         INTEGRITY + "test_a_renamed_rank_database_of_a_live_run_is_refused"], 600),
    "run folder: a missing rank database not checked": (
        [("mlaprof/store/integrity.py", r"(def check_complete\(.*?\"\"\"\n)", r"\1    return\n")],
        [INTEGRITY + "test_a_deleted_rank_database_is_named_not_a_smaller_run",
         INTEGRITY + "test_an_import_from_before_the_ranks_were_recorded_still_names_its_missing_rank"],
        600),
    "run folder: a linked rank database followed": (
        [("mlaprof/store/integrity.py", r"if p\.is_symlink\(\):", "if False:")],
        [INTEGRITY + "test_a_linked_rank_database_is_never_read"], 600),
    "follower: the run's identity (folder and database inodes, run id) not checked": (
        [("mlaprof/store/follow.py",
          r"if self\._folder_id is not None and ident != self\._folder_id:", "if False:"),
         ("mlaprof/store/follow.py", r"if self\._run_id is not None and ident != self\._run_id:",
          "if False:"),
         ("mlaprof/store/follow.py", r"if ident != self\._db_ids\.get\(key, ident\):", "if False:")],
        ["tests/unit/test_follow_identity.py"], 600),
    "gate: the check in the caller's process, not a child (exits)": (
        [("mlaprof/commands/check.py", r"run_isolated\(spec", "run_in_process(spec"),
         ("mlaprof/commands/check.py", r"RAISED, run_isolated", "RAISED, run_in_process")],
        [GATE + "test_a_sync_before_an_exit_still_fails",
         GATE + "test_an_exit_before_anything_is_recorded_is_no_pass"], 600),
    "gate: the check in the caller's process, not a child (fork)": (
        [("mlaprof/commands/check.py", r"run_isolated\(spec", "run_in_process(spec"),
         ("mlaprof/commands/check.py", r"RAISED, run_isolated", "RAISED, run_in_process")],
        [GATE + "test_a_fork_prints_one_verdict"], 600),
    "gate: no time limit": (
        [("mlaprof/gate/isolated.py", r"proc\.wait\(timeout=timeout\)", "proc.wait()")],
        [GATE + "test_a_hang_is_stopped_with_a_clear_message"], 90),
    "huge names: whole names carried through the report's SQL": (
        [("mlaprof/textsafe.py", r'return f"substr\(\{column\}, 1, \{int\(limit\)\}\) AS',
          'return f"{column} AS')],
        ["tests/unit/test_huge_names.py::test_reports_of_huge_names_stay_within_the_sql_cap"], 600),
    "gzip: no inflate limit": (
        [("mlaprof/importers/inputs.py", r"if total > limit:", "if False:")],
        [BOUNDED + "test_a_gzip_bomb_is_refused_while_it_inflates",
         "tests/unit/test_kineto_stream.py::test_gzip_stream_keeps_the_inflate_limit"], 600),
    "vLLM log: read whole, then split into lines": (
        [("mlaprof/importers/inputs.py", r"(def text_lines\(.*?\"\"\"\n)",
          r'\1    yield from read_text(path, what).split("\\n")\n    return\n')],
        [BOUNDED + "test_a_vllm_log_is_parsed_a_line_at_a_time"], 600),
    "vLLM log: each start's mode scans every record (quadratic in starts)": (
        [("mlaprof/importers/vllm_log.py",
          r"        if self\._downs\[0\] != len\(self\.records\):.*?return self\._downs\[1\]\[start\]\n",
          lambda: _SCAN_MODE)],
        [BOUNDED + "test_each_starts_final_mode_is_found_without_scanning_the_log_again"], 600),
    "Kineto: the whole text through json.loads": (
        [("mlaprof/importers/kineto.py",
          r"def scan\(path: Path, events: bool = True\) -> Scanned:\n    \"\"\".*?\"\"\"\n",
          lambda: _WHOLE_KINETO)],
        [BOUNDED + "test_a_kineto_trace_is_decoded_an_event_at_a_time"], 600),
    "exports: an imported run's kernels a Python row at a time (the writers before)": (
        [("mlaprof/exporters/csv_export.py", r'if typed\(run, "kernels", rank, _KERNEL_SOURCE\):',
          "if False:"),
         ("mlaprof/exporters/rocpd_export.py", r'if typed\(run, "kernels", rank, cols\):',
          "if False:"),
         ("mlaprof/exporters/perfetto.py", r"text = _fast_kernels\(batch, .*? else None",
          "text = None")],
        [STREAMING + "test_an_imported_runs_kernels_go_by_the_batch_writers"], 600),
    "exports: every kernel batch read before one is written": (
        [("mlaprof/exporters/csv_export.py",
          r'batches = iter_batches\(run, "kernels", rank, _KERNEL_SOURCE\)',
          'batches = iter(list(iter_batches(run, "kernels", rank, _KERNEL_SOURCE)))'),
         ("mlaprof/exporters/rocpd_export.py",
          r'for batch in iter_batches\(run, "kernels", rank, cols\):',
          'for batch in list(iter_batches(run, "kernels", rank, cols)):'),
         ("mlaprof/exporters/perfetto.py",
          r'for batch in iter_batches\(run, "kernels", rank, _KERNEL_COLS\):',
          'for batch in list(iter_batches(run, "kernels", rank, _KERNEL_COLS)):')],
        [STREAMING + "test_exporters_hold_a_batch_not_a_table"], 600),
    "duplicates: repeated dispatch records kept, not named": (
        [("mlaprof/importers/duplicates.py", r"kc, repeated = drop_repeated_dispatches\(kc\)",
          "repeated = 0")],
        [RECORDS + "test_dispatch_rows_written_twice_are_counted_once"], 600),
    "holes: dispatches without their kernel symbol not counted": (
        [("mlaprof/importers/duplicates.py", r"holes = nameless\(kc\)", "holes = 0")],
        [RECORDS + "test_dispatches_without_their_symbol_are_named"], 600),
    "Markdown: trace text not escaped": (
        [("mlaprof/textsafe.py",
          r's = _MD_SPECIAL\.sub\(lambda m: "\\\\" \+ m\.group\(\), _one_line\(value, limit\)\)',
          "s = _one_line(value, limit)")],
        [INJECTION + "test_md_text_is_text_in_github_markdown",
         INJECTION + "test_report_md_renders_trace_strings_as_text"], 600),
    "Markdown: a code span's fence always one backtick": (
        [("mlaprof/textsafe.py", r'fence = "`" \* \(max\(runs, default=0\) \+ 1\)', 'fence = "`"')],
        [INJECTION + "test_a_run_folder_named_with_a_backtick_keeps_its_heading"], 600),
    "terminal: tui --once's run list prints folder names raw": (
        [("mlaprof/tui/once.py", r"plain\(c\)\n(\s+)for c in \(r\.name",
          r"str(c)\n\1for c in (r.name"),
         ("mlaprof/tui/once.py", r'return plain_lines\(\n(\s+)f"runs in', r'return (\n\1f"runs in')],
        [INJECTION + "test_tui_once_run_list_prints_no_control_sequence"], 600),
}  # fmt: skip


def remove(work: Path, subs: list[tuple[str, str, object]]) -> None:
    for f, pat, rep in subs:
        p = work / f
        text = p.read_text()
        repl = (lambda _m, r=rep: r()) if callable(rep) else rep  # type: ignore[misc]
        new, n = re.subn(pat, repl, text, count=1, flags=re.S)  # type: ignore[call-overload]
        if n != 1:
            raise SystemExit(f"{f}: nothing matches {pat[:70]!r} (the fix moved: update REMOVALS)")
        p.write_text(new)


def run(name: str, work: Path) -> dict[str, object]:
    subs, tests, timeout = REMOVALS[name]
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".git", "__pycache__", ".*cache"))
    remove(work, subs)
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(work), "COLUMNS": "400"}  # failures' messages whole
    cmd = ["timeout", "-k", "10", str(timeout), sys.executable, "-m", "pytest", "-rf",
           "-p", "no:xdist", "-p", "no:cacheprovider", *tests]  # fmt: skip
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    _end_leftovers(work)
    lines = (r.stdout + r.stderr).strip().splitlines()
    summary = lines[-1].strip("= ") if lines else ""
    failed = [
        anonymous(x.removeprefix("FAILED "), work)[:300] for x in lines if x.startswith("FAILED ")
    ]
    # caught: a test failed, or the run ended without pytest's summary (killed by the removed
    # fix, e.g. os._exit in the caller's process, or past the timeout)
    caught = r.returncode != 0 or "failed" in summary or "passed" not in summary
    broken = " error" in summary and "failed" not in summary  # the removal broke the code
    return {"caught": caught and not broken, "broken": broken, "exit": r.returncode,
            "summary": anonymous(summary, work)[:200], "failed": failed, "tests": tests,
            "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip


def anonymous(text: str, work: Path) -> str:
    """A test's message without this machine's paths (recorded data names none)."""
    text = text.replace(str(work), "<tree>")
    return re.sub(re.escape(tempfile.gettempdir()) + r"/[^\s'\"]*", "<tmp>", text)


def _end_leftovers(work: Path) -> None:
    """Processes the run left behind (a hanging gate child of a removed time limit runs in its
    own session, out of ``timeout``'s reach): those whose PYTHONPATH holds this scratch tree."""
    mark = str(work).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        paths = [
            e.removeprefix(b"PYTHONPATH=").split(b":") for e in env if e.startswith(b"PYTHONPATH=")
        ]
        if any(mark in p for p in paths):
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", help="run the removals whose names hold these words")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    names = [n for n in REMOVALS if not args.only or any(o in n for o in args.only)]
    scratch = Path(tempfile.mkdtemp(prefix="mlaprof-fix-removed-"))
    results = {}
    try:
        for name in names:
            results[name] = run(name, scratch / "tree")
            print(f"{'caught' if results[name]['caught'] else 'MISSED'}  {name}: "
                  f"{results[name]['summary']}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "mlaprof", "tests"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    if args.json:
        doc = {"what": __doc__.splitlines()[0], "revision": rev, "tree_changed": bool(dirty),
               "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
               "results": results}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0 if all(r["caught"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
