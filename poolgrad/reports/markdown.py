"""The Markdown summary for CI pages and pull requests: the unexplained count first, the known
behaviours hit by impact, each unexplained failure with its rerun line, then the matrix.

Every interpolated value is escaped for Markdown and inline HTML (``finalize``), so a case id
cannot break a table or inject markup into a rendered page.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from poolgrad.knowledge.impacts import IMPACTS

from . import model

MAX_LISTED = 50   # unexplained failures listed: a pull request comment holds 65,536 characters
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def escape(value) -> str:
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=False, finalize=escape, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_ENV.globals["impacts"] = IMPACTS
_ENV.filters["n"] = "{:,}".format   # 182,840: counts read at a glance
_ENV.filters["percent"] = lambda share: "n/a" if share is None else f"{100 * share:.1f}%"


def render(report: model.Report) -> str:
    return _ENV.get_template("summary.md.j2").render(r=report, max_listed=MAX_LISTED, by_op=model.by_op(report.matrix))


def write_markdown(source, out_path, baseline=None) -> model.Report:
    """Write the Markdown summary for ``source`` (results paths or records) to ``out_path``."""
    report = model.build(source, baseline, details=False)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(render(report), encoding="utf-8")
    return report
