"""Every notebook executes offline on the CPU, and its .ipynb is the jupytext twin of its .py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
FIXTURES = ROOT / "tests" / "data" / "rocprof"  # in the repository: CI has no ../shared
KERNEL = "mlaprof-test"


def test_the_six_notebooks_exist_in_pairs():
    names = [p.stem for p in NOTEBOOKS]
    assert names == [
        "01_quickstart",
        "02_split_collapse",
        "03_capture_memory",
        "04_imported_trace",
        "05_compare_runs",
        "06_whatif",
    ]
    for py in NOTEBOOKS:
        ipynb = py.with_suffix(".ipynb")
        assert ipynb.is_file(), f"{ipynb.name} missing: run jupytext --to ipynb {py}"
        src = [c.source for c in jupytext.read(py).cells]
        paired = [c.source for c in nbformat.read(ipynb, as_version=4).cells]
        assert src == paired, f"{ipynb.name} is stale: run jupytext --sync {py}"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec for this interpreter (the venv's python3), and shared run / fixture folders
    so the notebooks make their CPU runs once between them."""
    base = tmp_path_factory.mktemp("jupyter")
    spec = base / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "mlaprof tests", "language": "python"})
    )
    env = {
        "JUPYTER_PATH": str(base),
        "MLAPROF_NOTEBOOK_TRACES": str(base / "runs"),
        "MLAPROF_ROCPROF_FIXTURES": str(FIXTURES),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield base
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# what each notebook must show (figure titles and printed text): a notebook that runs but shows
# the wrong thing, or nothing, fails here
SHOWS = {
    "01_quickstart": ["Step timeline", "Time per layer", "KV splits S used vs deserved per layer",
                      "aten._local_scalar_dense", "split-collapse"],
    "02_split_collapse": ["FULL capture sizes (tokens): [4, 8, 16", "KV splits S, aiter-gluon-v0.1.19",
                          "KV splits per policy", "Occupancy with the bug vs the fix"],
    "03_capture_memory": ["Capture memory per capture size", "FULL graph replay vs fallback",
                          "17 FULL graphs for max_num_seqs=32"],
    "04_imported_trace": ["GPU time per kernel", "Kernel timeline", "mla_verify_stage1",
                          "CRITICAL KV splits collapsed on the aiter-gluon path", "unreliable",
                          # the report's trace line (analysis.syncs.trace_sync_text), not "none"
                          "| syncs: 0 in MLA layers (all 3 MLA steps are graph replays"],
    "05_compare_runs": ["What changed from A", "all 30 steps ran PIECEWISE fallback",
                        "all 28 steps ran FULL graph"],
    "06_whatif": ["What-if: KV splits and predicted slowdown", "collapsed with the bug: 120",
                  "cudagraph_capture_sizes", "would break CUDA/HIP graph capture"],
}  # fmt: skip


def shown(nb) -> tuple[list[dict], list[str]]:  # noqa: ANN001
    """(errors, texts): every error output, and every figure title and text a reader sees."""
    errors, texts = [], []
    for o in (o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])):
        if o.output_type == "error":
            errors.append(o)
        elif o.output_type == "stream":
            texts.append(o.text)
        data = o.get("data", {})
        fig = data.get("application/vnd.plotly.v1+json")
        if fig is not None:
            title = fig["layout"].get("title", {})
            texts.append(title.get("text", "") if isinstance(title, dict) else str(title or ""))
        elif "text/plain" in data:
            texts.append(data["text/plain"])
    return errors, texts


def test_every_notebook_has_what_it_must_show() -> None:
    assert sorted(SHOWS) == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_shows_its_findings(path, kernel_env):
    nb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=180,
        kernel_name=KERNEL,
        allow_errors=True,  # run every cell: the errors are asserted below, with their text
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors, texts = shown(nb)
    assert not errors, [f"{e.ename}: {e.evalue}" for e in errors]
    figs = [o for c in nb.cells for o in c.get("outputs", [])
            if "application/vnd.plotly.v1+json" in o.get("data", {})]  # fmt: skip
    assert figs, f"{path.name} drew no Plotly figure"
    for o in figs:
        layout = o["data"]["application/vnd.plotly.v1+json"]["layout"]
        title = layout.get("title", {})
        assert title.get("text") if isinstance(title, dict) else title, f"{path.name}: untitled"
    everything = "\n".join(texts)
    missing = [want for want in SHOWS[path.stem] if want not in everything]
    assert not missing, f"{path.name} does not show {missing}"
