"""The dashboard's update worker: it polls the rows a run's databases committed
(:mod:`mlaprof.store.follow`), folds them (:mod:`mlaprof.analysis.live`) and hands out summaries,
each replacing the one before: provisional ones folded from the committed rows, and the full
pass (:func:`mlaprof.analysis.run_summary.build_summary` over the whole run, in a thread of its
own beside the polling) when it lands. The dashboard only draws what it is handed.

Problems (run deleted, truncated, corrupted, other schema) become a :class:`FollowError` with
one readable line; the dashboard shows it instead of a traceback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.live import FOLDED, LiveFold, LiveSummary
from mlaprof.store.follow import DB_ERRORS, FollowError, RunFollow, RunReplaced
from mlaprof.store.liveness import empty_run
from mlaprof.tui.view import ANALYSING, Selection, View, build_view

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import LayerRow

# rowids read per table per poll: catching up on a huge run happens in slices, so the lock
# is never held long and the dashboard draws progress instead of freezing
CHUNK = 20_000
CATCH_UP_DRAW_S = 0.2  # while catching up, the dashboard redraws at most this often
ANALYSIS_GRACE_S = 0.3  # the dashboard draws the caught-up run before the full pass starts


class RunFollower:
    """The committed rows of one run folder and its latest summary; thread-safe (:attr:`lock`)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.generation = 0  # how many times another run took the folder: each starts over
        self.polls = 0
        self.analyses: list[float] = []  # seconds each full pass took
        self.folds: list[float] = []  # seconds each provisional summary took
        self._start()

    def _start(self) -> None:
        """Follow the folder from nothing (at first, and when another run replaced it)."""
        self.store = RunFollow(self.path)
        self.fold = LiveFold(self.path.name)
        self.problem: str | None = None
        self.latest: LiveSummary | None = None  # what the dashboard draws (replaced, never merged)
        self.full: RunSummary | None = None  # the last full pass
        self.full_note = ANALYSING
        self.behind = False  # more committed rows wait than one poll reads
        self._summarised = -1  # the fold version the latest summary covers
        self._folded_at = 0.0

    def restart(self) -> None:
        """Another run took the folder: drop every row and summary of the old one."""
        with self.lock:
            self.store.close()
            self.generation += 1
            self._start()

    @property
    def meta(self) -> dict[str, Any]:
        return self.fold.meta

    @property
    def ranks(self) -> list[int]:
        with self.lock:
            return self.fold.ranks

    # -- polling -------------------------------------------------------------------------------
    def poll(self) -> int:
        """Read what was committed since the last poll; returns the number of new rows (a
        status change counts as one)."""
        with self.lock:
            try:
                try:
                    n = self._poll()
                except RunReplaced:  # the rows read so far are another run's: start over
                    self.restart()
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
        had = len(self.fold.meta) > 1  # run.json read before ({"name"} alone: not yet)
        if not had or self.polls % 8 == 0 or self.store.meta_changed():
            got = self.store.read_meta(had=had)
            if got is not None:
                self.fold.meta = {"name": self.path.name, **got}
                had = True
        if self.polls % 4 == 0 or not self.store.databases:
            self.store.discover()
            # the reader's rule, so the dashboard never draws what `report` refuses: databases
            # without run.json, a rank the run names missing, an ended run without databases
            self.store.check(self.fold.meta if had else None)
        if not self.store.databases:
            if not had:  # no run.json yet: a run about to start
                self.problem = "waiting for the first records"
                return 0
            # run.json and no record: starting, failed or abandoned, as the reader judges it
            # (`report` and `runs` say the same), the banner in the reader's words
            status, _, self.problem = empty_run(self.path, self.fold.meta)
            return int(self.fold.set_empty(status))
        self.problem = None
        total = 0
        self.store.cut = False
        for key in self.store.databases:
            total += int(self.fold.set_status(key, *self.store.state(key)))
            for rows in self.store.new_rows(key, CHUNK, FOLDED):
                self.fold.add(rows)
                total += rows.count
        self.behind = self.store.cut
        return total

    def catch_up(self) -> int:
        """Poll until every committed row is read (``--once``, benchmarks)."""
        n = self.poll()
        while self.behind:
            n += self.poll()
        return n

    # -- summaries -----------------------------------------------------------------------------
    @property
    def stale(self) -> bool:
        """Rows (or statuses) arrived that no summary covers yet."""
        with self.lock:
            return bool(self.fold.statuses) and self.fold.version != self._summarised

    def due(self) -> bool:
        """A provisional summary is due: stale, and the last one is long enough ago (at most
        a quarter of the time goes to folding: a big run's summary takes a while)."""
        gap = 3 * self.folds[-1] if self.folds else 0.0
        return self.stale and time.monotonic() - self._folded_at >= gap

    def summarise(self) -> LiveSummary | None:
        """A provisional summary of the rows committed so far, when rows arrived since the
        last one (the analysis' own code: :meth:`LiveFold.provisional`); the latest otherwise.
        It is built on a snapshot outside :attr:`lock`: polling and drawing go on meanwhile."""
        with self.lock:
            if not self.stale:
                return self.latest
            snap = self.fold.snapshot()
        t0 = time.monotonic()
        try:
            s, why = snap.provisional()
        except Exception as e:  # a partial run may not analyse yet; the next fold retries
            s, why = None, f"provisional summary failed: {type(e).__name__}: {e}"
        with self.lock:
            full = self.full
        if s is None and full is not None:
            # nothing provisional for this kind: the full pass stands, with today's rows
            live = snap.live_summary(full, False)
        else:
            live = snap.live_summary(s, True, why or self.full_note)
        with self.lock:
            self._folded_at = time.monotonic()
            self.folds.append(self._folded_at - t0)
            if snap.version > self._summarised:  # a full pass that landed meanwhile stays
                self._summarised = snap.version
                self.latest = live
            return self.latest

    def land_full(
        self, s: RunSummary | None, why: str, version: int, generation: int | None = None
    ) -> None:
        """A full pass landed (``version``: the fold's when it started): it replaces the
        provisional summary; rows folded since make the next provisional one newer again. A
        pass begun on a run since replaced (``generation``) is dropped."""
        with self.lock:
            if generation is not None and generation != self.generation:
                return
            if s is None:
                self.full_note = why or ANALYSING
                if self.latest is None or self.latest.summary is None:
                    self.latest = self.fold.live_summary(None, False, self.full_note)
                return
            self.full = s
            self.latest = self.fold.live_summary(s, False)
            self._summarised = max(self._summarised, version)

    # -- on-demand (UI thread) -----------------------------------------------------------------
    def step_ids(self, rank: int | None) -> list[int]:
        with self.lock:
            ids = self.latest.step_ids if self.latest else {}
            return list(ids.get(rank if rank is not None else min(ids, default=0), ()))

    def step_layers(
        self, step: int, rank: int | None, live: LiveSummary | None = None
    ) -> list[LayerRow]:
        """The analysis' layer rows of one step (:meth:`LiveFold.step_layers`), read with
        ``live``'s summary (default: the latest), as its sync count is decided."""
        with self.lock:
            live = live if live is not None else self.latest
            return self.fold.step_layers(step, rank, live.summary if live is not None else None)

    def current_step(self, sel: Selection) -> int | None:
        """The step id ``sel`` points at (its index clamped to the steps seen), or None."""
        if sel.step_index is None:
            return None
        ids = self.step_ids(sel.rank)
        if not ids:
            return None
        sel.step_index = max(0, min(sel.step_index, len(ids) - 1))
        return ids[sel.step_index]

    def selected_view(self, sel: Selection, live: LiveSummary | None = None) -> View:
        return self.view(sel.rank, self.current_step(sel), sel.layer_sort, live)

    def view(
        self,
        rank: int | None = None,
        step: int | None = None,
        layer_sort: tuple[str, bool] = ("layer", False),
        live: LiveSummary | None = None,
    ) -> View:
        """The frame of ``live`` (default: a summary of every row read so far: ``--once`` and
        tests; the dashboard passes the one its update worker handed it)."""
        with self.lock:
            if live is None:
                live = self.summarise()
            layers = self.step_layers(step, rank, live) if step is not None else None
            return build_view(
                live, rank, layers, step, self.problem, layer_sort, self.path.name, self.fold.status
            )

    def summary(self) -> RunSummary | None:
        """The latest summary handed out (provisional or full; None: none yet)."""
        with self.lock:
            return self.latest.summary if self.latest else None

    @property
    def finished(self) -> bool:
        with self.lock:
            return bool(self.fold.statuses) and self.fold.status not in ("running", "waiting")

    def close(self) -> None:
        with self.lock:
            self.store.close()


