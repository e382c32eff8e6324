"""The canonical annotation values and the patches built from them."""

import jsonpatch
import pytest

from fedplace.common.annotations import (
    annotation_json_patch,
    annotation_merge_patch,
    annotations_to_change,
    canonical_value,
    escape_json_pointer,
)

PREFS = "federation.kubernetes.io/replica-set-preferences"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("plain", "plain"),
        ({"b": 1, "a": [2, {"d": 1, "c": None}]}, '{"a":[2,{"c":null,"d":1}],"b":1}'),
        (3, "3"),
        (True, "true"),
        (None, "null"),
        ({"zoné": "é"}, '{"zoné":"é"}'),
    ],
)
def test_canonical_value(value, expected):
    assert canonical_value(value) == expected


def test_escape_json_pointer_escapes_tilde_before_slash():
    assert escape_json_pointer("a/b~c") == "a~1b~0c"
    assert escape_json_pointer("~1") == "~01"


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "ReplicaSet"},
        {"metadata": None},
        {"metadata": {"name": "x"}},
        {"metadata": {"name": "x", "annotations": None}},
        {"metadata": {"name": "x", "annotations": {"keep": "me", PREFS: "old"}}},
    ],
)
def test_patch_applies_cleanly_and_policy_wins(obj):
    desired = {PREFS: {"clusters": {"eu-1": {"weight": 1}}}, "x~y/z": "v"}
    ops = annotation_json_patch(obj, desired)
    result = jsonpatch.apply_patch(obj, ops)
    ann = result["metadata"]["annotations"]
    assert ann[PREFS] == '{"clusters":{"eu-1":{"weight":1}}}'
    assert ann["x~y/z"] == "v"
    if (obj.get("metadata") or {}).get("annotations"):
        assert ann["keep"] == "me"


def test_no_patch_when_nothing_changes():
    obj = {"metadata": {"annotations": {PREFS: '{"a":1,"b":2}'}}}
    assert annotation_json_patch(obj, {PREFS: {"b": 2, "a": 1}}) == []


def test_existing_key_is_replaced_new_key_added():
    obj = {"metadata": {"annotations": {"a": "1"}}}
    ops = annotation_json_patch(obj, {"a": "2", "b/c": "3"})
    assert ops == [
        {"op": "replace", "path": "/metadata/annotations/a", "value": "2"},
        {"op": "add", "path": "/metadata/annotations/b~1c", "value": "3"},
    ]


def test_changes_and_merge_patch():
    changes = annotations_to_change({"a": "1", "b": '{"x":1}'}, {"a": "1", "b": {"x": 2}, "c": [1]})
    assert changes == {"b": '{"x":2}', "c": "[1]"}
    assert annotation_merge_patch(changes) == {"metadata": {"annotations": changes}}
