"""Trace shapes of the conformance corpus: each returns a :class:`~tests.conformance.model.Trace`
with what it must import as. Add a shape by writing one more function here and listing it in
``SHAPES``; every writer renders every shape.

The MLA kernels are vLLM's Triton MLA decode (``_fwd_grouped_kernel_stage1`` with grid
``(rows*64, ceil(heads/16), S)`` in work-items, then ``_fwd_kernel_stage2``), with an RMSNorm
kernel in front of each layer.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.conformance.model import Builder, Expected, GraphLaunch, Trace

STAGE1 = "_fwd_grouped_kernel_stage1"
STAGE2 = "_fwd_kernel_stage2"
NORM = "void rms_norm_kernel<c10::BFloat16, 1>(c10::BFloat16*, c10::BFloat16 const*, int)"


def _layer(b: Builder, corr: tuple[int, int, int], S: int, rows: int, heads: int, graph: int,
           node: int) -> int:  # fmt: skip
    """One decoder layer's kernels; returns the next graph node id."""
    g = (graph, node) if graph else (0, 0)
    b.kernel(NORM, (rows * 256, 1, 1), (256, 1, 1), corr[0], 3_000, g)
    g = (graph, node + 1) if graph else (0, 0)
    b.kernel(STAGE1, (rows * 64, -(-heads // 16), S), (64, 1, 1), corr[1], 9_000, g)
    g = (graph, node + 2) if graph else (0, 0)
    b.kernel(STAGE2, (rows * 64, heads, 1), (64, 1, 1), corr[2], 2_000, g)
    return node + 3


def graph_replays(steps: int = 6, layers: int = 8, S: int = 4, rows: int = 4,
                  heads: int = 16, markers: bool = False) -> Trace:  # fmt: skip
    """A FULL-graph decode: each step is one ``hipGraphLaunch`` of a captured graph, whose
    kernels all carry that call's correlation id (and, from schema 3.0.2, the graph's exec id
    and their node ids). With ``markers``: each step inside a roctx range ``step N`` and a
    roctx mark per step (as mlaprof's vLLM plugin emits one per recorded build)."""
    tr = Trace("roctx_steps" if markers else "graph_replays")
    b = Builder(tr)
    exec_id = b.graph_exec()
    msgs: list[str] = []
    for s in range(steps):
        rng = b.push(f"step {s}") if markers else None
        if markers:
            msgs.append(b.mark(f"mlaprof build={s} aiter reqs={rows}").message)
        launch = b.api("hipGraphLaunch", 4_000)
        b.advance(1_000)
        node = 1
        for _ in range(layers):
            node = _layer(b, (launch.corr,) * 3, S, rows, heads, exec_id, node)
        tr.launches.append(GraphLaunch(exec_id, launch.corr, launch.start, b.t, layers * 3))
        if rng is not None:
            b.pop(rng)
            msgs.append(rng.message)
        b.advance(50_000)
    tr.expected = Expected(
        steps=steps, graph_steps=steps, eager_steps=0, layers=layers, S=S, api_calls=steps,
        graph_launches=steps, markers=msgs, kernels=steps * layers * 3,
    )  # fmt: skip
    return b.finish()


def eager(steps: int = 4, layers: int = 8, S: int = 2, rows: int = 4, heads: int = 16) -> Trace:
    """An eager decode: every kernel launched by its own HIP call (one correlation id each),
    steps apart by the idle time between forwards; in each step one ``hipStreamSynchronize``
    between layer 1's launches (a host read-back inside the layer, what breaks capture)."""
    tr = Trace("eager")
    b = Builder(tr)
    calls = 0
    for _ in range(steps):
        for layer in range(layers):
            ids = []
            for name in ("hipLaunchKernel", "hipModuleLaunchKernel", "hipModuleLaunchKernel"):
                ids.append(b.api(name, 1_500).corr)
                calls += 1
            if layer == 1:
                b.api("hipStreamSynchronize", 3_000)
                calls += 1
            _layer(b, (ids[0], ids[1], ids[2]), S, rows, heads, 0, 0)
        b.advance(2_000_000)
    tr.expected = Expected(
        steps=steps, graph_steps=0, eager_steps=steps, layers=layers, S=S, api_calls=calls,
        graph_launches=0, kernels=steps * layers * 3, syncs=steps,
    )  # fmt: skip
    return b.finish()


def roctx_steps(steps: int = 5, layers: int = 4, S: int = 8) -> Trace:
    return graph_replays(steps, layers, S, markers=True)


SHAPES: dict[str, Callable[[], Trace]] = {
    "graph_replays": graph_replays,
    "eager": eager,
    "roctx_steps": roctx_steps,
}
