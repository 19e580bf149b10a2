"""The GPU of a rocpd database's first kernel dispatch (it orders a fleet's ranks) is asked guid by
guid instead of sorting every dispatch: on random databases of several guids it is the agent of
the first dispatch by (guid, id), which the whole-table query gives."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from mlaprof.importers import rocpd_sqlite

# the rule as one query: every dispatch joined to its agent, sorted, the first taken
WHOLE_TABLE = (
    "SELECT A.absolute_index FROM rocpd_kernel_dispatch K JOIN rocpd_info_agent A "
    "ON A.id = K.agent_id AND A.guid = K.guid ORDER BY K.guid, K.id LIMIT 1"
)


def _db(path: Path, rng: random.Random) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE rocpd_info_agent (id INTEGER, guid TEXT, absolute_index INTEGER)")
    con.execute("CREATE TABLE rocpd_kernel_dispatch (id INTEGER, guid TEXT, agent_id INTEGER)")
    guids = rng.sample(["g0", "g1", "g2", "g3"], rng.randint(1, 4))
    for g in guids:
        for a in range(3):
            con.execute("INSERT INTO rocpd_info_agent VALUES (?, ?, ?)", (a, g, rng.randint(0, 9)))
    # dispatches of some guids only, stored out of id order, ids interleaved between guids,
    # some of an agent id that has no agent row (no join); a guid's agents may have none
    ids = rng.sample(range(1, 500), rng.randint(0, 60))
    for i in ids:
        con.execute(
            "INSERT INTO rocpd_kernel_dispatch VALUES (?, ?, ?)",
            (i, rng.choice([*guids[: max(1, len(guids) - 1)], "zz"]), rng.randint(0, 3)),
        )
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("seed", range(40))
def test_first_agent_is_the_first_dispatch_by_guid_then_id(tmp_path: Path, seed: int) -> None:
    path = _db(tmp_path / "results.db", random.Random(seed))
    with sqlite3.connect(path) as con:
        row = con.execute(WHOLE_TABLE).fetchone()
    assert rocpd_sqlite.first_agent(path) == (None if row is None else row[0])


def test_not_a_database_reads_none(tmp_path: Path) -> None:
    bad = tmp_path / "results.db"
    bad.write_bytes(b"not sqlite")
    assert rocpd_sqlite.first_agent(bad) is None
