import re

from poolgrad.reports import html, markdown
from reports_recorded import TIE_ID, XSS_ID, run_records


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
    assert report.total == 19 and len(report.divergences) == 5


def test_report_explains_a_divergence(tmp_path):
    report = html.write_html(run_records(), tmp_path / "r.html")
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
    text = (tmp_path / "r.html").read_text()
    assert "TF CPU MaxPoolGrad routes ties to the last maximum" in text


def test_matrix_and_fingerprints(tmp_path):
    report = html.write_html(run_records(), tmp_path / "r.html")
    row = next(r for r in report.matrix if r["family"] == "ties_overlap")
    by_target = {c["col"].target: c for c in row["cells"]}
    assert by_target["torch-eager-cpu"]["worst"] == "conforms"
    assert dict(by_target["jax-eager-cpu"]["counts"]) == {"policy": 2}
    fp = {f["col"].target: dict(f["backward"]) for f in report.fingerprints}
    assert fp["tensorflow-eager-cpu"] == {"nan=propagate, tie=last": 1, "nan=propagate, tie=first": 1}
    # 4 cases; only the two random ones agree with the spec everywhere; the injected-id case
    # has one target (it agrees with itself)
    assert report.interop == {"cases": 4, "spec": 2, "agree": 3, "spec_share": 0.5, "agree_share": 0.75}


def test_markdown_summary_has_matrix_and_escaped_divergences(tmp_path):
    markdown.write_markdown(run_records(), tmp_path / "s.md")
    text = (tmp_path / "s.md").read_text()
    assert "| max\\_pool2d | ties\\_overlap |" in text
    assert "&lt;img src=x onerror=alert(1)>" in text and "<img" not in text
    assert f"{TIE_ID}".replace("_", "\\_") in text
    assert XSS_ID not in text
