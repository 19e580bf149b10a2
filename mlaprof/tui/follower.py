"""Following a run while it is written, for the dashboard: the store's follower
(:mod:`mlaprof.store.follow`) hands out the rows committed since the last poll, grouped per
table; they are merged into :mod:`tui.aggregate`, and :func:`mlaprof.analysis.summary` runs in a
worker thread beside the polling (findings read "analysing..." until its first pass is in).

Problems (run deleted, truncated, corrupted, other schema) become a :class:`FollowError` with
one readable line; the dashboard shows it instead of a traceback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlaprof.analysis.splits import is_collapsed
from mlaprof.store.follow import DB_ERRORS, FollowError, RunFollow
from mlaprof.tui.aggregate import RankState
from mlaprof.tui.view import ANALYSING, Selection, View, build_view

# rowids ingested per table per poll: catching up on a huge run happens in slices, so the lock
# is never held long and the dashboard draws progress instead of freezing
CHUNK = 20_000
CATCH_UP_DRAW_S = 0.2  # while catching up, the dashboard redraws at most this often
ANALYSIS_GRACE_S = 0.3  # the dashboard draws the caught-up run before the analysis starts


class RunFollower:
    """Incremental view of one run folder; thread-safe through :attr:`lock`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.meta: dict[str, Any] = {}
        self.states: dict[int, RankState] = {}
        self.store = RunFollow(self.path)
        self.problem: str | None = None
        self.analysis: dict[str, Any] | None = None  # mlaprof.analysis.summary of the run
        self.analysis_note = ANALYSING
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
            except DB_ERRORS as e:
                self.problem = f"{self.path.name}: the database cannot be read ({e})"
                raise FollowError(self.problem) from None
            except OSError as e:
                self.problem = f"{self.path.name}: {e.strerror or e}"
                raise FollowError(self.problem) from None
            self.polls += 1
            return n

    def _poll(self) -> int:
        if not self.store.exists():
            self.problem = f"waiting for run {self.path} to appear"
            return 0
        if not self.meta or self.polls % 8 == 0:
            self.meta = self.store.read_meta(had=bool(self.meta)) or self.meta
        if self.polls % 4 == 0 or not self.states:
            for rank, side in self.store.discover().items():
                self.states[rank] = RankState(counts=dict(side))
        if not self.states:
            self.problem = "waiting for the first records"
            return 0
        self.problem = None
        total = 0
        self.store.cut = False
        for rank, st in self.states.items():
            status = self.store.status(rank)
            total += int(status != st.status)  # a status change (finished, failed) is news too
            st.status = status
            for batch in self.store.new_rows(rank, CHUNK):
                st.add(batch)
                total += batch.hi - batch.lo
        self.behind = self.store.cut
        return total

    # -- on-demand queries (UI thread) -----------------------------------------------------------
    def step_ids(self, rank: int | None) -> list[int]:
        with self.lock:
            st = self.states.get(rank if rank is not None else min(self.states, default=0))
            return list(st.step_ids) if st else []

    def step_layers(self, step: int, rank: int | None) -> list[dict[str, Any]]:
        """One step's layer rows, found through the rowid range recorded while ingesting."""
        with self.lock:
            out: dict[int, dict[str, Any]] = {}
            for r, st in self.states.items():
                if rank is not None and r != rank:
                    continue
                rng = st.layer_rowids.get(step)
                if rng is None:
                    continue
                for layer, dur, syncs, used, deserved in self.store.step_layers(
                    r, rng[0], rng[1], step
                ):
                    cur = out.setdefault(
                        layer,
                        {"layer": layer, "time_ms": 0.0, "syncs": 0, "used": used, "rows": 0},
                    )
                    cur["time_ms"] += (dur or 0) / 1e6
                    cur["syncs"] += syncs or 0
                    cur["rows"] += 1
                    cur["used"] = min(cur["used"] or used or 0, used or 0) or used
                    cur["deserved"] = deserved
                    cur["collapsed"] = int(is_collapsed(used, deserved))
            for cur in out.values():
                cur["time_ms"] /= cur["rows"]
                cur["occupancy"] = None
            return list(out.values())

    def current_step(self, sel: Selection) -> int | None:
        """The step id ``sel`` points at (its index clamped to the steps seen), or None."""
        if sel.step_index is None:
            return None
        ids = self.step_ids(sel.rank)
        if not ids:
            return None
        sel.step_index = max(0, min(sel.step_index, len(ids) - 1))
        return ids[sel.step_index]

    def selected_view(self, sel: Selection) -> View:
        return self.view(sel.rank, self.current_step(sel), sel.layer_sort)

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
                analysis=self.analysis,
                analysis_note=self.analysis_note,
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
            self.store.close()


def analyze_run(path: Path) -> tuple[dict[str, Any] | None, str]:
    """``(mlaprof.analysis.summary, "")`` of the run, or ``(None, why)`` when a pass fails (a
    partial run being written may not analyse yet; the next pass retries)."""
    from mlaprof.analysis import summary
    from mlaprof.store import load

    try:
        with load(path) as run:
            return summary(run), ""
    except Exception as e:  # shown in the findings panel; the dashboard keeps following
        return None, f"analysis failed: {type(e).__name__}: {e}"


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
        found, why = analyze_run(self.f.path)
        cost = time.monotonic() - t0
        with self.f.lock:
            if found is not None or self.f.analysis is None:
                self.f.analysis, self.f.analysis_note = found, why or ANALYSING
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
    last_draw = 0.0
    caught_up: float | None = None  # when the dashboard first had the whole run to draw
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
            now = time.monotonic()
            if follower.behind:
                caught_up = None
            elif caught_up is None:
                caught_up = now
            # the analysis reads the whole run (seconds on a fleet import) and shares the
            # interpreter with the dashboard: it starts once the run is all in and drawn
            if caught_up is not None and now - caught_up >= ANALYSIS_GRACE_S:
                analyzer.maybe_start()
            if analyzer.news.is_set():
                analyzer.news.clear()
                n = n or 1
            # catching up, the dashboard draws its progress a few times a second, not per slice
            if (n or first or follower.problem) and (
                not follower.behind or now - last_draw >= CATCH_UP_DRAW_S
            ):
                on_update(n)
                last_draw = now
            first = False
            if follower.behind:
                continue  # catching up: the next slice right away
            if caught_up is not None and analyzer.thread is None and follower.states:
                stop.wait(min(interval, ANALYSIS_GRACE_S))  # the first pass is due soon
                continue
        stop.wait(interval)
