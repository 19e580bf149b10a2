"""Where a capture plan's inputs come from: the decode batch-size distribution (a recorded run, a
vLLM-plugin run, or a file of counts) and the capture memory per size (a run's measurements, a
vLLM log, or a user model). Runs are read through :mod:`mlaprof.store` only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import counted
from mlaprof.whatif.plan import MemoryModel, fit_memory, memory_from_total

if TYPE_CHECKING:
    import pandas as pd

MIB = float(1 << 20)


def _numbers(values: Any) -> Any:
    """``values`` as numbers, NaN where not one. pandas is loaded here, not with the module: a
    run's tables are frames already, and a plan from a file of counts needs no pandas."""
    import pandas as pd

    return pd.to_numeric(values, errors="coerce")


def _lowest_rank(df: pd.DataFrame) -> pd.DataFrame:
    if "rank" in df.columns and len(df):
        r = _numbers(df["rank"])
        return df[r == r.min()]
    return df


def counts_from_run(run: Any, qlen: int | None = None) -> tuple[dict[int, int], int | None, str]:
    """(batch size -> steps, qlen, provenance) from a run's ``steps`` table: the steps of
    ``qlen`` (default: the run's most common qlen, i.e. its verify steps).

    Recorded runs (mlaprof run, the vLLM plugin) give each step's real request count. An imported
    trace gives the rows of each step's MLA kernels instead: an eager step's are its real
    requests, a graph replay's are padded (the real batch was at most that), and the provenance
    says so."""
    steps = _lowest_rank(run.table("steps"))
    real = _numbers(steps.get("num_real_reqs"))
    what = "real requests"
    if real.dropna().empty:
        real = _numbers(steps.get("num_reqs"))
        what = "kernel rows (graph replays: padded, the real batch was at most this)"
    if real.dropna().empty:
        raise MlaprofError(
            f"run {run.name} records no request or row count per step: give the batch sizes "
            "with --counts FILE"
        )
    q = _numbers(steps.get("qlen"))
    if qlen is None and q.notna().any():
        qlen = int(q.dropna().astype(int).mode().iloc[0])
    keep = real.notna() & (real > 0) & ((q == qlen) | q.isna() if qlen is not None else True)
    chosen = real[keep].astype(int)
    if chosen.empty:
        raise MlaprofError(f"run {run.name} has no steps with qlen {qlen}")
    counts = {int(b): int(n) for b, n in chosen.value_counts().items()}
    src = run.meta.get("source") or run.meta.get("imported_from") or "run"
    return counts, qlen, f"{len(chosen)} steps (qlen {qlen}) of run {run.name} ({src}): {what}"


def counts_from_file(path: Path) -> tuple[dict[int, int], str]:
    """Batch-size counts from JSON (``{"8": 120, ...}`` or ``[[8, 120], ...]``) or text lines
    ``BATCH COUNT`` / ``BATCH,COUNT`` (``#`` comments and one header line allowed)."""
    return read_counts(path, "batch"), f"counts from {path.name}"


def read_counts(path: Path, what: str, single_ok: bool = False) -> dict[int, int]:
    """``VALUE COUNT`` pairs (see :func:`counts_from_file`); with ``single_ok`` a line holding one
    value counts once (a file of request KV lengths, one a line)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise MlaprofError(f"cannot read {path}: {e}") from None
    pairs: list[tuple[Any, Any]] = []
    if text.lstrip().startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise MlaprofError(f"{path} is not valid JSON: {e}") from None
        pairs = list(doc.items()) if isinstance(doc, dict) else [tuple(x) for x in doc]
        where = ["entry"] * len(pairs)
    else:
        where = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.replace(",", " ").split()
            if not pairs and not where and not parts[0].lstrip("-").isdigit():
                continue  # a header line
            if single_ok and len(parts) == 1:
                parts.append("1")
            pairs.append(tuple(parts))
            where.append(f"line {n}")
    counts: dict[int, int] = {}
    for pair, w in zip(pairs, where, strict=True):
        try:
            b, c = pair
            bi, ci = int(b), int(float(c))
        except (TypeError, ValueError):
            raise MlaprofError(
                f"{path} {w}: {' '.join(map(str, pair))!r} is not '{what} count'"
            ) from None
        if bi < 1 or ci < 0:
            raise MlaprofError(f"{path} {w}: {what} must be >= 1 and count >= 0")
        counts[bi] = counts.get(bi, 0) + ci
    if not counts:
        raise MlaprofError(f"{path} has no {what} counts")
    return counts


def memory_from_run(run: Any) -> MemoryModel:
    """Fit ``fixed + per_token * size`` to the capture memory a run measured per size."""
    mem = _lowest_rank(run.table("memory"))
    dev = run.meta.get("device") or "unknown device"
    for col in ("pool_bytes", "driver_bytes", "allocator_bytes"):
        vals = mem[["capture_size", col]].apply(_numbers).dropna()
        vals = vals[(vals[col] > 0) & (vals["capture_size"] > 0)]
        if len(vals):
            pts = vals.groupby("capture_size")[col].median().to_dict()
            return fit_memory(
                {int(k): float(v) for k, v in pts.items()},
                f"fitted to {counted(len(pts), 'capture size(s)')} measured in "
                f"run {run.name} on {dev} ({col})",
            )
    raise MlaprofError(f"run {run.name} has no capture memory per size (memory table is empty)")


def memory_from_log(path: Path, default_sizes: list[int], rule: str) -> MemoryModel:
    """Capture memory from a vLLM log: the last server start's ``Graph capturing finished in N
    secs, took X GiB`` (the largest rank's: the budget is per GPU), spread in proportion to size
    over the capture sizes that start's config line lists (else the default list)."""
    from mlaprof.importers.inputs import text_lines
    from mlaprof.importers.vllm_log import parse_log

    facts = parse_log(text_lines(path, "vLLM log"))
    done = [r for r in facts.records if r.get("kind") == "capture-finished" and r.get("bytes")]
    if not done:
        raise MlaprofError(f"{path} has no 'Graph capturing finished ... took X GiB' line")
    start = max(int(r["start"]) for r in done)
    last = [r for r in done if int(r["start"]) == start]
    top = max(last, key=lambda r: float(r["bytes"]))
    total = float(top["bytes"])
    logged = facts.starts[start - 1].config.get("capture_sizes") if facts.starts else None
    sizes, which = (logged, "the capture sizes its config line lists") if logged else (
        default_sizes, f"the {rule} default list"
    )  # fmt: skip
    ranks = len({r.get("rank") for r in last})
    return memory_from_total(
        total,
        sizes,
        f"model: vLLM log {path.name} (start {start}) says capture took {total / (1 << 30):.2f} GiB "
        f"on rank {top.get('rank')} (largest of {ranks}); spread over {which} "
        f"({len(sizes)} sizes) in proportion to size",
    )


def memory_from_spec(text: str) -> MemoryModel:
    """``FIXED_MIB+PER_TOKEN_MIB`` (e.g. ``20+0.5``): a user's model, labelled as such."""
    fixed, plus, per = text.partition("+")
    try:
        a, b = float(fixed), float(per) if plus else 0.0
    except ValueError:
        raise MlaprofError(f"--memory-model wants FIXED_MIB+PER_TOKEN_MIB, got {text!r}") from None
    if a < 0 or b < 0 or a + b <= 0:
        raise MlaprofError(f"--memory-model: sizes must be >= 0 and not both 0, got {text!r}")
    return MemoryModel(a * MIB, b * MIB, f"user model: {a:g} MiB per graph + {b:g} MiB per token")
