"""Following a run while it is written: poll each rank's SQLite database for rows past the last
rowid seen, group them in SQL and merge the groups into :mod:`tui.state`.

A refresh costs a few indexed range queries per table whatever the run's size (rowid is the
primary key). Problems (run deleted, truncated, corrupted, other schema) become a
:class:`FollowError` with one readable line; the dashboard shows it instead of a traceback.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlaprof.analysis.findings import Finding
from mlaprof.errors import MlaprofError
from mlaprof.store import columnar
from mlaprof.store.schema import TABLES, version_problem
from tui.state import RankState, View, build_view

_RANK_DB = re.compile(r"^rank(\d+)\.db$")
_R = "rowid > ? AND rowid <= ?"
# rowids ingested per table per poll: catching up on a huge run happens in slices, so the lock
# is never held long and the dashboard draws progress instead of freezing
CHUNK = 20_000


class FollowError(Exception):
    """The followed run cannot be read any more (deleted, truncated, corrupted)."""


class RunFollower:
    """Incremental reader of one run folder; thread-safe through :attr:`lock`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.meta: dict[str, Any] = {}
        self.states: dict[int, RankState] = {}
        self._cons: dict[int, sqlite3.Connection] = {}
        self._last: dict[tuple[int, str], int] = {}
        self._seen_folder = False
        self.problem: str | None = None
        self.findings: list[Finding] | None = None
        self.findings_source = "built-in rules"
        self.polls = 0
        self.behind = False  # more committed rows wait than one poll ingests
        self.analyses: list[float] = []  # seconds each mlaprof.analysis pass took

    # -- polling -------------------------------------------------------------------------------
    def poll(self) -> int:
        """Read what was committed since the last poll; returns the number of new rows."""
        with self.lock:
            try:
                n = self._poll()
            except FollowError as e:
                self.problem = str(e)
                raise
            except sqlite3.DatabaseError as e:
                self.problem = f"{self.path.name}: the database cannot be read ({e})"
                raise FollowError(self.problem) from None
            except OSError as e:
                self.problem = f"{self.path.name}: {e.strerror or e}"
                raise FollowError(self.problem) from None
            self.polls += 1
            return n

    def _poll(self) -> int:
        if not self.path.is_dir():
            if self._seen_folder:
                raise FollowError(f"run {self.path.name} was deleted")
            self.problem = f"waiting for run {self.path} to appear"
            return 0
        self._seen_folder = True
        if not self.meta or self.polls % 8 == 0:
            self._read_meta()
        if self.polls % 4 == 0 or not self._cons:
            self._open_ranks()
        if not self._cons:
            self.problem = "waiting for the first records"
            return 0
        self.problem = None
        total = 0
        self.behind = False
        for rank, con in self._cons.items():
            db = self.path / f"rank{rank}.db"
            if not db.exists():
                raise FollowError(f"{db.name} of run {self.path.name} was deleted")
            total += self._ingest(rank, con)
        return total

    def _read_meta(self) -> None:
        p = self.path / "run.json"
        try:
            doc = json.loads(p.read_text())
        except FileNotFoundError:
            if self.meta:
                raise FollowError(f"run.json of {self.path.name} was deleted") from None
            return
        except (UnicodeDecodeError, json.JSONDecodeError):
            if self.meta:
                return  # being rewritten atomically elsewhere; keep the old one
            raise FollowError(f"{p} is corrupt (not JSON)") from None
        if not isinstance(doc, dict):
            raise FollowError(f"{p} is corrupt: expected a JSON object")
        problem = version_problem(doc.get("schema_version"), self.path.name)
        if problem:
            raise FollowError(problem)
        self.meta = doc

    def _open_ranks(self) -> None:
        for p in sorted(self.path.iterdir()):
            m = _RANK_DB.match(p.name)
            if not m or int(m.group(1)) in self._cons:
                continue
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True, check_same_thread=False)
            ver = con.execute("PRAGMA user_version").fetchone()[0]
            if ver == 0:
                con.close()  # the writer has not committed its tables yet
                continue
            problem = version_problem(ver, p.name)
            if problem:
                con.close()
                raise FollowError(problem)
            state = RankState()
            try:
                # an import's kernels sit in an Arrow file: counted, never polled (immutable)
                for table, side in columnar.side_tables(con, self.path).items():
                    state.counts[table] = side.rows
            except MlaprofError as e:
                con.close()
                raise FollowError(str(e)) from None
            self._cons[int(m.group(1))] = con
            self.states[int(m.group(1))] = state

    def _ingest(self, rank: int, con: sqlite3.Connection) -> int:
        st = self.states[rank]
        row = con.execute("SELECT value FROM meta WHERE key='status'").fetchone()
        status = row[0] if row else "running"
        new = int(status != st.status)  # a status change (finished, failed) is news too
        st.status = status
        for table in TABLES:
            hi = con.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
            lo = self._last.get((rank, table), 0)
            if hi < lo:
                raise FollowError(f"rank{rank}.db of {self.path.name} was truncated ({table})")
            if hi == lo:
                continue
            if hi - lo > CHUNK:
                hi = lo + CHUNK
                self.behind = True
            _INGEST.get(table, _count_only)(con, st, lo, hi)
            st.counts[table] = (
                st.counts.get(table, 0)
                + con.execute(f"SELECT COUNT(*) FROM {table} WHERE {_R}", (lo, hi)).fetchone()[0]
            )
            self._last[(rank, table)] = hi
            new += hi - lo
        return new

    # -- on-demand queries (UI thread) -----------------------------------------------------------
    def step_ids(self, rank: int | None) -> list[int]:
        with self.lock:
            st = self.states.get(rank if rank is not None else min(self.states, default=0))
            return list(st.step_ids) if st else []

    def step_layers(self, step: int, rank: int | None) -> list[dict[str, Any]]:
        """One step's layer rows, found through the rowid range recorded while ingesting."""
        with self.lock:
            out: dict[int, dict[str, Any]] = {}
            for r, con in self._cons.items():
                if rank is not None and r != rank:
                    continue
                rng = self.states[r].layer_rowids.get(step)
                if rng is None:
                    continue
                rows = con.execute(
                    "SELECT layer, duration_ns, syncs, splits_used, splits_deserved FROM layers "
                    "WHERE rowid >= ? AND rowid <= ? AND step = ?",
                    (rng[0], rng[1], step),
                ).fetchall()
                for layer, dur, syncs, used, deserved in rows:
                    cur = out.setdefault(
                        layer,
                        {"layer": layer, "time_ms": 0.0, "syncs": 0, "used": used, "rows": 0},
                    )
                    cur["time_ms"] += (dur or 0) / 1e6
                    cur["syncs"] += syncs or 0
                    cur["rows"] += 1
                    cur["used"] = min(cur["used"] or used or 0, used or 0) or used
                    cur["deserved"] = deserved
                    cur["collapsed"] = int(
                        used is not None and deserved is not None and used < deserved
                    )
            for cur in out.values():
                cur["time_ms"] /= cur["rows"]
                cur["occupancy"] = None
            return list(out.values())

    def catch_up(self) -> int:
        """Poll until every committed row is ingested (``--once``, benchmarks)."""
        n = self.poll()
        while self.behind:
            n += self.poll()
        return n

    def view(
        self,
        rank: int | None = None,
        step: int | None = None,
        layer_sort: tuple[str, bool] = ("layer", False),
    ) -> View:
        with self.lock:
            layers = self.step_layers(step, rank) if step is not None else None
            return build_view(
                self.meta or {"name": self.path.name},
                self.states,
                rank,
                step_layers=layers,
                step=step,
                findings=self.findings,
                findings_source=self.findings_source,
                problem=self.problem,
                layer_sort=layer_sort,
            )

    @property
    def finished(self) -> bool:
        with self.lock:
            return bool(self.states) and all(
                s.status in ("finished", "failed") for s in self.states.values()
            )

    def close(self) -> None:
        with self.lock:
            for con in self._cons.values():
                con.close()
            self._cons.clear()


