"""The one section -> rows layer: a run summary's typed sections as labelled rows and tables
that every view lays out (terminal, Markdown, HTML, ``tui``), each value formatted once by
:mod:`mlaprof.reporters.fmt`.

The rows are derived from the section dataclasses (:mod:`mlaprof.analysis.sections`), field by
field in their declared order, so a field or a section added there shows in every view with no
change here or in any view. What a view may want to say otherwise is declared once, below:
a section's title (:data:`TITLES`), a field's label (:data:`LABELS`), the fields the views
lay out on their own (:data:`OWN`). The shape:

- the summary's plain fields (run, status, kind, ...) are the rows of the first block, ``run``,
  which also names the sections this run does not hold (None, or an empty list);
- a section (a dataclass) is a block: its plain fields are rows; a nested section is a block of
  its own (titled ``parent · child``); a list of small records is a table; a list of records
  that hold records of their own (an engine start and its memory per rank) is a block each;
- a table shows at most :data:`TABLE_ROWS` rows and says how many more ``report --json`` has.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.typed_json import OMIT
from mlaprof.reporters.fmt import field_text, label_of, value_text

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary

TABLE_ROWS = 12  # rows a table shows in a report; the JSON document holds them all
SAID_ONCE_CHARS = 40  # a text this long that a field repeats is shown once (said_once)
BLOCKS_PER_LIST = 8  # records of a list shown as a block each (engine starts)
SEP = " · "  # between a section's title and a nested one's
# the heading every view puts above the blocks
HEADING = "Sections (every field of the summary; report --json has every row)"

# summary fields each view lays out itself (its findings with severity, the headline numbers)
# or that are not part of the document (the figures' series)
OWN = frozenset({"findings", "headline", "series"})
HIDDEN_FIELDS = frozenset({"null_keys"})  # typed-JSON bookkeeping, not evidence

# a section's title where its field name does not say it (key: the summary field's name)
TITLES: dict[str, str] = {
    "run": "run",
    "state": "where the run stands",
    "imported": "imported from",
    "sync_counts": "sync counts (device->host, in the watched region)",
    "route": "vLLM route",
    "splits": "KV splits per policy (worst step, modelled)",
    "layers": "layers",
    "layer_splits": "S per MLA layer (from the trace)",
    "fleet": "ranks side by side",
    "trace": "imported trace",
    "reservation": "verify buffers (modelled)",
    "paths": "verify paths (step 0, one layer)",
    "engine_starts": "server starts",
    "engine": "engine (measured)",
    "shadow": "shadow AITER (modelled)",
    "replayed_splits": "S the captured graph replayed (measured)",
    "log_spec": "spec decoding over the log",
    "dp_groups": "data-parallel groups",
    "full_graph_splits": "S a captured graph replays (measured or modelled)",
    "syncs": "syncs in the captured region",
    "allocations": "allocations in the captured region",
    "h2d_copies": "host-to-device copies in the captured region",
    "capture_errors": "capture errors",
}

# a field's label where its name does not say it (key: "<Dataclass>.<field>")
LABELS: dict[str, str] = {
    "Timing.step_median_text": "median step",
    "Timing.timing_label": "timing",
    "Timing.timing": "timing kind",
    "Timing.full_share": "steps replayed in a graph",  # FULL or not: the capture section says
    "Capture.text": "capture",
    "Capture.effective_mode": "mode that ran",
    "Capture.mode": "mode asked for",
    "Capture.memory_bytes": "capture memory",
    "SyncCounts.text": "verdict",
    "Padding.text": "padding",
    "Fleet.text": "ranks",
    "RunState.text": "state",
    "TraceDrafter.text": "drafter",
}


@dataclass(frozen=True, slots=True)
class Row:
    """One labelled value: ``key`` names the field (``timing.step_median_us``)."""

    key: str
    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Table:
    """A list of records: one column per field, one row per record (the first
    :data:`TABLE_ROWS`; ``more``: how many the report leaves to ``report --json``)."""

    key: str
    title: str
    head: list[str]
    rows: list[list[str]]
    more: int


@dataclass(frozen=True, slots=True)
class Block:
    """One section: its rows, then its tables."""

    key: str
    title: str
    rows: list[Row]
    tables: list[Table]


def summary_blocks(s: RunSummary) -> list[Block]:
    """Every section of ``s`` as a block, in the summary's field order (``run`` first)."""
    run_rows: list[Row] = []
    absent: list[str] = []
    out: list[Block] = []
    for f in dataclasses.fields(s):
        if f.name in OWN:
            continue
        v = getattr(s, f.name)
        title = TITLES.get(f.name, label_of(f.name))
        if v is None or (isinstance(v, list) and not v) or _all_unknown(v):
            absent.append(title)
        elif dataclasses.is_dataclass(v):
            out += _blocks(f.name, title, v)
        elif _records(v):
            out += _list_blocks(f.name, title, v)
        else:
            run_rows.append(Row(f.name, _label(type(s).__name__, f.name), field_text(f.name, v)))
    if absent:
        run_rows.append(Row("absent", "not in this run", ", ".join(absent)))
    return said_once([Block("run", TITLES["run"], run_rows, []), *out])


