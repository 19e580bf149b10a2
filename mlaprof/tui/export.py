"""Export key: every format ``mlaprof export`` writes (:mod:`mlaprof.export_targets`), into the same
default folder (``./out/``, never next to the run); the notification names the folder."""

from __future__ import annotations

from pathlib import Path

from mlaprof import export_targets
from mlaprof.errors import MlaprofError


def export_run(path: Path, folder: Path | None = None) -> tuple[bool, str]:
    """Run every exporter; (ok, one line for the user)."""
    from mlaprof.store import load

    path = Path(path)
    done, failed = [], []
    try:
        run = load(path)
    except Exception as e:  # a run deleted or corrupted meanwhile: say so, keep the dashboard
        return False, f"export failed: {e}"
    where = None
    lost: list[str] = []
    with run:
        for fmt in export_targets.FORMATS:
            out = export_targets.default_output(path, fmt, folder, len(run.ranks))
            where = out.parent
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                gone: list[str] = []
                if fmt == "csv":  # what `mlaprof export --format csv` warns of, in short
                    from mlaprof.exporters.csv_export import csv_losses

                    gone = [loss.what for loss in csv_losses(run)]
                export_targets.exporter(fmt)(run, out)
                done.append(out.name)
                lost += gone
            except MlaprofError as e:  # nothing to export in that format, or a bad target
                failed.append(f"{fmt} skipped ({e})")
            except Exception as e:  # an exporter's bug is reported, never crashes the view
                failed.append(f"{fmt} failed ({type(e).__name__}: {e})")
    text = f"exported {', '.join(done)} to {where}" if done else "export failed"
    if failed:
        text += "; " + "; ".join(failed)
    if lost:
        text += (
            f"; the CSVs leave out {', '.join(lost)}: imported again they read another run "
            "(the rocpd file keeps every table)"
        )
    return bool(done), text
