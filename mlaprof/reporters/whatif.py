"""Terminal view of a what-if grid: provenance and the worst cells (rich)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    if v is None or v != v:
        return "-"
    return fmt.format(v)


def print_whatif(whatif: Any, top: int = 15, console: Console | None = None) -> None:
    console = console or Console()
    cells = whatif.columns
    prov = whatif.provenance
    console.print(
        f"[bold]what-if[/] {len(whatif):,} cells, modelled (nothing was run): "
        f"[red]{whatif.count('collapsed')}[/] collapse with the padding bug, "
        f"[magenta]{whatif.count('frozen_collapsed')}[/] collapse frozen at capture"
    )
    for key in ("policies", "devices", "capture_sizes", "time"):
        v = prov[key]
        text = "; ".join(f"{a}: {b}" for a, b in v.items()) if isinstance(v, dict) else str(v)
        console.print(f"  [dim]{key}:[/] {text}")
    axes = [a for a in ("model", "policy", "device", "qlen") if len(set(cells[a].tolist())) > 1]
    fixed = {a: cells[a][0] for a in ("model", "policy", "device", "qlen") if a not in axes}
    if fixed:
        console.print("  " + ", ".join(f"{k} {v}" for k, v in fixed.items()))
    t = Table(
        title=f"worst {top} cells (S in red: collapsed)", box=box.SIMPLE_HEAVY, pad_edge=False
    )
    for col in axes:
        t.add_column(col, overflow="fold")
    for col in ("real+pad", "KV", "S bug", "S fix", "S frz", "occ bug>fix", "t fix µs",
                "bug x", "frz x"):  # fmt: skip
        t.add_column(col, justify="right", no_wrap=True)
    for r in whatif.worst_rows(top):
        bug = str(r["S_bug"] or "n/a")
        frz = str(r["S_frozen"] or "-")
        t.add_row(
            *[str(r[a]) for a in axes],
            f"{r['batch']}+{r['padding_rows']}",
            f"{r['context']:,}"
            if r["kv_min"] == r["kv_max"]
            else f"{r['kv_min']:,}..{r['kv_max']:,}",
            f"[bold red]{bug}[/]" if r["collapsed"] else bug,
            str(r["S_fix"] or "n/a"),
            f"[bold red]{frz}[/]" if r["frozen_collapsed"] else frz,
            f"{_f(r['occupancy_bug'], '{:.0%}')}>{_f(r['occupancy_fix'], '{:.0%}')}",
            _f(r["t_fix_us"], "{:.0f}"),
            _f(r["slowdown_bug"], "{:.2f}x"),
            _f(r["slowdown_frozen"], "{:.2f}x"),
        )
    console.print(t)
    misfit = {
        (m, d, q, p, r)
        for m, d, q, p, r, ok in zip(
            cells["model"].tolist(),
            cells["device"].tolist(),
            cells["qlen"].tolist(),
            cells["policy"].tolist(),
            cells["route"].tolist(),
            cells["route_fits"].tolist(),
            strict=True,
        )  # fmt: skip
        if not ok
    }
    for m, d, q, p, r in sorted(misfit)[:5]:
        console.print(
            f"  [yellow]route:[/] vLLM sends {m} (qlen {q}) on {d} to {r}: {p} models another kernel"
        )
    notes = sorted({n.split(", got")[0] for n in set(cells["note"].tolist()) if n})
    for n in notes[:5]:
        console.print(f"  [yellow]note:[/] {n}")
