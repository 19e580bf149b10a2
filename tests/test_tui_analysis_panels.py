"""The TUI shows every section the analysis returns: S decided on the device, engine runs,
imported traces and imported vLLM logs (rendered from ``mlaprof.analysis.summary`` only)."""

from __future__ import annotations

from pathlib import Path

from mlaprof.store import create_run
from mlaprof.synthetic.dashboard import meta, write_captures, write_step
from tui.once import read_view
from tui.text import render_text, split_table


def _persistent_run(tmp_path: Path) -> Path:
    """A run whose splits table also holds the persistent ASM policy's (modelled) rows."""
    w = create_run(tmp_path, "ps", meta("ps", True))
    write_captures(w, True)
    for step in range(3):
        write_step(w, step, 2, True)
        with w.transaction():
            w.add("splits", step=step, capture_size=8, policy="aiter-asm-persistent", used=7,
                  deserved=16, frozen=7, min_kv_used=0, min_kv_deserved=4096,
                  occupancy_used=0.4, occupancy_deserved=0.9, target="MI355X")  # fmt: skip
    w.finish()
    return tmp_path / "ps"


def test_on_device_policy_reads_device_never_frozen(tmp_path: Path) -> None:
    v, _ = read_view(_persistent_run(tmp_path))
    head, rows = split_table(v)
    ps = [r for r in rows if r[1] == "aiter-asm-persistent"]
    assert ps and all(r[2] == "device" and r[4] == "never" for r in ps)
    assert not any("7" in cell for r in ps for cell in r[2:])  # the modelled S is not shown
    host = [r for r in rows if r[1] == "aiter-gluon"]
    assert host and all(r[2] == "1" for r in host)  # host-decided policies keep their numbers
    assert "aiter-asm-persistent" in render_text(v)
