"""``mlaprof tui --once``: the main screen as plain text, for scripts and CI logs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import rank_list
from mlaprof.store import is_run_folder, list_runs_nested
from mlaprof.textsafe import plain, plain_lines
from mlaprof.tui.compare import HEAD, compare_table
from mlaprof.tui.follower import FollowError, RunFollower, analyze_run
from mlaprof.tui.text import format_table, render_text

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.tui.view import View


def read_view(path: Path, rank: int | None = None) -> tuple[View, RunSummary | None]:
    """Read a run once (whatever was committed so far): its view, drawn from the full summary
    (the dashboard's, once its full pass lands), and that summary's JSON (for a compare)."""
    if not path.exists():
        raise MlaprofError(f"run folder {path} does not exist")
    # the analysis first, its tables freed before the follower reads: a huge import's peak
    # memory is the larger of the two, not their sum (the follower then sees at least as much).
    # The reader opens the run by the rule every command shares: a folder `report` refuses
    # (damaged, emptied, no run.json, no record yet) is refused here with its words
    analysis, why = analyze_run(path, strict=True)
    f = RunFollower(path)
    try:
        f.catch_up()
    except FollowError as e:
        f.close()
        raise MlaprofError(str(e)) from None
    if not f.ranks:  # the reader found records a moment ago: they went meanwhile
        f.close()
        from mlaprof.store import load

        load(path).close()  # the reader's words for the folder as it is now
        raise MlaprofError(f"{path} has no readable rank databases (rank<N>.db) yet")
    if rank is not None and rank not in f.ranks:
        f.close()
        raise MlaprofError(f"{path} has no rank {rank} (it has {rank_list(f.ranks)})")
    try:
        if analysis is None:  # the full pass failed: the fold of the committed rows, said so
            f.summarise()
        f.land_full(analysis, why, f.fold.version)
        return f.view(rank), f.summary()
    finally:
        f.close()


def snapshot(path: Path, compare: Path | None = None, rank: int | None = None) -> str:
    if not is_run_folder(path):
        runs = list_runs_nested(path)
        rows = [
            [
                plain(c)
                for c in (
                    r.name,
                    r.created[:19],
                    r.scenario,
                    r.device,
                    r.status_text(),
                    r.steps_text(),
                )
            ]
            for r in runs
        ]
        # folder names are data: a folder named ``ESC]0;...BEL`` retitles no terminal
        head = ["run", "created", "scenario", "device", "status", "steps"]
        return plain_lines(
            f"runs in {path} (newest first)\n" + "\n".join(format_table((head, rows))) + "\n"
        )
    v, sa = read_view(path, rank)
    text = render_text(v)
    if compare is not None:
        w, sb = read_view(compare, rank)
        text += f"\nCOMPARE  A: {v.name}  B: {w.name}\n"
        rows, said = compare_table(sa, sb)  # the workload line first, under the table
        text += "\n".join(format_table((HEAD, rows)))
        text += "".join(f"\n  {line}" for line in said.splitlines())
        text += "\n\n" + render_text(w)
    return plain_lines(text)
