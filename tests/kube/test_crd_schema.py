"""Structural schemas of CustomResourceDefinitions: the CRDs kube-apiserver 1.24 refuses, and what
it does to custom resources — unknown fields pruned (``x-kubernetes-preserve-unknown-fields`` and
embedded resources respected), defaults applied, objects validated against the schema (422 Invalid
with the causes naming the fields), also after a mutating webhook and on ``/status``.

Every test asserts the same answers on the devstack and on a real kube-apiserver
(``FEDPLACE_TEST_KUBECONFIG``); each uses its own CRDs (a fresh ``*.fedplace.io`` group), deleted
after it. kube-apiserver lists a validation's causes in Go map order: they are compared as sets.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from devstack.federation import CLUSTER_CRD
from devstack.scratch import CRDS_PATH, delete_crd, install_crd

from .helpers import WebhookTLS, assert_status, b64_patch, mwc_body, raw, register_webhook, unique, webhook_server

REPO = Path(__file__).resolve().parents[2]
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["name", "replicas"],
            "properties": {
                "name": {"type": "string", "minLength": 3, "maxLength": 8, "pattern": "^[a-z]+$"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "format": "int32"},
                "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1,
                          "exclusiveMaximum": True},
                "mode": {"type": "string", "enum": ["A", "B"]},
                "level": {"type": "integer", "enum": [1, 2]},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
                "labels": {"type": "object", "additionalProperties": {"type": "string"},
                           "minProperties": 1, "maxProperties": 2},
                "optional": {"type": "string", "nullable": True},
                "plain": {"type": "string"},
                "when": {"type": "string", "format": "date-time"},
                "port": {"x-kubernetes-int-or-string": True},
                "withDefault": {"type": "string", "default": "dflt"},
                "defaulted": {"type": "object", "default": {},
                              "properties": {"inner": {"type": "integer", "default": 5}}},
                "placement": {"type": "object", "properties": {"clusterAffinities": {
                    "type": "array", "items": {"type": "object", "required": ["affinityName"], "properties": {
                        "affinityName": {"type": "string", "minLength": 1},
                        "clusterNames": {"type": "array", "items": {"type": "string"}}}}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "x-kubernetes-preserve-unknown-fields": True},
                "typedTemplate": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {
                    "spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
                "byName": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"weight": {"type": "integer"}}}},
                "anything": {"type": "object", "additionalProperties": True},
                "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                               "items": {"type": "object", "required": ["type"], "properties": {
                                   "type": {"type": "string"}, "status": {"type": "string"}}}},
            },
        },
        "status": {"type": "object", "properties": {
            "phase": {"type": "string", "enum": ["Ready", "Failed"]},
            "count": {"type": "integer", "minimum": 0},
        }},
    },
}
DEFAULTS = {"withDefault": "dflt", "defaulted": {"inner": 5}}


def _group() -> str:
    return f"s{uuid.uuid4().hex[:8]}.fedplace.io"


def crd(group: str, plural: str, kind: str, schema: Any, *, status: bool = False,
        versions: tuple[str, ...] = ("v1",), schemas: list[Any] | None = None) -> dict[str, Any]:
    vs = []
    for i, v in enumerate(versions):
        entry: dict[str, Any] = {"name": v, "served": True, "storage": i == 0,
                                 "schema": {"openAPIV3Schema": copy.deepcopy(schemas[i] if schemas else schema)}}
        if status:
            entry["subresources"] = {"status": {}}
        vs.append(entry)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": kind + "List"},
                     "versions": vs}}


class Widgets:
    """A Widget CRD (``WIDGET_SCHEMA``, status subresource) in a fresh group, and requests to it."""

    def __init__(self, api: client.ApiClient, namespace: str, schema: Any = None, status: bool = True) -> None:
        self.api, self.namespace = api, namespace
        self.group = _group()
        self.body = crd(self.group, "widgets", "Widget", schema or WIDGET_SCHEMA, status=status)
        self.path = f"/apis/{self.group}/v1/namespaces/{namespace}/widgets"

    async def __aenter__(self) -> "Widgets":
        await install_crd(self.api, self.body)
        for _ in range(100):  # a real server serves an Established CRD a moment later
            status, _, _ = await raw(self.api, "GET", self.path)
            if status == 200:
                return self
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.path} never served")

    async def __aexit__(self, *exc: Any) -> None:
        await delete_crd(self.api, self.body["metadata"]["name"])

    def obj(self, name: str, spec: Any, **extra: Any) -> dict[str, Any]:
        return {"apiVersion": f"{self.group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec, **extra}

    async def create(self, body: dict[str, Any], dry: bool = False) -> tuple[int, Any]:
        status, doc, _ = await raw(self.api, "POST", self.path, [("dryRun", "All")] if dry else None, body)
        return status, doc

    async def get(self, name: str) -> dict[str, Any]:
        status, doc, _ = await raw(self.api, "GET", f"{self.path}/{name}")
        assert status == 200, doc
        return doc

    async def send(self, method: str, name: str, body: Any, content_type: str = "application/json",
                   sub: str = "") -> tuple[int, Any]:
        path = f"{self.path}/{name}" + (f"/{sub}" if sub else "")
        status, doc, _ = await raw(self.api, method, path, body=body, content_type=content_type)
        return status, doc


def causes(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(c["field"], c["reason"], c["message"]) for c in doc["details"]["causes"]}


def assert_invalid(status: int, doc: Any, kind: str, name: str, expected: set[tuple[str, str, str]]) -> None:
    """A 422 Invalid naming exactly these causes (field, reason, message); the message lists them."""
    assert status == 422, doc
    assert_status(doc, 422, "Invalid")
    assert causes(doc) == expected, doc
    prefix = f'{kind} "{name}" is invalid: '
    assert doc["message"].startswith(prefix), doc["message"]
    for field, _, message in expected:
        assert f"{field}: {message}" in doc["message"], (field, doc["message"])
    assert doc["details"]["name"] == name


# ---- CRDs --------------------------------------------------------------------------------------------

ROOT = "spec.validation.openAPIV3Schema"
NON_STRUCTURAL: list[tuple[str, Any, set[tuple[str, str, str]]]] = [
    ("no type at the root", {"properties": {"spec": {"type": "object"}}},
     {(f"{ROOT}.type", "FieldValueRequired", "Required value: must not be empty at the root")}),
    ("a string at the root", {"type": "string"},
     {(f"{ROOT}.type", "FieldValueInvalid", 'Invalid value: "string": must be object at the root')}),
    ("a field without type", {"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}},
     {(f"{ROOT}.properties[spec].type", "FieldValueRequired",
       "Required value: must not be empty for specified object fields")}),
    ("an array without items", {"type": "object", "properties": {"spec": {"type": "array"}}},
     {(f"{ROOT}.properties[spec].items", "FieldValueRequired", "Required value: must be specified")}),
    ("array items without type", {"type": "object", "properties": {"spec": {"type": "array", "items": {}}}},
     {(f"{ROOT}.properties[spec].items.type", "FieldValueRequired",
       "Required value: must not be empty for specified array items")}),
    ("additionalProperties with properties", {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}},
     {(f"{ROOT}.properties[spec].additionalProperties", "FieldValueForbidden",
       "Forbidden: additionalProperties and properties are mutual exclusive")}),
    ("additionalProperties at the root", {"type": "object", "additionalProperties": {"type": "string"}},
     {(f"{ROOT}.additionalProperties", "FieldValueForbidden", "Forbidden: must not be used at the root")}),
    ("preserve-unknown-fields false", {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": False}}},
     {(f"{ROOT}.properties[spec].x-kubernetes-preserve-unknown-fields", "FieldValueInvalid",
       "Invalid value: false: must be true or undefined")}),
    ("metadata beyond name", {"type": "object", "properties": {"metadata": {
        "type": "object", "properties": {"labels": {"type": "object"}}}}},
     {(f"{ROOT}.properties[metadata]", "FieldValueForbidden",
       "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly "
       "specified")}),
    ("an embedded resource without fields", {"type": "object", "properties": {"spec": {
        "type": "string", "x-kubernetes-embedded-resource": True}}},
     {(f"{ROOT}.properties[spec].properties", "FieldValueRequired",
       "Required value: must not be empty if x-kubernetes-embedded-resource is true without "
       "x-kubernetes-preserve-unknown-fields"),
      (f"{ROOT}.properties[spec].type", "FieldValueInvalid",
       'Invalid value: "string": must be object if x-kubernetes-embedded-resource is true')}),
    ("a type in anyOf", {"type": "object", "properties": {"spec": {"type": "object", "anyOf": [{"type": "object"}]}}},
     {(f"{ROOT}.properties[spec].anyOf[0].type", "FieldValueForbidden", "Forbidden: must be empty to be structural")}),
    ("$ref", {"type": "object", "properties": {"spec": {"$ref": "#/definitions/x"}}},
     {(f"{ROOT}.properties[spec].$ref", "FieldValueForbidden", "Forbidden: $ref is not supported")}),
    ("an unknown type", {"type": "object", "properties": {"spec": {"type": "foo"}}},
     {(f"{ROOT}.properties[spec].type", "FieldValueNotSupported",
       'Unsupported value: "foo": supported values: "array", "boolean", "integer", "number", "object", "string"')}),
    ("uniqueItems", {"type": "object", "properties": {"spec": {"type": "array", "items": {"type": "string"},
                                                               "uniqueItems": True}}},
     {(f"{ROOT}.properties[spec].uniqueItems", "FieldValueForbidden",
       "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic")}),
    ("a default of the wrong type", {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "n": {"type": "integer", "default": "x"}}}}},
     {(f"{ROOT}.properties[spec].properties[n].default", "FieldValueTypeInvalid",
       'Invalid value: "string":  in body must be of type integer: "string"')}),
    ("a default with unknown fields", {"type": "object", "properties": {"spec": {
        "type": "object", "default": {"a": 1, "zz": 2}, "properties": {"a": {"type": "integer"}}}}},
     {(f"{ROOT}.properties[spec].default", "FieldValueInvalid",
       'Invalid value: map[string]interface {}{"a":1, "zz":2}: must not have unknown fields')}),
    ("a list-map key neither required nor defaulted", {"type": "object", "properties": {"spec": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
        "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}},
     {(f"{ROOT}.properties[spec].items.properties[k].default", "FieldValueRequired",
       "Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required "
       "property")}),
    ("several at once", {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "array"}, "b": {},
        "c": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}}},
     {(f"{ROOT}.properties[spec].properties[a].items", "FieldValueRequired", "Required value: must be specified"),
      (f"{ROOT}.properties[spec].properties[b].type", "FieldValueRequired",
       "Required value: must not be empty for specified object fields"),
      (f"{ROOT}.properties[spec].properties[c].additionalProperties", "FieldValueForbidden",
       "Forbidden: additionalProperties and properties are mutual exclusive")}),
]


@pytest.mark.parametrize("schema,expected", [pytest.param(s, e, id=i) for i, s, e in NON_STRUCTURAL])
async def test_non_structural_crds_are_refused(kube, kube_api: client.ApiClient, schema: Any,
                                               expected: set[tuple[str, str, str]]) -> None:
    body = crd(_group(), "widgets", "Widget", schema)
    status, doc, _ = await raw(kube_api, "POST", CRDS_PATH, [("dryRun", "All")], body)
    assert_invalid(status, doc, "CustomResourceDefinition.apiextensions.k8s.io", body["metadata"]["name"], expected)


async def test_per_version_schemas_are_checked_each(kube, kube_api: client.ApiClient) -> None:
    """Identical schemas are checked once (``spec.validation``), different ones per version."""
    good = {"type": "object", "properties": {"spec": {"type": "object"}}}
    bad = {"type": "object", "properties": {"spec": {"type": "array"}}}
    body = crd(_group(), "widgets", "Widget", None, versions=("v1", "v2"), schemas=[good, bad])
    status, doc, _ = await raw(kube_api, "POST", CRDS_PATH, [("dryRun", "All")], body)
    assert_invalid(status, doc, "CustomResourceDefinition.apiextensions.k8s.io", body["metadata"]["name"],
                   {("spec.versions[1].schema.openAPIV3Schema.properties[spec].items", "FieldValueRequired",
                     "Required value: must be specified")})
    body = crd(_group(), "widgets", "Widget", bad, versions=("v1", "v2"))
    status, doc, _ = await raw(kube_api, "POST", CRDS_PATH, [("dryRun", "All")], body)
    assert_invalid(status, doc, "CustomResourceDefinition.apiextensions.k8s.io", body["metadata"]["name"],
                   {(f"{ROOT}.properties[spec].items", "FieldValueRequired", "Required value: must be specified")})


async def test_an_update_to_a_non_structural_schema_is_refused(kube, kube_api: client.ApiClient,
                                                               kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        name = w.body["metadata"]["name"]
        status, current, _ = await raw(kube_api, "GET", f"{CRDS_PATH}/{name}")
        assert status == 200
        current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tags"] = {
            "type": "array"}
        status, doc, _ = await raw(kube_api, "PUT", f"{CRDS_PATH}/{name}", body=current)
        assert_invalid(status, doc, "CustomResourceDefinition.apiextensions.k8s.io", name,
                       {(f"{ROOT}.properties[spec].properties[tags].items", "FieldValueRequired",
                         "Required value: must be specified")})


def _shipped_crds() -> list[tuple[str, dict[str, Any]]]:
    out = [("devstack/federation.py CLUSTER_CRD", CLUSTER_CRD)]
    for path in sorted((REPO / "deploy" / "components").glob("*/crd.yaml")) + [REPO / "devstack/karmada/crds.yaml"]:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out.append((f"{path.relative_to(REPO)} {doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize("body", [pytest.param(b, id=i) for i, b in _shipped_crds()])
async def test_shipped_crds_are_structural(kube, kube_api: client.ApiClient, body: dict[str, Any]) -> None:
    """A dry-run create passes validation: created, or already there (409, after validation)."""
    status, doc, _ = await raw(kube_api, "POST", CRDS_PATH, [("dryRun", "All")], body)
    assert status in (201, 409), doc


# ---- custom resources: pruning, defaults --------------------------------------------------------------

async def test_unknown_fields_are_pruned(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        body = w.obj("pruned", {
            "name": "abc", "replicas": 2, "unknown": 1,
            "placement": {"clusterAffinities": [{"affinityName": "a", "junk": True}], "junk": 2},
            "free": {"anything": {"x": 1}, "known": {"a": "s", "gone": 1}},
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "junk": 1},
                         "data": {"k": "v"}},
            "typedTemplate": {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "m", "labels": {"a": "b"}},
                              "spec": {"x": "s", "drop": 1}, "other": 1},
            "byName": {"a": {"weight": 1, "extra": 2}},
            "anything": {"a": {"b": 1}, "c": 3},
        }, topLevel=5)
        body["metadata"].update({"labels": {"a": "b"}, "junkMeta": 1, "annotations": {}})
        status, created = await w.create(body)
        assert status == 201, created
        want_spec = {
            "name": "abc", "replicas": 2, **DEFAULTS,
            "placement": {"clusterAffinities": [{"affinityName": "a"}]},
            "free": {"anything": {"x": 1}, "known": {"a": "s"}},
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}, "data": {"k": "v"}},
            "typedTemplate": {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "m", "labels": {"a": "b"}},
                              "spec": {"x": "s"}},
            "byName": {"a": {"weight": 1}},
            "anything": {"a": {}, "c": 3},
        }
        assert created["spec"] == want_spec
        assert set(created) == {"apiVersion", "kind", "metadata", "spec"}
        assert created["apiVersion"] == f"{w.group}/v1" and created["kind"] == "Widget"
        assert created["metadata"]["labels"] == {"a": "b"}
        assert "junkMeta" not in created["metadata"] and "annotations" not in created["metadata"]
        assert (await w.get("pruned"))["spec"] == want_spec

        # update, merge patch and JSON patch: what the schema does not know is dropped again
        stored = await w.get("pruned")
        stored["spec"]["unknown"] = 1
        stored["spec"]["free"]["known"]["gone"] = 2
        stored["extra"] = {"x": 1}
        status, updated = await w.send("PUT", "pruned", stored)
        assert status == 200, updated
        assert updated["spec"] == want_spec and "extra" not in updated
        assert updated["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]  # a no-op
        status, patched = await w.send("PATCH", "pruned", {"spec": {"mode": "A", "junk": 1}, "junk": 2}, MERGE)
        assert status == 200, patched
        assert patched["spec"] == {**want_spec, "mode": "A"} and "junk" not in patched
        status, patched = await w.send("PATCH", "pruned", [
            {"op": "add", "path": "/spec/byName/b", "value": {"weight": 2, "junk": 1}},
            {"op": "add", "path": "/spec/placement/junk", "value": 1}], JSON_PATCH)
        assert status == 200, patched
        assert patched["spec"]["byName"] == {"a": {"weight": 1}, "b": {"weight": 2}}
        assert patched["spec"]["placement"] == want_spec["placement"]
        assert patched["metadata"]["generation"] == 3


async def test_defaults_and_nulls(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        status, created = await w.create(w.obj("nulls", {
            "name": "abc", "replicas": 3.0, "optional": None, "plain": None, "withDefault": None, "defaulted": None}))
        assert status == 201, created
        # a whole float is an integer; a non-nullable null is dropped, or defaulted; a nullable one stays
        assert created["spec"] == {"name": "abc", "replicas": 3, "optional": None, **DEFAULTS}
        status, patched = await w.send("PATCH", "nulls", {"spec": {"withDefault": None, "defaulted": {}}}, MERGE)
        assert status == 200, patched
        assert patched["spec"] == {"name": "abc", "replicas": 3, "optional": None, **DEFAULTS}
        status, patched = await w.send("PATCH", "nulls", {"spec": {"withDefault": "mine"}}, MERGE)
        assert patched["spec"]["withDefault"] == "mine"
        # a missing object is not made up: only what the schema defaults
        status, created = await w.create(w.obj("nospec", None))
        assert status == 201, created
        assert "spec" not in created


async def test_a_schema_change_applies_to_stored_objects_on_read(kube, kube_api: client.ApiClient,
                                                                 kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        status, created = await w.create(w.obj("old", {"name": "abc", "replicas": 2, "mode": "A"}))
        assert status == 201, created
        name = w.body["metadata"]["name"]
        status, current, _ = await raw(kube_api, "GET", f"{CRDS_PATH}/{name}")
        spec_schema = current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        del spec_schema["mode"]
        spec_schema["added"] = {"type": "string", "default": "new"}
        status, doc, _ = await raw(kube_api, "PUT", f"{CRDS_PATH}/{name}", body=current)
        assert status == 200, doc
        for _ in range(100):  # a real server applies the new schema a moment later
            spec = (await w.get("old"))["spec"]
            if spec.get("added") == "new":
                break
            await asyncio.sleep(0.1)
        assert spec == {"name": "abc", "replicas": 2, "added": "new", **DEFAULTS}
        assert (await w.get("old"))["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


# ---- custom resources: validation -------------------------------------------------------------------

def _widget_causes(prefix: str = "spec") -> dict[str, tuple[Any, set[tuple[str, str, str]]]]:
    """name → (spec, the causes kube-apiserver names)."""
    p = prefix
    return {
        "missing": ({}, {(f"{p}.name", "FieldValueRequired", "Required value"),
                         (f"{p}.replicas", "FieldValueRequired", "Required value")}),
        "types": ({"name": 5, "replicas": "3", "ratio": "x", "flag": "true", "tags": "a", "labels": [],
                   "placement": {"clusterAffinities": [{"clusterNames": "m1"}]}, "when": "yesterday"},
                  {(f"{p}.name", "FieldValueTypeInvalid",
                    f'Invalid value: "integer": {p}.name in body must be of type string: "integer"'),
                   (f"{p}.replicas", "FieldValueTypeInvalid",
                    f'Invalid value: "string": {p}.replicas in body must be of type integer: "string"'),
                   (f"{p}.ratio", "FieldValueTypeInvalid",
                    f'Invalid value: "string": {p}.ratio in body must be of type number: "string"'),
                   (f"{p}.flag", "FieldValueTypeInvalid",
                    f'Invalid value: "string": {p}.flag in body must be of type boolean: "string"'),
                   (f"{p}.tags", "FieldValueTypeInvalid",
                    f'Invalid value: "string": {p}.tags in body must be of type array: "string"'),
                   (f"{p}.labels", "FieldValueTypeInvalid",
                    f'Invalid value: "array": {p}.labels in body must be of type object: "array"'),
                   (f"{p}.placement.clusterAffinities[0].affinityName", "FieldValueRequired", "Required value"),
                   (f"{p}.placement.clusterAffinities[0].clusterNames", "FieldValueTypeInvalid",
                    f'Invalid value: "string": {p}.placement.clusterAffinities[0].clusterNames in body must be of '
                    'type array: "string"'),
                   (f"{p}.when", "FieldValueTypeInvalid",
                    f'Invalid value: "yesterday": {p}.when in body must be of type date-time: "yesterday"')}),
        "ranges": ({"name": "ABCDEFGHIJ", "replicas": 11, "ratio": 1, "mode": "C", "level": 3, "tags": [],
                    "labels": {}},
                   {(f"{p}.name", "FieldValueTooLong", "Too long: may not be longer than 8"),
                    (f"{p}.replicas", "FieldValueInvalid",
                     f"Invalid value: 11: {p}.replicas in body should be less than or equal to 10"),
                    (f"{p}.ratio", "FieldValueInvalid", f"Invalid value: 1: {p}.ratio in body should be less than 1"),
                    (f"{p}.mode", "FieldValueNotSupported", 'Unsupported value: "C": supported values: "A", "B"'),
                    (f"{p}.level", "FieldValueNotSupported", 'Unsupported value: 3: supported values: "1", "2"'),
                    (f"{p}.tags", "FieldValueInvalid", f"Invalid value: 0: {p}.tags in body should have at least 1 items"),
                    (f"{p}.labels", "FieldValueInvalid",
                     f"Invalid value: 0: {p}.labels in body should have at least 1 properties")}),
        "ranges2": ({"name": "ab", "replicas": 0, "ratio": 0, "tags": ["a", "b", "c", "d"],
                     "labels": {"a": "1", "b": "2", "c": "3"}},
                    {(f"{p}.name", "FieldValueInvalid", f'Invalid value: "ab": {p}.name in body should be at least 3 '
                                                        'chars long'),
                     (f"{p}.replicas", "FieldValueInvalid",
                      f"Invalid value: 0: {p}.replicas in body should be greater than or equal to 1"),
                     (f"{p}.ratio", "FieldValueInvalid", f"Invalid value: 0: {p}.ratio in body should be greater than 0"),
                     (f"{p}.tags", "FieldValueTooMany", "Too many: 4: must have at most 3 items"),
                     (f"{p}.labels", "FieldValueTooMany", "Too many: 3: must have at most 2 items")}),
        "pattern": ({"name": "abc1", "replicas": 2.5, "mode": 5, "port": True},
                    {(f"{p}.name", "FieldValueInvalid", f"Invalid value: \"abc1\": {p}.name in body should match "
                                                        "'^[a-z]+$'"),
                     (f"{p}.replicas", "FieldValueTypeInvalid",
                      f'Invalid value: "number": {p}.replicas in body must be of type integer: "number"'),
                     (f"{p}.mode", "FieldValueTypeInvalid",
                      f'Invalid value: "integer": {p}.mode in body must be of type string: "integer"'),
                     (f"{p}.mode", "FieldValueNotSupported", 'Unsupported value: 5: supported values: "A", "B"'),
                     (f"{p}.port", "FieldValueTypeInvalid",
                      f'Invalid value: "boolean": {p}.port in body must be of type integer,string: "boolean"')}),
        "lists": ({"name": "abc", "replicas": 1, "tags": [None, 1], "set": ["a", "b", "a"],
                   "conditions": [{"type": "Ready"}, {"type": "Ready", "status": "x"}],
                   "byName": {"q": {"weight": "heavy"}}},
                  {(f"{p}.tags[0]", "FieldValueTypeInvalid",
                    f'Invalid value: "null": {p}.tags[0] in body must be of type string: "null"'),
                   (f"{p}.tags[1]", "FieldValueTypeInvalid",
                    f'Invalid value: "integer": {p}.tags[1] in body must be of type string: "integer"'),
                   (f"{p}.set[2]", "FieldValueDuplicate", 'Duplicate value: "a"'),
                   (f"{p}.conditions[1]", "FieldValueDuplicate", 'Duplicate value: map[string]interface {}{"type":"Ready"}'),
                   (f"{p}.byName.q.weight", "FieldValueTypeInvalid",
                    f'Invalid value: "string": {p}.byName.q.weight in body must be of type integer: "string"')}),
        "embedded": ({"name": "abc", "replicas": 1, "template": {"metadata": {"name": "a/b"}},
                      "typedTemplate": {"apiVersion": "a/b/c", "kind": "Bad_Kind"}},
                     {(f"{p}.template.apiVersion", "FieldValueRequired", "Required value: must not be empty"),
                      (f"{p}.template.kind", "FieldValueRequired", "Required value: must not be empty"),
                      (f"{p}.template.metadata.name", "FieldValueInvalid", "Invalid value: \"a/b\": may not contain '/'"),
                      (f"{p}.typedTemplate.apiVersion", "FieldValueInvalid",
                       'Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'),
                      (f"{p}.typedTemplate.kind", "FieldValueInvalid",
                       'Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 label '
                       "must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
                       "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
                       "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")}),
    }


@pytest.mark.parametrize("case", list(_widget_causes()))
async def test_invalid_objects_are_refused(kube, kube_api: client.ApiClient, kube_namespace: str, case: str) -> None:
    spec, expected = _widget_causes()[case]
    async with Widgets(kube_api, kube_namespace) as w:
        status, doc = await w.create(w.obj(case, spec))
        assert_invalid(status, doc, f"Widget.{w.group}", case, expected)
        assert doc["details"]["group"] == w.group and doc["details"]["kind"] == "Widget"
        status, _, _ = await raw(kube_api, "GET", f"{w.path}/{case}")
        assert status == 404


async def test_valid_objects_are_accepted(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    spec = {"name": "abc", "replicas": 10, "ratio": 0.5, "mode": "B", "level": 2.0, "flag": False, "tags": ["x"],
            "labels": {"a": "b"}, "optional": None, "when": "2024-01-02T03:04:05Z", "port": "http",
            "placement": {"clusterAffinities": [{"affinityName": "east", "clusterNames": ["m1", "m2"]}]},
            "template": {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}},
            "set": ["a", "b"], "conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced"}],
            "byName": {"x": {"weight": 2}}}
    async with Widgets(kube_api, kube_namespace) as w:
        status, created = await w.create(w.obj("valid", spec))
        assert status == 201, created
        assert created["spec"] == {**spec, "level": 2, **DEFAULTS}
        status, created = await w.create(w.obj("valid2", {"name": "xyz", "replicas": 1, "port": 8080}), dry=True)
        assert status == 201, created
        assert created["spec"] == {"name": "xyz", "replicas": 1, "port": 8080, **DEFAULTS}


async def test_an_embedded_apiversion_that_is_no_string_cannot_be_decoded(kube, kube_api: client.ApiClient,
                                                                         kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        status, doc = await w.create(w.obj("bad", {"name": "abc", "replicas": 1,
                                                   "typedTemplate": {"apiVersion": 5, "kind": "Y"}}))
        assert status == 400, doc
        assert_status(doc, 400, "BadRequest")
        assert doc["message"] == ('Widget in version "v1" cannot be handled as a Widget: '
                                  "spec.typedTemplate.apiVersion: Invalid value: 5: must be a string")


async def test_updates_and_patches_are_validated(kube, kube_api: client.ApiClient, kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        status, created = await w.create(w.obj("w", {"name": "abc", "replicas": 2}))
        assert status == 201, created
        rv = created["metadata"]["resourceVersion"]
        body = copy.deepcopy(created)
        body["spec"]["replicas"] = 20
        status, doc = await w.send("PUT", "w", body)
        assert_invalid(status, doc, f"Widget.{w.group}", "w", {
            ("spec.replicas", "FieldValueInvalid", "Invalid value: 20: spec.replicas in body should be less than or "
                                                   "equal to 10")})
        status, doc = await w.send("PATCH", "w", {"spec": {"mode": "Q", "name": None}}, MERGE)
        assert_invalid(status, doc, f"Widget.{w.group}", "w", {
            ("spec.mode", "FieldValueNotSupported", 'Unsupported value: "Q": supported values: "A", "B"'),
            ("spec.name", "FieldValueRequired", "Required value")})
        status, doc = await w.send("PATCH", "w", [{"op": "replace", "path": "/spec/replicas", "value": "x"}],
                                   JSON_PATCH)
        assert_invalid(status, doc, f"Widget.{w.group}", "w", {
            ("spec.replicas", "FieldValueTypeInvalid",
             'Invalid value: "string": spec.replicas in body must be of type integer: "string"')})
        assert (await w.get("w"))["metadata"]["resourceVersion"] == rv


async def test_the_status_subresource_is_validated_and_pruned(kube, kube_api: client.ApiClient,
                                                              kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        status, created = await w.create(w.obj("s", {"name": "abc", "replicas": 2}, status={"phase": "Nope"}))
        assert status == 201, created  # the status a create sends is dropped, not validated
        assert "status" not in created
        body = copy.deepcopy(created)
        body["spec"]["replicas"] = "ignored"
        body["status"] = {"phase": "Nope", "count": -1, "junk": 1}
        status, doc = await w.send("PUT", "s", body, sub="status")
        assert_invalid(status, doc, f"Widget.{w.group}", "s", {
            ("status.phase", "FieldValueNotSupported", 'Unsupported value: "Nope": supported values: "Ready", "Failed"'),
            ("status.count", "FieldValueInvalid", "Invalid value: -1: status.count in body should be greater than or "
                                                  "equal to 0")})
        body["status"] = {"phase": "Ready", "count": 1, "junk": 1}
        status, updated = await w.send("PUT", "s", body, sub="status")
        assert status == 200, updated
        assert updated["status"] == {"phase": "Ready", "count": 1}
        assert updated["spec"] == created["spec"]
        status, doc = await w.send("PATCH", "s", {"status": {"count": "x"}}, MERGE, sub="status")
        assert_invalid(status, doc, f"Widget.{w.group}", "s", {
            ("status.count", "FieldValueTypeInvalid",
             'Invalid value: "string": status.count in body must be of type integer: "string"')})
        status, patched = await w.send("PATCH", "s", {"status": {"count": 4, "junk": 2}}, MERGE, sub="status")
        assert status == 200, patched
        assert patched["status"] == {"phase": "Ready", "count": 4}


async def test_status_without_the_subresource_is_part_of_the_object(kube, kube_api: client.ApiClient,
                                                                    kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace, status=False) as w:
        status, doc = await w.create(w.obj("s", {"name": "abc", "replicas": 2}, status={"phase": "Nope"}))
        assert_invalid(status, doc, f"Widget.{w.group}", "s", {
            ("status.phase", "FieldValueNotSupported", 'Unsupported value: "Nope": supported values: "Ready", "Failed"')})
        status, created = await w.create(w.obj("s", {"name": "abc", "replicas": 2}, status={"phase": "Ready", "x": 1}))
        assert status == 201, created
        assert created["status"] == {"phase": "Ready"}


# ---- after mutating webhooks ---------------------------------------------------------------------------

async def test_what_a_webhook_adds_is_pruned_and_validated(kube, kube_api: client.ApiClient,
                                                           kube_namespace: str) -> None:
    async with Widgets(kube_api, kube_namespace) as w:
        async def mutate(review: dict[str, Any]) -> dict[str, Any]:
            obj = review["request"]["object"]
            if review["request"]["resource"]["resource"] != "widgets":
                return {"allowed": True}
            name = obj["metadata"].get("name", "")
            ops: list[dict[str, Any]] = [{"op": "add", "path": "/spec/addedByWebhook", "value": 1},
                                         {"op": "add", "path": "/spec/mode", "value": "A"},
                                         {"op": "add", "path": "/spec/withDefault", "value": None}]
            if name.startswith("invalid"):
                ops.append({"op": "replace", "path": "/spec/replicas", "value": 99})
                ops.append({"op": "add", "path": "/spec/plain", "value": None})
            return {"allowed": True, "patchType": "JSONPatch", "patch": b64_patch(ops)}

        tls = WebhookTLS()
        rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                  "resources": ["configmaps"]},
                 {"operations": ["CREATE", "UPDATE"], "apiGroups": [w.group], "apiVersions": ["v1"],
                  "resources": ["widgets"]}]
        async with webhook_server(tls, mutate) as hook:
            await register_webhook(kube_api, mwc_body(unique("mwc"), "schema.fedplace.io",
                                                      {"url": hook.url, "caBundle": tls.ca_bundle}, rules=rules),
                                   hook, kube_namespace)
            status, created = await w.create(w.obj("mutated", {"name": "abc", "replicas": 2}))
            assert status == 201, created
            # the webhook saw the pruned, defaulted object; its unknown field is pruned, its null defaulted
            seen = hook.reviews[-1]["request"]["object"]["spec"]
            assert seen == {"name": "abc", "replicas": 2, **DEFAULTS}
            assert created["spec"] == {"name": "abc", "replicas": 2, "mode": "A", **DEFAULTS}
            assert (await w.get("mutated"))["spec"] == created["spec"]
            status, doc = await w.create(w.obj("invalid", {"name": "abc", "replicas": 2}))
            assert_invalid(status, doc, f"Widget.{w.group}", "invalid", {
                ("spec.replicas", "FieldValueInvalid",
                 "Invalid value: 99: spec.replicas in body should be less than or equal to 10"),
                ("spec.plain", "FieldValueTypeInvalid",
                 'Invalid value: "null": spec.plain in body must be of type string: "null"')})
            status, _, _ = await raw(kube_api, "GET", f"{w.path}/invalid")
            assert status == 404
