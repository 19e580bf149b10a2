"""Static PNGs of the report's figures through kaleido, which drives a local Chrome/Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlaprof.errors import MissingExtraError, MlaprofError
from mlaprof.figures import _common as c

WIDTH = 1200  # px; heights come from each figure's layout
CHROME_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
HOW_TO_GET_CHROME = (
    "PNG export needs Chrome or Chromium and none was found: install one "
    "(Debian/Ubuntu: 'apt-get install chromium'; or, with network, 'plotly_get_chrome' from "
    "plotly) or point BROWSER_PATH at a Chrome/Chromium binary, and install kaleido with "
    "pip install -e '.[png]' in the mlaprof checkout"
)


def find_chrome() -> str | None:
    """The browser kaleido will use: BROWSER_PATH, a choreographer-downloaded one, or PATH."""
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env if os.access(env, os.X_OK) else None
    try:
        from choreographer.browsers.chromium import Chromium

        found = Chromium.find_browser(skip_local=False)
        if found:
            return str(found)
    except Exception:  # an absent or changed choreographer only means "search PATH ourselves"
        pass
    for name in CHROME_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def write_pngs(
    summary: Any,
    folder: Path | str,
    diff: Any = None,
    scale: float = 1.0,
    only: Sequence[str] | None = None,
    force: bool = False,
) -> list[Path]:
    """Write one ``<figure>.png`` per report figure of the run ``summary`` into ``folder``;
    returns the paths. ``diff`` (the analysis' diff to a second run) adds ``diff.png``.
    ``only`` keeps the named figures (stems of :data:`mlaprof.figures.RUN_FIGURES`, or
    ``diff``).

    Raises :class:`MlaprofError` saying what to install when kaleido or a browser is missing."""
    c.go()
    try:
        import kaleido  # noqa: F401 - only checking that it is installed
    except ImportError:
        raise MissingExtraError(
            "PNG export", "png", "kaleido also needs Chrome or Chromium"
        ) from None
    chrome = find_chrome()
    if chrome is None:
        raise MlaprofError(HOW_TO_GET_CHROME)
    from plotly import io as pio

    from mlaprof.figures import run_figures

    figs = run_figures(summary, diff=diff, only=only)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise MlaprofError(f"{folder} is a file: give a folder for the PNGs")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise MlaprofError(f"cannot create {folder}: {e.strerror or e}") from None
    paths = [folder / f"{stem}.png" for stem, _ in figs]
    taken = [p.name for p in paths if os.path.lexists(p)]
    if taken and not force:
        raise MlaprofError(
            f"{folder} already holds {', '.join(taken[:3])}"
            + (" ..." if len(taken) > 3 else "")
            + ": give --force to overwrite them"
        )
    old = os.environ.get("BROWSER_PATH")
    os.environ["BROWSER_PATH"] = chrome  # kaleido asks choreographer, which reads this first
    try:
        todo = list(zip([f for _, f in figs], paths, strict=True))
        # kaleido has been seen to return without writing a file and without an error (on a
        # loaded machine): what is missing is drawn once more, then named if still missing
        for _attempt in range(2):
            pio.write_images(
                [f for f, _ in todo],
                [p for _, p in todo],
                format="png",
                width=WIDTH,
                height=[int(f.layout.height or 500) for f, _ in todo],
                scale=scale,
            )
            todo = [(f, p) for f, p in todo if not _written(p)]
            if not todo:
                break
    except Exception as e:  # kaleido's errors name the browser problem; keep them on one line
        msg = " ".join(str(e).split())[:300]
        raise MlaprofError(f"PNG export with {chrome} failed: {msg}") from None
    finally:
        if old is None:
            os.environ.pop("BROWSER_PATH", None)
        else:
            os.environ["BROWSER_PATH"] = old
    if todo:
        raise MlaprofError(
            f"PNG export with {chrome} wrote no {', '.join(p.name for _, p in todo)} "
            "(kaleido returned without an error, twice)"
        )
    return paths


def _written(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


# -- rendering the HTML report in a real browser (tests and bench/figures_bench.py) -----------
CHROMIUM = Path("/usr/bin/chromium")
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


def render_dom(html: Path, profile: Path, timeout: float) -> subprocess.CompletedProcess:
    """Open ``html`` offline in headless Chromium, let its scripts run, return the DOM (stdout)."""
    return subprocess.run(
        [str(CHROMIUM), *CHROME_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=3000",
         "--dump-dom", html.as_uri()],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


class PngRenderer:
    """``report --png DIR``: the summary's figures as PNG files, behind the same ``render``
    protocol as the other views (mlaprof.reporters.renderer); its text names the files."""

    def __init__(self, folder: Path | str, force: bool = False) -> None:
        self.folder = Path(folder)
        self.force = force

    def render(self, summary: Any, diff: Any = None) -> str:
        paths = write_pngs(summary, self.folder, diff=diff, force=self.force)
        from mlaprof.textsafe import plain

        return "".join(f"wrote {plain(p)}\n" for p in paths)  # a path is data: shown, not sent
