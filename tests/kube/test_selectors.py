"""Label/field selector parsing and matching (pure functions)."""

from __future__ import annotations

import pytest

from devstack.kube.selectors import (
    SelectorError,
    fields_match,
    label_selector_from_object,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "n": "5"}


@pytest.mark.parametrize("text,expected", [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("missing!=x", True),
    ("app in (web,db)", True),
    ("app in (db)", False),
    ("app notin (db, cache)", True),
    ("missing notin (a)", True),
    ("app", True),
    ("!app", False),
    ("!missing", True),
    ("app=web,tier=back", False),
    ("app=web, tier in (front)", True),
    ("n>4", True),
    ("n<5", False),
    ("example.com/key", False),
])
def test_label_selectors(text: str, expected: bool) -> None:
    assert labels_match(parse_label_selector(text), LABELS) is expected


@pytest.mark.parametrize("text", ["app in ()", "a b", "=x", "app=bad value", "app in (a", "-bad=1"])
def test_bad_label_selectors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_label_selector_object() -> None:
    sel = label_selector_from_object({"matchLabels": {"app": "web"},
                                      "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]},
                                                           {"key": "gone", "operator": "DoesNotExist"}]})
    assert labels_match(sel, LABELS)
    assert not labels_match(sel, {"app": "web", "tier": "back"})
    assert label_selector_from_object({}) == ()
    with pytest.raises(SelectorError):
        label_selector_from_object({"matchExpressions": [{"key": "a", "operator": "Near"}]})


def test_field_selectors() -> None:
    obj = {"metadata": {"name": "a", "namespace": "ns1"}}
    supported = ("metadata.name", "metadata.namespace")
    assert fields_match(parse_field_selector("metadata.name=a", supported), obj)
    assert fields_match(parse_field_selector("metadata.name==a,metadata.namespace=ns1", supported), obj)
    assert not fields_match(parse_field_selector("metadata.name!=a", supported), obj)
    assert fields_match(parse_field_selector("metadata.namespace!=other", supported), obj)
    with pytest.raises(SelectorError):
        parse_field_selector("spec.foo=1", supported)
    with pytest.raises(SelectorError):
        parse_field_selector("metadata.name", supported)
