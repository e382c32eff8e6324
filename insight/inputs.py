"""What a decision can read: a static analysis of the loaded Rego, for sharing evaluations.

``fedplace what-if`` (and ``fedplace report``) evaluate the admission decision
for thousands of workloads. Most of them look alike to the policies — the
placement policy reads an object's kind and annotations, not its name or its
labels — so each distinct *projection* of the input (the values at the paths
the policies can read) is evaluated once and its decision shared by every
workload with that projection; and the evaluator is given only the part of
the replicated data the decision can read. Both are only sound if the paths
are a superset of what evaluation reads, so the analysis works on OPA's own
parse of every module (``rego.parse_module``, or the ``ast`` OPA's policy API
returns) and over-approximates wherever it cannot be sure:

* It starts from every rule under the decision's package and follows every
  rule a body, head or ``else`` can reach: ``data.…`` references (constant
  prefix; a dynamic segment reaches everything below it), import aliases, and
  names of rules of the module's own package. Rules nothing reaches (the
  remediation library, views such as the LimitRange report) do not count.
* Every ``input.a.b[x]`` reference adds its constant prefix (``a.b``), whose
  whole subtree is then compared. ``object.get(input, P, d)`` adds ``P`` when
  ``P`` is a constant path or names a rule whose every definition is one.
  Any other use of ``input`` as a whole — an argument, an assignment,
  ``walk(input)`` — means the whole input: no sharing for that kind.
* Rules reached only through ``… with input as X`` read ``X``, not the
  object: their ``input`` references are not counted (their ``data``
  references are still followed).
* A rule body, a comprehension body or a rule head that cannot succeed for
  the object is skipped, with what it reads: a top-level ``input.kind ==
  "C"`` (or ``input.kind in {…}``) the object's kind fails, or a rule that is
  undefined (or ``false``) — because every definition of it is skipped so (to
  a fixed point), or because it reads no input at all and the evaluator, asked
  (:meth:`Analysis.guards`), says it is undefined or false for the current
  data. So a pack that is idle (the SchedulingPolicy pack before any
  SchedulingPolicy is replicated, the LimitRange pack without LimitRanges)
  reads nothing, and the SchedulingPolicy validation of SchedulingPolicy
  objects (their whole ``spec``) is never reached for a ReplicaSet. A skipped
  body fails whatever else the object holds, so nothing it reads can change
  the decision.
* The data read is every constant prefix of a ``data`` reference that does not
  lead into a rule, with a function's parameters taken as constants where it
  is called with constant arguments (``replicated.collection("limitranges")``
  reads ``data.kubernetes.limitranges``).

Anything outside this vocabulary falls on the safe side (more paths, the whole
input, all the data). :func:`projection` turns the paths into a hashable key.
``tests/insight/test_inputs.py`` checks, on generated objects and data and
every shipped policy, that sharing decisions this way gives exactly the
per-object decisions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

__all__ = ["UNDEFINED", "Analysis", "analyse", "projection"]

Path = tuple[Any, ...]
Node = tuple[str, ...]  # package path + rule name
Env = tuple[tuple[str, str], ...]  # function parameter → constant (JSON), when called with constants
UNDEFINED: Any = type("Undefined", (), {"__repr__": lambda self: "<undefined>"})()
_MISSING = {"$missing": True}  # marks an absent path in a projection (JSON-distinct from null)
_COMPREHENSIONS = ("arraycomprehension", "setcomprehension", "objectcomprehension")


class _Whole(Exception):
    """The decision may read the whole input."""


def _constant(term: Any) -> Any:
    """The JSON value of a constant term (scalars, arrays, sets, objects of constants); raises KeyError."""
    if not isinstance(term, dict):
        raise KeyError("not a term")
    kind = term.get("type")
    if kind in ("string", "number", "boolean", "null"):
        return term.get("value")
    if kind in ("array", "set"):
        return [_constant(t) for t in term.get("value") or []]
    if kind == "object":
        return {json.dumps(_constant(k)): _constant(v) for k, v in term.get("value") or []}
    raise KeyError(kind)


def _strings(terms: Sequence[Mapping[str, Any]], env: Mapping[str, Any]) -> tuple[list[Any], int]:
    """The constant prefix of ref segments (strings, numbers, parameters bound to one) and where it stops."""
    out: list[Any] = []
    for i, t in enumerate(terms):
        if isinstance(t, dict) and t.get("type") in ("string", "number"):
            out.append(t["value"])
        elif isinstance(t, dict) and t.get("type") == "var" and t.get("value") in env:
            value = env[t["value"]]
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                return out, i
            out.append(value)
        else:
            return out, i
    return out, len(terms)


def _is_input(term: Any) -> bool:
    if not isinstance(term, dict):
        return False
    if term.get("type") == "var":
        return term.get("value") == "input"
    return term.get("type") == "ref" and len(term.get("value") or []) == 1 and _is_input(term["value"][0])


def _is_input_kind(term: Any) -> bool:
    if not isinstance(term, dict) or term.get("type") != "ref":
        return False
    v = term.get("value") or []
    return len(v) == 2 and _is_input(v[0]) and v[1] == {"type": "string", "value": "kind"}


def _op(expr_terms: Any) -> str | None:
    """The operator of a call-form expression (``equal``, ``internal.member_2``…)."""
    if not isinstance(expr_terms, list) or not expr_terms:
        return None
    head = expr_terms[0]
    if not isinstance(head, dict) or head.get("type") != "ref":
        return None
    parts = []
    for t in head.get("value") or []:
        if t.get("type") not in ("var", "string"):
            return None
        parts.append(str(t["value"]))
    return ".".join(parts)


def _pattern_vars(x: Any) -> Iterator[str]:
    """The variables a term declares when it is a target: a variable, or arrays and objects of them."""
    if isinstance(x, list):
        for item in x:
            yield from _pattern_vars(item)
    elif isinstance(x, dict):
        if x.get("type") == "var" and isinstance(x.get("value"), str):
            yield x["value"]
        elif x.get("type") in ("array", "object", "set"):
            yield from _pattern_vars(x.get("value"))


def _declared(rule: Mapping[str, Any]) -> frozenset[str]:
    """Names a definition (its ``else`` chain and comprehensions included) may declare as
    locals — ``:=`` targets, ``some`` and ``every`` variables, parameters — which then shadow
    rules of the same name (as OPA resolves them). Over-approximated."""
    names: set[str] = set()

    def scan(x: Any) -> None:
        if isinstance(x, list):
            if x and _op(x) == "assign" and len(x) == 3:
                names.update(_pattern_vars(x[1]))
            for item in x:
                scan(item)
        elif isinstance(x, dict):
            for sym in x.get("symbols") or []:
                if isinstance(sym, dict) and sym.get("type") == "call":
                    names.update(_pattern_vars((sym.get("value") or [])[1:-1]))  # some k, v in C
                else:
                    names.update(_pattern_vars(sym))  # some x
            if "domain" in x and "body" in x:  # every k, v in C
                names.update(_pattern_vars([x.get("key"), x.get("value")]))
            if x.get("type") == "call" and _op(x.get("value")) == "assign" and len(x["value"]) == 3:
                names.update(_pattern_vars(x["value"][1]))
            for value in x.values():
                if isinstance(value, (list, dict)):
                    scan(value)

    for r in _chain(rule):
        names.update(_pattern_vars((r.get("head") or {}).get("args") or []))
        scan(r.get("body"))
        scan((r.get("head") or {}).get("value"))
    return frozenset(names)


def _chain(rule: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """A definition and its ``else`` branches."""
    r: Mapping[str, Any] | None = rule
    while r:
        yield r
        r = r.get("else")


@dataclass
class _Module:
    id: str
    package: Node
    aliases: dict[str, tuple[str, Path]]  # alias → ("data" | "input", path)


@dataclass
class _Def:
    module: _Module
    rule: dict[str, Any]  # one definition, its ``else`` chain included
    local: frozenset[str] = frozenset()  # its local names (see _declared)

    @property
    def function(self) -> bool:
        return bool((self.rule.get("head") or {}).get("args"))

    @property
    def complete(self) -> bool:
        """A complete rule's definition (``x := v``, ``x if …``): undefined when no body succeeds.
        A partial set or object (``contains``, ``x[k] := v``, ``x.y := v``) is empty instead."""
        head = self.rule.get("head") or {}
        return not head.get("args") and "key" not in head and len(head.get("ref") or []) <= 1


@dataclass
class Analysis:
    """The loaded modules, indexed; :meth:`paths` and :meth:`data_reads` answer per kind.

    ``known`` holds the values of rules that read no input, as the evaluator
    answered them (:data:`UNDEFINED` when undefined): see :meth:`guards`.
    """

    decision: Node
    modules: list[_Module] = field(default_factory=list)
    defs: dict[Node, list[_Def]] = field(default_factory=dict)
    rules_of: dict[Node, set[str]] = field(default_factory=dict)  # package → its rule names
    known: dict[Node, Any] = field(default_factory=dict)
    views: dict[Node, Path] = field(default_factory=dict)  # rules that are a part of input (see _input_views)
    _results: dict[str | None, tuple[frozenset[Path], frozenset[Path]] | None] = field(default_factory=dict)
    _guards: list[Node] | None = None

    def learn(self, values: Mapping[Node, Any]) -> None:
        """Set :attr:`known` (the evaluator's answers for :meth:`guards`, for the current data)."""
        self.known = dict(values)
        self._results = {}

    # -- resolving names ------------------------------------------------------------

    def nodes_at(self, path: Sequence[Any]) -> list[Node]:
        """The rules a data reference with constant prefix ``path`` can reach."""
        path = tuple(str(p) for p in path)
        for n in range(len(path), 0, -1):
            if path[:n] in self.defs:
                return [path[:n]]
        return [node for node in self.defs if node[: len(path)] == path]

    def _exact(self, path: Sequence[Any]) -> Node | None:
        """The rule a reference goes into (the rule itself or a value inside it), if any."""
        path = tuple(str(p) for p in path)
        for n in range(len(path), 0, -1):
            if path[:n] in self.defs:
                return path[:n]
        return None

    def resolve(self, module: _Module, term: Mapping[str, Any], env: Mapping[str, Any] = {},  # noqa: B006
                local: frozenset[str] = frozenset()) -> tuple[str, Path, list[Any]] | None:
        """``("data"|"input", constant path, remaining segments)`` for a ref or var term, or None (a
        local). Names in ``local`` are locals, never rules; without it, a name that is both may be
        taken for the rule (an over-approximation, fine for what is read but not for pruning)."""
        if term.get("type") == "var":
            head, rest = term.get("value"), []
        elif term.get("type") == "ref" and term.get("value"):
            first = term["value"][0]
            if first.get("type") != "var":
                return None
            head, rest = first.get("value"), list(term["value"][1:])
        else:
            return None
        consts, stop = _strings(rest, env)
        if head == "input":
            return "input", tuple(consts), rest[stop:]
        if head == "data":
            return "data", tuple(consts), rest[stop:]
        if head in env or head in local:
            return None
        if head in module.aliases:
            root, base = module.aliases[head]
            return root, base + tuple(consts), rest[stop:]
        if head in self.rules_of.get(module.package, ()):
            return "data", module.package + (head,) + tuple(consts), rest[stop:]
        return None

    # -- what cannot succeed ------------------------------------------------------------

    def _undefined(self, module: _Module, term: Any, undefined: set[Node], local: frozenset[str],
                   falsy: bool = False) -> bool:
        """Whether ``term`` names a rule (or a value inside one) that is undefined (or, with
        ``falsy``, ``false``) for the objects at hand."""
        if not isinstance(term, dict) or term.get("type") not in ("ref", "var"):
            return False
        found = self.resolve(module, term, local=local)
        if found is None or found[0] != "data":
            return False
        node = self._exact(found[1])
        if node is None:
            return False
        if node in undefined:
            return True
        if node not in self.known:
            return False
        value = self.known[node]
        if value is UNDEFINED:
            return True
        inside: Any = value
        for seg in found[1][len(node):]:  # a constant path into a known value (as JSON: a set is a list)
            if isinstance(inside, dict) and isinstance(seg, str):
                if seg not in inside:
                    return True  # no such key: undefined, whatever follows
                inside = inside[seg]
            else:
                return False  # into a list (an array or a set: JSON cannot tell) or a scalar: cannot tell
        return falsy and not found[2] and inside is False

    def body_fails(self, module: _Module, body: Sequence[Mapping[str, Any]], kind: str | None,
                   undefined: set[Node], local: frozenset[str]) -> bool:
        """Whether a top-level expression of ``body`` fails for every object of ``kind``
        (``local``: the enclosing definition's local names, see :func:`_declared`)."""
        for expr in body:
            if expr.get("negated") or expr.get("with"):
                continue
            terms = expr.get("terms")
            op = _op(terms)
            if op == "equal" and len(terms) == 3:
                a, b = terms[1], terms[2]
                for x, y in ((a, b), (b, a)):
                    if _is_input_kind(x) and isinstance(y, dict) and y.get("type") == "string":
                        if kind is None or y["value"] != kind:
                            return True
            if op == "internal.member_2" and len(terms) == 3 and _is_input_kind(terms[1]):
                choices = self._constant_of(module, terms[2], local)
                if isinstance(choices, list) and (kind is None or kind not in choices):
                    return True
            if isinstance(terms, list):
                if op != "print" and any(self._undefined(module, t, undefined, local) for t in terms[1:]):
                    return True  # an operand is undefined: so is the call (print prints "<undefined>")
            elif isinstance(terms, dict) and self._undefined(module, terms, undefined, local, falsy=True):
                return True
            elif isinstance(terms, dict) and "symbols" in terms:  # some x in C: fails when C is undefined
                for sym in terms["symbols"]:
                    if (isinstance(sym, dict) and sym.get("type") == "call"
                            and _op(sym.get("value")) in ("internal.member_2", "internal.member_3")
                            and self._undefined(module, sym["value"][-1], undefined, local)):
                        return True
        return False

    def def_fails(self, d: _Def, rule: Mapping[str, Any], kind: str | None, undefined: set[Node]) -> bool:
        """A definition (one of a chain) that contributes nothing: its body fails or its head's value is undefined."""
        head = rule.get("head") or {}
        local = d.local
        return (self.body_fails(d.module, rule.get("body") or [], kind, undefined, local)
                or self._undefined(d.module, head.get("value"), undefined, local)
                or self._undefined(d.module, head.get("key"), undefined, local))

    def _constant_of(self, module: _Module, term: Any, local: frozenset[str]) -> Any:
        """A literal's value, or the value of a rule every definition of which is that one literal."""
        try:
            return _constant(term)
        except KeyError:
            pass
        found = self.resolve(module, term, local=local) if isinstance(term, dict) else None
        if found is None or found[0] != "data" or found[2]:
            return None
        nodes = self.nodes_at(found[1])
        if len(nodes) != 1 or nodes[0] != found[1]:
            return None
        values = []
        for d in self.defs[nodes[0]]:
            for rule in _chain(d.rule):
                try:
                    values.append(_constant(rule.get("head", {}).get("value")))
                except KeyError:
                    return None
        return values[0] if len(values) == 1 else None

    def undefined_for(self, kind: str | None) -> set[Node]:
        """Rules no definition of which an object of ``kind`` can satisfy (fixed point)."""
        undefined = {n for n, v in self.known.items() if v is UNDEFINED}
        changed = True
        while changed:
            changed = False
            for node, defs in self.defs.items():
                if node in undefined or any(d.rule.get("default") or not d.complete for d in defs):
                    continue
                if all(self.def_fails(d, r, kind, undefined) for d in defs for r in _chain(d.rule)):
                    undefined.add(node)
                    changed = True
        return undefined

    # -- rules that read no input ----------------------------------------------------------

    def guards(self) -> list[Node]:
        """Rules (not functions) that read no input and that a body or head of a rule the
        decision reaches uses as a condition or an operand: ask the evaluator for their
        values (set :attr:`known`) and the bodies they make fail are skipped."""
        if self._guards is not None:
            return self._guards
        depends = self._input_dependent()
        used: set[Node] = set()
        walk = _Walk(self, kind=None, prune=False, whole_input_ok=True)
        walk.run()
        for node, _, _ in walk.seen:
            for d in self.defs[node]:
                for rule in _chain(d.rule):
                    head = rule.get("head") or {}
                    for term in [head.get("value"), head.get("key"), *_operands(rule.get("body") or [])]:
                        if isinstance(term, dict) and term.get("type") in ("ref", "var"):
                            found = self.resolve(d.module, term, local=d.local)
                            node_used = self._exact(found[1]) if found and found[0] == "data" else None
                            if node_used is not None:
                                used.add(node_used)
        self._guards = sorted(n for n in used if n not in depends and not any(d.function for d in self.defs[n]))
        return self._guards

    def _input_dependent(self) -> set[Node]:
        """Rules whose value may depend on input (a fixed point over direct reads and references)."""
        direct: set[Node] = set()
        refs: dict[Node, set[Node]] = {}
        for node in self.defs:
            walk = _Walk(self, kind=None, prune=False, follow=False)
            walk.visit(node)
            if walk.whole or walk.found:
                direct.add(node)
            refs[node] = walk.referenced
        depends = set(direct)
        changed = True
        while changed:
            changed = False
            for node, targets in refs.items():
                if node not in depends and targets & depends:
                    depends.add(node)
                    changed = True
        return depends

    # -- the answers ------------------------------------------------------------------------

    def _result(self, kind: str | None) -> tuple[frozenset[Path], frozenset[Path]] | None:
        if kind not in self._results:
            walk = _Walk(self, kind)
            walk.run()
            self._results[kind] = None if walk.whole else (frozenset(walk.found), frozenset(walk.reads))
        return self._results[kind]

    def paths(self, kind: str | None) -> frozenset[Path] | None:
        """The input paths a decision about an object of ``kind`` can read; None: the whole input."""
        found = self._result(kind)
        return None if found is None else found[0]

    def data_reads(self, kinds: Iterable[str | None], guards: Iterable[Node] = ()) -> frozenset[Path] | None:
        """The data (constant prefixes under ``data``) the decisions about these kinds, and the
        rules ``guards``, can read; None when that cannot be told (then: all of it)."""
        out: set[Path] = set()
        for kind in kinds:
            walk = _Walk(self, kind, whole_input_ok=True)
            walk.run()
            out |= walk.reads
        if guards:
            walk = _Walk(self, kind=None, prune=False, whole_input_ok=True, roots=list(guards))
            walk.run()
            out |= walk.reads
        return None if () in out else frozenset(out)


def _operands(body: Sequence[Mapping[str, Any]]) -> Iterator[Any]:
    """The terms at the top level of a body's expressions (operands, or the bare term)."""
    for expr in body:
        terms = expr.get("terms")
        if isinstance(terms, list):
            yield from terms[1:]
        else:
            yield terms


class _Walk:
    """One traversal (see the module docstring)."""

    def __init__(self, analysis: Analysis, kind: str | None, *, prune: bool = True, follow: bool = True,
                 whole_input_ok: bool = False, roots: list[Node] | None = None) -> None:
        self.a = analysis
        self.kind = kind
        self.prune = prune
        self.follow = follow
        self.whole_input_ok = whole_input_ok
        self.roots = roots
        self.undefined = analysis.undefined_for(kind) if prune else set()
        self.found: set[Path] = set()
        self.reads: set[Path] = set()
        self.whole = False
        self.referenced: set[Node] = set()
        self.todo: list[tuple[Node, bool, Env]] = []
        self.seen: set[tuple[Node, bool, Env]] = set()
        self.local: frozenset[str] = frozenset()  # the locals of the definition being walked

    def run(self) -> None:
        roots = self.roots if self.roots is not None else [
            n for n in self.a.defs if n[: len(self.a.decision)] == self.a.decision]
        for node in roots:
            self._reach(node, True, ())
        while self.todo:
            node, ours, env = self.todo.pop()
            self.visit(node, ours, env)
            if self.whole and not self.whole_input_ok:
                return

    def visit(self, node: Node, ours: bool = True, env: Env = ()) -> None:
        for d in self.a.defs[node]:
            bound = self._bind(d, dict(env)) if env else {}
            self.local = d.local
            for rule in _chain(d.rule):
                if ours and self.prune and self.a.def_fails(d, rule, self.kind, self.undefined):
                    continue
                head = rule.get("head") or {}
                # not the first term of its "ref", the rule's own name
                self._walk(d.module, [(head.get("ref") or [])[1:], head.get("key"), head.get("value"),
                                      head.get("args")], ours, bound)
                self._walk(d.module, rule.get("body"), ours, bound)

    @staticmethod
    def _bind(d: _Def, args: Mapping[str, Any]) -> dict[str, Any]:
        """The definition's parameter names bound to the call's constant arguments (by position)."""
        params = (d.rule.get("head") or {}).get("args") or []
        out = {}
        for i, p in enumerate(params):
            if isinstance(p, dict) and p.get("type") == "var" and str(i) in args:
                out[p["value"]] = json.loads(args[str(i)])
        return out

    def _reach(self, node: Node, ours: bool, env: Env) -> None:
        self.referenced.add(node)
        if not self.follow:
            return
        if (node, ours, env) not in self.seen:
            self.seen.add((node, ours, env))
            self.todo.append((node, ours, env))

    def _read(self, path: Path, ours: bool) -> None:
        if not ours:
            return
        if not path:
            self.whole = True
            if not self.whole_input_ok:
                raise _Whole()
            return
        self.found.add(path)

    def _walk(self, module: _Module, x: Any, ours: bool, env: Mapping[str, Any]) -> None:
        try:
            self._walk_term(module, x, ours, env)
        except _Whole:
            if not self.whole_input_ok:
                self.todo.clear()

    def _walk_term(self, module: _Module, x: Any, ours: bool, env: Mapping[str, Any]) -> None:
        if isinstance(x, list):
            for item in x:
                self._walk_term(module, item, ours, env)
            return
        if not isinstance(x, dict):
            return
        if "terms" in x and "index" in x:  # an expression
            inner = ours
            for w in x.get("with") or []:
                if _is_input(w.get("target")):
                    inner = False
                self._walk_term(module, w.get("value"), ours, env)
            terms = x.get("terms")
            if isinstance(terms, list):
                self._call(module, terms, inner, env)
            else:
                self._walk_term(module, terms, inner, env)
            return
        kind = x.get("type")
        if kind in ("ref", "var"):
            self._ref(module, x, ours, env)
        elif kind == "call":
            self._call(module, x.get("value") or [], ours, env)
        elif kind in _COMPREHENSIONS and ours and self.prune and self.a.body_fails(
                module, (x.get("value") or {}).get("body") or [], self.kind, self.undefined, self.local):
            return  # always empty: nothing in it is read
        else:
            for value in x.values():
                if isinstance(value, (list, dict)):
                    self._walk_term(module, value, ours, env)

    def _ref(self, module: _Module, term: Mapping[str, Any], ours: bool, env: Mapping[str, Any],
             args: Env = ()) -> None:
        found = self.a.resolve(module, term, env)
        rest: list[Any]
        if found is None:
            rest = list(term.get("value") or []) if term.get("type") == "ref" else []
        else:
            root, path, rest = found
            node = self.a._exact(path) if root == "data" else None
            view = self.a.views.get(node) if node is not None else None
            keys = [*path[len(node):], *self._keys(module, rest)] if view is not None and node is not None else []
            if root == "input":
                self._read(path, ours)
            elif view is not None and keys:  # a constant key into a part of input: that key only
                self._read(view + tuple(keys), ours)
                rest = rest[len(keys) - (len(path) - len(node or ())):]
            else:
                nodes = self.a.nodes_at(path)
                for node in nodes:
                    self._reach(node, ours, args if nodes == [node] and node == tuple(str(p) for p in path) else ())
                if self.a._exact(path) is None:
                    self.reads.add(path)
        for seg in rest:
            self._walk_term(module, seg, ours, env)

    def _keys(self, module: _Module, segments: Sequence[Any]) -> list[str]:
        """The leading ref segments that are constant strings: literals, or rules of one constant value."""
        out: list[str] = []
        for seg in segments:
            value = self.a._constant_of(module, seg, self.local) if isinstance(seg, dict) else None
            if not isinstance(value, str):
                break
            out.append(value)
        return out

    def _call(self, module: _Module, terms: list[Any], ours: bool, env: Mapping[str, Any]) -> None:
        if not terms:
            return
        if _op(terms) == "object.get" and len(terms) >= 3 and _is_input(terms[1]):
            for path in self._object_get_paths(module, terms[2]):
                self._read(path, ours)
            self._walk_term(module, terms[2:], ours, env)
            return
        head, args = terms[0], terms[1:]
        constants: dict[str, str] = {}
        for i, a in enumerate(args):
            try:
                constants[str(i)] = json.dumps(_constant(a), sort_keys=True)
            except KeyError:
                if isinstance(a, dict) and a.get("type") == "var" and a.get("value") in env:
                    constants[str(i)] = json.dumps(env[a["value"]], sort_keys=True)
        bound: Env = tuple(sorted(constants.items())) if len(constants) == len(args) else ()
        if isinstance(head, dict) and head.get("type") == "ref":
            self._ref(module, head, ours, env, bound)
        else:
            self._walk_term(module, head, ours, env)
        self._walk_term(module, args, ours, env)

    def _object_get_paths(self, module: _Module, term: Any) -> Iterable[Path]:
        """The paths ``object.get(input, term, …)`` reads."""
        try:
            value = _constant(term)
            return [tuple(value) if isinstance(value, list) else (value,)]
        except KeyError:
            pass
        found = self.a.resolve(module, term, local=self.local) if isinstance(term, dict) else None
        if found is not None and found[0] == "data" and not found[2]:
            nodes = self.a.nodes_at(found[1])
            if len(nodes) == 1 and nodes[0] == found[1]:
                out = []
                for d in self.a.defs[nodes[0]]:
                    for rule in _chain(d.rule):
                        if self.prune and self.a.def_fails(d, rule, self.kind, self.undefined):
                            continue
                        try:
                            value = _constant((rule.get("head") or {}).get("value"))
                        except KeyError:
                            return [()]
                        out.append(tuple(value) if isinstance(value, list) else (value,))
                return out
        return [()]


def _input_views(analysis: Analysis) -> dict[Node, Path]:
    """Rules that only name a part of the input: one definition, no condition, and the value
    ``input.a.b`` or ``object.get(input, ["a", "b"], {})`` (an empty-object default: a key of it is
    as undefined as a key of an absent object). A constant key into such a rule
    (``requested[eu_key]``) reads that key only, not the whole part."""
    out: dict[Node, Path] = {}
    for node, defs in analysis.defs.items():
        if len(defs) != 1 or not defs[0].complete or defs[0].rule.get("else") or defs[0].rule.get("default"):
            continue
        rule = defs[0].rule
        body = rule.get("body") or []
        if len(body) != 1 or body[0].get("terms") != {"type": "boolean", "value": True}:
            continue
        value = (rule.get("head") or {}).get("value") or {}
        if value.get("type") == "ref" and value.get("value") and _is_input(value["value"][0]):
            path, stop = _strings(value["value"][1:], {})
            if stop == len(value["value"]) - 1 and path:
                out[node] = tuple(path)
        elif value.get("type") == "call" and _op(value.get("value")) == "object.get":
            args = value["value"][1:]
            if len(args) == 3 and _is_input(args[0]) and args[2] == {"type": "object", "value": []}:
                try:
                    path = _constant(args[1])
                except KeyError:
                    continue
                path = path if isinstance(path, list) else [path]
                if path and all(isinstance(p, str) for p in path):
                    out[node] = tuple(path)
    return out


def analyse(asts: Mapping[str, Mapping[str, Any]], decision: Sequence[str]) -> Analysis:
    """Index parsed modules (OPA's AST JSON by module id) for the decision at ``decision`` (under data)."""
    analysis = Analysis(tuple(decision))
    for module_id, ast in asts.items():
        pkg_terms = (ast.get("package") or {}).get("path") or []
        package = tuple(str(t.get("value")) for t in pkg_terms[1:])
        aliases: dict[str, tuple[str, Path]] = {}
        for imp in ast.get("imports") or []:
            ref = (imp.get("path") or {}).get("value") or []
            if not ref or ref[0].get("type") != "var":
                continue
            root = ref[0].get("value")
            path, _ = _strings(ref[1:], {})
            if root not in ("data", "input"):  # future.keywords, rego.v1
                continue
            alias = imp.get("alias") or (str(path[-1]) if path else root)
            aliases[alias] = (root, tuple(path))
        module = _Module(module_id, package, aliases)
        analysis.modules.append(module)
        for rule in ast.get("rules") or []:
            head_ref = (rule.get("head") or {}).get("ref") or []
            if not head_ref or head_ref[0].get("type") != "var":
                continue
            name = str(head_ref[0]["value"])
            analysis.defs.setdefault(package + (name,), []).append(_Def(module, rule, _declared(rule)))
            analysis.rules_of.setdefault(package, set()).add(name)
    analysis.views = _input_views(analysis)
    return analysis


def _at(obj: Any, path: Path) -> Any:
    for seg in path:
        if isinstance(obj, dict) and isinstance(seg, str) and seg in obj:
            obj = obj[seg]
        elif isinstance(obj, list) and isinstance(seg, int) and not isinstance(seg, bool) and 0 <= seg < len(obj):
            obj = obj[seg]
        else:
            return _MISSING
    return obj


def projection(obj: Any, paths: frozenset[Path] | None) -> str:
    """A key equal for two objects exactly when they agree on every path (the whole object if None)."""
    if paths is None:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return json.dumps([_at(obj, p) for p in sorted(paths, key=repr)], sort_keys=True, separators=(",", ":"))


def subset(doc: Any, paths: frozenset[Path] | None) -> Any:
    """The part of ``doc`` (the whole ``data`` document) under ``paths`` (all of it for None)."""
    if paths is None:
        return doc
    out: dict[str, Any] = {}
    for path in sorted(paths, key=len):
        src, dst = doc, out
        for i, seg in enumerate(path):
            key = str(seg)
            if not isinstance(src, dict) or key not in src:
                break
            if i == len(path) - 1 or not isinstance(src[key], dict):
                dst[key] = src[key]
                break
            if key in dst and not isinstance(dst[key], dict):
                break  # already copied whole
            src, dst = src[key], dst.setdefault(key, {})
    return out
