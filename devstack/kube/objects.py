"""Object semantics shared by every handler: decoding, type checks, metadata
defaulting on create/update, generation, status subresource, per-type
defaulting and validation. Pure functions (no store, no HTTP).

The stages of a write, in kube-apiserver's order: :func:`prepare_create` /
:func:`prepare_update` decode and default (what admission sees: on create no
uid and ``creationTimestamp: null``); then admission runs; then
:func:`finish_create` (the name from generateName) and :func:`finalize_create`
/ :func:`finalize_update` (system fields, the registry strategy, validation of
the admitted object).
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import random
import re
import uuid
from typing import Any

from . import crdschema, defaults, strategy
from .podupdate import pod_update_causes
from .quantity import QuantityError
from .quantity import parse as parse_quantity
from .resources import ResourceType
from .status import bad_request, invalid

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def decode_json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"error decoding request body: {exc}") from exc


def decode_object(raw: bytes, rt: ResourceType) -> dict[str, Any]:
    """A request body as an object of ``rt``: JSON object, matching kind/apiVersion if given, sane metadata."""
    obj = decode_json(raw)
    if not isinstance(obj, dict):
        raise bad_request(f"json: cannot unmarshal {type(obj).__name__} into Go value of type {rt.kind}")
    check_type(obj, rt)
    return obj


def check_type(obj: dict[str, Any], rt: ResourceType) -> None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version is not None and api_version != rt.api_version:
        if not (rt.custom and isinstance(api_version, str) and api_version.split("/")[0] == rt.group):
            raise bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                              f"version ({rt.api_version})")
    if kind is not None and kind != rt.kind:
        raise bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {kind}: "
                          f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = {}
        return
    if not isinstance(meta, dict):
        raise bad_request("json: cannot unmarshal metadata into Go struct field of type v1.ObjectMeta")
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise bad_request(f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{field} "
                              "of type map[string]string")
    for field in ("name", "generateName", "namespace", "resourceVersion", "uid"):
        if field in meta and meta[field] is not None and not isinstance(meta[field], str):
            raise bad_request(f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{field} of type string")


def _name_error(rt: ResourceType, name: str) -> str | None:
    if rt.name_rule == "none":
        return None
    if rt.name_rule == "label":
        if len(name) > 63 or not _LABEL.match(name):
            return LABEL_MSG
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        return SUBDOMAIN_MSG
    return None


def _strip_system(meta: dict[str, Any]) -> None:
    for field in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation", "selfLink", "managedFields"):
        meta.pop(field, None)


def _random_suffix(n: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(random.choice(alphabet) for _ in range(n))


def decode_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Defaulting at decode (:mod:`.defaults`; a custom resource's schema defaults); a quantity that
    does not parse is a 400, as a body the API server cannot decode."""
    try:
        defaults.apply(rt.group, rt.plural, obj, builtin=not rt.custom)
    except QuantityError as exc:
        raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {exc}') from None
    if rt.custom and rt.schema is not None:
        crdschema.decode_numbers(obj)
        crdschema.default(obj, rt.schema)


def decode_custom(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """A custom resource's request body as kube-apiserver decodes it against the version's schema
    (:func:`.crdschema.decode`: unknown fields pruned, metadata as ObjectMeta, defaults); an embedded
    resource whose apiVersion or kind is no string is a 400. Returns ``obj`` (changed in place)."""
    if rt.custom and rt.schema is not None:
        try:
            crdschema.decode(obj, rt.schema)
        except crdschema.CoerceError as exc:
            raise bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {exc}') from None
    return obj


def finalize_custom(rt: ResourceType, obj: dict[str, Any]) -> None:
    """After the strategy: a custom resource validated against its schema (422 Invalid), then in
    the form kube-apiserver stores and answers (what a webhook added and the schema does not know
    is pruned, defaults applied, whole floats written as integers)."""
    if not rt.custom or rt.schema is None:
        return
    causes = crdschema.validate(obj, rt.schema)
    if causes:
        raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)
    crdschema.storage_form(obj, rt.schema)


