"""Patch functions (pure)."""

from __future__ import annotations

import pytest

from devstack.kube.patching import (
    PatchApplyError,
    PatchDecodeError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    patch = {"a": "z", "c": {"f": None}, "l": [3]}
    assert merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}, "l": [3]}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}  # untouched
    assert merge_patch({"a": 1}, ["x"]) == ["x"]


def test_json_patch_ops_and_errors() -> None:
    doc = {"metadata": {"annotations": {"x/y": "1"}}}
    out = json_patch(doc, [{"op": "add", "path": "/metadata/annotations/a~1b", "value": "2"},
                           {"op": "test", "path": "/metadata/annotations/x~1y", "value": "1"}])
    assert out["metadata"]["annotations"] == {"x/y": "1", "a/b": "2"}
    with pytest.raises(PatchApplyError):
        json_patch(doc, [{"op": "test", "path": "/metadata/annotations/x~1y", "value": "2"}])
    with pytest.raises(PatchApplyError):
        json_patch(doc, [{"op": "add", "path": "/spec/missing/x", "value": 1}])
    with pytest.raises(PatchDecodeError):
        json_patch(doc, {"op": "add"})
    with pytest.raises(PatchDecodeError):
        json_patch(doc, [{"op": "frobnicate", "path": "/a"}])


def test_strategic_merge_patch_simplified() -> None:
    target = {
        "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
        "spec": {"template": {"spec": {"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}]}},
                 "args": ["a", "b"]},
    }
    patch = {
        "metadata": {"labels": {"b": None, "c": "3"}, "finalizers": ["y"]},
        "spec": {"template": {"spec": {"containers": [{"name": "c2", "image": "new"}, {"name": "c3", "image": "i3"}]}},
                 "args": ["z"], "$setElementOrder/x": []},
    }
    out = strategic_merge_patch(target, patch)
    assert out["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert out["metadata"]["finalizers"] == ["x", "y"]
    assert out["spec"]["template"]["spec"]["containers"] == [
        {"name": "c1", "image": "i1"}, {"name": "c2", "image": "new"}, {"name": "c3", "image": "i3"}]
    assert out["spec"]["args"] == ["z"]
    assert "$setElementOrder/x" not in out["spec"]
    deleted = strategic_merge_patch(out, {"spec": {"template": {"spec": {"containers": [{"name": "c1", "$patch": "delete"}]}}}})
    assert [c["name"] for c in deleted["spec"]["template"]["spec"]["containers"]] == ["c2", "c3"]