# -- per-table ingestion: grouped in SQL over the new rowid range -------------------------------
def _count_only(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
    return None


def _steps(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
    agg = con.execute(
        f"SELECT COUNT(*), SUM(duration_ns), MIN(duration_ns), MAX(duration_ns) FROM steps "
        f"WHERE {_R}",
        (lo, hi),
    ).fetchone()
    tail = con.execute(
        "SELECT step, duration_ns, graph_mode, num_reqs, num_real_reqs, padded_tokens, backend, "
        f"timing FROM steps WHERE {_R} ORDER BY rowid DESC LIMIT ?",
        (lo, hi, st.recent.maxlen),
    ).fetchall()
    st.add_steps(agg, tail[::-1])
    st.add_modes(
        con.execute(
            f"SELECT graph_mode, COUNT(*) FROM steps WHERE {_R} GROUP BY graph_mode", (lo, hi)
        ).fetchall()
    )
    st.step_ids.extend(
        s for (s,) in con.execute(f"SELECT step FROM steps WHERE {_R} ORDER BY rowid", (lo, hi))
    )


def _layers(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
    rows = con.execute(
        "SELECT layer, COUNT(*), SUM(duration_ns), SUM(syncs), "
        "SUM(splits_used < splits_deserved) "
        f"FROM layers WHERE {_R} GROUP BY layer",
        (lo, hi),
    ).fetchall()
    last = con.execute(
        "SELECT layer, splits_used, splits_deserved FROM layers WHERE rowid IN "
        f"(SELECT MAX(rowid) FROM layers WHERE {_R} GROUP BY layer)",
        (lo, hi),
    ).fetchall()
    st.add_layers(rows, last)
    st.add_layer_rowids(
        con.execute(
            f"SELECT step, MIN(rowid), MAX(rowid) FROM layers WHERE {_R} GROUP BY step", (lo, hi)
        ).fetchall()
    )


def _syncs(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
    st.add_syncs(
        con.execute(
            "SELECT layer, kind, op, location, function, COUNT(*), MIN(step), MAX(detail) "
            f"FROM syncs WHERE {_R} GROUP BY layer, kind, op, location, function",
            (lo, hi),
        ).fetchall()
    )


_SPLIT_LAST = (
    "capture_size, policy, step, used, deserved, frozen, min_kv_used, min_kv_deserved, "
    "occupancy_used, occupancy_deserved, target, note"
)


def _splits(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
    rows = con.execute(
        "SELECT capture_size, policy, COUNT(*), SUM(used < deserved), MIN(used), MAX(used) "
        f"FROM splits WHERE {_R} GROUP BY capture_size, policy",
        (lo, hi),
    ).fetchall()
    cur = con.execute(
        f"SELECT {_SPLIT_LAST} FROM splits WHERE rowid IN "
        f"(SELECT MAX(rowid) FROM splits WHERE {_R} GROUP BY capture_size, policy)",
        (lo, hi),
    )
    names = [d[0] for d in cur.description]
    st.add_splits(rows, [dict(zip(names, r, strict=True)) for r in cur.fetchall()])


def _padding(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
    st.add_padding(
        con.execute(
            "SELECT capture_size, COUNT(*), SUM(real_rows), SUM(padding_rows), SUM(real_tokens), "
            "SUM(padding_tokens), SUM(kv_bytes_real), SUM(kv_bytes_padding) "
            f"FROM padding WHERE {_R} GROUP BY capture_size",
            (lo, hi),
        ).fetchall()
    )


def _latest(table: str, target: str) -> Callable[[sqlite3.Connection, RankState, int, int], None]:
    """Keep the latest row per (capture_size, graph_mode): small tables, read whole."""

    def ingest(con: sqlite3.Connection, st: RankState, lo: int, hi: int) -> None:
        cur = con.execute(f"SELECT * FROM {table} WHERE {_R} ORDER BY rowid", (lo, hi))
        names = [d[0] for d in cur.description]
        dest = getattr(st, target)
        for r in cur.fetchall():
            row = dict(zip(names, r, strict=True))
            row.pop("rank", None)
            dest[(row.get("capture_size"), row.get("graph_mode"))] = row

    return ingest


_INGEST: dict[str, Callable[[sqlite3.Connection, RankState, int, int], None]] = {
    "steps": _steps,
    "layers": _layers,
    "syncs": _syncs,
    "splits": _splits,
    "padding": _padding,
    "memory": _latest("memory", "memory"),
    "captures": _latest("captures", "captures"),
}


# -- findings from mlaprof.analysis (lead's), when it exists -----------------------------------
def analyze_run(path: Path) -> tuple[list[Finding] | None, str]:
    """Findings of ``mlaprof.analysis.analyze``; ``(None, why)`` when it is not available."""
    try:
        from mlaprof.analysis import analyze  # type: ignore[attr-defined]
    except ImportError:
        return None, "built-in rules (mlaprof.analysis.analyze not available)"
    from mlaprof.store import load

    try:
        with load(path) as run:
            return list(analyze(run)), "mlaprof.analysis"
    except Exception as e:  # analysis of a partial run may fail; the built-in rules still show
        return None, f"built-in rules (analysis failed: {type(e).__name__}: {e})"


class _Analyzer:
    """Runs ``mlaprof.analysis`` beside the polling (it reads the whole run: seconds on big runs),
    at most every ``every`` seconds and backing off to 10x its own cost."""

    def __init__(self, follower: RunFollower, every: float) -> None:
        self.f = follower
        self.every = every
        self.thread: threading.Thread | None = None
        self.next_at = 0.0
        self.dirty = True  # records arrived since the last pass
        self.final_done = False
        self.news = threading.Event()  # a pass finished: redraw

    def maybe_start(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        f = self.f
        done = f.finished
        if not f.states or f.behind or self.final_done or not self.dirty:
            return
        if time.monotonic() < self.next_at and not done:
            return
        self.dirty = False
        self.thread = threading.Thread(target=self._run, args=(done,), daemon=True)
        self.thread.start()

    def _run(self, final: bool) -> None:
        t0 = time.monotonic()
        found, source = analyze_run(self.f.path)
        cost = time.monotonic() - t0
        with self.f.lock:
            self.f.findings, self.f.findings_source = found, source
            self.f.analyses.append(cost)
        self.next_at = time.monotonic() + max(self.every, 9 * cost)
        self.final_done = final
        self.news.set()


def follow(
    follower: RunFollower,
    on_update: Callable[[int], None],
    on_problem: Callable[[str], None],
    stop: threading.Event,
    paused: threading.Event,
    interval: float = 0.25,
    analyze_every: float = 5.0,
) -> None:
    """Thread body: poll until ``stop``; call back (through ``call_from_thread``) on news."""
    analyzer = _Analyzer(follower, analyze_every)
    first = True
    while not stop.is_set():
        if not paused.is_set():
            try:
                n = follower.poll()
            except FollowError as e:
                on_problem(str(e))
                stop.wait(1.0)
                continue
            except Exception as e:  # an unexpected record must not kill the follower thread
                follower.problem = f"cannot follow {follower.path.name}: {type(e).__name__}: {e}"
                on_problem(follower.problem)
                stop.wait(1.0)
                continue
            if n:
                analyzer.dirty = True
            analyzer.maybe_start()
            if analyzer.news.is_set():
                analyzer.news.clear()
                n = n or 1
            if n or first or follower.problem:
                on_update(n)
            first = False
            if follower.behind:
                continue  # catching up: the next slice right away
        stop.wait(interval)
