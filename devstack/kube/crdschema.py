"""CustomResourceDefinition schemas, as kube-apiserver 1.24 (apiextensions-apiserver) applies them.

* :func:`crd_causes` — what a CRD's ``openAPIV3Schema`` must satisfy on create and update:
  ``ValidateCustomResourceDefinitionOpenAPISchema`` (unsupported keywords, ``type``
  values, ``additionalProperties`` with ``properties``, ``uniqueItems``, list types,
  ``x-kubernetes-preserve-unknown-fields: false``, defaults in metadata), then the
  structural-schema rules (``ValidateStructural``: a ``type`` everywhere, ``items``
  for arrays, metadata restricted to name/generateName, embedded resources,
  value validations free of generic fields), then ``ValidateDefaults`` (pruned and
  valid defaults). Fields are named as kube-apiserver names them:
  ``spec.validation.openAPIV3Schema…`` when every version has the same schema (1.24
  hoists it), else ``spec.versions[i].schema.openAPIV3Schema…``.
* :func:`decode` — what the API server does to a custom resource it decodes from a
  request body (and, :func:`storage_form`, to what it stores and reads back): numbers as
  Go decodes JSON (an integer beyond int64 becomes a float), unknown fields pruned
  (``x-kubernetes-preserve-unknown-fields`` and embedded resources respected; the root's
  apiVersion/kind/metadata kept), non-nullable nulls without a default dropped, embedded
  resources' apiVersion/kind/metadata coerced, metadata round-tripped through ObjectMeta
  (unknown and empty fields dropped), then :func:`default`.
* :func:`default` — structural defaulting (also what a mutating webhook's result gets).
* :func:`validate` — the schema validation kube-openapi's validator does, with the
  errors mapped to field errors as ``ValidateCustomResource`` maps them (reasons
  FieldValueRequired, FieldValueInvalid, FieldValueTypeInvalid, FieldValueNotSupported,
  FieldValueTooLong, FieldValueTooMany), plus the embedded-resource and list-set/map
  checks of the custom resource strategy. kube-apiserver lists errors in Go map order;
  these come sorted by field (stable).

Formats: the ones apiextensions keeps (date, date-time, duration, email, hostname, ipv4,
ipv6, cidr, mac, uuid, uuid3/4/5, byte, hexcolor, rgbcolor, ssn, bsonobjectid, uri,
password) are checked on strings; isbn and creditcard are not checked; int32, int64,
float, double and unknown formats are ignored, as 1.24 strips them.

Pure functions on plain JSON values; schemas are the CRD's ``openAPIV3Schema`` dicts.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as dt
import decimal
import ipaddress
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["CoerceError", "crd_causes", "decode", "default", "storage_form", "validate", "Cause"]

Schema = dict[str, Any]
Cause = tuple[str, str, str]  # (field, message, reason)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_JSON_FLOAT = float(1 << 53)
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
META_FIELDS = ("apiVersion", "kind", "metadata")
# The formats apiextensions' StripUnsupportedFormatsPostProcess keeps (1.24); others are ignored.
SUPPORTED_FORMATS = frozenset((
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3", "uuid4",
    "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor", "byte", "password",
    "date", "duration", "datetime", "date-time"))

REQUIRED, INVALID, TYPE_INVALID = "FieldValueRequired", "FieldValueInvalid", "FieldValueTypeInvalid"
NOT_SUPPORTED, TOO_LONG, TOO_MANY = "FieldValueNotSupported", "FieldValueTooLong", "FieldValueTooMany"
FORBIDDEN, DUPLICATE = "FieldValueForbidden", "FieldValueDuplicate"


# ---- Go's renderings -------------------------------------------------------------------------

def _quote_char(ch: str) -> str:
    o = ord(ch)
    simple = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
              "\t": "\\t", "\v": "\\v"}
    if ch in simple:
        return simple[ch]
    if ch == " " or (ch.isprintable() and o != 0x7f):
        return ch
    if o < 0x80:
        return f"\\x{o:02x}"
    if 0xd800 <= o <= 0xdfff:
        return "\\ufffd"
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def go_quote(s: str) -> str:
    """``%q`` / ``strconv.Quote``."""
    return '"' + "".join(_quote_char(ch) for ch in s) + '"'


def go_float(f: float) -> str:
    """``%v`` of a float64 (``strconv.FormatFloat(f, 'g', -1, 64)``)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    dp = len(ds) + int(exp)  # position of the decimal point
    neg = "-" if sign else ""
    x = dp - 1
    if x < -4 or x >= 6:
        mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{neg}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{ds}"
    if dp >= len(ds):
        return neg + ds + "0" * (dp - len(ds))
    return f"{neg}{ds[:dp]}.{ds[dp:]}"


def go_sharp(v: Any) -> str:
    """``%#v`` of a decoded JSON value (``interface{}``)."""
    if v is None:
        return "interface {}(nil)"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, list):
        return "[]interface {}{" + ", ".join(go_sharp(x) for x in v) + "}"
    if isinstance(v, dict):
        return "map[string]interface {}{" + ", ".join(f"{go_quote(k)}:{go_sharp(v[k])}" for k in sorted(v)) + "}"
    return repr(v)


class GoStrings(list):
    """A ``[]string`` (how field errors print it differs from a JSON array's)."""


def err_value(v: Any) -> str:
    """How ``field.Error`` prints a bad value: as ``%#v`` but for null and ``[]string``."""
    if v is None:
        return '"null"'
    if isinstance(v, GoStrings):
        return "[]string{" + ", ".join(go_quote(x) for x in v) + "}"
    return go_sharp(v)


