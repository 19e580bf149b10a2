#!/bin/bash
# One device call: the suite (SECTIONS; empty: skip it), then the shipped demo runs through the
# CLI, each with its kernel timeline (the last 2 steps under torch.profiler), exported to Perfetto
# and CSV as a check, and tarred into $OUT/traces.tgz (unpack into traces/demo/).
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
if [ -n "${SECTIONS-copy,correct,sweep,kernel,collapse,capture}" ]; then
  python3 bench/gpu_suite.py --out "$OUT" --sections "${SECTIONS-copy,correct,sweep,kernel,collapse,capture}" 2>&1 | tee "$OUT/log.txt"
  rm -rf "$OUT/overhead-runs"
fi
[ -n "$NO_DEMOS" ] && exit 0
mkdir -p "$OUT/tr"
# name (its purpose), backend, min_kv mode, scenario, split policy, device preset of the split
# model: aiter's gluon kernel runs on gfx950 only, so its S is modelled on the mi355x preset
# (on h200 the rule gives no S) and replayed by the Triton kernel on this GPU
for spec in \
  "fix-native-kernel-full-graph triton active-rows default aiter-gluon-v0.1.19 mi355x" \
  "bug-legacy-flat-syncs-break-capture legacy-flat active-rows default aiter-gluon-v0.1.19 mi355x" \
  "bug-prefix-legacy-flat-all-rows legacy-flat all-rows default aiter-gluon-v0.1.19 mi355x" \
  "bug-padding-collapses-splits-c16 triton all-rows c16 aiter-gluon-v0.1.19 mi355x" \
  "fix-padding-active-rows-c16 triton active-rows c16 aiter-gluon-v0.1.19 mi355x" \
  "fix-splits-decided-on-device-c1-long triton active-rows c1-long mlaprof-triton h200"; do
  set -- $spec
  echo "== $1" >>"$OUT/demo_log.txt"
  (cd "$OUT/tr" && python3 -m mlaprof run --device cuda --backend "$2" --min-kv-mode "$3" \
    --scenario "$4" --policy "$5" --target "$6" --layers 8 --steps 32 --name "$1" --traces . --json \
    >>"$OUT/demo_log.txt" 2>&1)
  rc=$?
  echo "rc=$rc" >>"$OUT/demo_log.txt"
  if [ $rc -ne 0 ]; then  # keep the call useful: the same run on the 16-head model
    rm -rf "$OUT/tr/$1"
    (cd "$OUT/tr" && python3 -m mlaprof run --device cuda --backend "$2" --min-kv-mode "$3" \
      --scenario "$4" --policy "$5" --target "$6" --model deepseek-v3-tp8 --layers 8 --steps 32 --name "$1" \
      --traces . --json >>"$OUT/demo_log.txt" 2>&1)
    echo "rc=$? (retried on deepseek-v3-tp8)" >>"$OUT/demo_log.txt"
  fi
  python3 -m mlaprof export "$OUT/tr/$1" --format perfetto -o "/tmp/$1.perfetto.json" 2>&1 | tail -1
  python3 -m mlaprof export "$OUT/tr/$1" --format csv -o "/tmp/$1-csv" 2>&1 | tail -1
done
python3 - "$OUT/tr" <<'PY'
import statistics, sys
from pathlib import Path
from mlaprof.store.reader import load
for d in sorted(Path(sys.argv[1]).iterdir()):
    r = load(d)
    st, k, sp = r.steps, r.kernels, r.splits
    timed = st[st["timing"].isin(["graph-replay", "eager-events"])]
    kt = k.dropna(subset=["start_ns"]) if len(k) else k
    main = sp[sp["policy"] == r.meta["scenario"]["policy"]] if len(sp) else sp
    print(d.name, r.status, "steps", len(st), "median us",
          round(statistics.median(timed["duration_ns"]) / 1e3, 1) if len(timed) else None,
          "kernels", len(k), "with timestamps", len(kt),
          "S used", sorted(main["used"].dropna().astype(int).unique().tolist()) if len(main) else None,
          "command", r.meta.get("command"))
PY
tail -c 3000 "$OUT/demo_log.txt" | grep -v "^ "
tar czf "$OUT/traces.tgz" -C "$OUT/tr" . && rm -rf "$OUT/tr"
