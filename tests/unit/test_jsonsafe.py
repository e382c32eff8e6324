"""common.jsonsafe: orjson where it gives the very document json gives; json's answer elsewhere."""

from __future__ import annotations

import json

import pytest

from fedplace.common.jsonsafe import JsonRejected, dumps, json_depth, loads, loads_bounded
from fedplace.common.logs import JsonFormatter


@pytest.mark.parametrize("raw", [
    b'{"a": [1, 2.5, -0.0, 1e308, "\\u00e9", null, true]}',
    b'{"big": 123456789012345678901234567890, "neg": -9999999999999999999}',  # beyond 64 bits: kept exact
    b'"\\ud800"',  # a lone surrogate escape: json accepts it, orjson does not
    b'\xef\xbb\xbf{"bom": 1}',  # a UTF-8 byte order mark
    '{"utf16": 1}'.encode("utf-16"),
    b'{"a": 1, "a": 2}',
])
def test_same_document_as_json(raw: bytes) -> None:
    expected = json.loads(raw)
    assert loads_bounded(raw) == expected and loads(raw) == expected
    assert type(loads_bounded(raw)) is type(expected)


@pytest.mark.parametrize("raw,message", [
    (b"[NaN]", "not a JSON number"), (b"[-Infinity]", "not a JSON number"), (b"[1e400]", "too large"),
    (b"[1" + b"0" * 5000 + b"]", "not valid JSON"), (b"{", "not valid JSON"), (b"\xff", "not valid JSON"),
])
def test_refusals_say_why(raw: bytes, message: str) -> None:
    with pytest.raises(JsonRejected, match=message):
        loads_bounded(raw)


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert json_depth(b'{"a": "[[[[{{{{", "b": [[1]]}', 3) == 3
    deep = b"[" * 101 + b"]" * 101
    with pytest.raises(JsonRejected, match="nested deeper than 100"):
        loads_bounded(deep)
    many = b"[" + b"[]," * 500 + b"[]]"  # 501 brackets opened, depth 2
    assert loads_bounded(many) == [[]] * 501
    in_strings = json.dumps({"s": "[" * 500}).encode()
    assert loads_bounded(in_strings) == {"s": "[" * 500}


def test_dumps_is_compact_and_falls_back_for_what_orjson_refuses() -> None:
    assert dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert json.loads(dumps({"big": 2**70, "s": "\ud800"})) == {"big": 2**70, "s": "\ud800"}


@pytest.mark.parametrize("extra", [{}, {"big": 2**70}, {"s": "\ud800"}], ids=["orjson", "big-int", "surrogate"])
def test_dumps_writes_non_finite_floats_as_null(extra: dict) -> None:
    doc = {"inf": float("inf"), "neg": [float("-inf")], "nan": {"x": float("nan")}, **extra}
    assert json.loads(dumps(doc), parse_constant=pytest.fail) == {"inf": None, "neg": [None], "nan": {"x": None},
                                                                   **extra}


def test_log_lines_stay_ascii_json() -> None:
    import logging

    fmt = JsonFormatter("c", {"worker": 1})
    record = logging.LogRecord("x", logging.INFO, "f", 1, "m é", None, None)
    record.token = "secret"
    record.count = {1: 2}  # a non-string key: json's way
    line = fmt.format(record)
    assert line.isascii()
    doc = json.loads(line)
    assert doc["msg"] == "m é" and doc["token"] == "[redacted]" and doc["worker"] == 1 and doc["count"] == {"1": 2}