def said_once(blocks: list[Block]) -> list[Block]:
    """A long text that fields repeat (a verdict and the reason inside it, the capture of the
    run and of its trace) is said once: a later row that says it again, or says a part of an
    earlier row, points to that row instead."""
    first: dict[str, str] = {}  # long text -> where it was said
    out = []
    for b in blocks:
        rows = []
        for r in b.rows:
            if len(r.text) >= SAID_ONCE_CHARS:
                where = first.get(r.text) or next(
                    (w for t, w in first.items() if r.text in t), None
                )
                if where is not None:
                    r = Row(r.key, r.label, f"said in {where}")
                else:
                    first[r.text] = f"{b.title}{SEP}{r.label}"
            rows.append(r)
        out.append(Block(b.key, b.title, rows, b.tables))
    return out


def _all_unknown(v: Any) -> bool:
    """A section whose every field is None (an import's scenario): said absent, not row by row."""
    return dataclasses.is_dataclass(v) and all(getattr(v, f.name) is None for f in _fields(v))


def _label(owner: str, name: str) -> str:
    return LABELS.get(f"{owner}.{name}", label_of(name))


def _records(v: Any) -> bool:
    """A non-empty list of records (dataclasses)."""
    return isinstance(v, list) and bool(v) and all(dataclasses.is_dataclass(x) for x in v)


def _record_map(v: Any) -> bool:
    """A non-empty map of records (a kernel variant's stage-2 check, a mode's graphs)."""
    return isinstance(v, dict) and bool(v) and all(dataclasses.is_dataclass(x) for x in v.values())


def _rich(x: Any) -> bool:
    """A record that holds records of its own (shown as a block, not a table row)."""
    for f in _fields(x):
        v = getattr(x, f.name)
        if dataclasses.is_dataclass(v) and len(_fields(v)) > 2:
            return True
        if _records(v) and len(_fields(v[0])) > 2:
            return True
    return False


def _fields(*records: Any) -> list[dataclasses.Field]:
    """The fields a view shows of ``records`` (of one type): bookkeeping left out, and an
    optional key (``opt()``) no record's producer wrote (left out of the JSON document too)."""
    return [
        f
        for f in dataclasses.fields(records[0])
        if f.name not in HIDDEN_FIELDS
        and not (f.metadata.get(OMIT) and all(getattr(r, f.name) is None for r in records))
    ]


def _blocks(key: str, title: str, v: Any) -> list[Block]:
    """A section's block, then the blocks of the sections nested in it."""
    owner = type(v).__name__
    rows: list[Row] = []
    tables: list[Table] = []
    nested: list[Block] = []
    for f in _fields(v):
        x = getattr(v, f.name)
        k, label = f"{key}.{f.name}", _label(owner, f.name)
        if dataclasses.is_dataclass(x):
            nested += _blocks(k, title + SEP + label, x)
        elif _records(x) and any(_rich(r) for r in x):
            nested += _list_blocks(k, title + SEP + label, x)
        elif _records(x):
            tables.append(_table(k, label, x))
        elif _record_map(x):
            tables.append(_map_table(k, label, x))
        else:
            rows.append(Row(k, label, field_text(f.name, x)))
    return [Block(key, title, rows, tables), *nested]


