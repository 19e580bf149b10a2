"""Paths and route: the native 4-D entry vs the flattened legacy path (the run's path-check
events), and the verify route vLLM takes (the scenario's, or the one modelled for a recorded
engine's own batches)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import PathCheck, PathOp, Route
from mlaprof.analysis.typed_json import to_json

if TYPE_CHECKING:
    from mlaprof.analysis.claims import Claims
    from mlaprof.analysis.evidence.model import RunMeta
    from mlaprof.analysis.sections import Scenario, ShadowSection


def path_checks(events: pd.DataFrame) -> list[PathCheck]:
    """The run's ``path-check`` events (mlaprof.cpu_runner.record_path_check writes their
    JSON: backend, syncs_per_layer, ops, allocs_per_layer), typed where they are read."""
    if events.empty:
        return []
    rows = events[events["kind"] == "path-check"]
    ranks = rows["rank"] if "rank" in rows else pd.Series([None] * len(rows), index=rows.index)
    # ranks whose checks read the same are one row that names them (never one row per rank
    # with nothing to tell them apart)
    by_check: dict[str, tuple[dict[str, Any], set[int]]] = {}
    for data, rank in zip(rows["data"], ranks, strict=True):
        if data not in by_check:
            try:
                by_check[data] = (json.loads(data), set())
            except (TypeError, ValueError):
                continue
        if pd.notna(rank):
            by_check[data][1].add(int(rank))
    return [
        PathCheck(
            **{**d, "ops": [PathOp(**o) for o in d.get("ops") or []], "ranks": sorted(held) or None}
        )  # fmt: skip
        for d, held in by_check.values()
    ]


# a path check's finding: what another verify path does on this run's step-0 metadata, never a
# sync of this run's region (its sync count says those); contradictions.py holds it to the words
PATH_CHECK = "path-check"
NOT_THIS_RUN = "path check, not this run's region"


def path_findings(checks: list[PathCheck], run_backend: str) -> list[Finding]:
    by = {c.backend: c for c in checks}
    legacy, native = by.get("legacy-flat"), by.get("torch")
    if not legacy or not native or run_backend == "legacy-flat":
        return []
    ops = ", ".join(sorted({o.op for o in legacy.ops}))
    return [
        Finding(
            kind=PATH_CHECK,
            severity="info",
            title=(
                f"{NOT_THIS_RUN}: the flattened legacy verify path would do "
                f"{legacy.syncs_per_layer} syncs per layer on this run's step-0 metadata; "
                f"the native 4-D path does {native.syncs_per_layer}"
            ),
            evidence=f"path check on step 0, one layer of each path outside the run: {ops}",
            fix="keep calling the kernel's native 4-D MTP entry with builder-computed metadata",
            data={
                "path": "legacy-flat",
                "provenance": "checked on step 0's metadata, one layer of each path, outside "
                "the run's watched region",
                "legacy": to_json(legacy),
                "native": to_json(native),
            },
        )
    ]


def route_summary(meta: RunMeta) -> Route | None:
    """The verify path vLLM takes for the run's scenario: recorded at run start, else derived
    from the stored scenario (older runs); None where the run has no scenario (imports)."""
    if meta.route is not None:
        return meta.route
    if not meta.scenario.model:
        return None
    from mlaprof.errors import MlaprofError
    from mlaprof.scenario import scenario_from_mapping

    try:
        return Route.recorded(scenario_from_mapping(to_json(meta.scenario)).route().to_dict())
    except MlaprofError:
        return None


def run_route(
    meta: RunMeta, shadow: ShadowSection | None, claims: Claims | None = None
) -> Route | None:
    """The verify path vLLM takes: the scenario's (:func:`route_summary`), else the route the
    shadow analysis modelled for the recorded batches (one route per run: the most common).
    Only a run with recorded engine batches has a shadow summary. A modelled route reads
    verified only where the engine's recorded backend took that path alone
    (:meth:`mlaprof.analysis.claims.Claims.route_verified`), never "as recorded"."""
    r = route_summary(meta)
    if r is not None:
        return _said(r, _scenario_provenance(r, meta))
    if shadow and shadow.paths:
        paths = shadow.paths
        path = max(paths, key=lambda p: paths[p])
        ran = claims.engine_backend if claims is not None else None
        took = claims.recorded_route() if claims is not None else ()
        if not ran:
            engine = "; the engine's attention backend was not recorded"
        elif path in took:
            engine = f"; the engine ran {ran}"
        else:
            engine = (
                f"; not the route the engine took: it ran {ran} "
                f"({'/'.join(took) or 'a path mlaprof does not model'})"
            )
        r = Route(
            path=path,
            kernel=", ".join(shadow.policies or []),
            reason=(
                f"modelled for the recorded verify batches on {shadow.device} with aiter "
                f"{shadow.aiter} ({sum(paths.values())} steps: "
                + ", ".join(f"{p} x{n}" for p, n in paths.items())
                + ")"
            ),
            version=str(meta.vllm or meta.versions.get("vllm") or "unknown"),
            verified=claims is not None and claims.route_verified(path),
            source="shadow analysis of the engine's own batches (modelled, not recorded)",
        )
        # what the engine ran beside the model is the route's provenance: said in every view
        # with the route, the compare's row included (:func:`route_label`)
        said = f"modelled from the engine's recorded verify batches, not recorded{engine}"
        return _said(r, said)
    return None


def _scenario_provenance(r: Route, meta: RunMeta) -> str:
    """Where a scenario's route comes from beside what the run ran: the route vLLM takes for
    the scenario on its target device, modelled; a CPU engine ran none of it."""
    target = meta.scenario.target or "unknown"
    said = f"modelled for the {target} target"
    device, backend = str(meta.device or ""), meta.backend
    if not device or not backend:
        return said
    if device.startswith("cpu"):
        return f"{said}; this run ran mlaprof's {backend} backend on the CPU, not this route"
    return f"{said}; this run measured mlaprof's {backend} backend on {device}"


def route_text(r: Route, provenance: str) -> str:
    """The route as every view prints it: path, kernel, why, the vLLM version (UNVERIFIED where
    the rule is not checked against vLLM's code), where it comes from, what it does not model."""
    tag = "" if r.verified else " UNVERIFIED"
    return (
        f"{r.path} ({r.kernel}): {r.reason} [vLLM {r.version}{tag}] ({provenance})"
        + "".join(f"; not modelled: {m}" for m in r.not_modelled or ())
        + (f"; AITER {r.aiter_rule.requested}: {r.aiter_rule.label}" if r.aiter_rule else "")
    )


def route_label(r: Route) -> str:
    """The route where a view has no room for its line (the compare's row): its path, vLLM
    version (UNVERIFIED as :func:`route_text` says it) and where it comes from, the same
    provenance every view prints beside the route (:func:`run_route`: modelled, and what the
    run or engine ran instead); "provenance not recorded" where a route reached it without."""
    tag = "" if r.verified else " UNVERIFIED"
    return f"{r.path} (vLLM {r.version}{tag}; {r.provenance or 'provenance not recorded'})"


def _said(r: Route, provenance: str) -> Route:
    return replace(r, provenance=provenance, text=route_text(r, provenance))


def pre_fix_rule(scenario: Scenario) -> str | None:
    """Why a scenario's min_kv_seq_len rule is not its vLLM version's: ``all-rows`` is the rule
    before vLLM PR #51171, which 0.32.0 and later no longer have (``_build_decode`` takes the
    minimum over active rows). None when the scenario's version has the rule it runs."""
    from mlaprof.splits.routing import PRE_FIX

    version = str(scenario.vllm_version or "")
    if scenario.min_kv_mode != "all-rows" or not version or version == PRE_FIX:
        return None
    return (
        f"min_kv_seq_len over all rows is the rule before vLLM PR #51171, modelled on purpose: "
        f"vLLM {version} takes it over active rows (--min-kv-mode active-rows)"
    )


def route_findings(route: Route | None, policy: str) -> list[Finding]:
    """A scenario whose split policy models a kernel vLLM does not run for its configuration
    (the rule the split findings judge a what-if by: :func:`mlaprof.analysis.splits.off_route`)."""
    from mlaprof.analysis.splits import off_route

    if not route or not policy or not off_route(policy, route):
        return []
    return [
        Finding(
            kind="route",
            severity="warning",
            title=(
                f"split policy {policy} models a kernel vLLM does not run here: this "
                f"configuration takes {route.path} ({route.kernel})"
            ),
            evidence=f"{route.reason} [{route.source}]",
            fix="pick a policy of the routed kernel (mlaprof run --policy), or change the "
            "configuration (heads, KV dtype, target) to the one you mean to model",
            data={"route": to_json(route), "policy": policy},
        )
    ]
