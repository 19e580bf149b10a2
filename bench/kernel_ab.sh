#!/bin/bash
# Regression check: the kernel pair of two source trees, the same launch layouts and S, timed in
# alternating processes on one machine.  bench/kernel_ab.sh OLD_TREE NEW_TREE  (prints us)
set -o pipefail
code='import sys; sys.path.insert(0, "bench"); import gpu_suite as g
from mlaprof.backends.triton_backend import LaunchConfig as C
for b, ctx, q, s, cfg in [(8, 131072, 1, 64, C()), (8, 131072, 4, 32, C(rows=32)), (1, 131072, 1, 256, C())]:
    m, i = g.make_case(b, ctx, q, seed=1)
    print(f"{sys.argv[1]} B={b} ctx={ctx} qlen={q} S={s}: {g.time_kernel(m, i, q, s, cfg):.1f} us", flush=True)'
for round in ${AB_ROUNDS:-1 2}; do
  for tree in "$1" "$2"; do (cd "$tree" && PYTHONPATH=$PWD python3 -c "$code" "$tree") ; done
done
