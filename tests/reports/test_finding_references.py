"""A finding's typed upstream references travel with the results that it explains: into the
results file's finding record and the HTML drill-down, as report, fix (with its state) and
related, each a link; a finding without any reads "no upstream report" (issue 29)."""

from reports_recorded import TF_FINDING, run_records

from poolgrad.knowledge.finding import NO_UPSTREAM
from poolgrad.knowledge.schema import parse_finding
from poolgrad.reports import html
from poolgrad.reports.records import ResultsWriter, read_results

UPSTREAM = [{"type": "report", "url": "https://github.com/o/r/issues/1", "title": "ties go last"},
            {"type": "fix", "url": "https://github.com/o/r/pull/2", "title": "route ties to the first", "state": "open"},
            {"type": "related", "url": "https://github.com/o/r/issues/3", "title": "the same loop",
             "note": "another bug in this kernel"}]


def _summary(upstream):
    raw = {"id": TF_FINDING["id"], "title": TF_FINDING["title"], "framework": "tensorflow",
           "behaviour": "what it does", "source": "kernel.cc: f", "policy": {"tie": "last"}, "upstream": upstream}
    return parse_finding(raw, 0).summary()


def _report(tmp_path, finding):
    recs = [{**r, "findings": [finding]} if r.get("findings") else r for r in run_records()]
    path = tmp_path / "run.jsonl"
    with open(path, "w") as fh:
        writer = ResultsWriter(fh)
        for rec in recs:
            writer.write(rec)
    html.write_html([path], tmp_path / "report.html")
    return read_results(path)[1], (tmp_path / "report.html").read_text()


def test_typed_references_reach_the_results_file_and_the_drill_down(tmp_path):
    finding = _summary(UPSTREAM)
    assert finding["upstream"] == UPSTREAM and finding["link"] == UPSTREAM[0]["url"]
    results, page = _report(tmp_path, finding)
    explained = [r for r in results if r.get("findings")]
    assert explained and all(r["findings"][0]["upstream"] == UPSTREAM for r in explained)
    assert ('(report: <a href="https://github.com/o/r/issues/1">ties go last</a>; '
            'fix (open): <a href="https://github.com/o/r/pull/2">route ties to the first</a>; '
            'related: <a href="https://github.com/o/r/issues/3">the same loop</a>)') in page


def test_a_finding_without_references_reads_no_upstream_report(tmp_path):
    finding = _summary([])
    assert "upstream" not in finding and finding["link"] == NO_UPSTREAM
    _, page = _report(tmp_path, finding)
    assert f"{TF_FINDING['title']} ({NO_UPSTREAM})" in page


def test_a_reference_that_is_not_https_is_text_not_a_link(tmp_path):
    finding = {**_summary(UPSTREAM[:1]), "upstream": [{"type": "report", "url": "javascript:alert(1)", "title": "x"}]}
    _, page = _report(tmp_path, finding)
    assert "(report: x javascript:alert(1))" in page and 'href="javascript' not in page
