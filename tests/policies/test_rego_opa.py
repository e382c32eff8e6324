"""The Rego unit tests under policies/, run by OPA's own compiler and evaluator.

What ``opa test policies/`` does, in process (the ``opa_bindings`` wheel, OPA
1.20): every ``policies/**/*.rego`` is loaded into one engine (ids = paths
relative to policies/), the module set must compile, and every Rego test (see
:func:`tests.policies.suite.discover`) must evaluate to ``true``. One pytest
case per Rego test. The bindings evaluate with strict builtin errors, so a test
whose evaluation raises a builtin error fails here (``opa test`` would report
it as failing or erroring too).
"""

from __future__ import annotations

import functools

import pytest
from opa_bindings import OpaEngine, OpaError

from devstack.engine.evaluator import PATH_BUILTIN, query_terms, query_text
from tests.policies.suite import RegoTest, compile_error, discover, modules

TESTS = discover().tests
_PATH: list[str | int] = []  # the rule the next query reads (PATH_BUILTIN)


@functools.cache
def all_modules_engine() -> OpaEngine:
    """One engine holding every module under policies/ (compiled at its first evaluation).
    A test is read with the devstack engine's query (one text per path length, the path given
    by a builtin): the bindings compile every module for each new query text, so one text per
    test would compile them 300 times."""
    engine = OpaEngine()
    engine.register_function(PATH_BUILTIN, lambda: _PATH, arity=0)
    for module_id, source in modules().items():
        engine.add_policy(module_id, source)
    return engine


def test_opa_compiles_every_policy():
    error = compile_error(modules())
    assert error is None, f"OPA rejects policies/:\n{error}"


def test_every_test_file_parses_and_defines_tests():
    found = discover()
    assert not found.parse_errors, f"OPA cannot parse: {found.parse_errors}"
    assert found.test_files, "no *_test.rego under policies/"
    empty = [f for f in found.test_files if not found.tests_in(f)]
    assert not empty, f"*_test.rego files defining no test_* rule: {empty}"


def test_every_policy_file_has_tests():
    tested = {f.removesuffix("_test.rego") for f in discover().test_files}
    assert {"federation/placement", "lib/remediation"} <= tested, tested


@pytest.mark.parametrize("test", TESTS, ids=[t.id for t in TESTS])
def test_rego_under_opa(test: RegoTest):
    if test.skipped:
        pytest.skip(f"{test.id}: todo")
    _PATH[:] = query_terms(test.path)
    try:
        result = all_modules_engine().eval_query(query_text(len(test.path)))
    except OpaError as exc:
        pytest.fail(f"{test.file}: {test.name} errored under OPA: {exc.code}: {exc.message}")
    value = result[0]["x"] if result else "undefined"
    assert value is True, f"{test.file}: {test.name} is {value} under OPA"
