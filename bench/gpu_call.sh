#!/bin/bash
# One device call: the suite, then the shipped demo runs through the CLI (tarred into $OUT).
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 bench/gpu_suite.py --out "$OUT" --sections "${SECTIONS:-copy,correct,sweep,kernel,collapse,capture}" 2>&1 | tee "$OUT/log.txt"
rm -rf "$OUT/overhead-runs"
[ -n "$NO_DEMOS" ] && exit 0
mkdir -p "$OUT/tr"
for spec in "native-triton triton active-rows default" "legacy-flat legacy-flat active-rows default" \
            "padding-bug triton all-rows c16" "padding-fix triton active-rows c16"; do
  set -- $spec
  echo "== $1" >>"$OUT/demo_log.txt"
  python3 -m mlaprof run --device cuda --backend "$2" --min-kv-mode "$3" --scenario "$4" \
    --layers 8 --steps 32 --name "$1" --traces "$OUT/tr" --json >>"$OUT/demo_log.txt" 2>&1
  echo "rc=$?" >>"$OUT/demo_log.txt"
done
tail -c 4000 "$OUT/demo_log.txt"
tar czf "$OUT/traces.tgz" -C "$OUT/tr" . && rm -rf "$OUT/tr"
