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

ROOT = Path(__file__).resolve().parents[1]
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_env):
    nb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=180,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    figs = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert figs, f"{path.name} drew no Plotly figure"
    for o in figs:
        layout = o["data"]["application/vnd.plotly.v1+json"]["layout"]
        title = layout.get("title", {})
        assert title.get("text") if isinstance(title, dict) else title, f"{path.name}: untitled"
