"""The splits table's cells are worded once (mlaprof.reporters.rows.split_cells) for the terminal
report and the dashboard: a policy whose S the device decides shows the S it decides for the
worst step, as the JSON, Markdown and HTML do, reads "never" frozen ("never what-if" where vLLM
does not run its policy here), and carries the UNVERIFIED mark only where its rule is
unverified."""

from __future__ import annotations

import dataclasses
import io

from rich.console import Console

from mlaprof.analysis.sections import WHAT_IF
from mlaprof.reporters.rows import NEVER_FROZEN, split_cells
from mlaprof.reporters.terminal import TerminalRenderer
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
NAME = "demo-bug-legacy-flat-syncs-break-capture"


def _device_rows():
    s = shipped_runs.summary(NAME)
    rows = [r for r in s.splits if r.on_device]
    assert rows and all(r.used is not None and r.verified for r in rows), rows
    return s, rows


def test_a_device_decided_row_keeps_its_numbers_and_is_never_frozen() -> None:
    _, rows = _device_rows()
    for r in rows:
        c = split_cells(r)
        assert c.s == f"{r.used} dev" and c.deserved == str(r.deserved)
        assert c.frozen == NEVER_FROZEN + (f" {WHAT_IF}" if r.what_if else "")
        assert c.occupancy != "-"


def _line(text: str, policy: str) -> str:
    """The row's first line: the policy's name whole, or its first part where the table wraps
    it ("aiter-asm-" over "persistent")."""
    return next(
        ln
        for ln in text.splitlines()
        if ln.split()[:1]
        and policy.startswith(head := ln.split()[0])
        and (head == policy or head.endswith("-"))
    )


def test_the_terminal_and_the_dashboard_show_the_same_cells() -> None:
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text

    s, rows = _device_rows()
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(TerminalRenderer().render(s))
    term = out.getvalue().split("KV splits per policy (worst step")[1]
    view, _ = read_view(shipped_runs.run_dir(NAME))
    tui = render_text(dataclasses.replace(view, summary=s), width=400).split("KV SPLITS")[1]
    for r in rows:
        c = split_cells(r)
        line = _line(term, r.policy)
        assert "†" not in line, line  # verified: no UNVERIFIED mark
        cells = [c.s, c.all_act, c.deserved, c.frozen, c.occupancy]
        assert " ".join(line.split()[1:]) == " ".join(cells), line
        # the dashboard's row: its ranks cell as the report's ("1 (rank 0)"), then the policy
        (got,) = [ln.split() for ln in tui.splitlines() if ln.split()[3:4] == [r.policy]]
        assert got[:3] == ["1", "(rank", "0)"], got
        assert " ".join(got[4:]) == " ".join([c.s, c.deserved, c.frozen, c.occupancy]), got