def prepare_create(rt: ResourceType, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The decoded, defaulted new object admission sees (no uid yet, ``creationTimestamp: null``)."""
    obj = copy.deepcopy(obj)
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
    decode_custom(rt, obj)
    meta = obj["metadata"]
    _strip_system(meta)
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and body_ns != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and not meta.get("generateName"):
        raise invalid(rt.kind, rt.group, "", [("metadata.name", "Required value: name or generateName is required")])
    if meta.get("name"):
        check_name(rt, meta["name"])
    meta["creationTimestamp"] = None
    decode_defaults(rt, obj)
    default_and_validate(rt, obj, None)
    return obj


def check_name(rt: ResourceType, name: str) -> None:
    err = _name_error(rt, name)
    if err:
        raise invalid(rt.kind, rt.group, name, [("metadata.name", f'Invalid value: "{name}": {err}')])


def finish_create(rt: ResourceType, obj: dict[str, Any]) -> str:
    """After admission (as the storage layer does): generate the name from generateName; returns it."""
    meta = obj["metadata"]
    if not meta.get("name"):
        if not meta.get("generateName"):
            raise invalid(rt.kind, rt.group, "", [("metadata.name", "Required value: name or generateName is required")])
        meta["name"] = meta["generateName"] + _random_suffix()
    check_name(rt, meta["name"])
    if (rt.group, rt.plural) == ("", "namespaces"):
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    return meta["name"]


def finalize_create(rt: ResourceType, obj: dict[str, Any]) -> None:
    """System fields, the registry strategy and validation of an admitted, named new object."""
    meta = obj["metadata"]
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now()
    if rt.has_generation:
        meta["generation"] = 1
    if rt.status_subresource and rt.collection_key not in (("", "namespaces"), CRD_KEY) \
            and rt.collection_key not in STRATEGY_STATUS:
        obj.pop("status", None)
    strategy.prepare_for_create(rt, obj)
    validate_admitted(rt, obj)
    finalize_custom(rt, obj)


def _spec_part(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    skip = {"metadata", "status"} if rt.status_subresource or not rt.custom else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}


def prepare_update(rt: ResourceType, old: dict[str, Any], new: dict[str, Any], subresource: str = "") -> dict[str, Any]:
    """The decoded, defaulted object admission sees when ``new`` replaces ``old`` (main resource or
    ``status``): name and namespace from ``old``; uid, creationTimestamp and, with a status
    subresource, the status as the client sent them (:func:`finalize_update` restores them).
    ``/status`` changes only status.
    """
    new = copy.deepcopy(new)
    new["apiVersion"], new["kind"] = old.get("apiVersion", rt.api_version), rt.kind
    decode_custom(rt, new)
    old_meta = old["metadata"]
    if subresource == "status":
        if rt.custom:
            decode_defaults(rt, new)
        merged = {k: copy.deepcopy(v) for k, v in old.items() if k != "status"}
        if "status" in new:
            merged["status"] = new["status"]
        merged["metadata"] = copy.deepcopy(old_meta)
        return merged
    meta = new.setdefault("metadata", {})
    meta["name"] = old_meta["name"]
    if "namespace" in old_meta:
        meta["namespace"] = old_meta["namespace"]
    meta.pop("managedFields", None)
    meta.pop("selfLink", None)
    meta.setdefault("creationTimestamp", None)
    decode_defaults(rt, new)
    default_and_validate(rt, new, old)
    return new


def _keep_status(rt: ResourceType) -> bool:
    """An update of the main resource keeps the stored status (CRDs recompute theirs)."""
    return rt.status_subresource and rt.collection_key != CRD_KEY


def finalize_update(rt: ResourceType, old: dict[str, Any], new: dict[str, Any], subresource: str = "") -> None:
    """``BeforeUpdate`` on an admitted update: system metadata from ``old``, the stored status kept
    (status subresource), generation bumped when the spec part changes, the registry strategy,
    validation (a Pod's spec: only what :mod:`.podupdate` lets an update change)."""
    if not subresource:
        meta, old_meta = new["metadata"], old["metadata"]
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if _keep_status(rt):
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta.pop("generation", None)
        if rt.has_generation:
            generation = int(old_meta.get("generation", 1))
            meta["generation"] = generation + 1 if _spec_part(rt, new) != _spec_part(rt, old) else generation
        strategy.prepare_for_update(rt, old, new)
        if rt.collection_key == ("", "pods"):
            causes = pod_update_causes(old, new)
            if causes:
                raise invalid(rt.kind, rt.group, new["metadata"].get("name", ""), causes)
    validate_admitted(rt, new)
    finalize_custom(rt, new)


def unchanged(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when ``b`` differs from ``a`` only in resourceVersion (a no-op write)."""
    am = {k: v for k, v in a.get("metadata", {}).items() if k != "resourceVersion"}
    bm = {k: v for k, v in b.get("metadata", {}).items() if k != "resourceVersion"}
    if am != bm:
        return False
    return {k: v for k, v in a.items() if k != "metadata"} == {k: v for k, v in b.items() if k != "metadata"}


# ---- per-type defaulting / validation ----------------------------------

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB


def default_and_validate(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    key = (rt.group, rt.plural)
    fn = _TYPE_RULES.get(key)
    if fn is not None:
        fn(rt, obj, old)
    annotations = obj["metadata"].get("annotations") or {}
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:  # ValidateAnnotations, for every type
        raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""),
                      [("metadata.annotations", f"Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")])


MAX_DATA_SIZE = 1024 * 1024  # core.MaxSecretSize: a ConfigMap's or a Secret's data together
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
STRATEGY_STATUS = (("", "pods"),) + tuple(strategy.EMPTY_STATUS)
POD_SPEC_PATHS = {
    ("", "pods"): ("spec",),
    ("apps", "replicasets"): ("spec", "template", "spec"),
    ("apps", "deployments"): ("spec", "template", "spec"),
    ("apps", "statefulsets"): ("spec", "template", "spec"),
    ("apps", "daemonsets"): ("spec", "template", "spec"),
    ("batch", "jobs"): ("spec", "template", "spec"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template", "spec"),
}


def _data_size(values: Any, encoded: bool) -> int:
    total = 0
    for key, value in (values or {}).items() if isinstance(values, dict) else ():
        if encoded:
            try:
                total += len(base64.b64decode(value or "", validate=True))
            except (ValueError, TypeError):
                raise bad_request(f"illegal base64 data in key {key!r}") from None
        else:
            total += len(str(value).encode())
    return total


def _resource_causes(spec: Any, path: str) -> list[tuple[str, str]]:
    """``ValidateResourceRequirements``: a request above its limit (containers, then init containers)."""
    causes = []
    for kind in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(kind) or [] if isinstance(spec, dict) else []):
            res = c.get("resources") if isinstance(c, dict) and isinstance(c.get("resources"), dict) else {}
            limits, requests = res.get("limits") or {}, res.get("requests") or {}
            for name in sorted(requests):
                if name not in limits:
                    continue
                try:
                    above = parse_quantity(requests[name]).value > parse_quantity(limits[name]).value
                except QuantityError:
                    continue
                if above:
                    causes.append((f"{path}.{kind}[{i}].resources.requests",
                                   f'Invalid value: "{requests[name]}": must be less than or equal to {name} limit'))
    return causes


def validate_admitted(rt: ResourceType, obj: dict[str, Any]) -> None:
    """What kube-apiserver's validation refuses after admission, for what the devstack checks:
    ConfigMap and Secret data over 1 MiB (values' bytes, binary data decoded), a container
    request above its limit (Pods and pod templates)."""
    name = obj["metadata"].get("name", "")
    key = rt.collection_key
    causes: list[tuple[str, str]] = []
    if key == ("", "configmaps"):
        if _data_size(obj.get("data"), False) + _data_size(obj.get("binaryData"), True) > MAX_DATA_SIZE:
            causes.append(("[]", f"Too long: must have at most {MAX_DATA_SIZE} bytes"))
    elif key == ("", "secrets"):
        if _data_size(obj.get("data"), True) > MAX_DATA_SIZE:
            causes.append(("data", f"Too long: must have at most {MAX_DATA_SIZE} bytes"))
    elif key in POD_SPEC_PATHS:
        spec: Any = obj
        for part in POD_SPEC_PATHS[key]:
            spec = spec.get(part) if isinstance(spec, dict) else None
        causes += _resource_causes(spec, ".".join(POD_SPEC_PATHS[key]))
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)


def _namespace(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj["metadata"]
    labels = dict(meta.get("labels") or {})
    if meta.get("name"):
        labels["kubernetes.io/metadata.name"] = meta["name"]
    meta["labels"] = labels
    spec = obj.setdefault("spec", {}) if old is None else obj.get("spec") or (old.get("spec") or {})
    if old is None:
        spec.setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    obj["spec"] = spec


def _secret(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    string_data = obj.pop("stringData", None)
    if string_data:
        if not isinstance(string_data, dict):
            raise bad_request("json: cannot unmarshal stringData into map[string]string")
        data = dict(obj.get("data") or {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data
    obj.setdefault("type", old.get("type", "Opaque") if old else "Opaque")
    for k, v in (obj.get("data") or {}).items():
        try:
            base64.b64decode(v, validate=True)
        except (ValueError, TypeError):
            raise bad_request(f"illegal base64 data in secret data key {k!r}") from None


def _core_event(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj["metadata"]
    involved = obj.get("involvedObject") or {}
    causes = []
    inv_ns = involved.get("namespace") or ""
    if inv_ns and inv_ns != meta.get("namespace"):
        causes.append(("involvedObject.namespace",
                       f'Invalid value: "{inv_ns}": does not match event.namespace'))
    if causes:
        raise invalid(rt.kind, rt.group, meta.get("name", ""), causes)


def _events_v1(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj["metadata"]
    causes = []
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not obj.get(field):
            causes.append((field, "Required value"))
    note = obj.get("note") or ""
    if len(note) > 1024:
        causes.append(("note", "Too long: may not be more than 1024 bytes"))
    if obj.get("type") not in (None, "Normal", "Warning"):
        causes.append(("type", f'Unsupported value: "{obj.get("type")}": supported values: "Normal", "Warning"'))
    regarding_ns = (obj.get("regarding") or {}).get("namespace") or ""
    if regarding_ns and regarding_ns != meta.get("namespace"):
        causes.append(("regarding.namespace", f'Invalid value: "{regarding_ns}": does not match event.namespace'))
    if causes:
        raise invalid(rt.kind, rt.group, meta.get("name", ""), causes)


def validate_crd(obj: dict[str, Any]) -> None:
    """422 unless the CRD is well formed enough to serve (names, scope, versions, schema)."""
    name = obj["metadata"].get("name", "")
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    causes: list[tuple[str, str]] = []
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not group:
        causes.append(("spec.group", "Required value"))
    if not plural:
        causes.append(("spec.names.plural", "Required value"))
    if not kind:
        causes.append(("spec.names.kind", "Required value"))
    if group and plural and name != f"{plural}.{group}":
        causes.append(("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(("spec.scope", f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions") or []
    if not isinstance(versions, list) or not versions:
        causes.append(("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    else:
        if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
            causes.append(("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
        for i, v in enumerate(versions):
            if not isinstance(v, dict) or not v.get("name"):
                causes.append((f"spec.versions[{i}].name", "Required value"))
            elif (v.get("schema") or {}).get("openAPIV3Schema") is None:
                causes.append((f"spec.versions[{i}].schema.openAPIV3Schema", "Required value: schemas are required"))
        causes += crdschema.crd_causes(spec)  # structural schemas, pruned and valid defaults
    if causes:
        raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)


def _crd(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    validate_crd(obj)
    if old is not None:
        for field in ("group",):
            if obj["spec"].get(field) != old["spec"].get(field):
                raise invalid(rt.kind, rt.group, obj["metadata"]["name"],
                              [(f"spec.{field}", "Invalid value: field is immutable")])
        if obj["spec"]["names"].get("plural") != old["spec"]["names"].get("plural"):
            raise invalid(rt.kind, rt.group, obj["metadata"]["name"],
                          [("status.storedVersions", "Invalid value: spec.names.plural is immutable here")])
    spec = obj["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    spec["names"] = names
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    stored = list((old or {}).get("status", {}).get("storedVersions") or [])
    if storage not in stored:
        stored.append(storage)
    obj["status"] = {
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now()},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now()},
        ],
        "acceptedNames": names,
        "storedVersions": stored,
    }


def _webhook_config(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = []
    for i, hook in enumerate(obj.get("webhooks") or []):
        if not isinstance(hook, dict):
            raise bad_request("webhooks must be objects")
        if not hook.get("name"):
            causes.append((f"webhooks[{i}].name", "Required value"))
        if hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            causes.append((f"webhooks[{i}].sideEffects",
                           f'Unsupported value: "{hook.get("sideEffects")}": supported values: "None", "NoneOnDryRun"'))
        if not hook.get("admissionReviewVersions"):
            causes.append((f"webhooks[{i}].admissionReviewVersions", "Required value"))
        cc = hook.get("clientConfig") or {}
        if bool(cc.get("url")) == bool(cc.get("service")):
            causes.append((f"webhooks[{i}].clientConfig", "Required value: exactly one of url or service is required"))
        t = hook.get("timeoutSeconds")
        if t is not None and (not isinstance(t, int) or not 1 <= t <= 30):
            causes.append((f"webhooks[{i}].timeoutSeconds", f"Invalid value: {t}: the timeout value must be between 1 and 30 seconds"))
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("timeoutSeconds", 10)
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("reinvocationPolicy", "Never")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        for rule in hook.get("rules") or []:
            rule.setdefault("scope", "*")
    if causes:
        raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)


def _limit_range(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """``ValidateLimitRange``, its first rule: one item per type."""
    seen: set[str] = set()
    causes = []
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in seen:
            causes.append((f"spec.limits[{i}].type", f'Duplicate value: "{kind}"'))
        seen.add(kind)
    if causes:
        raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)


SYSTEM_PRIORITY_VALUES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
HIGHEST_USER_PRIORITY = 1000000000


def _priority_class(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """``ValidatePriorityClass`` (reserved names, the user maximum) and the update rules."""
    name = obj["metadata"].get("name") or ""
    value = obj.get("value")
    causes = []
    if name.startswith("system-"):
        known = SYSTEM_PRIORITY_VALUES.get(name)
        err = (f"{name} is not a known system priority class" if known is None
               else f"value of {name} PriorityClass must be {known}" if value != known
               else f"globalDefault of {name} PriorityClass must be false" if obj.get("globalDefault") else "")
        if err:
            causes.append(("metadata.name", "Forbidden: priority class names with 'system-' prefix are reserved "
                                            f"for system use only. error: {err}"))
    elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
        causes.append(("value", f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"))
    if old is not None:
        if value != old.get("value"):
            causes.append(("value", "Forbidden: may not be changed in an update."))
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
            causes.append(("preemptionPolicy", "Invalid value: field is immutable"))
    if causes:
        raise invalid(rt.kind, rt.group, name, causes)


_TYPE_RULES = {
    ("", "namespaces"): _namespace,
    ("", "secrets"): _secret,
    ("", "events"): _core_event,
    ("events.k8s.io", "events"): _events_v1,
    ("apiextensions.k8s.io", "customresourcedefinitions"): _crd,
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): _webhook_config,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): _webhook_config,
    ("scheduling.k8s.io", "priorityclasses"): _priority_class,
    ("", "limitranges"): _limit_range,
}