def analyze_run(path: Path, strict: bool = False) -> tuple[RunSummary | None, str]:
    """``(the full summary, "")`` of the run, or ``(None, why)`` when a pass fails (a partial
    run being written may not analyse yet; the next pass retries). ``strict``: a folder the
    reader refuses (damaged, empty, no run.json) raises its error, as ``report`` does."""
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.errors import MlaprofError
    from mlaprof.store import load

    try:
        run = load(path)
    except Exception as e:  # shown in the findings panel; the dashboard keeps following
        if strict and isinstance(e, MlaprofError):
            raise
        return None, f"analysis failed: {type(e).__name__}: {e}"
    try:
        with run:
            return build_summary(run), ""
    except Exception as e:
        return None, f"analysis failed: {type(e).__name__}: {e}"


class _FullPass:
    """Runs the full analysis beside the polling (it reads the whole run: seconds on big runs),
    at most every ``every`` seconds and backing off to 10x its own cost."""

    def __init__(self, follower: RunFollower, every: float) -> None:
        self.f = follower
        self.every = every
        self.thread: threading.Thread | None = None
        self.next_at = 0.0
        self.dirty = True  # records arrived since the last pass
        self.final_done = False
        self.news = threading.Event()  # a pass finished: draw its summary
        self.generation = follower.generation  # the run (of the folder's runs) last analysed

    def maybe_start(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        f = self.f
        if f.generation != self.generation:  # another run took the folder: analyse it afresh
            self.generation, self.final_done, self.dirty, self.next_at = (
                f.generation,
                False,
                True,
                0,
            )
        done = f.finished
        if not f.fold.statuses or f.behind or self.final_done or not self.dirty:
            return
        if time.monotonic() < self.next_at and not done:
            return
        self.dirty = False
        with f.lock:
            version, generation = f.fold.version, f.generation
        self.thread = threading.Thread(
            target=self._run, args=(done, version, generation), daemon=True
        )
        self.thread.start()

    def _run(self, final: bool, version: int, generation: int) -> None:
        t0 = time.monotonic()
        found, why = analyze_run(self.f.path)
        cost = time.monotonic() - t0
        self.f.land_full(found, why, version, generation)
        self.f.analyses.append(cost)
        self.next_at = time.monotonic() + max(self.every, 9 * cost)
        self.final_done = final
        self.news.set()


def follow(
    follower: RunFollower,
    on_update: Callable[[LiveSummary | None], None],
    on_problem: Callable[[str], None],
    stop: threading.Event,
    paused: threading.Event,
    interval: float = 0.25,
    analyze_every: float = 5.0,
) -> None:
    """Thread body: poll until ``stop``; hand each new summary to ``on_update`` (through
    ``call_from_thread``: a message that replaces the one before)."""
    full = _FullPass(follower, analyze_every)
    first = True
    last_draw = 0.0
    caught_up: float | None = None  # when the whole committed run was first read
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
                full.dirty = True
            now = time.monotonic()
            if follower.behind:
                caught_up = None
            elif caught_up is None:
                caught_up = now
            # the full pass reads the whole run (seconds on a fleet import) and shares the
            # interpreter with the dashboard: it starts once the run is all in and drawn
            if caught_up is not None and now - caught_up >= ANALYSIS_GRACE_S:
                full.maybe_start()
            landed = full.news.is_set()
            full.news.clear()
            # catching up, the dashboard draws its progress a few times a second, not per slice
            news = landed or follower.due() or first or bool(follower.problem and n)
            if news and (not follower.behind or now - last_draw >= CATCH_UP_DRAW_S):
                on_update(follower.summarise() if follower.due() else follower.latest)
                last_draw = now
            first = False
            if follower.behind:
                continue  # catching up: the next slice right away
            if caught_up is not None and full.thread is None and follower.fold.statuses:
                stop.wait(min(interval, ANALYSIS_GRACE_S))  # the first pass is due soon
                continue
        stop.wait(interval)
