#!/bin/bash
# One device call: the verify layouts with both load orders (issue 16 item 2), the kernel
# against the tree in old/ (regression check), device-decided splits at every shape.
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 bench/verify_hopper.py --out "$OUT" --shapes 0,1,2 2>&1 | grep "B=" | tee -a "$OUT/log.txt"
[ -d old ] && bash bench/kernel_ab.sh old . 2>&1 | grep "B=" | head -6 | tee -a "$OUT/log.txt"
python3 bench/device_splits.py --out "$OUT" 2>&1 | grep "B=\|all" | cut -c1-230 | tee -a "$OUT/log.txt"
