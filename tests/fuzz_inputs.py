"""Mutated importer inputs, shared by the fuzz tests (hypothesis picks the seeds) and the stress
command ``scripts/fuzz_import.py`` (10,000 seeds per format).

Every format starts from real or documented-format fixtures and gets 1-3 mutations chosen by a
seeded RNG: byte flips, truncation, inserted/deleted/duplicated spans, huge or non-finite numbers,
swapped numbers (end before start), deep nesting, other encodings and invalid UTF-8, terminal
escapes and rich markup in names, gzip (valid, corrupt, truncated, twice), dropped CSV columns;
rocpd databases also get SQL-level damage (huge or wrongly typed cells, dropped objects, a view
whose query never ends). :func:`run_case` imports through the CLI and says what happened.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import re
import shutil
import sqlite3
import traceback
from dataclasses import dataclass
from pathlib import Path

from mlaprof.cli import main

FORMATS = ("rocprof-csv", "rocprof-json", "rocpd", "kineto", "vllm-log")
KIND = {
    "rocprof-csv": "rocprof",
    "rocprof-json": "rocprof",
    "rocpd": "rocprof",
    "kineto": "kineto",
    "vllm-log": "vllm-log",
}
SUFFIX = {
    "rocprof-csv": ".csv",
    "rocprof-json": ".json",
    "rocpd": ".db",
    "kineto": ".json",
    "vllm-log": ".log",
}

HUGE = [
    b"18446744073709551615",  # uint64 max (rocprofv3 ids)
    b"9223372036854775808",  # int64 max + 1
    b"-9223372036854775809",
    b"9" * 5000,  # over Python's int-digits limit
    b"1e999999",
    b"1e309",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"-1",
    b"0",
    b"1.5",
    b"-0",
    b"0x10",
]
NASTY = [
    b"\x1b[2J\x1b]0;pwned\x07",
    b"[red]x[/]",
    b"[/]",
    b"[bold",
    b"\x00",
    b"\r",
    b"\n",
    b'"',
    b",",
    b"\\",
    b"\xed\xa0\x80",  # a UTF-8-encoded lone surrogate
    b"\xff\xfe",
    b"\xc3\x28",
    "ℳ𝓛𝒜 ✓".encode(),
    b"</script><script>alert(1)</script>",
]
_NUM = re.compile(rb"-?\d+(?:\.\d+)?")


def seed_files(work: Path) -> dict[str, list[Path]]:
    """The unmutated inputs of each format (written under ``work``)."""
    from mlaprof.exporters.rocpd_export import export_rocpd
    from mlaprof.store import load
    from tests.trace_io_helpers import (
        DATA,
        KINETO_REAL,
        ROCPROF,
        kineto_trace,
        make_run,
        replay_kernel_csv,
        write_kineto,
    )
    from tests.unit.test_import_rocprof import _rocprof_json

    work.mkdir(parents=True, exist_ok=True)
    # real rocprofv3 CSVs, and the AMD MLA kernel traces made from aiter's own kernel names
    csvs = sorted(ROCPROF.glob("*.csv")) + sorted((DATA / "aiter").rglob("*.csv"))
    replay_kernel_csv(work / "replays_kernel_trace.csv", replays=2, layers=2, splits=4)
    csvs.append(work / "replays_kernel_trace.csv")
    rocpd = work / "export.rocpd.db"
    if not rocpd.exists():
        with load(make_run(work / "src")) as run:
            export_rocpd(run, rocpd)
    trace, _ = kineto_trace(replays=2, layers=2)
    return {
        "rocprof-csv": csvs,
        "rocprof-json": [_rocprof_json(work)],
        "rocpd": [rocpd],
        "kineto": [KINETO_REAL, write_kineto(work / "synthetic.json", trace)],
        "vllm-log": sorted((DATA / "vllm").glob("*.log")),  # logs vLLM's own logger wrote
    }


# -- byte- and text-level mutations ----------------------------------------------------------
def _pos(rng: random.Random, data: bytes) -> int:
    return rng.randrange(len(data) + 1)


def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    return bytes(out)


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: _pos(rng, data)]


def _insert(rng: random.Random, data: bytes) -> bytes:
    p = _pos(rng, data)
    junk = rng.choice([rng.randbytes(rng.randint(1, 16)), rng.choice(NASTY), rng.choice(HUGE)])
    return data[:p] + junk + data[p:]


def _delete(rng: random.Random, data: bytes) -> bytes:
    p = _pos(rng, data)
    return data[:p] + data[p + rng.randint(1, 64) :]


def _duplicate(rng: random.Random, data: bytes) -> bytes:
    p = _pos(rng, data)
    span = data[p : p + rng.randint(1, 400)]
    return data[:p] + span * rng.randint(2, 4) + data[p:]


def _huge(rng: random.Random, data: bytes) -> bytes:
    nums = list(_NUM.finditer(data))
    if not nums:
        return _insert(rng, data)
    for m in rng.sample(nums, min(len(nums), rng.randint(1, 3))):
        # replace from the end so that earlier offsets stay valid: one at a time is enough here
        data = data[: m.start()] + rng.choice(HUGE) + data[m.end() :]
        break
    return data


def _swap(rng: random.Random, data: bytes) -> bytes:
    """Swap two numbers (e.g. a start and an end timestamp)."""
    nums = list(_NUM.finditer(data))
    if len(nums) < 2:
        return _huge(rng, data)
    i = rng.randrange(len(nums) - 1)
    a, b = nums[i], nums[i + 1]
    return data[: a.start()] + b.group() + data[a.end() : b.start()] + a.group() + data[b.end() :]


def _nest(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice([50, 1000, 5000, 100_000])
    p = _pos(rng, data)
    inner = rng.choice([b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth])
    return data[:p] + inner + data[p:]


def _encoding(rng: random.Random, data: bytes) -> bytes:
    text = data.decode("utf-8", "replace")
    how = rng.choice(["utf-16", "utf-16-le", "utf-32", "latin-1", "bom", "cp1252", "invalid"])
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "invalid":
        p = _pos(rng, data)
        return (
            data[:p] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88"]) + data[p:]
        )
    return text.encode(how, "replace")


def _nasty_name(rng: random.Random, data: bytes) -> bytes:
    """Terminal escapes and markup inside a quoted string (a kernel name, a backend)."""
    quotes = [m.start() + 1 for m in re.finditer(rb'"[A-Za-z_]', data)]
    p = rng.choice(quotes) if quotes else _pos(rng, data)
    return data[:p] + rng.choice(NASTY[:4] + NASTY[-2:]) + data[p:]


def _drop_column(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    if not lines or b"," not in lines[0]:
        return _delete(rng, data)
    j = rng.randrange(lines[0].count(b",") + 1)
    only_header = rng.random() < 0.3
    out = []
    for i, line in enumerate(lines):
        if only_header and i > 0:
            out.append(line)
            continue
        parts = line.split(b",")
        if j < len(parts):
            del parts[j]
        out.append(b",".join(parts))
    return b"\n".join(out)


def _compress(rng: random.Random, data: bytes) -> bytes:
    z = gzip.compress(data)
    how = rng.choice(["valid", "flip", "truncate", "twice"])
    if how == "flip":
        return _flip(rng, z)
    if how == "truncate":
        return z[: rng.randrange(len(z))]
    if how == "twice":
        return gzip.compress(z)
    return z


TEXT_OPS = (
    _flip,
    _truncate,
    _insert,
    _delete,
    _duplicate,
    _huge,
    _swap,
    _nest,
    _encoding,
    _nasty_name,
    _compress,
)
CSV_OPS = (*TEXT_OPS, _drop_column, _huge, _swap)


def mutate_bytes(fmt: str, data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    ops = CSV_OPS if fmt == "rocprof-csv" else TEXT_OPS
    done = []
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(ops)
        if op is _compress and done and done[-1] == "_compress":
            continue
        data = op(rng, data)
        done.append(op.__name__)
        if op is _compress:
            break  # byte damage after compression is _compress's own business
    return data, done


# -- rocpd (SQLite) ---------------------------------------------------------------------------
SQL_VALUES = [2**63 - 1, -(2**63), 1e308, float("inf"), "x", "18446744073709551615", b"\x00b", None]


def _sql_mutation(rng: random.Random, db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        objs = con.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")
        objs = [o for o in objs.fetchall() if o[0] in ("table", "view")]
        tables = [o for o in objs if o[0] == "table"]
        how = rng.choice(["cell", "cell", "cell", "drop", "swap", "dup", "recursive"])
        if how == "drop" and objs:
            typ, name, _ = rng.choice(objs)
            con.execute(f'DROP {typ.upper()} "{name}"')
        elif how == "recursive":
            views = [o for o in objs if o[0] == "view" and o[1].startswith("rocpd_")]
            typ, name, sql = rng.choice(views)
            body = sql.split(" AS ", 1)[1]
            con.execute(f'DROP VIEW "{name}"')
            con.execute(
                f'CREATE VIEW "{name}" AS SELECT K.* FROM ({body}) K WHERE (WITH RECURSIVE '
                "c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT max(n) FROM c) > 0"
            )
        elif tables:
            _, name, _ = rng.choice(tables)
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
            n = con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
            if not cols or not n:
                return "noop"
            if how == "dup":
                con.execute(f'INSERT INTO "{name}" SELECT * FROM "{name}" LIMIT 3')
            elif how == "swap" and {"start", "end"} <= set(cols):
                con.execute(f'UPDATE "{name}" SET start = "end", "end" = start')
            else:
                col = rng.choice(cols)
                rowid = rng.randint(1, n)
                v = rng.choice(SQL_VALUES)
                con.execute(f'UPDATE "{name}" SET "{col}" = ? WHERE rowid = ?', (v, rowid))
        con.commit()
        return how
    except sqlite3.Error:
        return "sql-refused"
    finally:
        con.close()


def make_case(fmt: str, seeds: list[Path], seed: int, out_dir: Path) -> tuple[Path, list[str]]:
    """Write the mutated input of case ``seed`` and return (path, what was done)."""
    rng = random.Random(f"{fmt}:{seed}")
    src = rng.choice(seeds)
    name = src.name
    if fmt == "rocpd":
        path = out_dir / "case.db"
        shutil.copy(src, path)
        done = ["sql-" + _sql_mutation(rng, path)] if rng.random() < 0.6 else []
        if not done or rng.random() < 0.3:
            data = path.read_bytes()
            keep = 100 if rng.random() < 0.7 else 0  # mostly past the header, into the pages
            body, ops = mutate_bytes(fmt, data[keep:], rng)
            path.write_bytes(data[:keep] + body)
            done += ops
        return path, done
    data = src.read_bytes()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
        name = name.removesuffix(".gz")
    data, done = mutate_bytes(fmt, data, rng)
    if rng.random() < 0.1:  # a long line or string: every parser and renderer must stay linear
        at = rng.randrange(len(data) + 1)
        n = rng.choice([50_000, 200_000, 1_000_000])
        data = data[:at] + rng.choice([b"A", b"=", b"9", b"a=1 "]) * (n // 4) + data[at:]
        done.append(f"long-{n}")
    if data[:2] == b"\x1f\x8b" and fmt == "kineto":
        name += ".gz"
    path = out_dir / f"case-{name}"
    if fmt == "rocprof-csv" and path.suffix != ".csv":
        path = path.with_suffix(".csv")
    path.write_bytes(data)
    if fmt == "rocprof-csv" and rng.random() < 0.15:
        return _multi_rank(path, rng, out_dir), [*done, "multi-rank"]
    return path, done


def _multi_rank(path: Path, rng: random.Random, out_dir: Path) -> Path:
    """The case as rocprofv3 writes a multi-GPU job: a folder per host, a file set per process
    (pid prefix), sometimes the same process's file twice under another pid."""
    root = out_dir / "fleet"
    for h in range(rng.randint(1, 2)):
        for i in range(rng.randint(1, 3)):
            d = root / f"host{h}"
            d.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, d / f"{4000 + 10 * h + i}_kernel_trace.csv")
    path.unlink()
    return root


