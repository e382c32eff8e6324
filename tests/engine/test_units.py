"""Pure parts of the engine: store semantics (OPA's in-memory store), OPA's parse of a module, OPA's error texts."""

from __future__ import annotations

import pytest

from devstack.engine import compiler
from devstack.engine.evaluator import topdown_error
from devstack.engine.state import conflict_view
from devstack.engine.store import (
    MISSING,
    StoreError,
    apply_patch,
    delete,
    lookup,
    parse_pointer,
    parse_url_path,
    put,
    read_path,
)


def _err(fn, *args) -> StoreError:
    with pytest.raises(StoreError) as info:
        fn(*args)
    return info.value


# -- store ------------------------------------------------------------------------------------------


def test_put_is_persistent_and_mkdir_p():
    old = {"a": {"x": 1}}
    new = put(old, ("a", "b", "c"), 2)
    assert new == {"a": {"x": 1, "b": {"c": 2}}}
    assert old == {"a": {"x": 1}}  # never mutated
    assert new["a"] is not old["a"]


def test_put_below_a_scalar_or_array_is_a_write_conflict():
    root = {"s": 5, "l": [1]}
    for path in (("s", "x"), ("s", "x", "y"), ("l", "x"), ("l", "5")):
        err = _err(put, root, path, 1)
        assert (err.status, err.code) == (404, "resource_conflict"), path
        assert err.message.startswith("storage_write_conflict_error: /")


def test_put_on_existing_array_element_inserts_like_opa():
    assert put({"l": [1, 2]}, ("l", "0"), 0) == {"l": [0, 1, 2]}


def test_root_rules():
    assert put({"a": 1}, (), {"b": 2}) == {"b": 2}
    assert _err(put, {}, (), [1]).status == 400
    err = _err(delete, {"a": 1}, ())
    assert (err.status, err.code) == (400, "invalid_parameter") and "root cannot be removed" in err.message


def test_delete_missing_is_404():
    err = _err(delete, {"a": {}}, ("a", "b"))
    assert (err.status, err.code) == (404, "resource_not_found")
    assert delete({"a": {"b": 1, "c": 2}}, ("a", "b")) == {"a": {"c": 2}}
    assert delete({"l": [1, 2, 3]}, ("l", "1")) == {"l": [1, 3]}


def test_patch_ops_and_errors():
    root = {"l": [1], "m": {"k": 1}}
    assert apply_patch(root, ("m",), [{"op": "add", "path": "/j", "value": 2},
                                      {"op": "remove", "path": "/k"}]) == {"l": [1], "m": {"j": 2}}
    assert apply_patch(root, (), [{"op": "add", "path": "/l/-", "value": 2}])["l"] == [1, 2]
    assert apply_patch(root, ("l",), [{"op": "replace", "path": "/0", "value": 9}])["l"] == [9]
    assert _err(apply_patch, root, (), [{"op": "remove", "path": "/l/-"}]).status == 400
    assert _err(apply_patch, root, (), [{"op": "test", "path": "/l"}]).status == 400
    assert _err(apply_patch, root, (), [{"op": "add", "path": "/x/y", "value": 1}]).status == 404
    assert _err(apply_patch, root, (), [{"op": "replace", "path": "/m/zz", "value": 1}]).status == 404
    assert _err(apply_patch, root, (), [{"op": "add", "path": "/l/x", "value": 1}]).status == 404
    assert root == {"l": [1], "m": {"k": 1}}


def test_paths():
    assert parse_url_path("/a%2Fb/c%20d/") == ("a/b", "c d")
    assert parse_pointer("/a~1b/c~0d/") == ("a/b", "c~d")
    assert parse_pointer("") == ()


def test_reads():
    root = {"l": ["a", "b"], "o": {"0": "zero", "k": {"x": 1}}}
    assert lookup(root, ("o", "0")) == "zero"
    assert read_path(root, ("o", "0")) is MISSING  # OPA: number term never matches a string key
    assert read_path(root, ("l", "1")) == "b"
    assert read_path(root, ("l", "x")) is MISSING
    assert read_path(root, ("o", "k", "x")) == 1


# -- OPA's parse of a module ---------------------------------------------------------------------


def test_module_package_and_rule_heads():
    src = ('package a["b-c"].d\n\ndefault allow := false\n\nallow if input.x\n\n'
           'deny contains "m" if true\n\nf(x) := x\n\nm[k] := 1 if k := "z"\n\nq.r["s"] := 1\n\np[x].y := 2 if x := "a"\n')
    mod = compiler.parse_module("p", src)
    assert mod.package == ("a", "b-c", "d")
    assert [h[3:] for h in mod.heads] == [("allow",), ("deny",), ("f",), ("m",), ("q", "r", "s"), ("p",)]
    assert mod.ast["package"]["path"][0] == {"type": "var", "value": "data"}
    assert [r["head"].get("name") for r in mod.ast["rules"]][:4] == ["allow", "allow", "deny", "f"]


