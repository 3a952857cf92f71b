"""``Combination``: the typed ``EXTRACTOR+FORMAT`` value, its spelling and its checks."""

from __future__ import annotations

import pytest

from kgwise.errors import ConfigError
from kgwise.inject import ARMS, DEFAULT_COMBO, PAPER_COMBINATIONS, Combination, arm_name


def test_parse_and_str_round_trip_the_cli_and_json_spelling() -> None:
    c = Combination.parse(" P_RL+F_g ")
    assert c == Combination("P_RL", "F_g") and (c.extractor, c.format) == ("P_RL", "F_g")
    assert str(c) == "P_RL+F_g" and Combination.parse(c) is c
    assert str(DEFAULT_COMBO) == "P_sub+F_s"
    assert [str(x) for x in PAPER_COMBINATIONS] == list(ARMS) == [
        "P_sub+F_t", "P_sub+F_s", "P_sub+F_g", "P_RL+F_t", "P_RL+F_s", "P_RL+F_g"]
    assert arm_name("P_sub", "F_t") == "P_sub+F_t"


@pytest.mark.parametrize(("text", "message"), [
    ("P_sub", "write EXTRACTOR\\+FORMAT"), ("P_sub+", "write EXTRACTOR"), ("+F_s", "write EXTRACTOR"),
    ("P_sub+F_s+F_t", "write EXTRACTOR"), ("P_x+F_s", "unknown extractor 'P_x' in 'P_x\\+F_s'; registered: "
                                                       "P_sub, P_RL"),
    ("P_sub+F_x", "unknown knowledge format 'F_x' in 'P_sub\\+F_x'; registered: F_t, F_s, F_g"),
])
def test_bad_combinations_are_refused_with_the_registered_names(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Combination.parse(text)
