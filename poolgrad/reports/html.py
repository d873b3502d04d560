"""The self-contained HTML report: one file, inline CSS and a few lines of plain JS, no network.

Everything from results goes through Jinja2 autoescaping; a Content-Security-Policy that
allows no external source keeps the file offline even if a value ever slipped through.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from poolgrad.knowledge.impacts import IMPACTS

from . import model

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_ENV.globals["max_drilldowns"] = model.MAX_DRILLDOWNS
_ENV.globals["impacts"] = IMPACTS  # what each impact means, for a result's drill-down
_ENV.filters["n"] = "{:,}".format   # 182,840: counts read at a glance
_ENV.filters["percent"] = lambda share: "n/a" if share is None else f"{100 * share:.1f}%"


def render(report: model.Report) -> str:
    return _ENV.get_template("report.html.j2").render(r=report)


def write_html(source, out_path, baseline=None) -> model.Report:
    """Write the report for ``source`` (results paths, or records in memory) to ``out_path``.

    ``baseline``: results paths (or records) of an earlier run, to show what changed.
    Returns the report model (its counts are handy for callers' summaries).
    """
    report = model.build(source, baseline)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(render(report), encoding="utf-8")
    return report
