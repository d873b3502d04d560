"""The one-dtype comparison, the prepared comparison of one observed array with many, and the
whole-array JSON conversion agree with their element-wise definitions (NaN payloads, signed zeros, subnormals, infinities, every case dtype)."""

import json
import math

import ml_dtypes
import numpy as np
import pytest

from poolgrad.json_values import decode_array, encode_array, float_to_json
from poolgrad.verdicts.compare import identical, identical_to, same_bits
from poolgrad.verdicts.verdict import json_value

VALUES = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 1e-40, 6e-8, 2.5, 65504.0]
DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_same_bits_is_equal_value_and_sign_or_both_nan(dtype):
    with np.errstate(over="ignore"):
        v = np.array(VALUES).astype(dtype)
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    payload = a.copy()
    payload.view(f"u{a.itemsize}")[np.isnan(a)] |= 1   # another NaN payload is still NaN
    for got in (a, payload):
        a64, b64 = got.astype(np.float64), b.astype(np.float64)
        want = ((a64 == b64) & (np.signbit(a64) == np.signbit(b64))) | (np.isnan(a64) & np.isnan(b64))
        assert (same_bits(got, b) == want).all()
        assert (same_bits(got, b.astype(np.float64)) == want).all()   # across dtypes: widened


@pytest.mark.parametrize("dtype", DTYPES)
def test_identical_to_is_identical(dtype):
    with np.errstate(over="ignore"):
        v = np.array(VALUES).astype(dtype)
    rows = [v, np.where(np.isnan(v.astype(np.float64)), 1, v).astype(dtype), -v, v[::-1]]
    payload = v.copy()
    payload.view(f"u{v.itemsize}")[np.isnan(v)] |= 1
    rows += [payload, rows[1].copy()]
    others = rows + [rows[1].astype(np.float64), rows[1][:-1], None]
    for observed in rows:
        same = identical_to(observed)
        assert [same(e) for e in others] == [identical(observed, e) for e in others]
        assert same(observed.copy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_json_value_of_an_array_is_the_codecs_and_reads_back_bit_for_bit(dtype):
    with np.errstate(over="ignore"):
        a = np.array(VALUES).astype(dtype).reshape(3, 4)
    finite = a[np.isfinite(a.astype(np.float64)) & ~np.signbit(a.astype(np.float64))]
    for part in (a, finite, np.asarray(a[0, 0])):   # a 0-d array too
        written = json.loads(json.dumps(json_value(part)))
        assert written == encode_array(part)
        back = decode_array(written, dtype)
        assert same_bits(back, part).all()  # NaN reads back as NaN (its payload and sign are not kept)
