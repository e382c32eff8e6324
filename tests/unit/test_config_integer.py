"""common.config.integer: the one integer-in-range check every configuration uses."""

from __future__ import annotations

from typing import Any

import pytest

from fedplace.common.config import ConfigError, integer


@pytest.mark.parametrize("value, expected", [(1, 1), (7, 7), (10, 10)])
def test_an_integer_within_the_bounds_is_returned(value: int, expected: int) -> None:
    assert integer({"n": value}, "n", "s.n", 3, minimum=1, maximum=10) == expected


def test_the_default_applies_when_the_key_is_absent() -> None:
    assert integer({}, "n", "s.n", 3, minimum=1) == 3


@pytest.mark.parametrize("value, message", [
    (True, "s.n: True: must be an integer from 1 to 10"),
    (2.0, "s.n: 2.0: must be an integer from 1 to 10"),
    ("2", "s.n: '2': must be an integer from 1 to 10"),
    (0, "s.n: 0: must be an integer from 1 to 10"),
    (11, "s.n: 11: must be an integer from 1 to 10"),
    (None, "s.n: None: must be an integer from 1 to 10"),
])
def test_anything_else_names_the_setting_and_the_range(value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        integer({"n": value}, "n", "s.n", 3, minimum=1, maximum=10)
    assert str(err.value) == message
    assert err.value.field == "s.n"


def test_without_a_maximum_the_message_gives_the_minimum() -> None:
    with pytest.raises(ConfigError, match=r"^max_body_bytes: 10: must be an integer >= 1024$"):
        integer({"max_body_bytes": 10}, "max_body_bytes", "max_body_bytes", 4096, minimum=1024)


def test_a_missing_value_without_a_default_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"^p: None: must be an integer from 1 to 65535$"):
        integer({}, "port", "p", None, minimum=1, maximum=65535)
