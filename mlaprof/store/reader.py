"""Reading runs: ``mlaprof.load(path)`` gives every table as a pandas DataFrame (all ranks).

Safe while the run is being written: each query sees the records committed so far.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.store import columnar, integrity, liveness, runmeta, sqlengine, summary_cache
from mlaprof.store import trace_checks as checks_table
from mlaprof.store.runkind import PLUGIN_DEVICE, ROWS_ONLY, run_kind
from mlaprof.store.schema import TABLES, columns, lacking_tables, version_problem
from mlaprof.store.writer import rank_db_name

if TYPE_CHECKING:  # imported where a frame is built: listing runs or an error needs none
    import pandas as pd

# a listed field the report decides, for a run no kept report document has counted yet
NOT_ANALYSED = "not analysed yet"
_RANK_DB = re.compile(r"^rank(\d+)(?:\.([a-z]+))?\.db$")  # rank<N>[.<role>].db


def _connect(path: Path) -> sqlite3.Connection | None:
    """Open a rank database for reading without writing to it (None: its writer has not
    committed its tables yet), but for one case: a writer that died mid-transaction left a hot
    journal, which only a read-write open rolls back (done once, and only when the database's
    writer lock shows its writer is gone)."""
    try:
        return _connect_ro(path)
    except sqlite3.OperationalError as e:
        m = _RANK_DB.match(path.name)
        alive = m and liveness.writer_alive(path.parent, int(m.group(1)), m.group(2) or "")
        if "readonly" not in str(e) or not m or alive:
            raise MlaprofError(f"{path} is not a readable mlaprof database ({e})") from None
    try:
        rw = sqlite3.connect(path)
        try:
            rw.execute("PRAGMA user_version").fetchone()  # rolls the hot journal back
        finally:
            rw.close()
        return _connect_ro(path)
    except sqlite3.DatabaseError as e:
        raise MlaprofError(
            f"{path} needs recovery from a crashed writer and cannot be recovered here ({e})"
        ) from None


def _connect_ro(path: Path) -> sqlite3.Connection | None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    try:
        ver = con.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.OperationalError:
        con.close()
        raise
    except sqlite3.DatabaseError as e:
        con.close()
        raise MlaprofError(f"{path} is not a readable mlaprof database ({e})") from None
    if ver == 0:
        con.close()
        return None
    problem = version_problem(ver, path)
    if problem:
        con.close()
        raise MlaprofError(problem)
    return con


class Run:
    """A recorded run. Tables are attributes: ``run.steps``, ``run.layers``, ``run.syncs``, ...

    Each attribute access queries the databases again, so a followed run shows new records.
    Imported kernels live in Parquet files next to the databases (:mod:`mlaprof.store.columnar`);
    every read here returns them after the table's SQLite rows. Two ways in: :meth:`query`
    (SQL over all ranks as one relation, :mod:`mlaprof.store.sqlengine`) and
    :meth:`read_tables` (whole tables, the summary's bulk read).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise MlaprofError(f"run folder {self.path} does not exist")
        if not self.path.is_dir():
            raise MlaprofError(f"{self.path} is not a run folder")
        if not (self.path / runmeta.META_FILE).is_file():  # databases without it: damaged
            integrity.check_run(self.path, None, ())
        # run.json as its writer wrote it; :attr:`meta` is what a reader is told
        self.written_meta: dict[str, Any] = runmeta.read(self.path)
        # one database per (rank, role): a rank's worker is role "", other processes name theirs
        self._cons: dict[tuple[int, str], sqlite3.Connection] = {}
        self._side: dict[tuple[int, str], dict[str, columnar.SideTable]] = {}
        # per database: the store tables it lacks (written before they existed), and the rows
        # that stand in for them (an older import's trace checks, migrated from run.json)
        self._lacks: dict[tuple[int, str], frozenset[str]] = {}
        self._migrated: dict[tuple[int, str], dict[str, list[tuple[Any, ...]]]] = {}
        try:
            self.refresh_ranks()
            # a run that names a rank it lacks, or ended without its databases, is refused
            integrity.check_run(self.path, self.written_meta, self.ranks)
        except BaseException:
            self.close()
            raise
        if not self._cons:  # starting, failed or abandoned: the one judgement (liveness)
            raise EmptyRunError(self.path, *liveness.empty_run(self.path, self.written_meta)[:2])

    # -- ranks -------------------------------------------------------------------------------
    def refresh_ranks(self) -> list[int]:
        """Pick up rank databases that appeared since opening (multi-rank runs start unevenly)."""
        for p in sorted(self.path.iterdir()):
            m = _RANK_DB.match(p.name)
            key = (int(m.group(1)), m.group(2) or "") if m else None
            if key is not None and key not in self._cons:
                integrity.check_file(p)
                con = _connect(p)
                if con is None:
                    continue
                try:
                    con.execute("SELECT 1 FROM steps LIMIT 1").fetchall()
                    integrity.check_rows(con, p, key[0])
                    side = columnar.side_tables(con, self.path)
                    integrity.check_sides(side, p, key[0])
                except sqlite3.DatabaseError as e:
                    con.close()
                    raise MlaprofError(f"{p} is corrupt or incomplete ({e})") from None
                except MlaprofError:
                    con.close()
                    raise
                self._cons[key] = con
                self._side[key] = side
                self._lacks[key] = lacking_tables(con)
        self._migrate()
        return self.ranks

    def _migrate(self) -> None:
        """The trace checks of a run written before their table, from its run.json: each rank's
        rows stand in for the table its database lacks (an older import's sum over its ranks
        goes with the lowest rank's database, under rank -1: never a rank's own)."""
        self._migrated.clear()
        old = [k for k in self.databases if not k[1] and checks_table.TABLE in self._lacks[k]]
        if not old:
            return
        by_rank = checks_table.from_run_json(self.written_meta, self.ranks)
        for rank, tc in by_rank.items():
            key = (rank, "") if (rank, "") in old else old[0]
            if key in old:  # rows as plain tuples: listing runs builds no frame
                got = self._migrated.setdefault(key, {}).setdefault(checks_table.TABLE, [])
                got += checks_table.table_rows({rank: tc})

    def _stand_in(self, key: tuple[int, str], name: str) -> pd.DataFrame | None:
        """The migrated rows standing in for table ``name`` of database ``key`` (None: none)."""
        rows = self._migrated.get(key, {}).get(name)
        if not rows:
            return None
        import pandas as pd

        return pd.DataFrame(rows, columns=list(columns(name)))

    def trace_checks(self) -> dict[int, checks_table.TraceChecks]:
        """Each rank's trace checks (the ``trace_checks`` table, read whole), as typed records;
        rank -1: an older import that kept only its ranks' sum."""
        rows: list[tuple[Any, ...]] = []
        for key in self.databases:  # a few rows each: through the open connection, no frame
            if checks_table.TABLE not in self._lacks.get(key, frozenset()):
                rows += (
                    self._cons[key]
                    .execute(
                        f"SELECT {', '.join(columns(checks_table.TABLE))} "
                        f"FROM main.{checks_table.TABLE} ORDER BY rowid"
                    )
                    .fetchall()
                )
            rows += self._migrated.get(key, {}).get(checks_table.TABLE, [])
        return checks_table.groups_of(rows)

    @property
    def ranks(self) -> list[int]:
        return sorted({rank for rank, _ in self._cons})

    @property
    def databases(self) -> list[tuple[int, str]]:
        """(rank, role) of every database; role "" is the rank's own (worker) process."""
        return sorted(self._cons)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def meta(self) -> dict[str, Any]:
        """run.json as every view tells the run: its fields as written, but for the ones a
        reader judges, which read as :attr:`status`, :attr:`reason` and :attr:`name` say (a
        killed run's run.json still says ``running``; a copied run's names the folder it was
        recorded in). What run.json itself says of them is kept as ``written_<field>``
        (``run.meta["written_status"]``); :attr:`written_meta` is the file as written. A new
        dict each time (the status of a run being written moves)."""
        doc = dict(self.written_meta)
        judged = {"status": self.status, "reason": self.reason, "name": self.name}
        for key, value in judged.items():
            if key in doc:
                doc[f"written_{key}"] = doc[key]
            if value is not None or key in doc:
                doc[key] = value
        return doc

    # -- tables ------------------------------------------------------------------------------
    def query(
        self,
        sql: str,
        params: tuple[Any, ...] = (),
        *,
        frames: dict[str, pd.DataFrame] | None = None,
        ranks: Iterable[int] | None = None,
        portable: bool = False,
    ) -> pd.DataFrame:
        """``sql`` once over all ranks as one relation: every store table it names holds every
        rank's rows (its ``rank`` column tells them apart), so an aggregate spans the ranks
        unless the SQL groups by ``rank``. One dialect, DuckDB's: an import's kernels are read
        from their columnar files in place, database rows through SQLite's ADBC driver. Without
        duckdb installed (vLLM's own environment), SQL naming no columnar table runs in SQLite
        over every rank database attached as one view per table (plain SELECT / WHERE / GROUP
        BY / JOIN read alike in both). ``frames``: DataFrames the SQL may also name (an
        analysis' own small tables). ``ranks``: the relation holds those ranks' rows only (a
        fleet analysis going one rank at a time reads only that rank's databases and files).
        ``portable``: the SQL reads alike in SQLite and DuckDB; a small run's rows without
        columnar files are then queried in SQLite, DuckDB not started
        (:func:`mlaprof.store.sqlengine.in_sqlite`)."""
        only = None if ranks is None else {int(r) for r in ranks}
        keys = [k for k in self.databases if only is None or k[0] in only]
        return sqlengine.query([self._source(k) for k in keys], sql, params, frames, portable)

    def _source(self, key: tuple[int, str]) -> sqlengine.RankSource:
        return sqlengine.RankSource(
            key[0],
            self._cons[key],
            self.path / rank_db_name(*key),
            self._side.get(key, {}),
            self._lacks.get(key, frozenset()),
            {
                n: f
                for n in self._migrated.get(key, {})
                if (f := self._stand_in(key, n)) is not None
            },
        )

    def table(self, name: str) -> pd.DataFrame:
        """One whole table, every rank's rows (:meth:`read_tables` of one name); SQL over it,
        a ``WHERE`` included, goes through :meth:`query`."""
        return self.read_tables([name])[name]

    def read_tables(self, names: Iterable[str]) -> dict[str, pd.DataFrame]:
        """Whole tables (the bulk read the summary uses), every rank's rows, read together: one ADBC
        connection per database for all of them (a table of few rows through the run's own
        SQLite connection), a table a database holds no row of not read there (a small run's
        tables are mostly empty). Rows as recorded: a layer's sync count a
        producer left empty stays empty (the analysis fills it by its rule,
        :func:`mlaprof.analysis.syncs.fill_layer_syncs`)."""
        import pandas as pd

        names = list(names)
        for name in names:
            if name not in TABLES:
                raise MlaprofError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        parts: dict[str, list[pd.DataFrame]] = {name: [] for name in names}
        for key in self.databases:
            con = self._cons[key]
            lacks = self._lacks.get(key, frozenset())
            full = [n for n in names if n not in lacks and sqlengine.has_rows(con, n)]
            sqls = {n: f"SELECT {', '.join(columns(n))} FROM main.{n}" for n in full}
            # a table of few rows (a recorded run's are all few) through this connection: the
            # ADBC driver's import (it loads pyarrow.dataset) and connection cost more than them
            bulk = [n for n in full if not sqlengine.few_rows(con, n)]
            read = sqlengine.adbc_fetch_many(
                self.path / rank_db_name(*key), [sqls[n] for n in bulk]
            )
            got: dict[str, Any] = dict.fromkeys(full, sqlengine.UNREAD)
            got.update(zip(bulk, read, strict=True))
            for name, sql in sqls.items():
                tab = got[name]
                if isinstance(tab, sqlengine.Unread):
                    parts[name].append(self._query_rank(key, sql, ()))
                else:
                    parts[name].append(columnar.as_pandas(tab))
            for name in names:
                side = self._side.get(key, {}).get(name)
                if side is not None:
                    parts[name].append(columnar.frame(side))
                stand_in = self._stand_in(key, name)
                if stand_in is not None:
                    parts[name].append(stand_in)
        out: dict[str, pd.DataFrame] = {}
        for name in names:
            frames = [f for f in parts[name] if len(f)]
            df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
            out[name] = pd.DataFrame(columns=list(columns(name))) if df.empty else df
        return out

    def columns(self, name: str, cols: list[str], rank: int | None = None) -> pd.DataFrame:
        """Some columns of a table, all ranks (database rows first, as :meth:`table`), text as
        pandas categoricals built from the files' dictionaries: a 10M-kernel import's few
        columns fit in memory where the whole table, every name a string, does not. ``rank``:
        that rank's rows only."""
        if name not in TABLES:
            raise MlaprofError(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        import numpy as np
        import pandas as pd

        text = {c for c, t in TABLES[name] if t == "TEXT"} & set(cols)
        parts: list[dict[str, Any]] = []  # column -> values, or (codes, categories) for text
        for key in self.databases:
            if rank is not None and key[0] != rank:
                continue
            if name in self._lacks.get(key, frozenset()):
                stand_in = self._stand_in(key, name)
                if stand_in is not None:
                    parts.append({c: stand_in[c].to_numpy(object) for c in cols})
                continue
            db = self._query_rank(key, f"SELECT {', '.join(cols)} FROM main.{name}", ())
            if len(db):
                parts.append({c: db[c].to_numpy(object if c in text else None) for c in cols})
            side = self._side.get(key, {}).get(name)
            if side is not None:
                tab = columnar.read_columns(side, cols)
                part: dict[str, Any] = {}
                for c in cols:
                    col = tab.column(c).combine_chunks()
                    if c in text and hasattr(col, "indices"):
                        codes = col.indices.fill_null(-1).to_numpy(zero_copy_only=False)
                        part[c] = (codes.astype(np.int64), col.dictionary.to_pylist())
                    else:
                        part[c] = col.to_numpy(zero_copy_only=False)
                parts.append(part)
        if not parts:
            return pd.DataFrame(columns=cols)
        out: dict[str, Any] = {}
        for c in cols:
            if c not in text:
                out[c] = np.concatenate([pt[c] for pt in parts])
                continue
            cats: dict[Any, int] = {}
            codes = []
            for pt in parts:
                v = pt[c]
                if isinstance(v, tuple):  # a file's dictionary: remap its codes
                    lut = np.array([_code(cats, x) for x in v[1]] + [-1], np.int64)
                    codes.append(lut[v[0]])  # code -1 (NULL) picks the trailing -1
                else:
                    codes.append(np.fromiter((_code(cats, x) for x in v), np.int64, len(v)))
            out[c] = pd.Categorical.from_codes(np.concatenate(codes), categories=list(cats))
        return pd.DataFrame(out)

    def _query_rank(self, key: tuple[int, str], sql: str, params: tuple[Any, ...]) -> pd.DataFrame:
        import pandas as pd

        try:
            return pd.read_sql_query(sql, self._cons[key], params=params)
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
            name = rank_db_name(*key)
            raise MlaprofError(f"{self.path / name} cannot be read: {e}") from None

    def side_tables(self, rank: int) -> dict[str, columnar.SideTable]:
        """The Arrow-stored tables of ``rank`` (imports keep their kernels there)."""
        return dict(self._side.get((rank, ""), {}))

    def count(self, name: str) -> int:
        """Rows of ``name`` summed over every rank (:meth:`count_per_rank` keeps them apart)."""
        return sum(self.count_per_rank(name).values())

    def count_per_rank(self, name: str) -> dict[int, int]:
        """Rows of ``name`` per rank (every database of a rank counted together)."""
        if name not in TABLES:
            raise MlaprofError(f"unknown table {name!r}")
        out: dict[int, int] = {}
        for key, con in self._cons.items():
            if name in self._lacks.get(key, frozenset()):
                n = len(self._migrated.get(key, {}).get(name, []))
            else:
                n = con.execute(f"SELECT COUNT(*) FROM main.{name}").fetchone()[0]
            side = self._side.get(key, {}).get(name)
            out[key[0]] = out.get(key[0], 0) + n + (side.rows if side else 0)
        return out

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name in TABLES:
            return self.table(name)
        raise AttributeError(name)

    # -- state -------------------------------------------------------------------------------
    def rank_meta(self, rank: int, role: str = "") -> dict[str, str]:
        """The database's meta table, its ``status`` as the reader judges that database (a
        writer that died without closing its record reads ``incomplete``, as :attr:`status`
        does), what the writer recorded kept as ``written_status``."""
        meta = self._written_rank_meta(rank, role)
        if "status" in meta:
            meta["written_status"] = meta["status"]
        meta["status"] = self._db_status(rank, role)
        return meta

    def _written_rank_meta(self, rank: int, role: str = "") -> dict[str, str]:
        rows = self._cons[(rank, role)].execute("SELECT key, value FROM meta").fetchall()
        return dict(rows)

    def _db_status(self, rank: int, role: str = "") -> str:
        meta = self._written_rank_meta(rank, role)
        recorded = meta.get("status")
        status = liveness.effective_status(
            self.path, rank, recorded, role, meta.get(liveness.DRAINED)
        )
        if recorded in liveness.LIVE and status not in liveness.LIVE:
            # the writer may have finished between reading its mark and probing its lock
            again = self._written_rank_meta(rank, role).get("status") or "running"
            status = status if again in liveness.LIVE else again
        return status

    @property
    def status(self) -> str:
        """finished | running | failed | interrupted | incomplete (a writer died without
        finishing: its lock is free, :mod:`mlaprof.store.liveness`)."""
        # a rank's own database decides; another process of it (the vLLM EngineCore, often
        # killed at shutdown without finishing) only counts when it failed
        return liveness.process_run_status(
            [(key[1], self._db_status(*key)) for key in self.databases],
            self.written_meta.get("status"),
            self.written_meta.get(liveness.EXPORTED_STATUS),
        )

    @property
    def reason(self) -> str | None:
        """Why the run ended early, where its writer recorded it (e.g. disk full)."""
        dbs = []
        for key in self.databases:
            meta = self._written_rank_meta(*key)
            # drained and stopped without closing its record (a closed one has its own status)
            drained = meta.get(liveness.DRAINED) == "1" and meta.get("status") in liveness.LIVE
            status = self._db_status(*key) if drained and not key[1] else ""
            dbs.append(
                (key[1], meta.get("reason"), drained, status, meta.get(liveness.STOP_SIGNAL))
            )
        return liveness.run_reason(
            dbs,
            self.written_meta.get("status"),
            self.written_meta.get("reason"),
            self.written_meta.get(liveness.EXPORTED_STATUS),
            self.written_meta.get(liveness.EXPORTED_REASON),
        )

    def close(self) -> None:
        for con in self._cons.values():
            con.close()
        self._cons.clear()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, ranks={self.ranks})"


def _code(cats: dict[Any, int], value: Any) -> int:
    """The category number of a text value (-1: NULL), adding it when new."""
    if value is None or value != value:
        return -1
    return cats.setdefault(str(value), len(cats))


class EmptyRunError(MlaprofError):
    """A run folder with run.json but no rank database yet: its writer is ``starting``, it
    ``failed`` before its first record or, if its lock is free, it was ``abandoned`` (killed
    before its first record): :func:`mlaprof.store.liveness.empty_run` judges, as the live
    dashboard's follower does."""

    def __init__(self, path: Path, state: str, reason: str = "") -> None:
        self.state = state
        self.reason = reason
        super().__init__(liveness.empty_run_text(path, state, reason))


def load(path: Path | str) -> Run:
    """Open a run folder; every table is a DataFrame attribute (``run.steps``, ``run.syncs``...)."""
    return Run(path)


@dataclass
class RunInfo:
    path: Path
    name: str
    created: str
    status: str
    scenario: str
    backend: str
    device: str
    steps: int | None  # summed over ranks (None: unreadable): list it with steps_text
    error: str | None = None
    policy: str = ""  # the split policy driving the backend (scenario runs)
    min_kv_mode: str = ""  # all-rows (the bug) or active-rows (the fix)
    rank_steps: dict[int, int] | None = None  # steps per rank (None: not read)
    # whether ``steps`` is the report's count: False for a run whose analysis may leave
    # committed steps out (an imported trace's warm-ups and drafter passes) and that no kept
    # report document counts yet; the listing then says so, never the raw rows as its steps
    counted: bool = True

    def steps_text(self, unit: str = "") -> str:
        """The step count as every listing shows it: per rank, never summed silently ("3 per
        rank (2 ranks)"; ``unit`` "steps": "3 steps per rank (2 ranks)"); a count the report
        has not made yet is the committed rows, said as such ("12 committed": an import's
        warm-ups and drafter passes are told apart by its report)."""
        from mlaprof.rank_counts import per_rank_count

        if self.steps is None:  # an unreadable run's count is unknown, never 0
            return "unknown"
        n = per_rank_count(self.rank_steps or {0: self.steps}, unit)
        return n if self.counted else f"{n} committed"

    def status_text(self) -> str:
        """The status as every listing shows it (``runs``, ``tui --once``, the picker): an
        unreadable run's with the reason (``unreadable: <path> has no run.json ...``)."""
        return f"{self.status}: {self.error}" if self.error else self.status


def list_runs(folder: Path | str, code: list[object] | None = None) -> list[RunInfo]:
    """Runs under ``folder`` (newest first). Unreadable ones are listed with their error.
    ``code``: the analysis' code identity (:func:`mlaprof.store.summary_cache.code_identity`),
    taken once for every run listed; None: taken here where a run needs it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MlaprofError(f"traces folder {folder} does not exist")
    code = _Code(code)
    out: list[RunInfo] = []
    for p in folder.iterdir():
        # a folder of rank databases without run.json is a damaged run: listed unreadable with
        # the reason (the reader's rule), never dropped from the listing
        if p.name.startswith(".") or not ((p / runmeta.META_FILE).is_file() or has_ranks(p)):
            continue
        out.append(run_info(p, code))
    out.sort(key=lambda r: (r.created, r.name), reverse=True)
    return out


def list_runs_nested(folder: Path | str) -> list[RunInfo]:
    """The runs of ``folder`` and those one folder down (``traces/demo/...``), newest first; a
    run one level down is named ``sub/run``."""
    folder = Path(folder)
    code = _Code()  # one code identity for the whole listing
    runs = list_runs(folder, code)
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if (sub / runmeta.META_FILE).exists() or has_ranks(sub):  # a run, listed above
            continue
        try:
            inner = list_runs(sub, code)
        except Exception:  # an unreadable sub-folder is not a reason to show no runs
            continue
        for r in inner:
            r.name = f"{sub.name}/{r.name}"
        runs += inner
    runs.sort(key=lambda r: (r.created, r.name), reverse=True)
    return runs


def is_run_folder(path: Path | str) -> bool:
    """A run (run.json or rank databases), or a path that does not exist yet (a run starting)."""
    path = Path(path)
    if not path.exists():
        return True
    return is_run_json_folder(path) or has_ranks(path)


def has_ranks(path: Path | str) -> bool:
    """Whether a writer has created a rank database in ``path`` yet (a run started)."""
    path = Path(path)
    return path.is_dir() and any(_RANK_DB.match(p.name) for p in path.iterdir())


def ranks_written(path: Path | str) -> list[int]:
    """The ranks whose own database ``rank<N>.db`` is in run folder ``path``."""
    path = Path(path)
    if not path.is_dir():
        return []
    return sorted(
        int(m.group(1)) for p in path.iterdir() if (m := _RANK_DB.match(p.name)) and not m.group(2)
    )


def is_run_json_folder(path: Path | str) -> bool:
    """Whether ``path`` holds a run's metadata file (a run folder, not a folder of runs)."""
    return (Path(path) / runmeta.META_FILE).is_file()


class _Code:
    """The analysis' code identity, taken at most once per listing, and only where a run needs
    it (a run whose listed fields the report decides: most need none)."""

    def __init__(self, code: Any = None) -> None:
        if isinstance(code, _Code):
            code = code.value
        self.value: list[object] | None = code

    def get(self) -> list[object]:
        if self.value is None:
            self.value = summary_cache.code_identity()
        return self.value


def _reported(run: Run, code: _Code) -> dict[str, Any] | None:
    """The run's kept ``report --json`` document, where its key still holds (the store, the
    run's status and the code are those it was made from); None where there is none."""
    if not (run.path / summary_cache.CACHE_NAME).is_file():  # no key to take: most runs
        return None
    text = summary_cache.read(run, summary_cache.key(run, code=code.get()))
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _report_steps(doc: dict[str, Any]) -> dict[int, int] | None:
    """Steps per rank as the report counts them (its ``state.per_rank``)."""
    per = (doc.get("state") or {}).get("per_rank")
    if not isinstance(per, list) or not per:
        return None
    try:
        return {int(r["rank"]): int(r["steps_committed"]) for r in per}
    except (KeyError, TypeError, ValueError):
        return None


def run_info(p: Path, code: _Code | list[object] | None = None) -> RunInfo:
    """One run's listing line; a damaged run is ``unreadable`` with the reason, never an error.
    The step count and device are the report's: from the run's kept report document where it
    holds; else a run whose every committed step is a report step (its kind's evidence is its
    rows: :data:`mlaprof.store.runkind.ROWS_ONLY`) lists its rows' count and run.json's
    device, and any other lists its rows' count and device as not analysed yet."""
    try:
        with Run(p) as run:
            m = run.meta
            sc = m.get("scenario")
            scenario = sc.get("name", "") if isinstance(sc, dict) else (sc or m.get("source", ""))
            steps = run.count_per_rank("steps")
            kind = run_kind(m)
            device = str(m.get("device", ""))
            # what the report decides beyond the rows: which committed steps count (an import),
            # the device (a log's config line, an engine's attention backends)
            decides = kind not in ROWS_ONLY or device in ("", PLUGIN_DEVICE)
            doc = _reported(run, _Code(code)) if decides else None
            counted = kind in ROWS_ONLY
            if doc is not None:
                steps = _report_steps(doc) or steps
                counted = True
                device = str(doc.get("device") or device)
            elif decides and device in ("", PLUGIN_DEVICE):  # the importer's device stands
                device = NOT_ANALYSED
            return RunInfo(
                p,
                p.name,
                str(m.get("created", "")),
                run.status,
                str(scenario),
                str(m.get("backend", "")),
                device,
                sum(steps.values()),
                policy=str(sc.get("policy", "")) if isinstance(sc, dict) else "",
                min_kv_mode=str(sc.get("min_kv_mode", "")) if isinstance(sc, dict) else "",
                rank_steps=steps,
                counted=counted,
            )
    except EmptyRunError as e:
        created = ""
        with contextlib.suppress(MlaprofError):
            created = str(runmeta.read(p).get("created", ""))
        return RunInfo(p, p.name, created, e.state, "", "", "", 0)
    except MlaprofError as e:
        return RunInfo(p, p.name, "", "unreadable", "", "", "", None, str(e))
    except (OSError, sqlite3.Error, ValueError, TypeError, AttributeError, KeyError) as e:
        # a run.json or database damaged in a way no check foresaw: still one line, not a crash
        return RunInfo(p, p.name, "", "unreadable", "", "", "", None, f"{type(e).__name__}: {e}")
