import json

import ml_dtypes
import numpy as np
import pytest

from poolgrad.reports import schema
from poolgrad.reports.records import decode_array, encode_array, read_results, write_record

from reports_recorded import run_records, write


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_encode_decode_round_trip_is_bit_exact(dtype):
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    values = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -3.25, 0.1, 1e-3, 7e-8], dtype=np.float64)
    a = values.astype(dt).reshape(1, 1, 2, 5)
    nested = json.loads(json.dumps(encode_array(a)))
    assert nested[0][0][0][:5] == [0.0, "-0.0", "nan", "inf", "-inf"]
    back = decode_array(nested, dtype)
    assert back.dtype == dt
    assert back.tobytes() == a.tobytes()


def test_integer_arrays_stay_integers():
    idx = np.array([[[0, 5]]], dtype=np.int64)
    assert encode_array(idx) == [[[0, 5]]]
    assert decode_array([[[0, 5]]], np.int64).tolist() == [[[0, 5]]]


@pytest.mark.parametrize("bad, words", [([[1.0], [1.0, 2.0]], "ragged"), ([1.0, "NaN"], "unknown value")])
def test_decode_refuses_bad_arrays(bad, words):
    with pytest.raises(ValueError, match=words):
        decode_array(bad, "float32")


def test_write_then_read_validates_and_splits(tmp_path):
    recs = run_records()
    envs, results = read_results(write(tmp_path / "r.jsonl", recs))
    assert len(envs) == 1 and len(results) == len(recs) - 1
    assert results[0]["case_id"] == recs[1]["case_id"]


def test_a_gzip_compressed_results_file_reads_as_the_plain_one(tmp_path):
    import gzip
    plain = write(tmp_path / "r.jsonl", run_records())
    packed = tmp_path / "r.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_results(packed) == read_results(plain)


def test_non_finite_metrics_are_written_as_strings(tmp_path):
    rec = {**run_records()[1], "max_abs_error": float("inf")}
    with open(tmp_path / "r.jsonl", "w") as fh:
        write_record(fh, rec)
    assert json.loads((tmp_path / "r.jsonl").read_text())["max_abs_error"] == "inf"


@pytest.mark.parametrize("edit, words", [
    ({"verdict": "fine"}, "field 'verdict': unknown 'fine'"),
    ({"target": "torch-eager-gpu"}, "field 'target'"),
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"case_id": 3.5}, "field 'case_id' must be string"),
    ({"case_id": 3}, "field 'case_id' names case 3, which no case record before it has as its ref"),
    ({"message": 7}, "field 'message' names text 7, which no text record before it holds"),
])
def test_a_bad_record_is_named_by_file_line_and_field(tmp_path, edit, words):
    recs = run_records()
    recs[2] = {**recs[2], **edit}
    path = write(tmp_path / "bad.jsonl", recs)
    with pytest.raises(schema.RecordError, match=f"bad.jsonl:3: {words}"):
        read_results(path)


def test_a_cases_arrays_are_written_once_and_read_back_into_every_result(tmp_path):
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import ResultsWriter, read_results
    spec, x, g = synthetic.tie_case()
    recs = [synthetic.result("tie", "ties", spec, x, g, framework=fw, variant=v, run_id="r", tie=tie)
            for fw, v, tie in (("torch", "eager", "first"), ("jax", "jit", "all"))]
    path = tmp_path / "r.jsonl"
    with open(path, "w") as fh:
        writer = ResultsWriter(fh)
        for rec in [*recs, synthetic.environment("r")]:
            writer.write(rec)
    lines = [{"record": "result", **json.loads(line)} for line in path.read_text().splitlines()]
    lines = [r for r in lines if r["record"] != "text"]
    assert [r["record"] for r in lines] == ["case", "result", "result", "environment"]
    assert all("input" not in r and "expected_grad_input" not in r and "spec" not in r
               for r in lines if r["record"] == "result")
    # The canonical target's arrays are the reference's; the "all" target's gradient differs
    # in the tied cells only, which are all it writes.
    assert lines[1]["as_expected"] == ["forward", "grad_input"] and "grad_input" not in lines[1]
    changes = lines[2]["grad_input_changes"]
    assert 0 < len(changes) < np.size(x) / 2 and "grad_input" not in lines[2]
    _, results = read_results(path)
    assert [{k: r[k] for k in recs[0]} for r in results] == recs


