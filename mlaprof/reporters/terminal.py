"""Terminal report: findings table, KV splits per policy, syncs per layer (rich).

A renderer of the typed summary only (:class:`TerminalRenderer`): every number and every
verdict (red cells included) is the summary's, computed in :mod:`mlaprof.analysis`; nothing
here reads the run or its tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from mlaprof.analysis.findings import rank_list
from mlaprof.analysis.memory import human_bytes
from mlaprof.analysis.share import share_text
from mlaprof.analysis.starts import gib
from mlaprof.reporters.names import fit_names
from mlaprof.textsafe import term

if TYPE_CHECKING:
    from mlaprof.analysis.diff import SummaryDiff
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import (
        EngineSection,
        EngineStart,
        Fleet,
        ShadowSection,
        SpecDecoding,
        TraceReplayTime,
        TraceSection,
    )

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pct0(x: float | None) -> str:
    return share_text(x)


class TerminalRenderer:
    """The terminal report of a summary (and, with ``--compare``, its diff) as text: rich markup
    rendered for ``console`` (its width and colours)."""

    def __init__(self, console: Console | None = None, verbose: bool = False) -> None:
        self.console = console or Console()
        self.verbose = verbose

    def render(self, s: RunSummary, diff: SummaryDiff | None = None) -> str:
        with self.console.capture() as out:
            print_report(s, self.console, self.verbose)
            if diff is not None:
                print_diff(diff, self.console)
        return out.get()


def print_report(
    s: RunSummary, console: Console | None = None, verbose: bool = False, sections: bool = True
) -> None:
    """The terminal report: the headline, the tables and the findings, then (``sections``)
    every section of the summary as the rows layer lays it out. ``mlaprof run`` leaves the
    sections to ``mlaprof report`` and says so: a quick start ends on its findings."""
    console = console or Console()
    sc = s.scenario
    fields = {
        "backend": s.backend,
        "device": s.device,
        "model": sc.model,
        "qlen": sc.qlen,
        "graph": sc.graph_mode,
        "min_kv_mode": sc.min_kv_mode,
        "policy": sc.policy,
        "target": sc.target,
    }
    # every string here may come from an imported trace or log: escaped (textsafe.term)
    head = " ".join(f"{k}={term(v)}" for k, v in fields.items() if v not in (None, ""))
    if s.imported is not None:  # an imported trace has no scenario: say where it came from
        fmt = s.imported.format
        head += f" imported from {term(s.imported.imported_from + (f' ({fmt})' if fmt else ''))}"
    console.print(f"[bold]{term(s.run)}[/]  {head}")
    if s.state.text:
        console.print(f"[yellow]status: {term(s.state.status)}[/] ({term(s.state.text)})")
    cap = s.capture
    padding = s.padding.text
    trace = s.trace
    if s.engine_starts and not sc.recorded:  # an imported log: no syncs or padding in it
        console.print(
            f"capture (start {cap.start} of {len(s.engine_starts)}, as the log says): "
            f"{cap.mode} -> {cap.status} (runs {cap.effective_mode})"
        )
        _print_engine_starts(console, s.engine_starts, s.log_spec)
        console.print(f"syncs in region: {s.sync_counts.text}")
    elif trace is not None:  # an imported trace: only the verdicts its evidence supports
        sy = trace.syncs
        syncs = (
            "unknown" if sy.status == "unknown" else f"{sy.count} in MLA layers"
        ) + f" ({sy.evidence})"  # evidence: which trace, or why unknown
        # an unknown verdict's label already holds its why: said once
        said = cap.label if cap.status == "unknown" else f"{cap.label} ({cap.evidence})"
        console.print(f"capture: {term(said)}  |  syncs: {term(syncs)}  |  padding: {padding}")
        for h in s.headline:  # the trace's S and timing, as every view prints them
            if h.label == "median step" or h.label.startswith("KV splits"):
                console.print(f"{h.label}: [bold]{term(h.value)}[/]  "
                              f"[dim]({term(h.provenance)})[/]")  # fmt: skip
        for note in trace.trust.notes or []:
            console.print(f"[dim]trace: {term(note)}[/]")
        if trace.cpu is not None:
            for line in trace.cpu.lines:
                if sections and line == trace.cpu.limits:
                    continue  # the CPU section below says what a CPU trace cannot show
                console.print(f"cpu trace: {term(line)}", highlight=False)
        if trace.trust.verdict == "unreliable":
            console.print(
                "[bold magenta]UNRELIABLE TRACE[/]: " + term("; ".join(trace.trust.reasons)),
                highlight=False,
            )
        console.print(f"sync probe: {s.sync_counts.text}")
        _print_trace_paths(console, trace)
        if trace.drafter is not None:
            console.print(term(trace.drafter.text), highlight=False)
        if trace.capture_phase is not None:
            console.print(term(trace.capture_phase.text), highlight=False)
    else:
        for h in s.headline:
            console.print(f"{h.label}: [bold]{term(h.value)}[/]  [dim]({term(h.provenance)})[/]")
        console.print(f"syncs in region: {s.sync_counts.text}  |  padding: {padding}")

    route = s.route
    console.print(
        "vLLM route: "
        + (
            f"{route.path} ({route.kernel}): {route.reason} [vLLM {route.version}"
            + ("" if route.verified else " UNVERIFIED")
            + "]"
            + "".join(f"; not modelled: {m}" for m in route.not_modelled or ())
            + (
                f"; AITER {route.aiter_rule.requested}: {route.aiter_rule.label}"
                if route.aiter_rule
                else ""
            )
            if route
            else "not modelled (no scenario: heads, KV dtype and arch are unknown; an imported "
            "trace's own paths are listed with it)"
        ),
        highlight=False,
    )
    if s.reservation:
        console.print(
            "verify buffers (modelled): "
            + "  |  ".join(
                f"{r.path} by {r.sized_by}: "
                + ("unknown" if r.bytes is None else human_bytes(r.bytes))
                for r in s.reservation
            )
            + (f"  |  capture: {human_bytes(cap.memory_bytes)}" if cap.memory_bytes else ""),
            highlight=False,
        )
    if s.engine is not None:
        _print_engine(console, s.engine, s.shadow)
    if s.fleet.ranks > 1:
        _print_fleet(console, s.fleet)

    if s.paths:
        shown = (
            ("native 4-D (torch)", next((c for c in s.paths if c.backend == "torch"), None)),
            ("legacy flat", next((c for c in s.paths if c.backend == "legacy-flat"), None)),
        )
        console.print(
            "verify paths (step 0, one layer): "
            + "  |  ".join(f"{n}: {c.syncs_per_layer} sync(s)/layer" for n, c in shown if c)
        )
    n_ranks = s.fleet.ranks
    # ranks that disagree are never merged: then every row names the ranks it holds for
    by_rank = n_ranks > 1 and any(len(r.ranks or [0]) != n_ranks for r in s.splits)

    def splits_table(show: Callable[[str], str]) -> Table:
        t = _simple_table("KV splits per policy (worst step)")
        # the numbers and their headers keep their width; a long policy name breaks after a
        # separator (reporters.names), never inside a version
        t.add_column("policy", ratio=1)
        if by_rank:
            t.add_column("ranks", no_wrap=True)
        for col in ("S", "all/act", "deserved", "frozen", "occ. (model)"):
            t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
        for r in s.splits:
            mark = " *" if r.policy == sc.policy else ""
            who = [rank_list([x or 0 for x in r.ranks] or [r.rank or 0])] if by_rank else []
            if r.on_device:  # S is the device's, at every replay: no host number
                t.add_row(show(r.policy + mark + " †"), *who, "device", "-", "-", "never", "-")
                continue
            if r.used is None:  # the policy's kernel does not take this configuration
                t.add_row(show(r.policy), *who, "‡", "-", "-", "-", "-")
                continue
            t.add_row(
                show(r.policy + mark + ("" if r.verified else " †")),
                *who,
                f"[bold red]{r.used}[/]" if r.collapsed else str(r.used),
                f"{r.all_rows}/{r.active_rows}",
                str(r.deserved),
                "-" if r.frozen is None else str(r.frozen),
                f"{_pct0(r.occupancy)}->{_pct0(r.occupancy_deserved)}",
            )
        return t

    t = fit_names(console, splits_table)
    if not s.splits and (s.engine_starts or s.shadow):
        t = None  # a log has no kernels; a recorded engine's modelled splits are shown above
    elif not s.splits and trace and trace.paths:
        t = None  # the trace's paths table above shows S per path and variant
    elif not s.splits and not s.layer_splits:
        t = None  # nothing to tabulate: an empty table says nothing
    elif not s.splits:
        t = Table(title="KV splits: no split metadata recorded", title_justify="left", box=None)
        t.add_column("S per MLA layer (from the trace)", justify="right")
        t.add_column("layer records", justify="right")
        for x in s.layer_splits:
            t.add_row("unknown" if x.splits is None else str(x.splits), str(x.records))
    if t is not None:
        console.print(t)
    if s.splits:
        console.print(
            "[dim]* the run's policy; S: splits used; all/act: S with min_kv_seq_len over all rows / active rows; "
            "deserved: real rows only; frozen: S a FULL graph captured with the dummy run keeps "
            "(device: S decided on the device at replay, never frozen); "
            f"occupancy of {sc.target} units used -> deserved; † UNVERIFIED: part of the "
            "rule is not verified (see --json 'source'); ‡ not runnable: the policy's kernel "
            "asserts against this configuration (head count, batch, KV dtype or arch), so it "
            "gives no S[/]"
        )

    if s.syncs and verbose:
        st = Table(title="syncs in the captured region", title_justify="left")
        for col in ("layer", "op", "location"):
            st.add_column(col)
        for x in s.syncs:
            st.add_row(str(x.layer), term(x.op), term(x.location))
        console.print(st)

    findings = s.findings  # analysed once, in the summary
    console.print(f"\n[bold]findings[/] ({len(findings)})")
    ft = Table(show_header=False, box=None, padding=(0, 1, 1, 0))
    ft.add_column("severity", no_wrap=True)
    ft.add_column("finding")
    for f in findings:
        ft.add_row(
            f"[{_STYLE.get(f.severity, '')}]{f.severity.upper()}[/]"
            + ("\n[magenta]unreliable[/]" if f.unreliable else ""),
            f"[bold]{term(f.title)}[/]\n[dim]{term(f.evidence)}[/]\n[green]fix:[/] {term(f.fix)}",
        )
    if not findings and s.splits:
        ft.add_row("OK", "no findings: the verify path captures and splits as deserved")
    elif not findings and trace and trace.paths:
        ft.add_row("OK", "no findings: S and the kernel variants in this trace look as expected")
    elif not findings:
        ft.add_row(
            "OK", "no findings (no split metadata: S could not be compared to what it deserves)"
        )
    console.print(ft)
    if sections:
        print_sections(s, console)
    else:
        console.print(
            f"every section of the summary: mlaprof report {term(s.run)}",
            style="dim",
            markup=False,
            highlight=False,
        )


def print_sections(s: RunSummary, console: Console) -> None:
    """Every section of the summary, as the rows layer lays it out (mlaprof.reporters.rows):
    the same rows, values and wording as the Markdown, HTML and ``tui`` views."""
    from mlaprof.reporters.rows import HEADING, block_lines, summary_blocks

    console.print("\n" + HEADING, style="bold", markup=False, highlight=False, soft_wrap=True)
    for line in block_lines(summary_blocks(s), console.width):
        console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)


def _print_engine_starts(
    console: Console, starts: list[EngineStart], total: SpecDecoding | None
) -> None:
    """Server starts of an imported vLLM log, then capture memory per rank per start."""
    console.print("[bold]server starts[/]")
    if total and len(starts) > 1:
        console.print(
            f"  spec decoding over the log: {total.accepted} of {total.drafted} drafted "
            f"tokens accepted over {total.lines} line(s) in {len(starts)} starts"
            + (" (a lower bound)" if total.complete is False else "")
        )
    for st in starts:
        spec = st.speculative
        # every string here comes from the log: escaped (textsafe.term)
        mode = term(st.final_mode or "mode not logged")
        if st.requested_mode and st.requested_mode != st.final_mode:
            mode = f"{term(st.requested_mode)} -> [bold red]{mode}[/]"
        sizes = st.capture_sizes
        console.print(
            f"  start {st.start}: vLLM {term(st.version or '?')} (log line {st.line}, "
            f"{term(st.time or 'no time')})  spec decode: "
            + ("-" if spec is None else term(f"{spec.method} x{spec.num_spec_tokens}"))
            + (
                f"  attention: {term(', '.join(map(str, st.attention_backends)))}"
                if st.attention_backends
                else ""
            )
            + f"  cudagraph: {mode}"
            + ("" if not sizes else f"  capture sizes: {len(sizes)} ({min(sizes)}..{max(sizes)})")
        )
        if st.prefill_backends:
            console.print(f"    MLA prefill: {term(', '.join(st.prefill_backends))}")
        if sd := st.spec_decoding:
            rate = "-" if sd.acceptance_rate is None else f"{100 * sd.acceptance_rate:.1f}%"
            pos = sd.per_position_last
            console.print(
                f"    spec decoding: {sd.accepted} of {sd.drafted} drafted tokens accepted "
                f"({rate}) over {sd.lines} SpecDecoding line(s)"
                + (
                    ""
                    if not pos
                    else f"; per position (last line): {', '.join(f'{p:.3f}' for p in pos)}"
                )
            )
            if sd.complete is False:
                console.print(f"      [yellow]{term(sd.completeness or '')}[/]", highlight=False)
        for d in st.downgrades:
            console.print(
                f"    downgraded by {term(d.backend)} (support {term(d.support)}"
                f"{', spec-decode' if d.spec_decode else ''}) -> {term(d.setting)} on ranks "
                f"{', '.join(map(str, d.ranks))} (log line {d.line})"
            )
        if st.profile:
            console.print(
                "    vLLM profiled graph memory for: "
                + term(
                    ", ".join(
                        f"{k}={v.graphs} (largest={v.largest})" for k, v in st.profile.items()
                    )
                )
            )
        if st.graphs:
            console.print(
                "    graphs captured: "
                + term(", ".join(f"{g.label} {g.done}/{g.total}" for g in st.graphs))
            )
    m = Table(title="graph capture memory per rank", title_justify="left", box=box.SIMPLE,
              pad_edge=False)  # fmt: skip
    cols = ("start", "rank", "process", "took", "secs", "estimate", "est/took", "profiling")
    rows = [
        (
            str(st.start),
            str(r.rank),
            term(r.process or "-"),
            gib(r.measured_bytes),
            "-" if r.capture_secs is None else f"{r.capture_secs:.0f}",
            gib(r.estimated_bytes),
            "-" if r.estimate_ratio is None else f"{r.estimate_ratio:.2f}x",
            "-" if r.profiling is None else ("on" if r.profiling.enabled else "off"),
        )
        for st in starts
        for r in st.memory
    ]
    for i, col in enumerate(cols):
        if col == "process":  # the one column that may fold; numbers keep their width
            m.add_column(col, overflow="fold")
        else:
            width = max([len(col)] + [len(row[i]) for row in rows])
            m.add_column(col, justify="right", no_wrap=True, min_width=width)
    if not rows:  # an eager server (or a log without capture lines): no empty table
        return
    for row in rows:
        m.add_row(*row)
    console.print(m)
    console.print(
        f"[dim]{term(starts[0].provenance)}; memory is per rank and start, never summed[/]"
    )


def _print_fleet(console: Console, fleet: Fleet) -> None:
    """Ranks side by side (never merged): which collapsed, S per rank."""
    console.print(fleet.text, highlight=False)
    t = Table(title="per rank", title_justify="left", box=box.SIMPLE, pad_edge=False)
    cols = ("rank", "host", "pid", "agent", "DP", "trust", "layers", "S min", "S max",
            "coll. layers")  # fmt: skip
    # every cell reads whole (the trust column read "reliab…" at 80 columns); only a host
    # name past 16 characters folds, and the last header over two lines
    host_w = min(16, max([4, *(len(r.host or "-") for r in fleet.per_rank)]))
    for col in cols:
        t.add_column(col, justify="left" if col == "host" else "right",
                     no_wrap=col not in ("host", "coll. layers"), overflow="fold",
                     min_width=host_w if col == "host" else None)  # fmt: skip
    for r in fleet.per_rank:
        t.add_row(
            str(r.rank), term(r.host or "-"), _or_unknown(r.pid), _or_unknown(r.agent),
            _or_unknown(r.dp_group), _or_unknown(r.trust), str(r.layers),
            _or_unknown(r.S_min), _or_unknown(r.S_max), _or_unknown(r.collapsed_layers),
        )  # fmt: skip
    console.print(t)
    console.print(
        f"[dim]DP: data-parallel group, {term(fleet.dp_groups_source)}; host: "
        f"{term(fleet.hosts_source or '')}[/]"
    )


def _simple_table(title: str) -> Table:
    """A titled table without side edges (the report's per-policy and per-kernel tables)."""
    return Table(title=title, title_justify="left", box=box.SIMPLE, pad_edge=False)


def _or_unknown(v: object) -> str:
    return "unknown" if v is None else str(v)


def _print_trace_paths(console: Console, trace: TraceSection) -> None:
    """Path, kernel variant, S and batch rows per variant, as the analysis read them."""
    if not trace.paths:  # no MLA kernel recognised: the findings say so, no empty table
        _print_replay_time(console, trace.replay_time)
        return

    def paths_table(show: Callable[[str], str]) -> Table:
        t = _simple_table("verify path and kernel variant per step (from the trace)")
        for col in ("path", "kernel variant", "steps (graph/eager)", "S", "rows", "qlen",
                    "layer us"):  # fmt: skip
            left = col in ("path", "kernel variant")
            t.add_column(col, justify="left" if left else "right",
                         overflow="fold" if col == "path" else None)  # fmt: skip
        for p in trace.paths:
            t.add_row(
                term(p.path) + ("" if p.engine is None else f" (engine {p.engine})"),
                show(p.variant),  # broken after a separator, never mid-identifier
                f"{p.steps} ({p.graph_steps}/{p.eager_steps})"
                + (f" +{p.piecewise_steps} PIECEWISE" if p.piecewise_steps else ""),
                str(p.S),
                p.rows or "-",
                p.qlen or "-",
                "-" if p.layer_median_us is None else f"{p.layer_median_us:.1f}",
            )
        return t

    t = fit_names(console, paths_table, column=1)
    console.print(t)
    for p in trace.paths:
        console.print(
            "[dim]"
            + term(f"{p.variant}: S {p.S_source}; rows: {p.rows_source}; qlen: ")
            + term(p.qlen_source)
            + "[/]"
        )
    _print_replay_time(console, trace.replay_time)


def _share(x: float | None) -> str:
    return share_text(x)


def _print_replay_time(console: Console, rt: TraceReplayTime, rows: int = 8) -> None:
    """Per-layer and per-kernel GPU time inside graph replays (the analysis's numbers)."""
    if not rt.replays:
        return
    share = _share(rt.attention_share)
    t = Table(
        title=f"time inside {rt.replays} graph replay(s): attention {share} of kernel time",
        title_justify="left",
        box=box.SIMPLE,
        pad_edge=False,
    )
    grouped = len(rt.rank_groups or []) > 1  # ranks that ran different S: apart
    for col in ("ranks",) * grouped + ("layer", "median us", "attention us", "attention", "S"):
        t.add_column(col, justify="right")
    layers = rt.layers
    rows *= max(1, len(rt.rank_groups or []))
    shown = layers if len(layers) <= rows else layers[: rows - 2] + [None] + layers[-1:]
    for x in shown:
        if x is None:
            t.add_row(*["..."] + [""] * (4 + grouped))
            continue
        t.add_row(*[x.ranks_text] * grouped, str(x.layer), f"{x.median_us:.1f}",
                  f"{x.attention_median_us:.1f}", _share(x.attention_share),
                  "-" if x.S is None else str(x.S))  # fmt: skip
    console.print(t)

    def kernels_table(show: Callable[[str], str]) -> Table:
        k = _simple_table("kernels inside graph replays (GPU time)")
        k.add_column("kernel")  # a name broken after a separator, never mid-identifier
        for col in ("launches", "total us", "median us", "share"):
            k.add_column(col, justify="right")
        for x in rt.kernels[:rows]:
            bold = x.attention
            k.add_row(("[bold]" if bold else "") + show(x.name) + ("[/]" if bold else ""),
                      str(x.launches), f"{x.total_us:.1f}", f"{x.median_us:.1f}",
                      _share(x.share))  # fmt: skip
        return k

    k = fit_names(console, kernels_table)
    console.print(k)
    console.print(f"[dim]{term(rt.provenance)}; bold: attention (MLA) kernels[/]")


def print_diff(d: SummaryDiff, console: Console | None = None) -> None:
    """The run diff of mlaprof.analysis.diff: metric (unit, provenance), A, B, change, verdict."""
    from mlaprof.analysis.diff import fmt_change, fmt_value

    console = console or Console()
    t = Table(title=f"A {term(d.before)}  ->  B {term(d.after)}", title_justify="left")
    # A and B take at most a quarter of what the borders and the last two columns leave each,
    # the metric's name the rest (at 80 columns it wrapped over up to 5 lines beside a long A
    # or B text); a long value wraps within its column
    t.add_column("metric", overflow="fold")
    for col in ("A", "B"):
        t.add_column(
            col, justify="right", overflow="fold", max_width=max(10, (console.width - 28) // 4)
        )
    t.add_column("change", justify="right", no_wrap=True, min_width=6)
    t.add_column("B is", no_wrap=True, min_width=6)
    style = {"better": "green", "worse": "red"}

    def metric(name: str, provenance: str) -> str:
        return name + (f"\n[dim]{term(provenance)}[/]" if provenance else "")

    for r in d.table:
        v = r.verdict
        t.add_row(
            metric(f"{r.metric} ({r.unit})", r.provenance),
            fmt_value(r.a),
            fmt_value(r.b),
            fmt_change(r),
            f"[{style[v]}]{v}[/]" if v in style else str(v),
        )
    t.add_row("capture", term(d.capture.before), term(d.capture.after), "", "")
    if d.route.before or d.route.after:
        route = [term(r or "not modelled") for r in (d.route.before, d.route.after)]
        t.add_row("vLLM route", *route, "", "")
    for x in d.trace_splits:
        t.add_row(
            metric(f"S from the trace ({term(x.variant)})", term(x.source)),
            _or_absent(x.S_before, x.rows_before),
            _or_absent(x.S_after, x.rows_after),
            "",
            "",
        )
    t.add_row("backend", term(d.backend.before), term(d.backend.after), "", "")
    console.print(t)
    if d.workload.same is not True:  # what the diff says about comparing these two runs
        console.print(f"[yellow]workload: {term(d.workload.text)}[/]")
    if d.cpu_spread:
        console.print(
            f"[dim]CPU reference timings: identical CPU runs differ by up to "
            f"{d.cpu_spread:.1f}x on their clock (bench/cpu_step_stability.py); smaller "
            "changes read 'within spread'[/]"
        )


def _or_absent(s: str | None, rows: str | None) -> str:
    if s is None:
        return "not run"
    return f"{s} ({rows} rows)" if rows else str(s)


def _print_engine(console: Console, e: EngineSection, sh: ShadowSection | None) -> None:
    """A recorded vLLM engine: what it did (measured), and the shadow AITER view (modelled)."""
    acc = (
        "not recorded (disable_log_stats?)"
        if e.accepted_tokens is None
        else f"{e.accepted_tokens} accepted ({_pct0(e.acceptance_rate)})"
    )
    modes = ", ".join(f"{m} x{n}" for m, n in e.graph_modes.items())
    console.print(
        f"engine (measured): {e.backend}, {e.heads} heads/rank, {e.spec_method} "
        f"k={e.num_speculative_tokens}  |  {e.steps} steps, {e.verify_steps} verify  |  "
        f"{e.verify_rows} verify rows ({e.verify_rows_as_prefill} filed as prefill), "
        f"{e.draft_tokens} draft tokens, {acc}  |  graph {modes}"
    )
    if not sh:
        return
    t = Table(title=f"shadow AITER: {sh.provenance}", title_justify="left", box=box.SIMPLE,
              pad_edge=False)  # fmt: skip
    for col in ("step", "path", "rows+pad", "size", "S bug", "S fix", "frozen", "deserved", "occ"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in sh.per_step[:12]:

        def show(v: object) -> str:
            return "-" if v is None or v != v else str(int(v))  # type: ignore[call-overload]

        t.add_row(
            str(r.step),
            r.path,
            f"{r.real_rows}+{r.padding_rows}",
            show(r.capture_size),
            f"[bold red]{show(r.s_bug)}[/]" if r.collapsed else show(r.s_bug),
            show(r.s_fix),
            show(r.s_frozen),
            show(r.s_deserved),
            _pct0(r.occupancy_fix),
        )
    console.print(t)
    more = len(sh.per_step) - 12
    console.print(
        f"[dim]{'(' + str(more) + ' more steps in --json) ' if more > 0 else ''}S bug: "
        "min_kv_seq_len over all rows (padding pinned to qlen); S fix: over active rows; frozen: "
        "S a FULL graph captured with the dummy run keeps; occ: device units busy with S fix[/]"
    )
