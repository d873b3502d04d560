"""A finding's upstream references say what they are (issue 29): a `report` is an issue about the
behaviour itself, a `fix` a pull request with its state, a `related` thread carries a note saying
why it bears; `upstream = []` says no report exists. The loader refuses a malformed reference,
naming the finding and the field, and the knowledge base keeps the corrections of the audit."""

import re
from pathlib import Path

import pytest

from poolgrad.knowledge import sources
from poolgrad.knowledge.finding import NO_UPSTREAM
from poolgrad.knowledge.schema import FindingsError, parse_finding

# poolgrad's own knowledge (a plugin's findings file keeps its own references)
OWN_FILES = [p for p in sources.framework_files() if p.is_relative_to(Path(sources.__file__).parents[1])]
KB = [f for p in OWN_FILES for f in sources.load(p, history=None)]
BY_ID = {f.id: f for f in KB}
RAW = {"id": "x", "title": "t", "framework": "torch", "behaviour": "what it does", "source": "kernel.cc: f",
       "policy": {"tie": "last"}}
ISSUE = "https://github.com/o/r/issues/1"


@pytest.mark.parametrize("upstream, message", [
    ({"type": "report", "url": ISSUE}, r"'upstream' is a list"),
    ([{"type": "bug", "url": ISSUE, "title": "t"}], r"upstream\[0\]: field 'type' is one of report, fix, related"),
    ([{"type": "report", "title": "t"}], r"upstream\[0\]: field 'url' is an https:// URL"),
    ([{"type": "report", "url": "github.com/o/r/issues/1"}], r"field 'url'"),
    ([{"type": "fix", "url": "https://github.com/o/r/pull/2", "title": "t"}], r"upstream\[0\]: a fix needs its 'state'"),
    ([{"type": "related", "url": ISSUE, "title": "t"}], r"upstream\[0\]: a related thread needs a 'note'"),
    ([{"type": "report", "url": ISSUE, "link": ISSUE}], r"upstream\[0\] is a table of"),
])
def test_a_bad_reference_is_refused_naming_the_finding_and_the_field(upstream, message):
    with pytest.raises(FindingsError, match=r"finding 'x'.*" + message):
        parse_finding({**RAW, "upstream": upstream}, 0)


def test_a_reference_is_typed_and_the_old_link_is_refused_beside_it():
    f = parse_finding({**RAW, "upstream": [
        {"type": "related", "url": ISSUE, "title": "another bug", "note": "same kernel"},
        {"type": "fix", "url": "https://github.com/o/r/pull/2", "title": "the fix", "state": "open"},
        {"type": "report", "url": "https://github.com/o/r/issues/3", "title": "this bug"}]}, 0)
    assert [(r.type, r.state, r.note) for r in f.upstream] == [
        ("related", "", "same kernel"), ("fix", "open", ""), ("report", "", "")]
    assert f.link == "https://github.com/o/r/issues/3"   # the summary link is a report or nothing
    assert parse_finding({**RAW, "upstream": [f.upstream[0].__dict__]}, 0).link == NO_UPSTREAM
    with pytest.raises(FindingsError, match="not both"):
        parse_finding({**RAW, "upstream": [], "link": ISSUE}, 0)


@pytest.mark.parametrize("finding", KB, ids=lambda f: f.id)
def test_every_reference_points_at_what_its_type_says(finding):
    for r in finding.upstream:
        kind = re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", r.url)
        assert kind and r.title, r
        # a report is an issue about the behaviour, a fix is a pull request; either may be related
        assert r.type == "related" or kind.group(1) == {"report": "issues", "fix": "pull"}[r.type], r
    assert len({r.url for r in finding.upstream}) == len(finding.upstream)


def test_the_knowledge_files_carry_no_untyped_link():
    for path in OWN_FILES:
        text = path.read_text()
        assert not re.search(r"^link\s*=", text, re.M) and "no upstream report" not in text, path


def _urls(fid, kind=None):
    return {r.url.rsplit("github.com/", 1)[1] for r in BY_ID[fid].upstream if kind in (None, r.type)}


def test_the_audits_misattributions_stay_corrected():
    """Threads about another bug are never a finding's report (issue 29, point 7)."""
    reports = {u for f in KB for u in _urls(f.id, "report")}
    for thread in ("pytorch/pytorch/issues/131659", "tensorflow/tensorflow/issues/36514", "jax-ml/jax/issues/39257",
                   "pytorch/pytorch/pull/96080", "jax-ml/jax/issues/3793", "tensorflow/tensorflow/pull/56353",
                   "google/flax/issues/4233"):
        assert thread not in reports
    # 116992 reports tf.reduce_max under XLA, not the XLA max-pool kernels
    assert "tensorflow/tensorflow/issues/116992" not in _urls("tf-xla-max-nan-forward-skips-gradient-scan", "report")
    anywhere = {u for f in KB for u in _urls(f.id)}
    assert not {"tensorflow/tensorflow/issues/36514", "jax-ml/jax/issues/39257"} & anywhere


def test_the_threads_the_audit_found_missing_are_cited():
    assert {"tensorflow/tensorflow/issues/125965"} <= _urls("tf-cpu-max-forward-skips-nan", "report")
    assert {"tensorflow/tensorflow/pull/125968"} <= _urls("tf-cpu-max-forward-skips-nan", "fix")
    assert {"pytorch/pytorch/issues/194347", "pytorch/pytorch/pull/194472", "pytorch/pytorch/issues/185610",
            "pytorch/pytorch/pull/185765"} <= _urls("torch-compile-max-forward-last-zero")
    assert {"pytorch/pytorch/pull/187207"} <= _urls("torch-lp-norm-one-nan-window-zero-gradient", "fix")
    assert {"uxlfoundation/oneDNN/pull/2386"} <= _urls("tf-graph-onednn-half-max-grad-sums-unordered")
    assert {"jax-ml/jax/issues/37762"} <= _urls("jax-cpu-subnormal-flushed")
    assert {"openxla/xla/issues/48714"} <= _urls("jax-cpu-large-call-nan-skipped")
