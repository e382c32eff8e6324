"""common.field_selector: the grammar kube-apiserver accepts for metadata.name / metadata.namespace."""

from __future__ import annotations

import pytest

from fedplace.common.field_selector import FieldSelector, Term


def obj(name: str, namespace: str | None = None) -> dict:
    return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}


@pytest.mark.parametrize("text, name, namespace, expected", [
    ("", "a", "x", True),
    ("metadata.name=a", "a", "x", True),
    ("metadata.name==a", "b", "x", False),
    ("metadata.name!=a", "a", "x", False),
    ("metadata.namespace!=kube-system,metadata.namespace!=opa", "a", "opa", False),
    ("metadata.namespace!=kube-system,metadata.namespace!=opa", "a", "apps", True),
    ("metadata.namespace=", "a", None, True),  # a cluster-scoped object has the empty namespace
    (r"metadata.name=a\,b", "a,b", None, True),
    (r"metadata.name!=a\=b", "a=b", None, False),
])
def test_matches_as_the_api_server_does(text: str, name: str, namespace: str | None, expected: bool):
    assert FieldSelector.parse(text).matches(obj(name, namespace)) is expected


def test_round_trips_as_the_query_value():
    text = r"metadata.namespace!=kube-system,metadata.name=a\,b\=c"
    parsed = FieldSelector.parse(text)
    assert parsed.terms == (Term("metadata.namespace", "kube-system", True), Term("metadata.name", "a,b=c"))
    assert str(parsed) == text and FieldSelector.parse(str(parsed)) == parsed
    assert not FieldSelector.parse(None) and str(FieldSelector.parse(" ")) == ""


@pytest.mark.parametrize("text, fragment", [
    ("spec.nodeName=n1", "only metadata.name and metadata.namespace"),
    ("metadata.name", "no operator"),
    ("metadata.name=a=b", "unescaped operator"),
    ("metadata.name=a\\", "ends with an escape"),
])
def test_refusals_name_the_term(text: str, fragment: str):
    with pytest.raises(ValueError, match=fragment):
        FieldSelector.parse(text)
