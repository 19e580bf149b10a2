"""Helpers shared by the verbs: locating runs, the traces folder, rich consoles."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from mlaprof.errors import MlaprofError
from mlaprof.store.liveness import RunStatus

DEFAULT_TRACES = "traces"
ENDED_EARLY = (RunStatus.FAILED, RunStatus.INTERRUPTED)  # run statuses that stopped the run


def traces_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("MLAPROF_TRACES") or DEFAULT_TRACES)


def check_traces(base: Path) -> Path:
    """A traces folder a writer may use: refused before any work when it is a file."""
    if os.path.lexists(base) and not base.is_dir():
        raise MlaprofError(f"--traces {base} is not a folder (it names the folder that holds runs)")
    return base


def resolve_run(spec: str, traces: str | None = None) -> Path:
    """A run folder path, or a run name under the traces folder, or 'latest': the one rule
    every command (report, export, tui, --compare, plan-capture) turns what ``mlaprof runs``
    prints into a run folder by.

    A name is turned into its folder by the store's one rule (``runmeta.folder_name``: ``"a b"``
    is ``a-b``, as ``run --name "a b"`` stored it). A traces folder given (``--traces`` or
    ``$MLAPROF_TRACES``) is looked in first: ``report NAME --traces T`` opens ``T/NAME`` even where
    the working folder has a ``NAME`` of its own."""
    from mlaprof.store.runmeta import folder_name

    p = Path(spec)
    base = traces_dir(traces)
    check_traces(base)
    if spec == "latest":
        from mlaprof.store.reader import list_runs

        runs = [r for r in list_runs(base) if r.error is None]
        # a run that ended before its first step (a start that failed) has nothing to show
        dead = [r for r in runs if r.steps == 0 and r.status in ENDED_EARLY]
        live = [r for r in runs if r not in dead]
        if not live:
            why = f" ({len(dead)} ended before recording a step)" if dead else ""
            raise MlaprofError(f"no runs under {base}{why}")
        skipped = [r.name for r in dead if (r.created, r.name) > (live[0].created, live[0].name)]
        if skipped:
            print(
                f"mlaprof: note: latest is {live[0].name}; newer {', '.join(skipped)} "
                "ended before recording a step",
                file=sys.stderr,
            )
        return live[0].path
    under: list[Path] = []
    # a name as `runs` prints it: ``bug``, or ``demo/bug`` one folder down (the folder its last
    # part is stored under); never a path that leaves the traces folder
    if spec and not p.is_absolute() and ".." not in p.parts:
        under.append(base / p)
        with contextlib.suppress(MlaprofError):
            under.append(base / p.parent / folder_name(p.name))
    under = [u for u in under if u.is_dir()]
    explicit = bool(traces or os.environ.get("MLAPROF_TRACES"))
    if under and (explicit or not p.is_dir()):
        return under[0]
    if p.is_dir():
        return p
    if p.exists():
        raise MlaprofError(f"{p} is not a run folder")
    hint = did_you_mean(spec, base)
    raise MlaprofError(f"run {spec!r} not found (neither a folder nor a run under {base}){hint}")


def did_you_mean(spec: str, base: Path) -> str:
    """``; did you mean 'x'?`` for the run names under ``base`` closest to ``spec`` (or "")."""
    import difflib

    if not base.is_dir():
        return ""
    names = []
    for p in base.iterdir():  # the runs and those one folder down (demo/...), as `runs` lists
        if p.is_dir() and not p.name.startswith("."):
            names.append(p.name)
            with contextlib.suppress(OSError):
                names += [f"{p.name}/{q.name}" for q in p.iterdir() if q.is_dir()]
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(n) for n in close)}?" if close else ""


def add_traces_arg(parser) -> None:  # noqa: ANN001
    parser.add_argument(
        "--traces",
        metavar="DIR",
        help=f"folder of runs (default: $MLAPROF_TRACES or ./{DEFAULT_TRACES})",
    )


MAX_LIST = 100_000


def add_vllm_version_arg(parser, what: str = "routing, capture sizes and dispatch") -> None:  # noqa: ANN001
    """``--vllm-version``: the vLLM release modelled (default: the newest modelled release)."""
    from mlaprof.splits.routing import DEFAULT_VERSION, VERSIONS

    parser.add_argument(
        "--vllm-version",
        choices=list(VERSIONS),
        help=f"the vLLM release whose {what} are modelled (default {DEFAULT_VERSION}, the newest; "
        "pre-51171: before the verify fix, flattened small-head verify)",
    )


def add_engine_model_args(parser) -> None:  # noqa: ANN001
    """``--max-num-batched-tokens`` and ``--aiter``: the engine limit capture sizes stop at and
    the AITER release the stack runs (mlaprof.splits.releases labels an unmodelled one)."""
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        help="vLLM max_num_batched_tokens: no capture size above it (default: not limiting)",
    )
    parser.add_argument(
        "--aiter",
        metavar="VERSION",
        help="the AITER release the stack runs, e.g. 0.1.21.post2 (vLLM 0.32/0.33's pin): its "
        "gluon rule, or the nearest modelled one labelled 'not verified'",
    )


def int_list(text: str, what: str) -> list[int]:
    """``1,2,4``, ranges ``1-64`` (or ``8-64:8`` with a step) and ``k`` suffixes (``128k`` =
    131072) as a sorted list of distinct integers."""
    out: set[int] = set()

    def one(tok: str) -> int:
        tok = tok.strip().lower()
        mult = 1024 if tok.endswith("k") else 1
        try:
            return int(tok.removesuffix("k")) * mult
        except ValueError:
            raise MlaprofError(f"{what}: {tok!r} is not an integer") from None

    for part in text.split(","):
        if not part.strip():
            continue
        rng, _, step = part.partition(":")
        lo, dash, hi = rng.partition("-")
        if dash and not lo.strip():  # "-5": a minus sign, read as a range with no start
            raise MlaprofError(f"{what}: {part.strip()!r} is negative: give positive integers "
                               "(a range is LO-HI, e.g. 1-64)")  # fmt: skip
        if dash and not hi.strip():
            raise MlaprofError(f"{what}: the range {part.strip()!r} has no end (LO-HI, e.g. 1-64)")
        if dash:
            a, b, s = one(lo), one(hi), one(step) if step else 1
            if a > b or s < 1:
                raise MlaprofError(f"{what}: bad range {part!r}")
            if (b - a) // s + 1 > MAX_LIST:
                raise MlaprofError(f"{what}: {part!r} has more than {MAX_LIST:,} values")
            out.update(range(a, b + 1, s))
        else:
            out.add(one(rng))
    if not out:
        raise MlaprofError(f"{what}: no values in {text!r}")
    return sorted(out)


def name_list(text: str, known: dict | tuple, what: str) -> list[str]:
    """Comma-separated names, or ``all``; unknown names raise naming the known ones."""
    names = (
        list(known) if text.strip() == "all" else [t.strip() for t in text.split(",") if t.strip()]
    )
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise MlaprofError(
            f"unknown {what} {', '.join(bad) or text!r}; choose from {', '.join(known)} or all"
        )
    return names
