"""Host-side recording work of the capture runner, queued so that it only runs while the GPU is
busy (pure Python: tested on the CPU).

Per step the profiler has host work to do (split analysis of every policy, padding, the step's
records), a few milliseconds in Python. Done after the step's sync it would lengthen every step;
so the work is cut into small items and run between the replay's launch and its sync, each item
only while the step's end event reports the GPU still busy (``cudaEventQuery``, no sync). What
is left waits for the next step's replay, and the run drains the rest at its end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from mlaprof.metadata import BatchShape, VerifyMetadata
from mlaprof.recording import padding_row, scenario_splits, split_row
from mlaprof.scenario import Scenario
from mlaprof.splits.policies import POLICIES
from mlaprof.store.writer import RunWriter

Item = Callable[[], None]


class HostQueue:
    """FIFO of small host work items."""

    def __init__(self) -> None:
        self._items: deque[Item] = deque()
        self.ran = 0

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Item) -> None:
        self._items.append(item)

    def extend(self, items: list[Item]) -> None:
        self._items.extend(items)

    def run_while(self, busy: Callable[[], bool]) -> int:
        """Run items while ``busy()`` says the GPU still works; returns how many ran."""
        n = 0
        while self._items and busy():
            self._items.popleft()()
            n += 1
        self.ran += n
        return n

    def drain(self) -> int:
        return self.run_while(lambda: True)


def analysis_items(
    writer: RunWriter,
    sc: Scenario,
    step: int,
    meta: VerifyMetadata,
    shape: BatchShape,
    holder: dict[str, Any],
) -> list[Item]:
    """One item per split policy (the scenario's first; its row lands in ``holder['main']``)
    and one for the padding record."""
    names = [sc.policy] + [p for p in POLICIES if p != sc.policy]

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
