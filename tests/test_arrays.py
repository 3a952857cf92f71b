"""``kgwise.arrays``: exact round trips, old list form, bad input named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kgwise.arrays import decode_array, encode_array


@given(hnp.arrays(st.sampled_from([np.float64, np.float32, np.int64]),
                  hnp.array_shapes(min_dims=0, max_dims=3)))
def test_round_trip_is_exact_through_json(a: np.ndarray) -> None:
    back = decode_array(json.loads(json.dumps(encode_array(a))), a.dtype)
    assert back.shape == a.shape and back.dtype == a.dtype
    np.testing.assert_array_equal(back, a)


def test_lists_of_numbers_are_read_as_they_are() -> None:
    np.testing.assert_array_equal(decode_array([[1.0, 2.5], [3.0, 4.0]]), np.array([[1.0, 2.5], [3.0, 4.0]]))


@pytest.mark.parametrize("v, match", [
    ({"dtype": "float64", "shape": [3], "base64": "AAAAAAAAAAA="}, "holds 1"),
    ({"dtype": "complex", "shape": [1], "base64": ""}, "dtype"), ({"shape": [1]}, "dtype"),
    ("1.0", "got str")])
def test_bad_input_is_named(v: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decode_array(v)
