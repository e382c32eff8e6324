"""common.list_items: a list answer's items, parsed one by one as its bytes arrive."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from fedplace.common.list_items import ListItems

SEED = 20261127


def nasty(rng: random.Random, depth: int = 0) -> Any:
    """A value whose text holds what an item's end looks like: '},{"metadata":', '}]', quotes."""
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice(['},{"metadata":', "}]", '"}],', "x", 1, 2.5, None, True, "ü}", ""])
    if roll < 0.6:
        return [nasty(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["metadata", "spec", "}", "items"]): nasty(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def answer(rng: random.Random) -> dict[str, Any]:
    items = []
    for i in range(rng.randint(0, 6)):
        item: dict[str, Any] = {"metadata": {"name": f"o{i}"}, "spec": nasty(rng)}
        if rng.random() < 0.3:  # a StatefulSet's claims begin as its items do
            item["spec"] = {"volumeClaimTemplates": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}
        items.append(item)
    if rng.random() < 0.25:  # custom resources begin with apiVersion
        items = [{"apiVersion": "example.com/v1", "kind": "Thing", **item} for item in items]
    return {"kind": "ThingList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rng.randint(1, 99))},
            "items": items}


def read(raw: bytes, rng: random.Random) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Feed ``raw`` in random pieces; (the items, the head)."""
    reader, got, at = ListItems(), [], 0
    while at < len(raw):
        size = rng.choice([1, 2, 7, 40, 4096])
        got += reader.feed(raw[at:at + size])
        at += size
    reader.close()
    return got, reader.head


def test_any_pieces_give_the_items_the_whole_answer_has():
    rng = random.Random(SEED)
    for _ in range(1500):
        doc = answer(rng)
        # A built-in type's order, or a custom resource's (keys sorted: items before metadata).
        raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=rng.random() < 0.5,
                         sort_keys=rng.random() < 0.5).encode()
        got, head = read(raw, rng)
        assert got == doc["items"], raw
        assert head == {"kind": "ThingList", "apiVersion": "v1", "metadata": doc["metadata"]}


def test_null_and_empty_items():
    rng = random.Random(SEED)
    for items in ("null", "[]", " [ ] "):
        raw = b'{"kind":"L","metadata":{"resourceVersion":"3"},"items":' + items.encode() + b"}"
        assert read(raw, rng) == ([], {"kind": "L", "metadata": {"resourceVersion": "3"}})


def test_items_arrive_as_soon_as_they_are_complete():
    reader = ListItems()
    assert reader.feed(b'{"kind":"L","metadata":{},"items":[{"metadata":{"name":"a"}}') == []  # may go on
    assert reader.feed(b',{"metadata":{"name":"b"}') == [{"metadata": {"name": "a"}}]
    assert reader.feed(b"}]}") == [{"metadata": {"name": "b"}}]
    reader.close()


@pytest.mark.parametrize("raw", [
    b'{"kind":"L","metadata":{},"items":[{"metadata":{}}',  # cut after an item
    b'{"kind":"L","metadata":{},"items":[{"metadata":{"na',  # cut inside one
    b'{"kind":"L","metadata":{}',  # no items at all
    b"",
])
def test_an_answer_cut_short_is_an_error(raw):
    reader = ListItems()
    reader.feed(raw)
    with pytest.raises(ValueError, match="ended before its items did"):
        reader.close()


def test_what_follows_the_items_is_part_of_the_head():
    reader = ListItems()
    assert reader.feed(b'{"apiVersion":"x/v1","items":[{"apiVersion":"x/v1","kind":"C"}],') == [
        {"apiVersion": "x/v1", "kind": "C"}]
    assert reader.head == {"apiVersion": "x/v1"}
    reader.feed(b'"kind":"CList","metadata":{"resourceVersion":"9"}}')
    reader.close()
    assert reader.head == {"apiVersion": "x/v1", "kind": "CList", "metadata": {"resourceVersion": "9"}}


@pytest.mark.parametrize("raw, message", [
    (b'{"kind":"L","items":[],"metadata":{}]', "not the rest of a JSON object"),
    (b'{"kind":"L","items":[] x', "does not end after its items"),
    (b'{"kind":"L","items":[],"metadata":{"resourceVersion":"3"}', "not the rest of a JSON object"),  # cut
])
def test_an_answer_that_does_not_end_as_an_object_is_an_error(raw, message):
    reader = ListItems()
    reader.feed(raw)
    with pytest.raises(ValueError, match=message):
        reader.close()


@pytest.mark.parametrize("raw, message", [
    (b'{"kind":"L","metadata":{},"items":{"a":1}}', "not a list"),
    (b'{"kind":"L","metadata":{},"items":[1,2]}', "not a JSON object"),
    (b'[1,{"items":[]}]', "not a JSON object"),
])
def test_an_answer_that_is_not_a_list_is_an_error(raw, message):
    with pytest.raises(ValueError, match=message):
        ListItems().feed(raw)
