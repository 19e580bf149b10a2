"""What a run can claim, decided once from its context: its capture verdict, the route it took
(recorded) or is modelled to take, the backend it ran (a scenario run's own) and its device. Every finding builder that
states something the context could contradict asks :class:`Claims` instead of judging alone, so
one report never says "capture failed" beside "S would be frozen into the FULL graph", nor calls
a modelled route verified.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlaprof.analysis.capture_status import (
    CaptureStatus,
    RankVerdict,
    keeps_full_graphs,
    no_full_graph,
)
from mlaprof.analysis.findings import Finding

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import Evidence
    from mlaprof.analysis.sections import Route

# the verify paths each vLLM attention backend can run (v1/attention/backends/mla/).
# ROCM_AITER_MLA chooses among several AITER paths per batch, and TRITON_MLA folds verify into
# its own kernel from vLLM 0.34 (triton-verify), so those names alone do not say which ran.
BACKEND_PATHS: dict[str, tuple[str, ...]] = {
    "ROCM_AITER_MLA": ("gluon-verify", "gluon-decode", "asm-persistent", "asm"),
    "TRITON_MLA": ("triton-mla", "triton-verify"),
    "FLASH_ATTN_MLA": ("flash-attn-mla",),
    "FLASHMLA": ("flashmla",),
    "CPU_MLA": ("cpu-mla",),
    "AMX_MLA": ("cpu-mla",),
}

# the route path an mlaprof backend runs itself (the rest call the kernel's native 4-D entry)
LEGACY_BACKEND = "legacy-flat"


def full_graph_serves(
    graph_mode: str | None,
    capture_status: str | None,
    effective_mode: str | None = None,
    per_rank: Iterable[RankVerdict] = (),
) -> bool:
    """A FULL graph serves the steps: asked for (a mode that keeps FULL decode graphs), the
    capture did not fail, and no rank ran its steps in another mode (the one rule an S frozen
    into a captured graph, or a capture's memory, is claimed by; ``effective_mode``: the mode
    that ran, or the one predicted where nothing ran as a graph (``Capture.served_mode``),
    ``per_rank``: each rank's verdict where the status is per rank,
    :func:`~mlaprof.analysis.capture_status.no_full_graph`). An engine that ran eagerly or
    piecewise by its own choice failed nothing, yet freezes no S into a graph."""
    if not keeps_full_graphs(graph_mode):
        return False
    ran = [effective_mode] if effective_mode is not None else [r.served_mode for r in per_rank]
    if any(m is not None and not keeps_full_graphs(m) for m in ran):
        return False
    return not no_full_graph(capture_status, effective_mode, per_rank)


def recorded_paths(backend: str | None) -> tuple[str, ...]:
    """The verify paths a recorded attention backend can have taken (empty: not recorded or not
    an attention backend vLLM names)."""
    return BACKEND_PATHS.get(str(backend or "").upper(), ())


@dataclass(frozen=True)
class Claims:
    """The run's context, and what it lets a finding claim (one rule per question)."""

    graph_mode: str  # the graph mode the run asked for
    capture_status: str  # the capture verdict (mlaprof.analysis.capture_status)
    device: str  # where the numbers were measured ("cpu" for a CPU run)
    backend: str | None = None  # the mlaprof backend a scenario ran (None: not a scenario run)
    engine_backend: str | None = None  # the attention backend a recorded engine ran
    cpu_op: bool = False  # the MLA op is a CPU op (no grid, no split count)
    effective_mode: str | None = None  # the graph mode that ran (None: not said)
    # each rank's own verdict where the capture status is per rank (Capture.per_rank)
    per_rank: tuple[RankVerdict, ...] = ()

    @property
    def full_graph(self) -> bool:
        """A FULL graph serves the steps (asked for, and the capture did not fail): only then is
        an S frozen into a captured graph, or the capture's memory worth trimming."""
        return full_graph_serves(
            self.graph_mode, self.capture_status, self.effective_mode, self.per_rank
        )

    @property
    def capture_succeeded(self) -> bool:
        """A capture was measured to succeed: its memory is a cost to advise on."""
        return self.capture_status == CaptureStatus.CAPTURED

    @property
    def has_grid(self) -> bool:
        """The MLA work is a GPU kernel with a grid (a split count a pattern can describe)."""
        return not self.cpu_op and self.device != "cpu"

    def recorded_route(self) -> tuple[str, ...]:
        """The paths the run's own record says it took (empty: no route recorded)."""
        return recorded_paths(self.engine_backend)

    def route_verified(self, path: str) -> bool:
        """A modelled route reads verified only where the recorded route is that path alone."""
        return self.recorded_route() == (path,)

    def backend_mismatch(self, route: Route | None) -> str | None:
        """Why the run's own backend does not run the route its vLLM version takes (None: it
        does, or the run has no backend or route)."""
        if not route or not self.backend:  # only a scenario run ran a backend of its own
            return None
        path = route.path
        legacy = self.backend == LEGACY_BACKEND
        if legacy and path and path != "legacy-flat":
            return (
                f"backend {self.backend} runs the flattened pre-#51171 verify path, but vLLM "
                f"{route.version} routes this configuration to {path} ({route.kernel})"
            )
        if not legacy and path == "legacy-flat":
            return (
                f"backend {self.backend} calls the kernel's native 4-D entry, but vLLM "
                f"{route.version} routes this configuration to the flattened legacy path"
            )
        return None


def claims_of(ev: Evidence) -> Claims:
    """The run's claims, from its evidence (one per run, shared by every finding builder)."""
    engine_backend = None
    if ev.engine_steps:
        names = {s.backend for s in ev.engine_steps if s.backend}
        engine_backend = names.pop() if len(names) == 1 else None
    cpu = ev.cpu is not None or ev.meta.device == "cpu"
    return Claims(
        graph_mode=ev.graph_mode,
        capture_status=str(ev.capture.status),
        # the graph mode that ran, or the one predicted where the run captured nothing (a CPU's
        # eager steps are no graph mode: Capture.served_mode)
        effective_mode=ev.capture.served_mode,
        per_rank=tuple(ev.capture.per_rank or ()),
        device=ev.meta.device or ev.device,
        backend=ev.meta.backend if ev.scenario.recorded and ev.meta.backend else None,
        engine_backend=engine_backend,
        cpu_op=cpu or bool(engine_backend and recorded_paths(engine_backend) == ("cpu-mla",)),
    )


def mismatch_findings(claims: Claims, route: Route | None) -> list[Finding]:
    """A run whose backend does not run the route its vLLM version takes: its numbers describe
    another path than the route every view names."""
    why = claims.backend_mismatch(route)
    if why is None or route is None:
        return []
    legacy = claims.backend == LEGACY_BACKEND
    return [
        Finding(
            kind="route",
            severity="warning",
            title=f"the run's backend does not run its vLLM route: {why}",
            evidence=(
                f"route {route.path} from {route.source}; the run measured backend {claims.backend}"
            ),
            fix=(
                "model the pre-fix route with --vllm-version pre-51171, or run --backend torch "
                "for the route this vLLM version takes"
                if legacy
                else "run --backend legacy-flat to measure the flattened path, or pick a vLLM "
                "version whose route is the native 4-D entry"
            ),
            data={"backend": claims.backend, "route": route.path},
        )
    ]
