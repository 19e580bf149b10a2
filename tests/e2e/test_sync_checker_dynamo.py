"""The sync checker's dispatch mode and Dynamo, in a fresh process: a region where
``torch._dynamo`` is not loaded does not load it (its import cost ~1.4 s, once counted in the
first checked step), and a region with compiled code in it (``torch.compile`` called inside it,
or before it) still keeps its handler out of Dynamo, as torch does for every mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT

CHILD = textwrap.dedent(
    """
    import json, sys, torch
    from mlaprof.probes.sync_checker import SyncChecker

    def f(x):
        y = x.sin() + 1
        if y.sum() > 0:  # a sync
            return y.nonzero()  # a sync
        return y.cos()

    def frames():
        if "torch._dynamo" not in sys.modules:
            return None
        return dict(torch._dynamo.utils.counters["frames"])

    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    out = {}
    c = SyncChecker()
    with c.region(layer=0):
        f(x)
    out["plain"] = {"dynamo": "torch._dynamo" in sys.modules, "ops": [e.op for e in c.events]}
    original = torch.compile
    c = SyncChecker()
    with c.region(layer=1):  # torch.compile first called (and Dynamo first loaded) inside
        g = torch.compile(f, backend="eager")
        g(x)
    out["inside"] = {"frames": frames(), "ops": [e.op for e in c.events],
                     "restored": torch.compile is original}
    h = torch.compile(f, backend="eager")  # compiled before the region, Dynamo loaded
    c = SyncChecker()
    with c.region(layer=2):
        h(x)
    out["before"] = {"frames": frames(), "ops": [e.op for e in c.events]}
    print(json.dumps(out))
    """
)


def test_regions_load_dynamo_only_for_compiled_code_and_keep_the_handler_out_of_it(
    tmp_path: Path,
) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    syncs = ["aten._local_scalar_dense", "aten.nonzero"]
    assert out["plain"] == {"dynamo": False, "ops": syncs}
    # the compiled function runs eagerly under the mode (Dynamo skips frames while a mode is
    # on); Dynamo compiled no frame, the handler's included, and every sync is seen
    assert out["inside"] == {"frames": {}, "ops": syncs, "restored": True}
    assert out["before"] == {"frames": {}, "ops": syncs}
