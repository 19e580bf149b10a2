"""A rocpd export's content, independent of where mlaprof keeps its analysis tables (the
process row's extdata before, ``rocpd_arg`` rows of a payload event now): every schema table's
rows in id order, the payload's rows per table, the views. Host-dependent values are blanked."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

PAYLOAD_ARG = "mlaprof-row"
PAYLOAD_CATEGORY = "MLAPROF_PAYLOAD"
# when, where, by what; and the store's own bookkeeping (the run's random id, its rank list)
VOLATILE_META = ("created", "imported_from", "git", "versions", "run_id", "ranks")


def content(db: Path) -> dict[str, Any]:
    con = sqlite3.connect(db)
    suffix = con.execute("SELECT value FROM rocpd_metadata WHERE tag = 'uuid'").fetchone()[0]
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    tabs: dict[str, list[Any]] = {}
    payload: dict[str, list[Any]] = {}
    pay_events: set[int] = set()
    pay_strings: set[int] = set()
    for name in names:
        if name.startswith("rocpd_arg"):
            for ev, tbl, value in con.execute(
                f'SELECT event_id, name, value FROM "{name}" WHERE type = ? ORDER BY id',
                (PAYLOAD_ARG,),
            ):
                payload.setdefault(tbl, []).append(json.loads(value))
                pay_events.add(ev)
        if name.startswith("rocpd_string"):
            pay_strings |= {
                r[0]
                for r in con.execute(
                    f'SELECT id FROM "{name}" WHERE string = ?', (PAYLOAD_CATEGORY,)
                )
            }
    for name in sorted(names):
        if name == "sqlite_sequence":  # the payload's rows move the event/string/arg counters
            continue
        rows = []
        for r in con.execute(f'SELECT * FROM "{name}" ORDER BY rowid'):
            r = list(r)
            if name.startswith("rocpd_event") and r[0] in pay_events:
                continue
            if name.startswith("rocpd_string") and r[0] in pay_strings:
                continue
            if name.startswith("rocpd_arg") and r[0] is not None and r[4] == PAYLOAD_ARG:
                continue
            if name.startswith("rocpd_info_node"):
                r[2] = None  # hash(hostname): salted per process
            if name.startswith("rocpd_info_process"):
                ext = json.loads(r[-1])
                mine = ext["mlaprof"]
                for k, v in (mine.pop("tables", None) or {}).items():
                    if v:
                        payload[k] = v
                mine.pop("tables_in", None)
                for k in VOLATILE_META:
                    mine["meta"].pop(k, None)
                r[-1] = ext
            rows.append(r)
        tabs[name.replace(suffix, "")] = rows
    views = sorted(
        tuple(r)
        for r in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'view' ORDER BY name"
        )
    )
    con.close()
    return {"tables": tabs, "payload": {k: v for k, v in payload.items() if v}, "views": views}


def digest(db: Path) -> str:
    """sha256 of :func:`content`, as canonical JSON."""
    doc = json.dumps(content(db), sort_keys=True, default=str)
    return hashlib.sha256(doc.encode()).hexdigest()
