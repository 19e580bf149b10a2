"""View equals view: on every shipped run and trace, the key facts read back from the terminal
report, ``report --json``, ``report --format md``, ``report --html`` and ``tui --once`` agree:
run status, capture, median step, the S used (and replayed), padding, and whether syncs were
checked (a "not checked" run never reads as "0 syncs"). Each view is the CLI's own output
(``mlaprof.cli.main``, as the console script runs it); ``--json`` is the truth the others are
read against, and a view that leaves a fact out fails as one that says another value."""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path

import pytest

from mlaprof.cli import main
from tests import shipped_runs
from tests.conftest import EACH_TEST

# in-process tests of one shipped run each: spread over the workers
WORKER_GROUP = EACH_TEST

IDS = shipped_runs.NAMES


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    assert rc == 0, out.err[-2000:]
    return out.out


@functools.cache
def _dir(ident: str) -> Path:
    return shipped_runs.run_dir(ident)


def views(ident: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    run = str(_dir(ident))
    page = tmp / "report.html"
    out = {
        "json": _cli(capsys, "report", run, "--json", "--html", str(page)),
        "text": _cli(capsys, "report", run),
        "md": _cli(capsys, "report", run, "--format", "md"),
        "tui": _cli(capsys, "tui", run, "--once"),
    }
    out["json"] = out["json"][out["json"].index("{") :]  # after the "wrote <html>" line
    # the Markdown as a reader sees it: its backslash escapes (CommonMark 2.4) taken off
    out["md"] = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", out["md"])
    # the page as a reader sees it: tags dropped, entities decoded
    page_text = re.sub(
        r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.S
    )
    out["html"] = html.unescape(re.sub(r"<[^>]+>", " ", page_text))
    return out


def flat(text: str) -> str:
    """Whitespace (line wraps at the terminal's width, table padding) as one space."""
    return " ".join(text.split())


def facts(doc: dict) -> dict[str, str | None]:
    """What every view must say, worded as the summary words it (None: nothing to say)."""
    head = {h["label"]: h["value"] for h in doc["headline"]}
    splits = next((v for k, v in head.items() if k.startswith("KV splits")), None)
    return {
        "capture": doc["capture"]["text"],
        "median step": doc["timing"]["step_median_text"],
        "S used": splits,
        "padding": head.get("padding waste"),
        "syncs": doc["sync_counts"]["text"],
    }


def status_said(view: str, text: str) -> str | None:
    """The run status a view states (the terminal report states it only when not finished)."""
    if view == "json":
        return json.loads(text)["status"]
    if view == "text":
        m = re.search(r"status: (\w+)", text)
        return m.group(1) if m else "finished"
    if view == "md":
        m = re.search(r"status \*\*(\w+)\*\*", text)
    elif view == "html":
        m = re.search(r"\bstatus (\w+)", flat(text))
    else:  # tui --once: the header's second line, "... | rank 0 | finished | 32 steps ..."
        m = re.search(r"\|\s+(running|finished|interrupted|failed|incomplete)\b", text)
    return m.group(1) if m else None


# Facts a view leaves out today, by run kind: each is a gap of that view's renderer (named
# here), asserted as it stands so that a view which starts saying the fact (or stops saying
# another) fails until this table says so. Nothing here may be a disagreement in value.
KNOWN_GAPS: dict[tuple[str, str], tuple[str, ...]] = {}


def known_gaps(doc: dict) -> set[str]:
    want = facts(doc)
    return {
        f"{view}: {fact} {want[fact]!r} not said"
        for (view, fact), kinds in KNOWN_GAPS.items()
        if doc["kind"] in kinds and want[fact] is not None
    }


@pytest.mark.parametrize("ident", IDS)
def test_every_view_says_the_same_key_facts(ident: str, tmp_path: Path, capsys) -> None:
    v = views(ident, tmp_path, capsys)
    doc = json.loads(v["json"])
    bad = []
    for view, text in v.items():
        said = status_said(view, text)
        if said != doc["status"]:
            bad.append(f"{view}: status {said!r}, the summary says {doc['status']!r}")
        if view == "json":
            continue
        for fact, want in facts(doc).items():
            if want is not None and flat(want) not in flat(text):
                bad.append(f"{view}: {fact} {want!r} not said")
        # a run whose syncs were not checked never shows a sync count of 0 as a finding
        if doc["sync_counts"]["text"].startswith("not checked") and re.search(
            r"\b0 syncs? in (the )?region", flat(text)
        ):
            bad.append(f"{view}: says 0 syncs where none were checked")
    gaps = known_gaps(doc)
    assert set(bad) == gaps, (
        f"{ident}:\nviews disagree:\n"
        + "\n".join(sorted(set(bad) - gaps))
        + "\nknown gaps no longer seen (take them out of KNOWN_GAPS):\n"
        + "\n".join(sorted(gaps - set(bad)))
    )


def test_a_view_that_drops_a_fact_fails(tmp_path: Path, capsys) -> None:
    """The read-back catches a view that leaves a fact out or words it otherwise."""
    v = views("demo-bug-padding-collapses-splits-c16", tmp_path, capsys)
    doc = json.loads(v["json"])
    want = facts(doc)["S used"]
    assert want and flat(want) in flat(v["html"])
    assert flat(want) not in flat(v["html"].replace(want, "S used 4, deserved 4"))
    assert status_said("text", "status: interrupted (Ctrl-C)") == "interrupted"
