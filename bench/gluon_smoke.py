"""A quick correctness check of one Gluon stage-1 configuration before a long benchmark: one
ragged page-64 case against the fp32 reference, in a process the caller can time out (a
kernel that never finishes must not eat a whole device call).

    timeout 90 python bench/gluon_smoke.py gluon_roles=1
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verify_gluon import check, custom_case  # noqa: E402

from mlaprof.backends.triton_backend import LaunchConfig  # noqa: E402


def main() -> int:
    fields = dict(kernel="gluon")
    for a in sys.argv[1:]:
        k, v = a.split("=")
        fields[k] = int(v) if v.lstrip("-").isdigit() else v
    cfg = LaunchConfig(**fields)
    ok = True
    for lens, qlen, rows, s in (([4100, 70, 9000], 4, 4, 8), ([9000, 77, 1], 1, 3, 8)):
        if (qlen == 1) != bool(cfg.gluon_decode):
            continue
        meta, inp = custom_case(lens, qlen, rows, page=64, seed=5)
        r = check(meta, inp, s, cfg)
        print(json.dumps({"cfg": fields, "lens": lens, "qlen": qlen, **r}, default=str), flush=True)
        ok = ok and bool(r.get("ok"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