def go_json(v: Any) -> str:
    """``json.Marshal`` of a decoded JSON value."""
    return json.dumps(encode_numbers(copy.deepcopy(v)), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _invalid(path: str, value: Any, detail: str, reason: str = INVALID) -> Cause:
    return (path, f"Invalid value: {err_value(value)}: {detail}" if detail else f"Invalid value: {err_value(value)}",
            reason)


def _required(path: str, detail: str = "") -> Cause:
    return (path, f"Required value: {detail}" if detail else "Required value", REQUIRED)


def _forbidden(path: str, detail: str) -> Cause:
    return (path, f"Forbidden: {detail}", FORBIDDEN)


def _not_supported(path: str, value: Any, values: Iterable[str]) -> Cause:
    quoted = ", ".join(go_quote(v) for v in values)
    return (path, f"Unsupported value: {err_value(value)}: supported values: {quoted}", NOT_SUPPORTED)


# ---- numbers ---------------------------------------------------------------------------------

def decode_numbers(v: Any) -> Any:
    """Numbers as Go decodes JSON into unstructured objects: integers beyond int64 are float64."""
    if isinstance(v, dict):
        for k, x in v.items():
            v[k] = decode_numbers(x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            v[i] = decode_numbers(x)
    elif isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        return float(v)
    return v


def encode_numbers(v: Any) -> Any:
    """Numbers as Go encodes float64: a whole number below 1e21 has no fraction (``3.0`` → ``3``)."""
    if isinstance(v, dict):
        for k, x in v.items():
            v[k] = encode_numbers(x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            v[i] = encode_numbers(x)
    elif isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 1e21:
        return int(v)
    return v


# ---- structural helpers ------------------------------------------------------------------------

def _sub(s: Schema | None, key: str) -> Schema | None:
    """The structural schema of a map's key: a property, else additionalProperties' schema."""
    if not isinstance(s, dict):
        return None
    props = s.get("properties")
    if isinstance(props, dict) and key in props:
        sub = props[key]
        return sub if isinstance(sub, dict) else {}
    ap = s.get("additionalProperties")
    return ap if isinstance(ap, dict) else None


def _has_ap(s: Schema) -> bool:
    return s.get("additionalProperties") is not None


def _items(s: Schema | None) -> Schema | None:
    items = s.get("items") if isinstance(s, dict) else None
    return items if isinstance(items, dict) else None


def _flag(s: Schema | None, name: str) -> bool:
    return isinstance(s, dict) and s.get(name) is True


# ---- pruning ----------------------------------------------------------------------------------

def prune(obj: Any, s: Schema | None, root: bool = True) -> None:
    """``structuralpruning.Prune``: unknown fields dropped, in place."""
    if root:
        s = dict(s or {})
        s["x-kubernetes-embedded-resource"] = True
    _prune(obj, s)


def _prune(x: Any, s: Schema | None) -> None:
    if _flag(s, "x-kubernetes-preserve-unknown-fields"):
        _skip_prune(x, s)
        return
    if isinstance(x, dict):
        if s is None:
            x.clear()
            return
        _prune_fields(x, s, drop_unknown=True)
    elif isinstance(x, list):
        for v in x:
            _prune(v, _items(s) if s is not None else None)


def _skip_prune(x: Any, s: Schema | None) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        _prune_fields(x, s, drop_unknown=False)
    elif isinstance(x, list):
        for v in x:
            _skip_prune(v, _items(s))


def _prune_fields(x: dict[str, Any], s: Schema, drop_unknown: bool) -> None:
    """Prune each field of an object by its schema; fields the schema does not know are dropped
    when ``drop_unknown`` (kept under x-kubernetes-preserve-unknown-fields)."""
    embedded = _flag(s, "x-kubernetes-embedded-resource")
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    for k in list(x):
        if embedded and k in META_FIELDS:
            continue
        if k in props:
            _prune(x[k], props[k] if isinstance(props[k], dict) else {})
        elif _has_ap(s):
            _prune(x[k], _sub(s, k))
        elif drop_unknown:
            del x[k]


def prune_nulls(x: Any, s: Schema | None) -> None:
    """``PruneNonNullableNullsWithoutDefaults``: a null where the schema allows none and has no
    default is dropped (the key goes; nulls in arrays stay)."""
    if isinstance(x, dict):
        for k in list(x):
            sub = _sub(s, k)
            if x[k] is None and isinstance(sub, dict) and not sub.get("nullable") and "default" not in sub:
                del x[k]
            else:
                prune_nulls(x[k], sub)
    elif isinstance(x, list):
        for v in x:
            prune_nulls(v, _items(s))


# ---- defaulting -------------------------------------------------------------------------------

def default(x: Any, s: Schema | None) -> None:
    """``structuraldefaulting.Default``: a property's default where it is absent (or a null it does
    not allow), recursively; never through additionalProperties' defaults."""
    if not isinstance(s, dict):
        return
    if isinstance(x, dict):
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        for k, prop in props.items():
            if not isinstance(prop, dict) or "default" not in prop or prop["default"] is None:
                continue
            if k not in x or (x[k] is None and not prop.get("nullable")):
                x[k] = copy.deepcopy(prop["default"])
        for k, v in x.items():
            if k in props:
                default(v, props[k])
            elif _has_ap(s):
                default(v, _sub(s, k))
    elif isinstance(x, list):
        for v in x:
            default(v, _items(s))


# ---- coercion (embedded resources, ObjectMeta) -------------------------------------------------------

class CoerceError(Exception):
    """A body kube-apiserver cannot decode into the custom resource (400)."""


OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers", "managedFields")


def object_meta(meta: dict[str, Any], embedded: bool) -> dict[str, Any]:
    """``SetObjectMeta(GetObjectMeta(...))``: ObjectMeta's fields only, empty ones omitted; an
    embedded resource's zero creationTimestamp is dropped, the root's stays ``null``."""
    out: dict[str, Any] = {}
    for k in OBJECT_META:
        if k not in meta:
            continue
        v = meta[k]
        if k == "creationTimestamp":
            if v is not None or not embedded:
                out[k] = v
            continue
        if v is None or (k not in _META_POINTERS and v in ("", 0, [], {}) and not isinstance(v, bool)):
            continue  # omitempty (a pointer only when nil)
        out[k] = v
    return out


_META_POINTERS = ("deletionTimestamp", "deletionGracePeriodSeconds")


def coerce(x: Any, s: Schema | None, path: str, drop_invalid: bool) -> None:
    """``objectmeta.Coerce`` below the root: embedded resources' apiVersion and kind must be strings
    (else :class:`CoerceError`, or dropped when ``drop_invalid``), their metadata is ObjectMeta."""
    if not isinstance(s, dict):
        return
    if isinstance(x, dict):
        embedded = _flag(s, "x-kubernetes-embedded-resource")
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        for k in list(x):
            v = x[k]
            if embedded:
                if k in ("apiVersion", "kind") and not isinstance(v, str):
                    if drop_invalid:
                        del x[k]
                        continue
                    raise CoerceError(f"{_child(path, k)}: Invalid value: {err_value(v)}: must be a string")
                if k == "metadata" and isinstance(v, dict):
                    x[k] = object_meta(v, embedded=True)
            if k in props:
                coerce(x[k], props[k], _child(path, k), drop_invalid)
            elif _has_ap(s):
                coerce(x[k], _sub(s, k), f"{path}[{k}]", drop_invalid)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            coerce(v, _items(s), f"{path}[{i}]", drop_invalid)


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ---- the decode and storage pipelines -------------------------------------------------------------

def decode(obj: dict[str, Any], s: Schema | None, drop_invalid: bool = False) -> None:
    """A custom resource as kube-apiserver decodes a request body (in place): numbers, pruning,
    nulls, embedded resources, ObjectMeta, defaults. Raises :class:`CoerceError`."""
    decode_numbers(obj)
    head = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    meta = obj.get("metadata")
    prune(obj, s, root=True)
    prune_nulls(obj, s)
    coerce(obj, s, "", drop_invalid)
    obj.update(head)
    if isinstance(meta, dict):
        obj["metadata"] = object_meta(meta, embedded=False)
    default(obj, s)


def storage_form(obj: dict[str, Any], s: Schema | None) -> None:
    """What kube-apiserver stores and answers for an admitted, validated custom resource: its
    encoding decoded again (pruned, defaulted, a whole float written as an integer)."""
    decode(obj, s, drop_invalid=True)
    encode_numbers(obj)


# ---- validation (kube-openapi's SchemaValidator) ----------------------------------------------------

@dataclass
class _Err:
    code: str          # type | required | enum | too_long | max_items | too_many_props | other | composite
    name: str
    message: str
    value: Any = None
    values: list[Any] = field(default_factory=list)
    valid: Any = None


@dataclass
class _Result:
    errors: list[_Err] = field(default_factory=list)
    matches: int = 0

    def merge(self, *others: "_Result | None") -> "_Result":
        for o in others:
            if o is not None:
                self.errors += o.errors
                self.matches += o.matches
        return self

    def add(self, err: _Err) -> None:
        self.errors.append(err)

    @property
    def valid(self) -> bool:
        return not self.errors


def _one(err: _Err) -> _Result:
    return _Result([err])


def _info(data: Any) -> tuple[str, str]:
    """``schemaInfoForType``: the JSON type and the Go format of a decoded value."""
    if isinstance(data, bool):
        return "boolean", ""
    if isinstance(data, int):
        return "integer", "int64"
    if isinstance(data, float):
        return "number", "float64"
    if isinstance(data, str):
        return "string", ""
    if isinstance(data, list):
        return "array", ""
    return "object", ""


def _is_json_integer(f: float) -> bool:
    """``swag.IsFloat64AJSONInteger``."""
    if math.isnan(f) or math.isinf(f) or f < -MAX_JSON_FLOAT or f > MAX_JSON_FLOAT:
        return False
    if f == math.trunc(f):
        return True
    diff = abs(f - round(f))
    return diff < 2.220446049250313e-16 * abs(f) if f != 0 else False


def _types(s: Schema) -> list[str]:
    if s.get("x-kubernetes-int-or-string") is True:
        return ["integer", "string"]
    t = s.get("type")
    if isinstance(t, str) and t:
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    return []


def _format(s: Schema) -> str:
    f = s.get("format")
    return f if isinstance(f, str) and f in SUPPORTED_FORMATS else ""


def _type_invalid(path: str, type_name: str, value: Any) -> _Err:
    msg = f"{path} in body must be of type {type_name}: {go_quote(value)}" if isinstance(value, str) \
        else f"{path} in body must be of type {type_name}"
    return _Err("type", path, msg, value)


def _check_type(s: Schema, path: str, data: Any) -> _Result:
    """``typeValidator``."""
    types, fmt, nullable = _types(s), _format(s), bool(s.get("nullable"))
    res = _Result(matches=1)
    if data is None:
        if types and "null" not in types and not nullable:
            return _one(_type_invalid(path, ",".join(types), "null"))
        return res
    sch_type, dformat = _info(data)
    is_float_int = sch_type == "number" and _is_json_integer(data) and "integer" in types
    is_int_float = sch_type == "integer" and "number" in types
    stringish = isinstance(data, (str, list))
    if not stringish and fmt and not (sch_type in types or dformat == fmt or is_float_int or is_int_float):
        return _one(_type_invalid(path, fmt, dformat))
    if not ("number" in types or "integer" in types) and fmt and stringish:
        return res
    if not (sch_type in types or is_float_int or is_int_float):
        return _one(_type_invalid(path, ",".join(types), sch_type))
    return res


def _convert(data: Any, like: Any) -> tuple[bool, Any]:
    """Go's ``reflect.Value.Convert`` of ``data`` to the type of ``like``, where it is allowed."""
    if isinstance(like, bool):
        return isinstance(data, bool), data
    if isinstance(like, str):
        if isinstance(data, str):
            return True, data
        if isinstance(data, int) and not isinstance(data, bool):
            return True, chr(data) if 0 <= data <= 0x10FFFF and not 0xd800 <= data <= 0xdfff else "\ufffd"
        return False, None
    if isinstance(like, (int, float)):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            return False, None
        if isinstance(like, int):
            if isinstance(data, float) and not math.isfinite(data):
                return False, None
            return True, int(data)
        return True, float(data)
    if isinstance(like, list):
        return isinstance(data, list), data
    if isinstance(like, dict):
        return isinstance(data, dict), data
    return False, None


def _deep_equal(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` of decoded JSON values (int64 and float64 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _check_enum(s: Schema, path: str, data: Any) -> _Result:
    """``basicCommonValidator``."""
    enum = s.get("enum")
    if not isinstance(enum, list) or not enum:
        return _Result(matches=1)
    for e in enum:
        if e is None or data is None:
            continue
        ok, converted = _convert(data, e)
        if ok and _deep_equal(converted, e):
            return _Result(matches=1)
    values = " ".join(go_sharp(e) if not isinstance(e, str) else e for e in enum)
    return _one(_Err("enum", path, f"{path} in body should be one of [{values}]", data, list(enum)))


def _check_string(s: Schema, path: str, data: str) -> _Result:
    """``stringValidator``: the first of maxLength, minLength, pattern that fails."""
    n = len(data)
    max_len, min_len, pattern = s.get("maxLength"), s.get("minLength"), s.get("pattern")
    if isinstance(max_len, int) and n > max_len:
        return _one(_Err("too_long", path, f"{path} in body should be at most {max_len} chars long", data,
                         valid=max_len))
    if isinstance(min_len, int) and n < min_len:
        return _one(_Err("other", path, f"{path} in body should be at least {min_len} chars long", data))
    if isinstance(pattern, str) and pattern:
        rx = _regex(pattern)
        if rx is not None and not rx.search(data):
            return _one(_Err("other", path, f"{path} in body should match '{pattern}'", data))
    return _Result(matches=1)


_RX_CACHE: dict[str, re.Pattern[str] | None] = {}


def _regex(pattern: str) -> re.Pattern[str] | None:
    """A Go (RE2) pattern as a Python one; None when Python cannot compile it (then it is not checked)."""
    if pattern not in _RX_CACHE:
        py = pattern.replace("\\z", "\\Z")
        py = re.sub(r"(?<!\\)\$(?=$|\|)", r"\\Z", py)  # Go's $ (no multiline) ends the text
        try:
            _RX_CACHE[pattern] = re.compile(py)
        except re.error:
            _RX_CACHE[pattern] = None
    return _RX_CACHE[pattern]


def _limit(limit: float, native_int: bool) -> str:
    return str(int(limit)) if native_int else go_float(float(limit))


def _check_number(s: Schema, path: str, data: int | float) -> _Result:
    """``numberValidator``: multipleOf, minimum, maximum (native integers compared as int64)."""
    res = _Result()
    native_int = isinstance(data, int)
    mult, minimum, maximum = s.get("multipleOf"), s.get("minimum"), s.get("maximum")
    if isinstance(mult, (int, float)) and not isinstance(mult, bool):
        if native_int:
            factor = int(mult)
            if factor <= 0:
                res.add(_Err("other", path, f"factor MultipleOf declared for {path} must be positive: {factor}", factor))
            elif data % factor != 0:
                res.add(_Err("other", path, f"{path} in body should be a multiple of {factor}", data))
        else:
            factor_f = float(mult)
            if factor_f <= 0:
                res.add(_Err("other", path, f"factor MultipleOf declared for {path} must be positive: "
                                            f"{go_float(factor_f)}", factor_f))
            else:
                q = (1 / factor_f * data) if factor_f < 1 else data / factor_f
                if not _is_json_integer(q):
                    res.add(_Err("other", path, f"{path} in body should be a multiple of {go_float(factor_f)}", data))
    if isinstance(minimum, (int, float)) and not isinstance(minimum, bool):
        excl = s.get("exclusiveMinimum") is True
        lim = int(minimum) if native_int else float(minimum)
        if (data < lim) if not excl else (data <= lim):
            word = "greater than" if excl else "greater than or equal to"
            res.add(_Err("other", path, f"{path} in body should be {word} {_limit(minimum, native_int)}", data))
    if isinstance(maximum, (int, float)) and not isinstance(maximum, bool):
        excl = s.get("exclusiveMaximum") is True
        lim = int(maximum) if native_int else float(maximum)
        if (data > lim) if not excl else (data >= lim):
            word = "less than" if excl else "less than or equal to"
            res.add(_Err("other", path, f"{path} in body should be {word} {_limit(maximum, native_int)}", data))
    res.matches += 1
    return res


def _check_slice(s: Schema, path: str, data: list[Any]) -> _Result:
    """``schemaSliceValidator``: the items, then minItems, maxItems."""
    res = _Result()
    items = _items(s)
    if items is not None:
        for i, v in enumerate(data):
            res.merge(_validate(items, f"{path}[{i}]", v))
    size = len(data)
    min_items, max_items = s.get("minItems"), s.get("maxItems")
    if isinstance(min_items, int) and size < min_items:
        res.add(_Err("other", path, f"{path} in body should have at least {min_items} items", size))
    if isinstance(max_items, int) and size > max_items:
        res.add(_Err("max_items", path, f"{path} in body should have at most {max_items} items", size,
                     valid=max_items))
    res.matches += 1
    return res


def _check_object(s: Schema, path: str, data: dict[str, Any]) -> _Result:
    """``objectValidator``: min/maxProperties (which end the check), additionalProperties, the
    properties present, then required."""
    n = len(data)
    min_p, max_p = s.get("minProperties"), s.get("maxProperties")
    if isinstance(min_p, int) and n < min_p:
        return _one(_Err("other", path, f"{path} in body should have at least {min_p} properties", n))
    if isinstance(max_p, int) and n > max_p:
        return _one(_Err("too_many_props", path, f"{path} in body should have at most {max_p} properties", n,
                         valid=max_p))
    res = _Result()
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    ap = s.get("additionalProperties")
    if ap is False:
        for k in sorted(data):
            if k not in props:
                res.add(_Err("other", path, f"{path}.{k} in body is a forbidden property", k))
    elif isinstance(ap, dict):
        for k in sorted(data):
            if k not in props:
                res.merge(_validate(ap, f"{path}.{k}", data[k]))
    for k in sorted(props):
        if k in data and isinstance(props[k], dict):
            res.merge(_validate(props[k], f"{path}.{k}" if path else k, data[k]))
    required = s.get("required")
    for k in required if isinstance(required, list) else ():
        if isinstance(k, str) and k not in data:
            res.add(_Err("required", f"{path}.{k}", f"{path}.{k} in body is required"))
    res.matches += 1
    return res


def _check_props(s: Schema, path: str, data: Any) -> _Result:
    """``schemaPropsValidator``: anyOf, oneOf, allOf, not."""
    main = _Result()
    any_of = [x for x in s.get("anyOf") or () if isinstance(x, dict)] if isinstance(s.get("anyOf"), list) else []
    one_of = [x for x in s.get("oneOf") or () if isinstance(x, dict)] if isinstance(s.get("oneOf"), list) else []
    all_of = [x for x in s.get("allOf") or () if isinstance(x, dict)] if isinstance(s.get("allOf"), list) else []
    quoted = go_quote(path)
    if any_of:
        best: _Result | None = None
        first_success: _Result | None = None
        for sub in any_of:
            r = _validate(sub, path, data)
            if r.valid:
                best, first_success = None, r
                break
            if best is None or r.matches > best.matches:
                best = r
        if first_success is None:
            main.add(_Err("composite", path, f"{quoted} must validate at least one schema (anyOf)"))
        main.merge(best if best is not None else first_success)
    if one_of:
        best, first_success, validated = None, None, 0
        for sub in one_of:
            r = _validate(sub, path, data)
            if r.valid:
                validated += 1
                best = None
                first_success = first_success or r
                continue
            if validated == 0 and (best is None or r.matches > best.matches):
                best = r
        if validated != 1:
            extra = "Found none valid" if validated == 0 else f"Found {validated} valid alternatives"
            main.add(_Err("composite", path, f"{quoted} must validate one and only one schema (oneOf). {extra}"))
            main.merge(best)
        else:
            main.merge(first_success)
    if all_of:
        validated = 0
        for sub in all_of:
            r = _validate(sub, path, data)
            validated += r.valid
            main.merge(r)
        if validated != len(all_of):
            extra = ". None validated" if validated == 0 else ""
            main.add(_Err("composite", path, f"{quoted} must validate all the schemas (allOf){extra}"))
    not_ = s.get("not")
    if isinstance(not_, dict) and _validate(not_, path, data).valid:
        main.add(_Err("composite", path, f"{quoted} must not validate the schema (not)"))
    main.matches += 1
    return main


def _check_format(s: Schema, path: str, data: str) -> _Result:
    fmt = _format(s)
    check = _FORMATS.get(fmt.replace("-", ""))
    if check is not None and not check(data):
        return _one(_type_invalid(path, fmt, data))
    return _Result(matches=1)


def _validate(s: Schema, path: str, data: Any) -> _Result:
    """``SchemaValidator.Validate``."""
    res = _Result()
    if data is None:
        res.merge(_check_type(s, path, data), _check_enum(s, path, data))
        return res
    if _types(s) or _format(s):
        res.merge(_check_type(s, path, data))
    res.merge(_check_props(s, path, data))
    if isinstance(data, str):
        res.merge(_check_string(s, path, data))
        if _format(s).replace("-", "") in _FORMATS:
            res.merge(_check_format(s, path, data))
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        res.merge(_check_number(s, path, data))
    if isinstance(data, list):
        res.merge(_check_slice(s, path, data))
    res.merge(_check_enum(s, path, data))
    if isinstance(data, dict):
        res.merge(_check_object(s, path, data))
    res.matches += 1
    return res


def _causes(errors: list[_Err], prefix: str | None) -> list[Cause]:
    """``ValidateCustomResource``: kube-openapi's errors as field errors under ``prefix``."""
    out: list[Cause] = []
    for e in errors:
        if e.code == "composite":
            out.append(_invalid(prefix if prefix is not None else "<nil>", "", e.message))
            continue
        name = e.name[1:] if e.name.startswith(".") else e.name
        if name:
            path = f"{prefix}.{name}" if prefix is not None else name
        else:
            path = prefix if prefix is not None else "<nil>"
        if e.code == "required":
            out.append(_required(path))
        elif e.code == "enum":
            values = [v if isinstance(v, str) else go_json(v) for v in e.values]
            out.append(_not_supported(path, e.value, values))
        elif e.code == "too_long":
            out.append((path, f"Too long: may not be longer than {e.valid}", TOO_LONG))
        elif e.code in ("max_items", "too_many_props"):
            out.append((path, f"Too many: {e.value}: must have at most {e.valid} items", TOO_MANY))
        elif e.code == "type":
            out.append(_invalid(path, "" if e.value is None else e.value, e.message, TYPE_INVALID))
        else:
            out.append(_invalid(path, "" if e.value is None else e.value, e.message))
    return out


# ---- embedded resources and list types (the custom resource strategy) ---------------------------------------

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
               "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _path_segment(name: str, prefix: bool) -> list[str]:
    """``path.IsValidPathSegmentName`` (a prefix may be anything but contain / or %)."""
    msgs = []
    if not prefix and name in (".", ".."):
        msgs.append(f"may not be '{name}'")
    for ch in ("/", "%"):
        if ch in name:
            msgs.append(f"may not contain '{ch}'")
    return msgs


def _embedded(path: str, x: dict[str, Any]) -> list[Cause]:
    """``validateEmbeddedResource``."""
    causes: list[Cause] = []
    if "apiVersion" not in x:
        causes.append(_required(_child(path, "apiVersion"), "must not be empty"))
    if "kind" not in x:
        causes.append(_required(_child(path, "kind"), "must not be empty"))
    for k in sorted(x):
        v = x[k]
        if k == "apiVersion":
            if not isinstance(v, str):
                causes.append(_invalid(_child(path, k), v, "must be a string"))
            elif not v:
                causes.append(_invalid(_child(path, k), v, "must not be empty"))
            elif v.count("/") > 1:
                causes.append(_invalid(_child(path, k), v, f"unexpected GroupVersion string: {v}"))
        elif k == "kind":
            if not isinstance(v, str):
                causes.append(_invalid(_child(path, k), v, "must be a string"))
            elif not v:
                causes.append(_invalid(_child(path, k), v, "must not be empty"))
            else:
                errs = []
                if len(v) > 63:
                    errs.append("must be no more than 63 characters")
                if not _DNS1035.match(v.lower()):
                    errs.append(DNS1035_MSG)
                if errs:
                    causes.append(_invalid(_child(path, k), v, "may have mixed case, but should otherwise match: "
                                           + ",".join(errs)))
        elif k == "metadata" and isinstance(v, dict):
            mpath = _child(path, "metadata")
            name = v.get("name") if isinstance(v.get("name"), str) and v.get("name") else "fakename"
            for msg in _path_segment(name, False):
                causes.append(_invalid(f"{mpath}.name", name, msg))
            gen = v.get("generateName")
            if isinstance(gen, str) and gen:
                for msg in _path_segment(gen, True):
                    causes.append(_invalid(f"{mpath}.generateName", gen, msg))
    return causes


def _objectmeta_validate(path: str, x: Any, s: Schema | None, root: bool = False) -> list[Cause]:
    """``objectmeta.Validate``: every embedded resource below the root."""
    if not isinstance(s, dict):
        return []
    causes: list[Cause] = []
    if isinstance(x, dict):
        if _flag(s, "x-kubernetes-embedded-resource") and not root:
            causes += _embedded(path, x)
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        for k in x:
            if k in props:
                causes += _objectmeta_validate(_child(path, k), x[k], props[k])
            elif _has_ap(s):
                causes += _objectmeta_validate(f"{path}[{k}]", x[k], _sub(s, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            causes += _objectmeta_validate(f"{path}[{i}]", v, _items(s))
    return causes


def _scalar_key(v: Any) -> Any:
    """A Go map key for a scalar: int64 1 and float64 1 differ, as do 1 and true."""
    return (type(v).__name__, v)


def _set_duplicates(values: list[Any]) -> list[int]:
    """``validateListSet``: the index of each value's second appearance."""
    seen: dict[Any, int] = {}
    dups = []
    for i, v in enumerate(values):
        key = ("json", go_json(v)) if isinstance(v, (dict, list)) else _scalar_key(v)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            dups.append(i)
    return dups


_UNSPECIFIED = object()


def _list_map(path: str, s: Schema, x: list[Any]) -> list[Cause]:
    for i, v in enumerate(x):
        if v is not None and not isinstance(v, dict):
            return [_invalid(f"{path}[{i}]", v, "must be an object for an array of list-type map")]
    if len(x) <= 1:
        return []
    keys = [k for k in s.get("x-kubernetes-list-map-keys") or [] if isinstance(k, str)]
    causes: list[Cause] = []
    if len(keys) == 1:
        key = keys[0]
        vals = [_UNSPECIFIED if v is None or key not in v else v[key] for v in x]
        seen: dict[Any, int] = {}
        for i, v in enumerate(vals):
            k = ("unspecified",) if v is _UNSPECIFIED else (
                ("json", go_json(v)) if isinstance(v, (dict, list)) else _scalar_key(v))
            seen[k] = seen.get(k, 0) + 1
            if seen[k] == 2:
                dup = {} if v is _UNSPECIFIED else {key: v}
                causes.append((f"{path}[{i}]", f"Duplicate value: {err_value(dup)}", DUPLICATE))
        return causes
    compound = [{k: v[k] for k in keys if k in v} if isinstance(v, dict) else {} for v in x]
    for i in _set_duplicates(compound):
        causes.append((f"{path}[{i}]", f"Duplicate value: {err_value(compound[i])}", DUPLICATE))
    return causes


def _list_types(path: str, s: Schema | None, x: Any) -> list[Cause]:
    """``ValidateListSetsAndMaps``."""
    if not isinstance(s, dict):
        return []
    causes: list[Cause] = []
    if isinstance(x, dict):
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        ap = s.get("additionalProperties")
        for k in x:
            if isinstance(ap, dict):
                causes += _list_types(f"{path}[{k}]", ap, x[k])
            if k in props:
                causes += _list_types(_child(path, k), props[k], x[k])
    elif isinstance(x, list):
        list_type = s.get("x-kubernetes-list-type")
        if list_type == "set":
            for i in _set_duplicates(x):
                causes.append((f"{path}[{i}]", f"Duplicate value: {err_value(x[i])}", DUPLICATE))
        elif list_type == "map":
            causes += _list_map(path, s, x)
        items = _items(s)
        if items is not None:
            for i, v in enumerate(x):
                causes += _list_types(f"{path}[{i}]", items, v)
    return causes


def validate(obj: dict[str, Any], s: Schema | None) -> list[Cause]:
    """The errors kube-apiserver's custom resource strategy finds in ``obj`` (sorted by field)."""
    if not isinstance(s, dict):
        return []
    causes = _causes(_validate(s, "", obj).errors, None)
    causes += _objectmeta_validate("", obj, s, root=True)
    causes += _list_types("", s, obj)
    return sorted(causes, key=lambda c: c[0])


# ---- formats ------------------------------------------------------------------------------------

_RX_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_RX_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z")


def _is_date(s: str) -> bool:
    if not _RX_DATE.match(s):
        return False
    try:
        dt.date(int(s[:4]), int(s[5:7]), int(s[8:10]))
    except ValueError:
        return False
    return True


def _is_datetime(s: str) -> bool:
    """strfmt's ``IsDateTime``."""
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _RX_TIME.match(parts[1])
    return bool(m) and m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


_HOST_CHAR = "a-zA-Z0-9\u00a1-\U0010ffff"
_RX_HOSTNAME = re.compile(
    rf"([{_HOST_CHAR}]((-?[{_HOST_CHAR}]{{0,62}})?)|([{_HOST_CHAR}](([-{_HOST_CHAR}]{{0,61}}[{_HOST_CHAR}])?)(\.))"
    rf"{{1,}}([a-zA-Z\u00c0-\U0010ffff]){{2,63}})\Z")


def _is_hostname(s: str) -> bool:
    return bool(_RX_HOSTNAME.match(s)) and len(s) <= 255 and all(len(p) <= 63 for p in s.split("."))


def _is_ip(s: str) -> bool:
    if "%" in s:
        return False
    try:
        ipaddress.ip_address(s)
    except ValueError:
        return False
    return True


def _is_cidr(s: str) -> bool:
    addr, sep, bits = s.partition("/")
    if not sep or not bits.isdigit() or not _is_ip(addr):
        return False
    return int(bits) <= (32 if ipaddress.ip_address(addr).version == 4 else 128)


_RX_MAC = re.compile(r"(([0-9a-fA-F]{2}[:-]){5}([0-9a-fA-F]{2})|([0-9a-fA-F]{2}[:-]){7}([0-9a-fA-F]{2})|"
                     r"([0-9a-fA-F]{2}[:-]){19}([0-9a-fA-F]{2})|([0-9a-fA-F]{4}\.){2}([0-9a-fA-F]{4})|"
                     r"([0-9a-fA-F]{4}\.){3}([0-9a-fA-F]{4})|([0-9a-fA-F]{4}\.){9}([0-9a-fA-F]{4}))\Z")


def _is_mac(s: str) -> bool:
    if not _RX_MAC.match(s):
        return False
    seps = {c for c in s if c in ":-."}
    return len(seps) == 1


def _is_base64(s: str) -> bool:
    try:
        base64.b64decode(s.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


_RX_GO_DURATION = re.compile(r"[-+]?(((\d+\.?\d*)|(\.\d+))(ns|us|µs|μs|ms|s|m|h))+\Z")
_RX_DURATION_PART = re.compile(r"(\d+)\s*([A-Za-zµ]+)")
_DURATION_UNITS = ("ns", "nano", "us", "µs", "micro", "ms", "milli", "s", "sec", "m", "min", "h", "hr", "hour",
                   "d", "day", "w", "wk", "week")


def _is_duration(s: str) -> bool:
    if s in ("0", "+0", "-0") or _RX_GO_DURATION.match(s):
        return True
    parts = _RX_DURATION_PART.findall(s)
    return bool(parts) and all(u.lower().strip() in _DURATION_UNITS or u.lower().rstrip("s") in _DURATION_UNITS
                               for _, u in parts)


_RX_EMAIL = re.compile(r"[^\s@<>()\[\]\\,;:\"]+@[^\s@<>()\[\]\\,;:\"]+\Z")


def _is_email(s: str) -> bool:
    m = re.match(r"[^<]*<([^>]*)>\s*\Z", s)
    return bool(_RX_EMAIL.match(m.group(1) if m else s.strip()))


def _is_uri(s: str) -> bool:
    if any(ord(c) < 0x20 or ord(c) == 0x7f for c in s):
        return False
    return re.search(r"%(?![0-9a-fA-F]{2})", s) is None


_RGB = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*"
_FORMATS: dict[str, Any] = {
    "date": _is_date,
    "datetime": _is_datetime,
    "duration": _is_duration,
    "email": _is_email,
    "hostname": _is_hostname,
    "ipv4": lambda s: _is_ip(s) and "." in s,
    "ipv6": lambda s: _is_ip(s) and ":" in s,
    "cidr": _is_cidr,
    "mac": _is_mac,
    "uuid": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z").match,
    "uuid3": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z").match,
    "uuid4": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\Z").match,
    "uuid5": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\Z").match,
    "byte": _is_base64,
    "hexcolor": re.compile(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})\Z").match,
    "rgbcolor": re.compile(rf"rgb\({_RGB},{_RGB},{_RGB}\)\Z").match,
    "ssn": re.compile(r"\d{3}[- ]?\d{2}[- ]?\d{4}\Z").match,
    "bsonobjectid": re.compile(r"[0-9a-fA-F]{24}\Z").match,
    "uri": _is_uri,
}


# ---- CRD checks ---------------------------------------------------------------------------------

ROOT, ITEM, FIELD = "root", "item", "field"
_UNSUPPORTED = (("id", "id is not supported"), ("additionalItems", "additionalItems is not supported"),
                ("patternProperties", "patternProperties is not supported"),
                ("definitions", "definitions is not supported"), ("dependencies", "dependencies is not supported"),
                ("$ref", "$ref is not supported"))
_SET_WHEN_PRESENT = ("additionalItems", "dependencies", "$ref")  # pointers in Go: set even when empty


def _uses(s: Schema, kw: str) -> bool:
    if kw in _SET_WHEN_PRESENT:
        return s.get(kw) is not None
    return bool(s.get(kw))
_GENERIC = ("type", "description", "title", "nullable", "default", "externalDocs")
_EXTENSIONS = ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
               "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
               "x-kubernetes-map-type")
_STRUCTURAL_KEYS = _GENERIC + _EXTENSIONS + ("properties", "items", "additionalProperties", "example")


def _key(path: str, k: str) -> str:
    return f"{path}[{k}]"


def _props(s: Schema) -> dict[str, Any]:
    p = s.get("properties")
    return p if isinstance(p, dict) else {}


def _sub_schemas(s: Schema, path: str) -> Iterable[tuple[Schema, str]]:
    """The value-validation subschemas of ``s`` (not, allOf, oneOf, anyOf) with their paths."""
    if isinstance(s.get("not"), dict):
        yield s["not"], f"{path}.not"
    for kw in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(s.get(kw) or [] if isinstance(s.get(kw), list) else []):
            if isinstance(sub, dict):
                yield sub, f"{path}.{kw}[{i}]"


def _generic(s: Schema, path: str, root: bool, inside_meta: bool, no_defaults: str) -> list[Cause]:
    """``ValidateCustomResourceDefinitionOpenAPISchema``."""
    causes: list[Cause] = []
    t = s.get("type")
    if isinstance(t, str) and t and t not in OPENAPI_TYPES:
        causes.append(_not_supported(f"{path}.type", t, OPENAPI_TYPES))
    for kw, msg in _UNSUPPORTED:
        if _uses(s, kw):
            causes.append(_forbidden(f"{path}.{kw}", msg))
    if t == "null":
        causes.append(_forbidden(f"{path}.type", "type cannot be set to null, use nullable as an alternative"))
    if isinstance(s.get("items"), list) and s["items"]:
        causes.append(_forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if no_defaults and "default" in s:
        causes.append(_forbidden(f"{path}.default", f"must not be set {no_defaults}"))
    if s.get("uniqueItems") is True:
        causes.append(_forbidden(f"{path}.uniqueItems",
                                 "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    ap = s.get("additionalProperties")
    if ap is not None:
        if _props(s) and (ap is False or isinstance(ap, dict)):
            causes.append(_forbidden(f"{path}.additionalProperties",
                                     "additionalProperties and properties are mutual exclusive"))
        if isinstance(ap, dict):
            sub_no = "inside additionalProperties applying to object metadata" if inside_meta else no_defaults
            causes += _generic(ap, f"{path}.additionalProperties", False, inside_meta, sub_no)
    embedded = s.get("x-kubernetes-embedded-resource") is True
    for k in sorted(_props(s)):
        sub = _props(s)[k]
        if not isinstance(sub, dict):
            continue
        sub_meta, sub_no = inside_meta, no_defaults
        if (root or embedded) and k in META_FIELDS:
            sub_meta = True
            if root:
                sub_no = f"in top-level {k}"
        causes += _generic(sub, _key(f"{path}.properties", k), False, sub_meta, sub_no)
    for sub, sub_path in _sub_schemas(s, path):
        causes += _generic(sub, sub_path, False, inside_meta, no_defaults)
    if isinstance(s.get("items"), dict):
        causes += _generic(s["items"], f"{path}.items", False, inside_meta, no_defaults)
    elif isinstance(s.get("items"), list):
        for i, sub in enumerate(s["items"]):
            if isinstance(sub, dict):
                causes += _generic(sub, f"{path}.items[{i}]", False, inside_meta, no_defaults)
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        causes.append(_invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined"))
    causes += _list_type_rules(s, path)
    return causes


def _list_type_rules(s: Schema, path: str) -> list[Cause]:
    causes: list[Cause] = []
    list_type, map_type = s.get("x-kubernetes-list-type"), s.get("x-kubernetes-map-type")
    keys = s.get("x-kubernetes-list-map-keys")
    keys = GoStrings(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else GoStrings()
    items = s.get("items") if isinstance(s.get("items"), dict) else None
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        causes.append(_not_supported(f"{path}.x-kubernetes-list-type", list_type, ("atomic", "set", "map")))
    if map_type is not None and map_type not in ("atomic", "granular"):
        causes.append(_not_supported(f"{path}.x-kubernetes-map-type", map_type, ("atomic", "granular")))
    if keys:
        if list_type is None:
            causes.append(_required(f"{path}.x-kubernetes-list-type",
                                    "must be map if x-kubernetes-list-map-keys is non-empty"))
        elif list_type != "map":
            causes.append(_invalid(f"{path}.x-kubernetes-list-type", list_type,
                                   "must be map if x-kubernetes-list-map-keys is non-empty"))
    if list_type == "map":
        if not keys:
            causes.append(_required(f"{path}.x-kubernetes-list-map-keys",
                                    "must not be empty if x-kubernetes-list-type is map"))
        if s.get("items") is None:
            causes.append(_required(f"{path}.items", "must have a schema if x-kubernetes-list-type is map"))
        elif items is not None and items.get("type") != "object":
            causes.append(_invalid(f"{path}.items.type", items.get("type") or "",
                                   "must be object if parent array's x-kubernetes-list-type is map"))
        elif items is not None:
            seen: set[str] = set()
            for k in keys:
                prop = _props(items).get(k)
                if isinstance(prop, dict):
                    if prop.get("type") in ("array", "object"):
                        causes.append(_invalid(f"{path}.items.properties[{k}].type", items.get("type"),
                                               "must be a scalar type if parent array's x-kubernetes-list-type is map"))
                else:
                    causes.append(_invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                           "entries must all be names of item properties"))
                if k in seen:
                    causes.append(_invalid(f"{path}.x-kubernetes-list-map-keys", keys,
                                           "must not contain duplicate entries"))
                seen.add(k)
            required = items.get("required") if isinstance(items.get("required"), list) else []
            for k in keys:
                prop = _props(items).get(k)
                if isinstance(prop, dict) and k not in required and prop.get("default") is None:
                    causes.append(_required(f"{path}.items.properties[{k}].default", "this property is in "
                                            "x-kubernetes-list-map-keys, so it must have a default or be a required "
                                            "property"))
    if list_type == "set" and items is not None:
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            causes.append(_invalid(f"{path}.items.x-kubernetes-map-type", items.get("x-kubernetes-map-type"),
                                   "must be atomic as item of a list with x-kubernetes-list-type=set"))
        if items.get("type") == "array" and items.get("x-kubernetes-list-type") != "atomic":
            causes.append(_invalid(f"{path}.items.x-kubernetes-list-type", items.get("x-kubernetes-list-type"),
                                   "must be atomic as item of a list with x-kubernetes-list-type=set"))
    return causes


def _unconvertible(s: Any) -> bool:
    """Whether ``NewStructural`` fails (unsupported keywords anywhere): its structural checks are
    then skipped, the generic checks having reported why."""
    if not isinstance(s, dict):
        return False
    if any(_uses(s, kw) for kw, _ in _UNSUPPORTED) or (isinstance(s.get("items"), list) and s["items"]):
        return True
    subs = list(_props(s).values()) + [s.get("items"), s.get("additionalProperties"), s.get("not")]
    for kw in ("allOf", "oneOf", "anyOf"):
        subs += s.get(kw) or [] if isinstance(s.get(kw), list) else []
    return any(_unconvertible(x) for x in subs)


_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def _structural(s: Schema, level: str, path: str) -> list[Cause]:
    """``validateStructuralInvariants``."""
    causes: list[Cause] = []
    t = s.get("type") if isinstance(s.get("type"), str) else ""
    items = s.get("items") if isinstance(s.get("items"), dict) else None
    if t == "array" and items is None:
        causes.append(_required(f"{path}.items", "must be specified"))
    if items is not None:
        causes += _structural(items, ITEM, f"{path}.items")
    for k, sub in _props(s).items():
        if isinstance(sub, dict):
            causes += _structural(sub, FIELD, _key(f"{path}.properties", k))
    ap = s.get("additionalProperties")
    if ap is not None:
        if level == ROOT:
            causes.append(_forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(ap, dict):
            causes += _structural(ap, FIELD, f"{path}.additionalProperties")
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = s.get("x-kubernetes-embedded-resource") is True
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    if int_or_string and preserve:
        causes.append(_invalid(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                               "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        causes.append(_invalid(f"{path}.x-kubernetes-embedded-resource", True,
                               "must be false if x-kubernetes-int-or-string is true"))
    causes += _value_validation(s, path, level)
    check_meta = level == ROOT or embedded
    if embedded and t != "object":
        if not t:
            causes.append(_required(f"{path}.type", "must be object if x-kubernetes-embedded-resource is true"))
        else:
            causes.append(_invalid(f"{path}.type", t, "must be object if x-kubernetes-embedded-resource is true"))
    elif not t and not int_or_string and not preserve:
        detail = {ROOT: "must not be empty at the root", ITEM: "must not be empty for specified array items",
                  FIELD: "must not be empty for specified object fields"}[level]
        causes.append(_required(f"{path}.type", detail))
    if embedded and ap is not None:
        causes.append(_forbidden(f"{path}.additionalProperties",
                                 "must not be used if x-kubernetes-embedded-resource is set"))
    if level == ROOT and t and t != "object":
        causes.append(_invalid(f"{path}.type", t, "must be object at the root"))
    props = _props(s)
    for k in ("kind", "apiVersion"):
        if k in props and check_meta and isinstance(props[k], dict) and props[k].get("type") != "string":
            causes.append(_invalid(f"{path}.properties[{k}].type", props[k].get("type") or "", "must be string"))
    if isinstance(props.get("metadata"), dict):
        meta = props["metadata"]
        mpath = f"{path}.properties[metadata]"
        if check_meta and meta.get("type") != "object":
            causes.append(_invalid(f"{mpath}.type", meta.get("type") or "", "must be object"))
        if level == ROOT:
            mprops = _props(meta)
            extra = {k: v for k, v in meta.items() if k not in ("type", "default", "properties")}
            only_names = set(mprops) <= {"name", "generateName"}
            if extra and any(v not in (None, False, "", [], {}) for v in extra.values()) or not only_names:
                causes.append(_forbidden(mpath, "must not specify anything other than name and generateName, but "
                                                "metadata is implicitly specified"))
    if embedded and not preserve and not props:
        causes.append(_required(f"{path}.properties", "must not be empty if x-kubernetes-embedded-resource is true "
                                                      "without x-kubernetes-preserve-unknown-fields"))
    return causes


def _value_validation(s: Schema, path: str, level: str) -> list[Cause]:
    causes: list[Cause] = []
    skip_any_of = s.get("anyOf") == _INT_OR_STRING_ANY_OF
    all_of = s.get("allOf") if isinstance(s.get("allOf"), list) else []
    skip_first_all_of_any_of = bool(all_of) and isinstance(all_of[0], dict) \
        and all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF
    if not skip_any_of:
        for i, sub in enumerate(s.get("anyOf") or [] if isinstance(s.get("anyOf"), list) else []):
            causes += _nested(sub, f"{path}.anyOf[{i}]", level, False)
    for i, sub in enumerate(all_of):
        causes += _nested(sub, f"{path}.allOf[{i}]", level, skip_first_all_of_any_of and i == 0)
    for i, sub in enumerate(s.get("oneOf") or [] if isinstance(s.get("oneOf"), list) else []):
        causes += _nested(sub, f"{path}.oneOf[{i}]", level, False)
    if isinstance(s.get("not"), dict):
        causes += _nested(s["not"], f"{path}.not", level, False)
    pattern = s.get("pattern")
    if isinstance(pattern, str) and pattern:
        err = _go_regex_error(pattern)
        if err:
            causes.append(_invalid(f"{path}.pattern", pattern, f"must be a valid regular expression, but isn't: {err}"))
    return causes


def _go_regex_error(pattern: str) -> str:
    """An approximation of Go's ``regexp.Compile`` error (Python's parser decides)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        if "missing )" in str(exc):
            return f"error parsing regexp: missing closing ): `{pattern}`"
        if "unbalanced parenthesis" in str(exc):
            return f"error parsing regexp: unexpected ): `{pattern}`"
        if "unterminated character set" in str(exc):
            return f"error parsing regexp: missing closing ]: `{pattern[pattern.rfind('['):]}`"
        return ""  # a construct Python lacks (\p{L}, …) is no error for Go
    return ""


def _nested(v: Any, path: str, level: str, skip_any_of: bool) -> list[Cause]:
    """``validateNestedValueValidation``."""
    if not isinstance(v, dict):
        return []
    causes: list[Cause] = []
    if not skip_any_of:
        for i, sub in enumerate(v.get("anyOf") or [] if isinstance(v.get("anyOf"), list) else []):
            causes += _nested(sub, f"{path}.anyOf[{i}]", level, False)
    for i, sub in enumerate(v.get("allOf") or [] if isinstance(v.get("allOf"), list) else []):
        causes += _nested(sub, f"{path}.allOf[{i}]", level, False)
    for i, sub in enumerate(v.get("oneOf") or [] if isinstance(v.get("oneOf"), list) else []):
        causes += _nested(sub, f"{path}.oneOf[{i}]", level, False)
    if isinstance(v.get("not"), dict):
        causes += _nested(v["not"], f"{path}.not", level, False)
    if isinstance(v.get("items"), dict):
        causes += _nested(v["items"], f"{path}.items", level, False)
    for k, sub in _props(v).items():
        causes += _nested(sub, _key(f"{path}.properties", k), FIELD, False)
    if v.get("type"):
        causes.append(_forbidden(f"{path}.type", "must be empty to be structural"))
    if v.get("additionalProperties") is not None:
        causes.append(_forbidden(f"{path}.additionalProperties", "must be undefined to be structural"))
    if v.get("default") is not None:
        causes.append(_forbidden(f"{path}.default", "must be undefined to be structural"))
    if v.get("title"):
        causes.append(_forbidden(f"{path}.title", "must be empty to be structural"))
    if v.get("description"):
        causes.append(_forbidden(f"{path}.description", "must be empty to be structural"))
    if v.get("nullable"):
        causes.append(_forbidden(f"{path}.nullable", "must be false to be structural"))
    if v.get("externalDocs"):
        causes.append(_forbidden(f"{path}.externalDocs", "must be undefined to be structural"))
    for ext, word in (("x-kubernetes-preserve-unknown-fields", "false"), ("x-kubernetes-embedded-resource", "false"),
                      ("x-kubernetes-int-or-string", "false")):
        if v.get(ext):
            causes.append(_forbidden(f"{path}.{ext}", f"must be {word} to be structural"))
    if v.get("x-kubernetes-list-map-keys"):
        causes.append(_forbidden(f"{path}.x-kubernetes-list-map-keys", "must be empty to be structural"))
    for ext in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
        if v.get(ext) is not None:
            causes.append(_forbidden(f"{path}.{ext}", "must be undefined to be structural"))
    if "metadata" in _props(v):
        causes.append(_forbidden(f"{path}.properties[metadata]", "must not be specified in a nested context"))
    return causes


def _defaults(s: Schema, path: str, root_schema: Schema, inside_meta: bool) -> list[Cause]:
    """``structuraldefaulting.ValidateDefaults``: a default must be pruned and valid."""
    causes: list[Cause] = []
    if s.get("x-kubernetes-embedded-resource") is True:
        inside_meta = False
    if s.get("default") is not None and not inside_meta:
        value = s["default"]
        pruned = copy.deepcopy(value)
        if s.get("x-kubernetes-embedded-resource") is True:
            prune(pruned, s, root=True)
        else:
            _prune(pruned, s)
        if not _deep_equal(pruned, value):
            causes.append(_invalid(f"{path}.default", value, "must not have unknown fields"))
        else:
            embedded = _objectmeta_validate(f"{path}.default", value, s,
                                            root=s.get("x-kubernetes-embedded-resource") is not True)
            if embedded:
                causes += embedded
            else:
                errs = _causes(_validate(s, "", value).errors, f"{path}.default")
                causes += errs or _list_types(f"{path}.default", s, value)
    if isinstance(s.get("items"), dict):
        causes += _defaults(s["items"], f"{path}.items", root_schema, inside_meta)
    for k in sorted(_props(s)):
        sub = _props(s)[k]
        if isinstance(sub, dict):
            sub_meta = inside_meta or (s.get("x-kubernetes-embedded-resource") is True or s is root_schema) \
                and k in META_FIELDS
            causes += _defaults(sub, _key(f"{path}.properties", k), root_schema, sub_meta)
    return causes


def schema_causes(s: Any, path: str) -> list[Cause]:
    """Everything kube-apiserver refuses in one version's ``openAPIV3Schema`` at ``path``."""
    if not isinstance(s, dict):
        return [_invalid(path, "", "must be an object")]
    causes: list[Cause] = []
    if s.get("nullable") is True:
        causes.append(_forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    causes += _generic(s, path, True, False, "")
    if _unconvertible(s):
        return causes
    structural = sorted(_structural(s, ROOT, path), key=lambda c: f"{c[0]}: {c[1]}")
    if structural:
        return causes + structural
    return causes + _defaults(s, path, s, False)


def crd_causes(spec: dict[str, Any]) -> list[Cause]:
    """The schema errors of a CRD's spec (the caller reports missing schemas)."""
    causes: list[Cause] = []
    if spec.get("preserveUnknownFields") is True:
        causes.append(_invalid("spec.preserveUnknownFields", True, "cannot set to true, set x-preserve-unknown-fields "
                                                                  "to true in spec.versions[*].schema instead"))
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    schemas = [(v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v.get("schema"), dict) else None
               for v in versions]
    if not schemas or any(s is None for s in schemas):
        return causes
    whole = [v.get("schema") for v in versions]
    if all(w == whole[0] for w in whole):
        return causes + schema_causes(schemas[0], "spec.validation.openAPIV3Schema")
    for i, s in enumerate(schemas):
        causes += schema_causes(s, f"spec.versions[{i}].schema.openAPIV3Schema")
    return causes


def version_schema(crd: dict[str, Any], version: str) -> Schema | None:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(v, dict) and v.get("name") == version:
            s = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(v.get("schema"), dict) else None
            return s if isinstance(s, dict) else None
    return None
