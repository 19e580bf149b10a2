#!/usr/bin/env bash
# The Python sources of the vLLM releases that cannot run on the CI machine (0.33.0, 0.34.0: CUDA
# wheels), for the tests that read and execute their pure functions (tests/vllm_src.py). Each
# wheel is downloaded once (pip download --no-deps, about 300 MB) into ~/.cache and only its
# vllm/*.py files are unpacked beside it; a reused machine skips both. Exit 3: the package index
# is unreachable (the tests then skip, saying so).
set -euo pipefail
W="${MLAPROF_VLLM_WHEELS:-$HOME/.cache/mlaprof-vllm-wheels}"
S="${MLAPROF_VLLM_SRC:-$HOME/.cache/mlaprof-vllm-src}"
PY=${PYTHON:-python3}
mkdir -p "$W" "$S"
exec 8>"$S.lock"
flock 8
for v in "${@:-0.33.0 0.34.0}"; do
  for one in $v; do
    [ -f "$S/$one/vllm/__init__.py" ] && continue
    if ! ls "$W"/vllm-"$one"-*.whl >/dev/null 2>&1; then
      "$PY" -m pip download -q --no-deps "vllm==$one" -d "$W" || exit 3
    fi
    rm -rf "$S/$one.tmp" && mkdir -p "$S/$one.tmp"
    "$PY" - "$W" "$one" "$S/$one.tmp" <<'PY'
import glob, sys, zipfile
wheel = sorted(glob.glob(f"{sys.argv[1]}/vllm-{sys.argv[2]}-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    z.extractall(sys.argv[3], [n for n in z.namelist() if n.startswith("vllm/") and n.endswith(".py")])
PY
    rm -rf "$S/$one" && mv "$S/$one.tmp" "$S/$one"
  done
done
