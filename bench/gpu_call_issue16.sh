#!/bin/bash
# One device call for issue 16 (the kernel against the tree in old/ at the same layout and S;
# device-decided splits at every shape; the verify layouts; the correctness suite) and issue 15
# item 1 (replay overhead, 3 separate invocations).
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
[ -d old ] && bash bench/kernel_ab.sh old . 2>&1 | grep "B=" | tee -a "$OUT/log.txt"
python3 bench/device_splits.py --out "$OUT" 2>&1 | grep "B=\|all" | cut -c1-300 | tee -a "$OUT/log.txt"
python3 bench/verify_hopper.py --out "$OUT" --variants default,r32-portable 2>&1 | grep "B=" | tee -a "$OUT/log.txt"
[ -n "$NO_OVERHEAD" ] && exit 0
python3 bench/gpu_suite.py --out "$OUT" --sections correct 2>&1 | grep "correct" | cut -c1-200 | tee -a "$OUT/log.txt"
for i in 1 2 3; do
  python3 bench/replay_overhead.py --out "$OUT" --tag "$i" > /dev/null 2>&1
done
python3 bench/replay_overhead.py --out "$OUT" --summarize 2>&1 | cut -c1-400 | tee -a "$OUT/log.txt"
rm -f "$OUT"/replay_overhead_?.json  # inside replay_overhead.json
