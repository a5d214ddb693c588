"""The naming conventions and the integer check: one function each, round trips."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dgpbench._validation import IntegerError, check_int
from dgpbench.naming import (
    MODEL_ID_PATTERN,
    ModelId,
    feature_key,
    model_id,
    parse_feature_key,
    parse_model_id,
)

positive = st.integers(1, 10**6)


@given(hidden=positive, layers=positive, seed=st.integers(0, 10**9))
def test_model_id_round_trip(hidden, layers, seed):
    text = model_id(hidden, layers, seed)
    assert text == f"h{hidden}-l{layers}-s{seed}"  # the documented layout
    assert re.fullmatch(MODEL_ID_PATTERN, text)
    assert parse_model_id(text) == ModelId(hidden, layers, seed)
    assert model_id(*parse_model_id(text)) == text


def test_model_id_accepts_numpy_integers():
    assert model_id(np.int64(650), np.int32(4), np.uint8(3)) == "h650-l4-s3"


@pytest.mark.parametrize(
    "bad", ["", "h16-l2", "h16-l2-s0-x", "H16-l2-s0", "h16-l2-s-1", "hx-l2-s0", " h16-l2-s0"]
)
def test_parse_model_id_rejects_other_text(bad):
    with pytest.raises(ValueError, match="model id"):
        parse_model_id(bad)
    assert re.fullmatch(MODEL_ID_PATTERN, bad) is None


@pytest.mark.parametrize(
    ("args", "name"), [((0, 2, 0), "hidden"), ((16, 0, 0), "layers"), ((16, 2, -1), "seed")]
)
def test_model_id_rejects_out_of_range_parts(args, name):
    with pytest.raises(ValueError, match=name):
        model_id(*args)


@given(code=st.from_regex(r"[A-Za-z0-9]+", fullmatch=True), intensity=st.integers(0, 10**6))
def test_feature_key_round_trip(code, intensity):
    key = feature_key(code, intensity)
    assert key == f"{code}_{intensity}"
    assert parse_feature_key(key) == (code, intensity)


@pytest.mark.parametrize("bad", ["GN", "GN_", "_3", "GN_x", "GN_3_1", "clean", "GN_-1"])
def test_parse_feature_key_rejects_other_keys(bad):
    with pytest.raises(ValueError, match="feature key"):
        parse_feature_key(bad)


@pytest.mark.parametrize("code", ["", "G_N", "G N"])
def test_feature_key_rejects_codes_that_would_not_parse(code):
    with pytest.raises(ValueError, match="corruption code"):
        feature_key(code, 1)


@given(value=st.integers(-(10**12), 10**12), minimum=st.integers(-5, 5))
def test_check_int_accepts_exactly_integers_at_or_above_the_minimum(value, minimum):
    if value >= minimum:
        assert check_int(value, "x", minimum=minimum) == value
        assert type(check_int(np.int64(value), "x", minimum=minimum)) is int
    else:
        with pytest.raises(ValueError, match=f"x must be >= {minimum}"):
            check_int(value, "x", minimum=minimum)


@pytest.mark.parametrize("bad", [True, False, 2.0, 2.5, "3", None, np.float64(3.0)])
def test_check_int_refuses_non_integers_as_value_and_type_error(bad):
    with pytest.raises(IntegerError, match="n_draws must be an integer"):
        check_int(bad, "n_draws")
    assert issubclass(IntegerError, ValueError) and issubclass(IntegerError, TypeError)


@given(hidden=positive, layers=positive, seed=st.integers(0, 10**9))
def test_cnn_model_id_round_trip(hidden, layers, seed):
    text = model_id(hidden, layers, seed, kind="cnn")
    assert text == f"cnn-h{hidden}-l{layers}-s{seed}"
    assert re.fullmatch(MODEL_ID_PATTERN, text)
    assert parse_model_id(text) == ModelId(hidden, layers, seed, "cnn")
    assert model_id(*parse_model_id(text)) == text
    assert parse_model_id(model_id(hidden, layers, seed)).kind == "mlp"


@pytest.mark.parametrize("bad", ["mlp-h16-l2-s0", "cnnh16-l2-s0", "CNN-h16-l2-s0", "cnn-"])
def test_other_kind_prefixes_are_not_model_ids(bad):
    with pytest.raises(ValueError, match="model id"):
        parse_model_id(bad)
    assert re.fullmatch(MODEL_ID_PATTERN, bad) is None


def test_model_id_rejects_unknown_kind():
    with pytest.raises(ValueError, match="model kind"):
        model_id(16, 2, 0, kind="vgg")