def test_topdown_error_reads_the_bindings_text():
    assert topdown_error("eval_error", "1 error occurred: m.rego:7: eval_conflict_error: complete rules must not "
                                       "produce multiple outputs") == {
        "code": "eval_conflict_error", "message": "complete rules must not produce multiple outputs",
        "location": {"file": "m.rego", "row": 7, "col": 1}}
    assert topdown_error("x", "2 errors occurred:\nm:1: eval_type_error: a\nm:2: eval_type_error: b")["message"] == "a"
    assert topdown_error("invalid_argument", "string contains a NUL character") == {
        "code": "invalid_argument", "message": "string contains a NUL character"}


# -- OPA's compiler texts ----------------------------------------------------------------------------


TYPE_ERRORS = ("bundle activation failed: 2 errors occurred:\n"
               "a/b.rego:3: rego_type_error: plus: invalid argument(s)\n\thave: (number, string, ???)\n"
               "\twant: (x: number, y: number, z: number)\n"
               "rego_compile_error: error limit reached")


def test_split_errors_reads_ast_errors_texts():
    first, limit = compiler.split_errors(TYPE_ERRORS)
    assert (first.where, first.row, first.code, first.message) == (
        "a/b.rego", 3, "rego_type_error", "plus: invalid argument(s)")
    assert first.details == ("have: (number, string, ???)", "want: (x: number, y: number, z: number)")
    assert (limit.where, limit.row, limit.code) == (None, None, "rego_compile_error")
    [entry] = compiler.split_errors("1 error occurred: 4:0: rego_parse_error: unexpected eof token\n\tp := 1 +\n\t       ^")
    assert (entry.where, entry.row, entry.details) == ("4", 0, ("p := 1 +", "       ^"))
    assert compiler.split_errors("m.rego:0: rego_parse_error: empty module") is None  # one error, not a list


def test_parse_details_restores_tabs_and_steps_back_like_opa():
    source = "package p\n\n\tp := [1, 2\n\t\tq := 3 +/ 2\n"
    assert compiler.parse_details(source, 4, "q := 3 +/ 2", "^") == {"line": "\t\tq := 3 +/ 2", "idx": 2}
    # an error at the end of the file points back at the last non-blank line
    assert compiler.parse_details("package p\n\np := 1 +\n", 4, "p := 1 +", "       ^") == {"line": "p := 1 +", "idx": 7}
    assert compiler.parse_details("package p\n", 1, "nowhere", "^") is None


def test_column_opa_does_not_report_again_is_1():
    """The documented fallback: an error the empty-name run does not repeat gets column 1."""
    entries = compiler.split_errors(TYPE_ERRORS)
    errors = compiler.rest_errors(entries, {}, {"a/b.rego": "package p\n"})
    assert errors == [{"code": "rego_type_error", "message": "plus: invalid argument(s)",
                       "location": {"file": "a/b.rego", "row": 3, "col": 1}},
                      {"code": "rego_compile_error", "message": "error limit reached"}]


def test_compiler_refusals_and_caching():
    with pytest.raises(compiler.Refused) as info:
        compiler.check_modules({"m": 'package m\n\nx := 1 + "a"\n'})
    assert info.value.errors[0]["location"] == {"file": "m", "row": 3, "col": 6}
    with pytest.raises(compiler.Refused) as info:
        compiler.check_module("m", "\n")
    assert (info.value.errors, info.value.message) == ([], "m:0: rego_parse_error: empty module")
    compiler.check_modules({"m": "package m\n\nallow if true\n"})
    with pytest.raises(compiler.Refused):
        compiler.check_modules({"m": "package m\n\nallow if true\n"}, {"m": {"allow": 0}})


def test_conflict_view_keeps_what_path_conflicts_depend_on():
    tree = {"a": {"b": {"rule": [1, 2], "deep": {"x": "y"}}, "other": {"big": list(range(100))}},
            "s": 5, "untouched": {"k": 1}}
    assert conflict_view(tree, [("a", "b"), ("s", "p"), ("missing", "p")]) == {
        "a": {"b": {"rule": 0, "deep": {"x": 0}}}, "s": 0}
    assert conflict_view(tree, [("a",), ("a", "b")]) == {"a": {"b": {"rule": 0, "deep": {"x": 0}}, "other": {"big": 0}}}
