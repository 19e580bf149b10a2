"""Terminal view of a capture plan: default list vs proposed, and the ready config value."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

GIB = float(1 << 30)


def _sizes(s: list[int], n: int = 12) -> str:
    return (
        ", ".join(map(str, s)) if len(s) <= n else ", ".join(map(str, s[:n])) + f", ... ({len(s)})"
    )


def _batches(b: list[int]) -> str:
    return "none" if not b else _sizes(b, 10)


def print_plan(plan: Any, console: Console | None = None) -> None:
    console = console or Console()
    d, p = plan.default, plan.proposed
    console.print(
        f"[bold]capture plan[/] qlen {plan.qlen}, max_num_seqs {plan.max_num_seqs}, "
        f"{plan.steps:,.0f} decode steps ({plan.source}); modelled"
    )
    if plan.vllm_version is not None:
        console.print(f"  [dim]vLLM:[/] {plan.vllm_version[0]}, from {plan.vllm_version[1]}")
    console.print(f"  [dim]memory:[/] {plan.memory}")
    console.print(f"  [dim]budget:[/] {plan.budget}")
    t = Table(box=box.SIMPLE_HEAVY)
    t.add_column("")
    t.add_column(f"default ({plan.default_rule})", overflow="fold")
    t.add_column("proposed", overflow="fold")

    def mem(c: Any) -> str:
        if c.memory_bytes is None:
            return "unknown"
        return f"{c.memory_bytes / GIB:.3f} GiB" + (
            ", extrapolated" if c.memory_extrapolated else ""
        )

    for label, a, b in (
        ("graphs", str(len(d.sizes)), str(len(p.sizes))),
        (
            "padded tokens / step",
            f"{d.padded_tokens:.2f} ({d.padding_share:.1%})",
            f"{p.padded_tokens:.2f} ({p.padding_share:.1%})",
        ),
        ("steps without a graph", f"{d.eager_share:.2%}", f"{p.eager_share:.2%}"),
        ("batch sizes without a graph", _batches(d.eager_batches), _batches(p.eager_batches)),
        (
            "batch sizes run PIECEWISE",
            _batches(d.piecewise_batches),
            _batches(p.piecewise_batches),
        ),
        ("capture memory", mem(d), mem(p)),
        ("memory basis", d.memory_basis or "none", p.memory_basis or "none"),
        ("sizes (tokens)", _sizes(d.sizes), _sizes(p.sizes)),
    ):
        t.add_row(label, a, b)
    console.print(t)
    for n in plan.notes:
        console.print(f"  [dim]note:[/] {n}")
    console.print("vLLM flag:")
    # plain print: a terminal-width wrap would break the copy-paste
    print(f"  --compilation-config '{plan.compilation_config()}'")
