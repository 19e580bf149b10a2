#!/bin/bash
# One device call for the sm_90 Gluon verify kernel: correctness at the suite's shapes, the
# kernels side by side with the copy ceiling, device-decided S under graph replay, ncu profiles.
# Env: SHAPES (verify_hopper --shapes), V (--variants), OVL / EAGER (also check the overlapped loop /
# the per-tile row sums),
# NO_SPLITS / NO_NCU (skip those parts).
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L="$OUT/log.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$L"
timeout 200 python3 bench/verify_gluon.py --out "$OUT" 2>&1 | grep "correct\|rror" | cut -c1-300 | tee -a "$L"
[ -n "$OVL" ] && timeout 200 python3 bench/verify_gluon.py --out "$OUT" --overlap --name verify_gluon_overlap.json 2>&1 | grep "all correct\|rror" | tee -a "$L"
[ -n "$EAGER" ] && timeout 200 python3 bench/verify_gluon.py --out "$OUT" --eager-sum --name verify_gluon_eager_sum.json 2>&1 | grep "all correct\|rror" | tee -a "$L"
timeout 330 python3 bench/verify_hopper.py --out "$OUT" ${V:+--variants $V} ${SHAPES:+--shapes $SHAPES} 2>&1 | grep "B=\|copy\|rror" | tee -a "$L"
[ -n "$NO_SPLITS" ] || timeout 200 python3 bench/device_splits.py --out "$OUT" --reps 10 2>&1 | grep "B=\|all\|rror" | cut -c1-300 | tee -a "$L"
if command -v ncu >/dev/null && [ -z "$NO_NCU" ]; then
  for k in gluon triton; do
    timeout 150 ncu --clock-control none -k regex:stage1 --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
      --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
      --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,regex:sm__pipe_tensor_op.*cycles_active.avg.pct_of_peak_sustained_active \
      python3 bench/verify_profile.py --kernel $k > "$OUT/ncu_$k.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Compute \(SM\)|Registers Per|Issued Warp|stalled_(long|barrier|wait|math|short|mio|lg|no_inst|dispatch)|pipe_tensor" "$OUT/ncu_$k.txt" | head -24 | tee -a "$L"
  done
fi
