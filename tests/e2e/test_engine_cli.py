"""Engine-run analysis choices through the real command line: bad shadow choices are one-line
errors."""

from __future__ import annotations

import pytest

from mlaprof.analysis.shadow import shadow
from mlaprof.errors import MlaprofError
from tests.conftest import mlaprof_cli


def test_bad_shadow_choices_are_one_line_errors(tmp_path):
    with pytest.raises(MlaprofError, match="unknown device"):
        shadow([], "mi999", "0.1.20")
    with pytest.raises(MlaprofError, match="AITER version"):
        shadow([], "mi355x", "latest")
    with pytest.raises(MlaprofError, match="no 4-D gluon MTP entry"):
        shadow([], "mi355x", "0.1.18")
    ok = mlaprof_cli("run", "--traces", str(tmp_path), "--name", "r", "--steps", "1",
                     "--layers", "1")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    res = mlaprof_cli("report", str(tmp_path / "r"), "--shadow-aiter", "newest")
    assert res.returncode == 2 and res.stderr.startswith("mlaprof: error:")
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
