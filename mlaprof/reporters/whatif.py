"""Terminal view of a what-if grid: provenance and the worst cells (rich)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from mlaprof.analysis.frame_rows import column_rows
from mlaprof.reporters.names import fit_names


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None or v != v:
        return "-"
    return fmt.format(v)


def _tokens(n: int, compact: bool) -> str:
    """A KV length: ``131,072``, or ``128k`` where columns are scarce (exact multiples only)."""
    if compact and n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"


def print_whatif(whatif: Any, top: int = 15, console: Console | None = None) -> None:
    console = console or Console()
    cells = whatif.columns
    prov = whatif.provenance
    console.print(
        f"[bold]what-if[/] {len(whatif):,} cells, modelled (nothing was run): "
        f"[red]{whatif.count('collapsed')}[/] collapse with the padding bug, "
        f"[magenta]{whatif.count('frozen_collapsed')}[/] collapse frozen at capture"
        + (
            f", [yellow]{whatif.count('over_split')}[/] over-split (S >= 2x what the rows use)"
            if "over_split" in whatif.columns and whatif.count("over_split")
            else ""
        )
    )
    for key in ("policies", "devices", "capture_sizes", "vllm_log", "time", "aiter"):
        v = prov.get(key)
        if v is None or (key == "aiter" and not isinstance(v, dict)):  # no release named
            continue
        if key == "aiter" and isinstance(v, dict):
            v = f"AITER {v['requested']}: {v['label']} (policy {v['gluon_policy']})"
        text = "; ".join(f"{a}: {b}" for a, b in v.items()) if isinstance(v, dict) else str(v)
        if isinstance(v, list):  # vLLM's log lines, verbatim
            text = " | ".join(map(str, v))
        console.print(f"  [dim]{key}:[/] {text}")
    ver = whatif.spec.vllm_version
    modes = whatif.dispatch_summary()
    line = ", ".join(f"{n:,} cells {m}" for m, n in modes.items())
    if modes.get("PIECEWISE") and whatif.spec.graph_mode == "FULL":
        line += " (no FULL decode graph holds them: real rows, no padding, nothing frozen)"
    console.print(f"  [dim]dispatch (vLLM {ver}):[/] {line}")
    routes = "; ".join(f"{m} {d} qlen {q}: {r}" for m, d, q, r in whatif.routes())
    console.print(f"  [dim]route (vLLM {ver}):[/] {routes}")
    axes = [a for a in ("model", "policy", "device", "qlen") if len(set(cells[a].tolist())) > 1]
    fixed = {a: cells[a][0] for a in ("model", "policy", "device", "qlen") if a not in axes}
    if fixed:
        console.print("  " + ", ".join(f"{k} {v}" for k, v in fixed.items()))
    # below ~120 columns the S and slowdown columns stack (bug/fix/frozen in one cell) and
    # lengths read 128k: every key column and every number stays whole at 80 columns
    compact = console.width < 120
    rows = whatif.worst_rows(top)

    def worst_table(show: Callable[[str], str]) -> Table:
        t = Table(
            title=f"worst {top} cells (S in red: collapsed)", box=box.SIMPLE_HEAVY, pad_edge=False
        )
        for col in axes:  # as wide as their values where they fit, folded where they do not
            widest = max((len(str(v)) for v in set(cells[col].tolist())), default=len(col))
            if col == "policy":  # broken after a separator (reporters.names), never mid-version
                t.add_column(col)
            else:
                t.add_column(col, overflow="fold", min_width=min(10, max(len(col), widest)))
        cols = (
            ("B+pad", "KV", "S b/f/z", "occ b>f", "t µs", "x b/z")
            if compact
            else ("real+pad", "KV", "S bug", "S fix", "S frz", "occ bug>fix", "t fix µs", "bug x",
                  "frz x")
        )  # fmt: skip
        for col in cols:
            t.add_column(col, justify="right", no_wrap=True)
        for r in rows:
            bug = str(r["S_bug"] or "-")  # 0: not runnable (the note says why)
            frz = str(r["S_frozen"] or "-")
            bug_s = f"[bold red]{bug}[/]" if r["collapsed"] else bug
            frz_s = f"[bold red]{frz}[/]" if r["frozen_collapsed"] else frz
            fix = str(r["S_fix"] or "-")
            kv = (
                _tokens(r["context"], compact)
                if r["kv_min"] == r["kv_max"]
                else f"{_tokens(r['kv_min'], compact)}..{_tokens(r['kv_max'], compact)}"
            )
            occ = f"{_f(r['occupancy_bug'], '{:.0%}')}>{_f(r['occupancy_fix'], '{:.0%}')}"
            t_fix = _f(r["t_fix_us"], "{:.0f}")
            keys = [show(str(r[a])) if a == "policy" else str(r[a]) for a in axes]
            if compact:
                slow = f"{_f(r['slowdown_bug'], '{:.1f}')}/{_f(r['slowdown_frozen'], '{:.1f}')}"
                t.add_row(*keys, f"{r['batch']}+{r['padding_rows']}", kv,
                          f"{bug_s}/{fix}/{frz_s}", occ, t_fix, slow)  # fmt: skip
            else:
                t.add_row(*keys, f"{r['batch']}+{r['padding_rows']}", kv,
                          bug_s, fix, frz_s, occ, t_fix, _f(r["slowdown_bug"], "{:.2f}x"),
                          _f(r["slowdown_frozen"], "{:.2f}x"))  # fmt: skip
        return t

    t = (
        fit_names(console, worst_table, column=axes.index("policy"))
        if "policy" in axes
        else worst_table(str)
    )
    console.print(t)
    if compact:
        console.print(
            "  [dim]B+pad: real + padding rows; S b/f/z: S with the padding bug / with the fix / "
            "frozen at capture; occ b>f: occupancy bug > fix; t µs: predicted verify time with "
            "the fix; x b/z: predicted slowdown of bug / frozen over the fix; KV in tokens "
            "(k = 1024)[/]"
        )
    misfit = {
        (m, d, q, p, r)
        for m, d, q, p, r, ok in column_rows(
            cells, "model", "device", "qlen", "policy", "route", "route_fits"
        )
        if not ok
    }
    for m, d, q, p, r in sorted(misfit)[:5]:
        console.print(
            f"  [yellow]route:[/] vLLM {ver} sends {m} (qlen {q}) on {d} to {r}: {p} models "
            "another kernel"
        )
    notes = sorted({n.split(", got")[0] for n in set(cells["note"].tolist()) if n})
    for n in notes[:5]:
        console.print(f"  [yellow]note:[/] {n}")