def _list_blocks(key: str, title: str, items: list[Any]) -> list[Block]:
    """A list of records: one table, or one block per record where they hold records."""
    if not any(_rich(x) for x in items):
        return [Block(key, title, [], [_table(key, title, items)])]
    out: list[Block] = []
    for i, x in enumerate(items[:BLOCKS_PER_LIST]):
        out += _blocks(f"{key}[{i}]", f"{title} {i + 1} of {len(items)}", x)
    more = len(items) - BLOCKS_PER_LIST
    if more > 0:
        note = Row(f"{key}.more", "more", f"{more} more in report --json")
        out.append(Block(f"{key}.more", title, [note], []))
    return out


def _table(key: str, title: str, items: list[Any]) -> Table:
    cols = _fields(*items)
    owner = type(items[0]).__name__
    head = [_label(owner, f.name) for f in cols]
    rows = [[field_text(f.name, getattr(x, f.name)) for f in cols] for x in items[:TABLE_ROWS]]
    return Table(key, title, head, rows, max(0, len(items) - TABLE_ROWS))


def _map_table(key: str, title: str, items: dict[Any, Any]) -> Table:
    first = next(iter(items.values()))
    cols = _fields(*items.values())
    owner = type(first).__name__
    head = ["", *(_label(owner, f.name) for f in cols)]
    rows = [
        [value_text(k), *(field_text(f.name, getattr(x, f.name)) for f in cols)]
        for k, x in list(items.items())[:TABLE_ROWS]
    ]
    return Table(key, title, head, rows, max(0, len(items) - TABLE_ROWS))


def table_more(t: Table) -> str:
    """What a table that was cut says under its rows (empty: nothing was cut)."""
    return f"... {t.more} more row(s) in report --json" if t.more else ""


# -- plain-text layout (the terminal report and ``tui --once`` share it) ----------------------
def text_table(head: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell, numbers right-aligned (plain text, no wrapping)."""
    cols = list(zip(head, *rows, strict=True))
    widths = [max(len(c) for c in col) for col in cols]
    right = [all(_numeric(c) for c in col[1:]) and len(col) > 1 for col in cols]
    fmt = [(f"{{:>{w}}}" if r else f"{{:<{w}}}") for w, r in zip(widths, right, strict=True)]
    return [
        (indent + "  ".join(f.format(c) for f, c in zip(fmt, line, strict=True))).rstrip()
        for line in (head, *rows)
    ]


def _numeric(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "-+." and cell[1:2].isdigit())


def fit(lines: list[str], width: int | None) -> list[str]:
    """``lines`` broken at spaces to ``width`` columns (a terminal's), the continuation indented;
    a word is never cut, so the text reads the same with its line breaks taken out."""
    if width is None:
        return lines
    import textwrap

    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(line.strip(" "), width, initial_indent=lead,
                             subsequent_indent=lead + "    ", break_long_words=False,
                             break_on_hyphens=False)  # fmt: skip
    return out


def block_lines(blocks: list[Block], width: int | None = None) -> list[str]:
    """Every block as plain-text lines: a title, ``label: value`` rows, padded tables (lines
    broken to ``width`` columns where given: :func:`fit`)."""
    out: list[str] = []
    for b in blocks:
        out.append(b.title)
        out += [f"  {r.label}: {r.text}" for r in b.rows]
        for t in b.tables:
            if t.title != b.title:
                out.append(f"  {t.title}")
            out += text_table(t.head, t.rows, indent="    " if t.title != b.title else "  ")
            if t.more:
                out.append("    " + table_more(t))
    return fit(out, width)