def test_results_sent_against_their_case_write_the_file_whole_results_write(tmp_path):
    # A worker sends each result against its case (the case's fields with its first result
    # only): the writer writes it as it comes, to the same bytes, and restore is its inverse.
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import against_case, restore
    from poolgrad.reports.schema import CASE_FIELDS
    spec, x, g = synthetic.tie_case()
    recs = [synthetic.result("tie", "ties", spec, x, g, framework=fw, variant=v, run_id="r", tie=tie)
            for fw, v, tie in (("torch", "eager", "first"), ("jax", "jit", "all"), ("jax", "eager", "last"))]
    case = {f: recs[0][f] for f in CASE_FIELDS if f in recs[0]}
    sent = [{**against_case(recs[0]), **case}, *map(against_case, recs[1:])]
    assert all("input" not in r and "forward" not in r for r in sent[1:])
    assert [against_case(r) for r in sent[1:]] == sent[1:]
    assert [{k: restore(r, case)[k] for k in rec} for r, rec in zip(sent, recs)] == recs
    (whole, _), (relative, _) = (_written(tmp_path / name, records) for name, records in (("a", recs), ("b", sent)))
    assert relative.read_bytes() == whole.read_bytes()


def _written(tmp_path, recs):
    """The path of a results file ResultsWriter wrote ``recs`` to, and its lines."""
    from poolgrad.reports.records import ResultsWriter
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "r.jsonl"
    with open(path, "w") as fh:
        writer = ResultsWriter(fh)
        for rec in recs:
            writer.write(rec)
    return path, [{"record": "result", **json.loads(line)} for line in path.read_text().splitlines()]


def test_call_properties_shared_by_a_cases_targets_are_written_once(tmp_path):
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import ResultsWriter, read_results
    spec, x, g = synthetic.tie_case()
    recs = [{**synthetic.result("tie", "ties", spec, x, g, framework="torch", variant=v, run_id="r"),
             "call_properties": props}
            for v, props in (("eager", ["nan"]), ("module", ["nan"]), ("compile", []))]
    path, lines = _written(tmp_path, recs)
    lines = [r for r in lines if r["record"] != "text"]
    assert lines[0]["call_properties"] == ["nan"]  # the case record
    assert "call_properties" not in lines[1] and "call_properties" not in lines[2]
    assert lines[3]["call_properties"] == []  # a call of its own (a case rerun alone) says so
    _, results = read_results(path)
    assert [r["call_properties"] for r in results] == [["nan"], ["nan"], []]


def test_results_name_what_their_target_and_findings_records_already_say(tmp_path):
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import ResultsWriter, read_results
    spec, x, g = synthetic.tie_case()
    finding = {"id": "torch-tie-last", "title": "ties go last", "link": "no upstream report"}
    recs = [{**synthetic.result("tie", "ties", spec, x, g, framework="torch", variant=v, run_id="r", tie="last"),
             "findings": [finding], "outcome": "expected", "call_shape": None if v == "module" else [1, 1, 3, 3]}
            for v in ("eager", "return_indices", "module")]
    path, lines = _written(tmp_path, recs)
    texts = {r["id"]: r["text"] for r in lines if r["record"] == "text"}
    lines = [r for r in lines if r["record"] != "text"]
    assert [r["record"] for r in lines] == ["case", "finding", "result", "result", "result"]
    assert lines[1] == {"record": "finding", **finding}
    written = lines[2:]
    assert written[0]["findings"] == ["torch-tie-last"] and written[0]["framework_version"] == recs[0]["framework_version"]
    # target, verdict and message texts are written once each and named by id; the target's
    # release, the message and the reverse mode are said once, or not at all
    assert [texts[r["target"]] for r in written] == [r["target"] for r in recs]
    assert texts[written[0]["verdict"]] == recs[0]["verdict"] and texts[written[0]["message"]] == recs[0]["message"]
    assert len(texts) == len(set(texts.values())) == 4  # three targets; the verdict is also the message
    assert not any(k in r for r in written[1:] for k in ("framework_version", "message"))
    assert not any(k in r for r in written for k in ("framework", "variant", "device", "run_id", "contradicts", "mode"))
    assert "call_shape" not in written[0] and written[2]["call_shape"] is None  # null where not the case's
    # the later results of the case and verdict write what differs from the one before
    assert lines[0]["case_id"] == "tie" and lines[0]["ref"] == 0  # results name their case by its ref
    assert written[1] == {"record": "result", "case_id": 0, "target": written[1]["target"],
                          "verdict": written[0]["verdict"], "delta": 1}
    assert "record" not in json.loads(path.read_text().splitlines()[-1])  # a line without one is a result
    _, results = read_results(path)
    assert [{k: r[k] for k in recs[0]} for r in results] == recs


