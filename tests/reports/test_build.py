import html as htmllib
import re
import shlex

import numpy as np
from _pytest.mark.expression import Expression

from poolgrad.reports import html, markdown, model, synthetic
from reports_recorded import TF_FINDING, TIE_ID, XSS_ID, run_records

JAX_FINDING = {"id": "jax-tie-all", "title": "JAX routes a tie to every maximum", "impact": "valid_subgradient",
               "upstream": [{"type": "report", "url": "https://github.com/jax-ml/jax/issues/1", "title": "ties"}]}
TF_IMPACT = {**TF_FINDING, "impact": "wrong_forward",
             "upstream": [{"type": "fix", "url": "https://github.com/tensorflow/tensorflow/pull/2", "state": "merged in 2.22"}]}


def explained_run() -> list[dict]:
    """run_records with JAX's tie results explained too, and impacts and upstream references on
    both findings: 19 results, the injected-id case the one unexplained failure."""
    records = run_records()
    for rec in records:
        if rec.get("framework") == "jax" and rec["case_id"] == TIE_ID:
            rec.update(findings=[JAX_FINDING], outcome="expected")
        elif rec.get("findings"):
            rec["findings"] = [TF_IMPACT]
    return records


def visible_text(page: str) -> str:
    body = re.sub(r"<(script|style|summary)\b.*?</\1>|<details\b.*?</details>", " ", page.split("<body>", 1)[1], flags=re.S)
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_report_is_self_contained_and_escapes_everything(tmp_path):
    report = html.write_html(run_records(), tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert "<img src=x" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    # nothing fetched from anywhere, no link out: no src attribute, no href but to an anchor in
    # the file (the semantics pages' findings), and a CSP that forbids fetching
    assert not re.search(r"\b(src|href)\s*=\s*(?!\"#)", text.replace("src=x onerror", ""))
    assert 'href="#' in text
    assert "default-src 'none'" in text
    # 3 unexplained failures (JAX's tie=all twice, the injected id) listed, 1 finding's example
    assert report.total == 19 and report.headline["unexplained"] == 3 and len(report.divergences) == 4


def test_report_explains_a_divergence(tmp_path):
    report = html.write_html(run_records(tf_known=False), tmp_path / "r.html")   # an unexplained failure's drill-down
    tf = next(d for d in report.divergences if d["rec"]["target"] == "tensorflow-eager-cpu")
    assert tf["policy"] == "nan=propagate, tie=last"
    # the tie at input (0,1) vs (1,0): the reference routes window (0,0) to (0,1), tie=last to (1,0)
    marks = {tuple(c) for c in tf["rec"]["differing_cells"]}
    assert (0, 0, 0, 1) in marks and (0, 0, 1, 0) in marks
    grad_view = tf["detail"]["views"]["grad_input"]
    marked = [(r, c) for r, row in enumerate(grad_view["slices"][0]["rows"]) for c, cell in enumerate(row) if cell["mark"]]
    assert (0, 1) in marked and (1, 0) in marked
    assert tf["detail"]["windows"][0]["out"] == (0, 0, 0, 0)
    assert "tf.nn.max_pool2d" in tf["detail"]["script"]


def test_first_screen_answers_is_my_framework_ok(tmp_path):
    report = html.write_html(explained_run(), tmp_path / "r.html")
    text = visible_text((tmp_path / "r.html").read_text())
    assert text.startswith("1 unexplained failure poolgrad conformance report: jax 0.10.2, tensorflow 2.21.0, torch 2.13.0+cpu")
    assert re.search(r"results 19 : 19 ran unexplained failures 1 : .* known behaviours hit 2 findings of the "
                     r"knowledge base, explaining 4 results; .* worst impact wrong_forward : the forward value is wrong", text)
    # the findings by impact, worst first, with what they touched and their upstream status
    assert [(f["id"], f["impact"], f["count"], f["status"]) for f in report.findings] == [
        ("tf-tie-last", "wrong_forward", 2, "fix merged"), ("jax-tie-all", "valid_subgradient", 2, "reported")]
    assert report.findings[0]["paths"] == ["tensorflow eager", "tensorflow xla"]
    assert report.findings[0]["dtypes"] == ["float32"] and report.findings[0]["devices"] == ["cpu"]
    assert "TF CPU MaxPoolGrad routes ties to the last maximum" in text
    assert text.index("Known behaviours this run hit (2)") < text.index("Unexplained failures (1)") < text.index("Matrix:")
    assert 'href="https://github.com/jax-ml/jax/issues/1"' in (tmp_path / "r.html").read_text()


def test_rerun_lines_select_the_test_that_made_the_result():
    records = explained_run()
    report = model.build(records)
    (failure,) = report.unexplained
    assert shlex.split(failure["rerun"])[5:] == ["--frameworks", "jax", "--variants", "eager", "--devices", "cpu"]
    words = shlex.split(report.findings[1]["item"]["rerun"])   # JAX's tie example, on jax-eager-cpu
    assert words[:4] == ["pytest", "--pyargs", "poolgrad", "-k"]
    # -k is a pytest expression that matches the parametrized test's name (case id - target id)
    # and no other case's: a draw (<id>~<k>) is checked in its case's test
    matches = Expression.compile(words[4]).evaluate
    assert matches(lambda ident: ident in f"test_backward[{TIE_ID}-jax-eager-cpu]")
    assert not matches(lambda ident: ident in f"test_backward[{TIE_ID}-jax-jit-cpu]")
    draw = {**records[1], "case_id": TIE_ID + "~2"}
    assert model.rerun_line(draw, {TIE_ID}).split()[4] == f"'test_backward[{TIE_ID}-torch-eager-cpu]'"


def test_errors_read_as_rounding_or_magnitude():
    rec = {"dtype": "float16", "max_abs_error": 65536.0, "max_ulp_error": 5.8e48}
    assert model.error_text(rec) == "max abs error 6.554e+04; over 2^10 ulp: the values differ in magnitude, not by rounding"
    assert model.error_text({**rec, "max_abs_error": 0.0009765625, "max_ulp_error": 1.0}) == "max abs error 0.0009766; 1 ulp"
    assert model.error_text({**rec, "max_ulp_error": "nan"}).endswith("; an inf or NaN differs")
    assert model.error_text({**rec, "max_abs_error": None}) == ""


def test_matrix_rows_in_the_order_users_reach_for_and_idle_rows_folded(tmp_path):
    records = run_records()
    for op in ("lp_pool2d", "adaptive_avg_pool2d"):
        records.append({**records[1], "case_id": op, "op": op, "verdict": "unsupported", "outcome": "skipped"})
    report = html.write_html(records, tmp_path / "r.html")
    assert [(row["op"], row["run"]) for row in report.matrix] == [
        ("max_pool2d", True), ("max_pool2d", True), ("avg_pool2d", True), ("adaptive_avg_pool2d", False),
        ("lp_pool2d", False)]
    text = (tmp_path / "r.html").read_text()
    assert "2 rows not run on any target" in text
    cell = next(c for c in report.matrix[1]["cells"] if c["col"].target == "tensorflow-eager-cpu")   # ties_overlap
    assert cell["outcomes"] == [("known", 1)] and cell["tone"] == "known"
    assert '<span class="n-known">1 known</span>' in text   # the count in words, not colour alone


def test_report_stays_small_with_many_failures_and_findings(tmp_path):
    """A bad run: more unexplained failures than are listed and 40 findings hit, on the catalogue's
    largest input shape (1, 64, 9, 9), with ties the target routes otherwise in every channel.
    Drill-downs (arrays, reproducers) go to the first unexplained failures and one example per
    finding, so the report stays under one framework's budget, 1.5 MB."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 3, (1, 64, 9, 9)).astype(np.float32)
    g = rng.standard_normal((1, 64, 7, 7)).astype(np.float32)
    spec = {"op": "max_pool2d", "kernel_size": 3, "stride": 1, "dtype": "float32"}
    failed = synthetic.result("big", "ties", spec, x, g, framework="torch", variant="eager", run_id="big", tie="last")
    records = [synthetic.environment("big")]
    for i in range(2 * model.MAX_LISTED + 80):
        finding = {"id": f"f{i // 2 % 40}", "title": "a finding", "link": "no upstream report", "impact": "rounding"}
        records.append({**failed, "case_id": f"max_pool2d-big-{i}", "family": f"family{i % 60}",
                        **({"findings": [finding], "outcome": "expected"} if i % 2 else {})})
    report = html.write_html(records, tmp_path / "r.html")
    assert failed["outcome"] == "fail" and len(failed["differing_cells"]) > 50
    assert report.headline["unexplained"] == model.MAX_LISTED + 40 and report.headline["findings"] == 40
    assert len(report.unexplained) == model.MAX_LISTED
    assert sum(d["detail"] is not None for d in report.divergences) == model.MAX_DRILLDOWNS + 40
    assert (tmp_path / "r.html").stat().st_size <= 1_500_000


def test_markdown_summary_has_matrix_and_escaped_divergences(tmp_path):
    markdown.write_markdown(explained_run(), tmp_path / "s.md")
    text = (tmp_path / "s.md").read_text()
    assert text.startswith("## 1 unexplained failure · poolgrad conformance: jax 0.10.2, tensorflow 2.21.0, torch 2.13.0+cpu\n")
    assert "worst impact **wrong\\_forward**" in text
    assert text.index("| wrong\\_forward | TF CPU MaxPoolGrad") < text.index("| valid\\_subgradient | JAX routes")
    assert "rerun: pytest --pyargs poolgrad -k 'test\\_backward\\[&lt;img" in text
    # the matrix summed to op x framework, ops in the order users reach for them
    assert "| op | jax | tensorflow | torch |" in text
    assert text.index("| max\\_pool2d | 1 fail, 2 known, 2 ok | 2 known, 2 ok | 4 ok |") < text.index("| avg\\_pool2d | 2 ok | 2 ok | 2 ok |")
    assert "&lt;img src=x onerror=alert(1)>" in text and "<img" not in text
    assert XSS_ID not in text