@dataclass
class Outcome:
    result: str  # imported | refused | traceback | bad-error | leftover | bad-run
    detail: str = ""


HANG_S = 10  # a post-import command that runs longer than this is a hang


def _post_commands(traces: Path, out: Path) -> list[list[str]]:
    run = str(traces / "fz")
    return [
        ["runs", str(traces)],
        ["report", run],
        ["report", run, "--json"],
        ["report", run, "--html", str(out / "r.html"), "--force"],
        ["tui", run, "--once"],
        ["export", run, "--format", "perfetto", "-o", str(out / "t.perfetto.json")],
        ["export", run, "--format", "rocpd", "-o", str(out / "t.rocpd.db")],
        ["export", run, "--format", "csv", "-o", str(out / "csv")],
        ["import", "rocprof", str(out / "t.rocpd.db"), "--traces", str(out / "back"), "--name",
         "back"],
    ]  # fmt: skip


def _hang(*_: object) -> None:
    raise TimeoutError(f"no answer in {HANG_S} s")


def run_case(
    fmt: str, path: Path, traces: Path, report: bool = False, post: bool = False
) -> Outcome:
    """Import ``path`` through the CLI; judge the all-or-nothing, one-line-error contract.
    ``report``: also list and report a successful import (names shown escaped). ``post``: every
    command a user runs on an import (report, --json, --html, tui --once, the three exports and
    a re-import of the rocpd export), each within HANG_S seconds, no traceback, no raw escape."""
    if traces.exists():
        shutil.rmtree(traces)
    err, out = io.StringIO(), io.StringIO()
    argv = ["import", KIND[fmt], str(path), "--traces", str(traces), "--name", "fz"]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except BaseException as e:  # noqa: BLE001 - exactly what this harness counts
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        return Outcome("traceback", "".join(tb[-3:])[-1500:])
    left = sorted(p.name for p in traces.iterdir()) if traces.exists() else []
    msg = err.getvalue()
    if rc == 2:
        if not msg.startswith("mlaprof: error: ") or msg.count("\n") != 1 or "Traceback" in msg:
            return Outcome("bad-error", msg[-500:])
        if left:
            return Outcome("leftover", f"{left} after: {msg.strip()}")
        return Outcome("refused", msg.strip()[len("mlaprof: error: ") :][:300])
    if rc != 0:
        return Outcome("bad-error", f"exit {rc}: {msg[-500:]}")
    if left != ["fz"]:
        return Outcome("leftover", f"{left} after a successful import")
    from mlaprof.store.reader import run_info

    info = run_info(traces / "fz")
    if info.status != "finished" or info.error:
        return Outcome("bad-run", f"{info.status}: {info.error}")
    if post:
        return _run_post(traces)
    if report:
        for argv in (["runs", str(traces)], ["report", str(traces / "fz")]):
            err, out = io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                    rc = main(argv)
            except BaseException as e:  # noqa: BLE001
                tb = traceback.format_exception(type(e), e, e.__traceback__)
                return Outcome("traceback", f"{argv[0]}: " + "".join(tb[-3:])[-1500:])
            if rc != 0 or "\x1b" in out.getvalue() or "\x07" in out.getvalue():
                return Outcome("bad-run", f"{argv[0]} exit {rc}, raw escapes or: {err.getvalue()}")
    return Outcome("imported")


