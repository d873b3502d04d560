"""Case files: exact round trips, defaults, and one clear line for every kind of bad file."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from poolgrad.cases import CaseFileError, catalogue, load_case_file, routing_probe, write_case_file
from poolgrad.cases.model import default_grad_output, make_case
from poolgrad.reference import DTYPES, PoolSpec


def _bits(a: np.ndarray) -> bytes:
    return a.dtype.str.encode() + repr(a.shape).encode() + a.tobytes()


def _assert_same(written, loaded):
    assert [c.id for c in loaded] == [c.id for c in written]
    for a, b in zip(written, loaded):
        assert (a.family, a.spec) == (b.family, b.spec), a.id
        assert _bits(a.input) == _bits(b.input) and _bits(a.grad_output) == _bits(b.grad_output), a.id


def test_catalogue_round_trips_bit_for_bit(tmp_path):
    cases = catalogue()
    write_case_file(cases, tmp_path / "all.json")
    _assert_same(cases, load_case_file(tmp_path / "all.json"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_special_values_round_trip(tmp_path, dtype):
    info = ml_dtypes.finfo(DTYPES[dtype])
    values = [-0.0, 0.0, np.nan, np.inf, -np.inf, float(info.smallest_subnormal), float(info.max),
              -float(info.smallest_normal), 0.1, 1 / 3]
    spec = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 1, "dtype": dtype})
    case = make_case("specials", "user", spec, np.array(values).reshape(1, 1, -1))
    write_case_file([case], tmp_path / "s.json")
    _assert_same([case], load_case_file(tmp_path / "s.json"))
    text = (tmp_path / "s.json").read_text()
    assert '"-0.0"' in text and '"nan"' in text and '"-inf"' in text


def test_empty_batch_round_trips_with_its_shape(tmp_path):
    case = next(c for c in catalogue() if c.family == "empty_batch" and c.spec.rank == 3)
    write_case_file([case], tmp_path / "e.json")
    (back,) = load_case_file(tmp_path / "e.json")
    assert back.input.shape == case.input.shape and back.grad_output.shape == case.grad_output.shape


def _file(tmp_path, *cases, **top):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"format": "poolgrad-cases/1", "cases": list(cases), **top}))
    return path


GOOD = {"id": "mine", "op": "max_pool", "kernel_size": 2, "input": [[[1, "-0.0", "nan", 0.1]]]}


def test_defaults_dtype_rank_family_and_probe(tmp_path):
    (case,) = load_case_file(_file(tmp_path, GOOD))
    assert case.family == "user" and case.spec.dtype == "float32" and case.spec.rank == 1
    assert case.input.dtype == np.float32 and case.input[0, 0, 3] == np.float32(0.1)
    assert np.signbit(case.input[0, 0, 1]) and np.isnan(case.input[0, 0, 2])
    assert _bits(case.grad_output) == _bits(default_grad_output(case.spec, case.input.shape))
    assert _bits(case.grad_output) == _bits(routing_probe((1, 1, 2), "float32", 1))


def test_numbers_are_rounded_to_the_dtype(tmp_path):
    (case,) = load_case_file(_file(tmp_path, {**GOOD, "dtype": "bfloat16", "input": [[[1.00390625, 3]]],
                                              "grad_output": [[[0.3]]]}))
    assert case.input.dtype == ml_dtypes.bfloat16 and float(case.input[0, 0, 0]) == 1.0
    assert case.grad_output[0, 0, 0] == ml_dtypes.bfloat16(0.3)


BAD = [
    # (name, file text or case list, expected case label, expected field)
    ("not_json", '{"format": "poolgrad-cases/1", "cases": [}', None, "json"),
    ("nan_literal", '{"format": "poolgrad-cases/1", "cases": [{"id": "a", "input": NaN}]}', None, "json"),
    ("top_not_object", "[1, 2]", None, "format"),
    ("missing_format", '{"cases": []}', None, "format"),
    ("wrong_format", '{"format": "poolgrad-cases/2", "cases": []}', None, "format"),
    ("unknown_top_key", '{"format": "poolgrad-cases/1", "cases": [], "extra": 1}', None, "extra"),
    ("cases_not_list", '{"format": "poolgrad-cases/1", "cases": {}}', None, "cases"),
    ("case_not_object", [GOOD, 3], "#1", "case"),
    ("missing_id", [GOOD, {k: v for k, v in GOOD.items() if k != "id"}], "#1", "id"),
    ("id_not_string", [{**GOOD, "id": 7}], "#0", "id"),
    ("duplicate_id", [GOOD, GOOD], "#1", "id"),
    ("unknown_key", [{**GOOD, "kernal_size": 2}], "mine", "kernal_size"),
    ("unknown_dtype", [{**GOOD, "dtype": "float8"}], "mine", "dtype"),
    ("unknown_op", [{**GOOD, "op": "median_pool"}], "mine", "op"),
    ("bad_spec_value", [{**GOOD, "kernel_size": 0}], "mine", "kernel_size"),
    ("option_of_other_op", [{**GOOD, "norm_type": 2}], "mine", "norm_type"),
    ("kernel_larger_than_input", [{**GOOD, "kernel_size": 9}], "mine", "kernel_size"),
    ("rank_mismatch", [{**GOOD, "op": "max_pool2d"}], "mine", "input"),
    ("missing_input", [{k: v for k, v in GOOD.items() if k != "input"}], "mine", "input"),
    ("ragged", [{**GOOD, "input": [[[1, 2], [3]]]}], "mine", "input"),
    ("ragged_depth", [{**GOOD, "input": [[[1, 2], [3, [4]]]]}], "mine", "input"),
    ("not_nchw", [{**GOOD, "input": [[1, 2, 3]]}], "mine", "input"),
    ("too_deep", [{**GOOD, "input": [[[[[[[1]]]]]]]}], "mine", "input"),
    ("bad_string", [{**GOOD, "input": [[[1, "__import__('os')"]]]}], "mine", "input"),
    ("bool_value", [{**GOOD, "input": [[[1, True]]]}], "mine", "input"),
    ("huge_integer", [{**GOOD, "input": [[[1, 10 ** 400]]]}], "mine", "input"),
    ("grad_output_shape", [{**GOOD, "grad_output": [[[1, 2, 3]]]}], "mine", "grad_output"),
    ("grad_output_ragged", [{**GOOD, "grad_output": [[[1], 2]]}], "mine", "grad_output"),
    ("bad_shape_key", [{**GOOD, "shape": "1x1x4"}], "mine", "shape"),
    ("shape_disagrees", [{**GOOD, "shape": [1, 1, 5]}], "mine", "shape"),
    ("empty_family", [{**GOOD, "family": ""}], "mine", "family"),
    ("too_many_elements", [{**GOOD, "input": [[[0.0] * 11]]}], "mine", "input"),
]


@pytest.mark.parametrize("name, content, label, field", BAD, ids=[b[0] for b in BAD])
def test_bad_file_gives_one_line_naming_case_and_field(tmp_path, name, content, label, field):
    if isinstance(content, str):
        path = tmp_path / "cases.json"
        path.write_text(content)
    else:
        path = _file(tmp_path, *content)
    with pytest.raises(CaseFileError) as info:
        load_case_file(path, max_elements=10)
    err = info.value
    message = str(err)
    assert "\n" not in message and message.startswith(str(path))
    assert (err.case, err.field) == (label, field)
    assert f": {field}: " in message
    if label is not None:
        assert (label if label.startswith("#") else repr(label)) in message
    if name == "not_json":
        assert "line 1 column" in message


def test_missing_file_is_a_case_file_error(tmp_path):
    with pytest.raises(CaseFileError, match="cannot be read"):
        load_case_file(tmp_path / "absent.json")


def test_spec_error_keeps_the_reference_message(tmp_path):
    with pytest.raises(CaseFileError, match=r"case 'mine': kernel_size: window extent 9 .* larger than"):
        load_case_file(_file(tmp_path, {**GOOD, "kernel_size": 9}))


def test_draws_of_a_case_are_the_same_family_and_group_under_its_id_and_a_number():
    spec = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "dtype": "float32"})
    other = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 3, "dtype": "float32"})

    def case(cid, family="ties", s=spec, n=4):
        return make_case(cid, family, s, np.arange(n, dtype=np.float32)[None, None])
    cases = [case("a"), case("a~2"), case("b~1"), case("a~1"), case("a~0"), case("a~x"), case("a~1~1"),
             case("a~3", family="nan"), case("a~4", s=other), case("a~5", n=6), case("b")]
    from poolgrad.cases.model import with_draws
    tests = [(c.id, [d.id for d in draws]) for c, draws in with_draws(cases)]
    # in the cases' order: a draw before its case (b~1) is still the case's
    assert tests == [("a", ["a~2", "a~1"]), ("a~0", []), ("a~x", []), ("a~1~1", []), ("a~3", []), ("a~4", []),
                     ("a~5", []), ("b", ["b~1"])]
    assert [c.id for c, _ in with_draws(catalogue(1))] == [c.id for c in catalogue(1)]
