"""Host-side recording work of the capture runner, queued so that it only runs while the GPU is
busy (pure Python: tested on the CPU).

Per step the profiler has host work to do (split analysis of every policy, padding, the step's
records), about a millisecond in Python. Done after the step's sync it would lengthen every step;
so the work is cut into small items and run between the replay's launch and its sync, each item
only while the step's end event reports the GPU still busy (``cudaEventQuery``, no sync) AND the
item is expected to end before the replay does (a deadline from the replay's expected device
time, and each kind of item's measured cost): an item started just before the GPU finishes would
otherwise delay the step by its whole length. What is left waits for the next step's replay, and
the run drains the rest at its end. A step's rows are buffered (:class:`RowBuffer`) and committed
in one transaction with the step's own record: one commit a step instead of one a row.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlaprof.recording import padding_row, scenario_splits, split_row
from mlaprof.splits.policies import RELEASED_POLICIES

if TYPE_CHECKING:
    from mlaprof.metadata import BatchShape, VerifyMetadata
    from mlaprof.scenario import Scenario
    from mlaprof.store.writer import RunWriter

Item = Callable[[], None]


COST_SMOOTHING = 0.2  # weight of the newest run in an item kind's cost estimate
COST_MARGIN = 1.5  # an item starts only if 1.5x its estimated cost fits before the deadline


class HostQueue:
    """FIFO of small host work items, each of a ``kind`` whose cost is learnt as it runs."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self._items: deque[tuple[str, Item]] = deque()
        self._clock = clock
        self.cost_ns: dict[str, float] = {}  # smoothed cost of one item of each kind
        self.ran = 0
        self.held = 0  # times an item was held back because it would outlast the deadline

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Item, kind: str = "item") -> None:
        self._items.append((kind, item))

    def extend(self, items: list[Item], kind: str = "item") -> None:
        self._items.extend((kind, it) for it in items)

    def run_while(self, busy: Callable[[], bool], deadline_ns: float | None = None) -> int:
        """Run items while ``busy()`` says the GPU still works and, given a ``deadline_ns`` (the
        clock's time the GPU is expected to finish), while the next item is expected to end
        before it; returns how many ran. An item of a kind never seen runs (its cost is learnt)."""
        n = 0
        clock = self._clock
        while self._items and busy():
            kind, item = self._items[0]
            t = clock()
            if (
                deadline_ns is not None
                and t + COST_MARGIN * self.cost_ns.get(kind, 0.0) > deadline_ns
            ):
                self.held += 1
                break
            self._items.popleft()
            item()
            took = clock() - t
            old = self.cost_ns.get(kind)
            self.cost_ns[kind] = took if old is None else old + COST_SMOOTHING * (took - old)
            n += 1
        self.ran += n
        return n

    def drain(self) -> int:
        return self.run_while(lambda: True)


class RowBuffer:
    """Records of one step, held until the step's record commits them in one transaction."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def add(self, table: str, **row: Any) -> None:
        self.rows.append((table, row))

    def write_into(self, writer: RunWriter) -> None:
        """Add the rows through ``writer`` (inside the caller's transaction)."""
        for table, row in self.rows:
            writer.add(table, **row)
        self.rows.clear()


def analysis_items(
    writer: RunWriter | RowBuffer,
    sc: Scenario,
    step: int,
    meta: VerifyMetadata,
    shape: BatchShape,
    holder: dict[str, Any],
) -> list[Item]:
    """One item per split policy (the scenario's first; its row lands in ``holder['main']``)
    and one for the padding record."""
    names = [sc.policy] + [p for p in RELEASED_POLICIES if p != sc.policy]  # PRs: opt-in

    def policy_item(name: str) -> Item:
        def run() -> None:
            found = scenario_splits(sc, meta, shape, [name])
            for s in found:
                row = split_row(step, sc, shape, s)
                writer.add("splits", **row)
                if name == sc.policy:
                    holder["main"] = row

        return run

    items = [policy_item(n) for n in names]
    items.append(lambda: writer.add("padding", **padding_row(step, meta, shape)))
    return items