def test_an_unsupported_record_reads_as_one_result_per_case(tmp_path):
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import ResultsWriter, read_results
    spec, x, g = synthetic.tie_case()
    ran = synthetic.result("tie", "ties", spec, x, g, framework="torch", variant="eager", run_id="r")
    path = tmp_path / "r.jsonl"
    with open(path, "w") as fh:
        writer = ResultsWriter(fh)
        writer.write(ran)
        writer.write({"record": "unsupported", "run_id": "r", "target": "tensorflow-with_argmax-cpu",
                      "framework_version": "2.21.0", "reason": "2-D max pooling only", "case_ids": ["tie"]})
    _, results = read_results(path)
    assert len(results) == 2
    refused = results[1]
    assert (refused["framework"], refused["variant"], refused["device"]) == ("tensorflow", "with_argmax", "cpu")
    assert refused["verdict"] == "unsupported" and refused["outcome"] == "skipped"
    assert refused["framework_message"] == "2-D max pooling only" and refused["call_shape"] is None
    assert refused["input"] == ran["input"] and refused["spec"] == ran["spec"]


def test_integral_floats_are_written_as_json_integers_and_read_back_exactly():
    a = np.array([3.0, -2.0, 0.5, 2.0 ** 60, -0.0, 1e300], np.float64)
    nested = json.loads(json.dumps(encode_array(a)))
    assert [type(v) for v in nested[:2]] == [int, int] and nested[3:] == [float(2 ** 60), "-0.0", 1e300]
    assert decode_array(nested, "float64").tobytes() == a.tobytes()


def test_a_targets_release_is_written_where_it_changes(tmp_path):
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import read_results
    spec, x, g = synthetic.tie_case()
    recs = [{**synthetic.result(case_id, "ties", spec, x, g, framework="jax", variant="jit", run_id="r"),
             "framework_version": version}
            for case_id, version in (("a", "0.10.2"), ("b", "0.10.2"), ("c", "0.9.0"), ("d", "0.9.0"))]
    path, lines = _written(tmp_path, recs)
    assert [r.get("framework_version") for r in lines if r["record"] == "result"] == ["0.10.2", None, "0.9.0", None]
    _, results = read_results(path)
    assert [r["framework_version"] for r in results] == ["0.10.2", "0.10.2", "0.9.0", "0.9.0"]


def test_a_gz_results_file_reads_the_same_and_a_killed_runs_up_to_its_last_flush(tmp_path):
    from poolgrad.reports import synthetic
    from poolgrad.reports.records import ResultsWriter, open_results, read_results
    spec, x, g = synthetic.tie_case()
    recs = [synthetic.result(f"tie{i}", "ties", spec, x, g, framework="torch", variant="eager", run_id="r")
            for i in range(3)]
    plain, packed = tmp_path / "r.jsonl", tmp_path / "r.jsonl.gz"
    flushed = []  # the .gz file's size after each record's flush
    for path in (plain, packed):
        with open_results(path) as fh:
            writer = ResultsWriter(fh)
            for rec in recs:
                writer.write(rec)
                fh.flush()  # what the writer does every FLUSH_S
                flushed.append(path.stat().st_size)
    flushed = flushed[len(recs):]
    assert read_results(packed) == read_results(plain)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic
    killed = tmp_path / "killed.jsonl.gz"  # no trailer: the process died after the last flush
    killed.write_bytes(packed.read_bytes()[:flushed[-1]])
    assert read_results(killed) == read_results(plain)
    cut = tmp_path / "cut.jsonl.gz"  # died while writing the third: the two flushed read back
    cut.write_bytes(packed.read_bytes()[:flushed[1] + 2])
    assert read_results(cut)[1] == read_results(plain)[1][:2]