def _run_post(traces: Path) -> Outcome:
    import signal

    out = traces.parent / "post"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    old = signal.signal(signal.SIGALRM, _hang)
    try:
        for argv in _post_commands(traces, out):
            err, so = io.StringIO(), io.StringIO()
            signal.alarm(HANG_S)
            try:
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(so):
                    rc = main(argv)
            except TimeoutError:
                return Outcome("hang", f"{argv[0]} {' '.join(argv[2:3])}: > {HANG_S} s")
            except RuntimeError as e:  # the alarm inside a DuckDB query: DuckDB's own error
                if "Query interrupted" not in str(e):
                    tb = traceback.format_exception(type(e), e, e.__traceback__)
                    return Outcome("traceback", f"{argv[:3]}: " + "".join(tb[-3:])[-1500:])
                return Outcome("hang", f"{argv[0]} {' '.join(argv[2:3])}: > {HANG_S} s")
            except BaseException as e:  # noqa: BLE001
                tb = traceback.format_exception(type(e), e, e.__traceback__)
                return Outcome("traceback", f"{argv[:3]}: " + "".join(tb[-3:])[-1500:])
            finally:
                signal.alarm(0)
            text = so.getvalue()
            if rc not in (0, 2) or "\x1b" in text or "\x07" in text:
                return Outcome("bad-run", f"{argv[:3]} exit {rc}: {err.getvalue()[-300:]}")
            if rc == 2 and (err.getvalue().count("\n") != 1 or "Traceback" in err.getvalue()):
                return Outcome("bad-error", f"{argv[:3]}: {err.getvalue()[-300:]}")
            if argv[0] == "import" and rc == 0:
                from mlaprof.store.reader import run_info

                info = run_info(out / "back" / "back")
                if info.status != "finished":
                    return Outcome("partial", f"re-import of the rocpd export: {info.status}")
    finally:
        signal.signal(signal.SIGALRM, old)
    return Outcome("imported")
