"""A rocpd database whose kernel view never ends (a recursive CTE with no row to return): what a
read's time limit must stop. Shared by the unit test and bench/rocpd_time_limit.py (benchmarks do not import tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def never_ending_rocpd(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rocpd_info_agent (id INTEGER, guid TEXT, absolute_index INTEGER)")
    # an agent of the view's guid: a reader looking for that guid's dispatches scans the view
    con.execute("INSERT INTO rocpd_info_agent VALUES (1, 'g', 0)")
    con.execute(
        "CREATE VIEW rocpd_kernel_dispatch AS SELECT n AS id, 'g' AS guid, 1 AS agent_id FROM "
        "(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c) "
        "WHERE n < 0"
    )
    con.commit()
    con.close()
    return path
