"""``mlaprof check`` as a CI job runs it: the gate in a child process whose end the parent
judges. Exit codes and transcripts, and the code under test unable to suppress the verdict:
a sync recorded before ``sys.exit(0)`` / ``os._exit(0)`` still fails, ``--json`` always prints
one JSON object, a fork prints no second verdict, a hang is stopped by ``--timeout``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mlaprof.cli import main

CASE = "mlaprof.gate.verify_case"

# a user's module: each callable syncs (int() of a tensor) or not, then tries to end the check
USER = """\
import os, sys, time
import torch

def sync_then_exit(q):
    n = int((q > 0).sum())
    sys.exit(0)

def sync_then_os_exit(q):
    n = int((q > 0).sum())
    os._exit(0)

def clean_then_os_exit(q):
    q = q * 2
    os._exit(0)

def sync_in_a_fork(q):
    print("callable output")
    if os.fork() == 0:
        return q * 2  # the fork's copy of the check goes on: clean, it would pass
    n = int((q > 0).sum())
    os.wait()
    return q

def hangs(q):
    while True:
        time.sleep(0.05)
"""


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gate_user.py").write_text(USER)
    (tmp_path / "gate_hang_import.py").write_text(
        "import time\nwhile True:\n    time.sleep(0.05)\n"
    )
    return "gate_user"


@pytest.mark.parametrize("fn", ["sync_then_exit", "sync_then_os_exit"])
def test_a_sync_before_an_exit_still_fails(user: str, fn: str, capfd) -> None:
    assert main(["check", f"{user}:{fn}", "--shapes", "q=4x8"]) == 1
    out, err = capfd.readouterr()
    assert f"sync aten._local_scalar_dense at {user}.py:" in out
    assert "ended the process (exit status 0) before the check finished" in err
    assert main(["check", f"{user}:{fn}", "--shapes", "q=4x8", "--json"]) == 1
    doc = json.loads(capfd.readouterr().out)
    assert doc["ok"] is False and doc["findings"][0]["kind"] == "sync"


def test_an_exit_before_anything_is_recorded_is_no_pass(user: str, capfd) -> None:
    assert main(["check", f"{user}:clean_then_os_exit", "--shapes", "q=4x8", "--json"]) == 3
    out, err = capfd.readouterr()
    doc = json.loads(out)
    assert doc["ok"] is False and "ended the process" in doc["error"]
    assert "ended the process (exit status 0)" in err


def test_a_fork_prints_one_verdict(user: str, capfd) -> None:
    assert main(["check", f"{user}:sync_in_a_fork", "--shapes", "q=4x8", "--json"]) == 1
    out, err = capfd.readouterr()
    doc = json.loads(out)  # one object: the fork's copy printed nothing to stdout
    assert doc["ok"] is False and [f["kind"] for f in doc["findings"]] == ["sync"]
    assert "callable output" in err  # the callable's prints go to stderr


@pytest.mark.parametrize("target", ["gate_user:hangs", "gate_hang_import:f"])
def test_a_hang_is_stopped_with_a_clear_message(user: str, target: str, capfd) -> None:
    assert main(["check", target, "--shapes", "q=4x8", "--timeout", "2", "--json"]) == 3
    out, err = capfd.readouterr()
    assert json.loads(out)["error"].startswith(f"{target} did not finish within 2 s (--timeout)")
    assert f"mlaprof: {target} did not finish within 2 s (--timeout)" in err


def test_check_cli_exit_codes(capsys, tmp_path, monkeypatch) -> None:
    common = ["--setup", f"{CASE}:setup", "--shapes", "q=3x4x16"]
    assert main(["check", f"{CASE}:legacy_flat", *common, "--layers", "2"]) == 1
    out = capsys.readouterr().out
    assert "layer 1: sync aten._local_scalar_dense at mlaprof/backends/legacy_flat.py:" in out
    assert main(["check", f"{CASE}:native", *common, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["findings"] == []
    monkeypatch.chdir(tmp_path)
    (tmp_path / "userattn.py").write_text(
        "import torch\n"
        "def decode(q, kv):\n"
        "    n = int((q > 0).sum())\n"
        "    return torch.empty(n) @ torch.empty(n)\n"
        "def boom(q):\n"
        "    raise ValueError('bad shape')\n"
    )
    assert main(["check", "userattn:decode", "--shapes", "q=4x8,kv=16x8", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(f["kind"], f["location"]) for f in doc["findings"]][:2] == [
        ("sync", "userattn.py:3"),
        ("alloc", "userattn.py:4"),
    ]
    assert main(["check", "userattn:boom", "--shapes", "4x8"]) == 3
    assert "raised ValueError: bad shape" in capsys.readouterr().err
    for bad in (["nocolon"], ["userattn:nothere"], ["userattn:decode", "--shapes", "q=4xy"]):
        assert main(["check", *bad]) == 2
        assert capsys.readouterr().err.startswith("mlaprof: error:")


def test_check_exits_1_on_torch_cuda_synchronize_on_a_cpu_machine(tmp_path, capsys) -> None:
    mod = tmp_path / "gate_sync_mod.py"
    mod.write_text("import torch\n\ndef region(q):\n    torch.cuda.synchronize()\n    return q\n")
    sys.path.insert(0, str(tmp_path))
    try:
        rc = main(["check", "gate_sync_mod:region", "--shapes", "q=4x8", "--device", "cpu"])
    finally:
        sys.path.remove(str(tmp_path))
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "torch.cuda.synchronize at gate_sync_mod.py:4 in region()" in out


def test_check_exits_1_on_a_printed_or_formatted_tensor(tmp_path, capsys) -> None:
    """``mlaprof check`` of a function that prints, str()s or f-strings a tensor exited 0 "no
    sync"; a real capture fails on each (the text reads the values back to the host)."""
    mod = tmp_path / "gate_text_mod.py"
    mod.write_text(
        "def printed(q):\n    print(q.max())\n    return q\n\n"
        "def stringed(q):\n    s = str(q.sum())\n    return q\n\n"
        "def logged(q):\n    s = f'max {q.max()}'\n    return q\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        for fn, line, op in (("printed", 2, "Tensor.__repr__"), ("stringed", 6, "Tensor.__repr__"),
                             ("logged", 10, "Tensor.__format__")):  # fmt: skip
            rc = main(["check", f"gate_text_mod:{fn}", "--shapes", "q=4x8", "--device", "cpu"])
            out = capsys.readouterr().out
            assert rc == 1, out
            assert f"{op} at gate_text_mod.py:{line} in {fn}()" in out, out
    finally:
        sys.path.remove(str(tmp_path))
