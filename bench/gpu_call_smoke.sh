#!/bin/bash
# One device call: a GPU run with its kernel timeline (graph and eager), exported; the kernel
# regression check against the tree in old/; device-decided splits at every shape.
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for spec in "g triton active-rows" "e legacy-flat active-rows"; do
  set -- $spec
  python3 -m mlaprof run --device cuda --backend "$2" --min-kv-mode "$3" --layers 4 --steps 6 \
    --name "$1" --traces /tmp/tr --quiet 2>&1 | tail -3
  python3 -m mlaprof export /tmp/tr/$1 --format perfetto -o /tmp/$1.json 2>&1 | tail -1
  python3 -m mlaprof export /tmp/tr/$1 --format csv -o /tmp/$1-csv 2>&1 | tail -1
  python3 - "$1" <<'PY'
import sys
from mlaprof.store.reader import load
r = load(f"/tmp/tr/{sys.argv[1]}")
k, st = r.kernels, r.steps
t = k.dropna(subset=["start_ns"])
print(sys.argv[1], "kernels", len(k), "timed", len(t), "layers", sorted(t["layer"].dropna().unique().tolist())[:9],
      "steps", sorted(t["step"].unique().tolist()), "timing", st["timing"].value_counts().to_dict())
if len(t):
    s0 = st[st["step"] == t["step"].min()]["t_start_ns"].iloc[0]
    print("first kernel - step host start (us):", (t["start_ns"].min() - s0) / 1e3, "names", t["name"].unique()[:4])
PY
  head -c 600 /tmp/$1-csv/kernel_trace.csv 2>/dev/null; echo
done
cat /tmp/tr/g/run.json | grep command
bash bench/kernel_ab.sh old . 2>&1 | grep "B="
python3 bench/device_splits.py --out "$OUT" 2>&1 | grep "B=\|all" | cut -c1-260
