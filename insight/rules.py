"""The placement rules' answer for the objects the placement page shows, asked of OPA.

The page reads every placement rule from the placement-rules contract through
``data.io.k8s.federation.page.answer`` (policies/federation/page.rego): for one
object, whether some rule set constrains it, its malformed-request errors, its
requirements in words and, per cluster some rule forbids, each failed
requirement or forbid. This module asks it for many objects at once:

* objects that differ only in what identifies one object (name, uid, resource
  version, timestamps, owners, status:
  :func:`fedplace.insight.reasons.rules_key`) share one answer, so a
  rule reading a workload's name is shown as for the first workload of its group;
* the rest go through :func:`fedplace.insight.whatif.decide_workloads`: when the
  policies' AST is at hand, objects the rules cannot tell apart share one
  evaluation, and each evaluation reads only the data the answer reads;
* an answer that cannot be had (an evaluation error, the answer undefined) is
  kept as ``{"error": …}``: the page fails closed on it.

:class:`PageRules` keeps the answers between pages (opa-kube-sync): recomputed
from scratch when the policies or the data the rules may read change, and only
for new objects when the page's own objects do.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

from fedplace.common.secrets import without_secret_content
from fedplace.insight.evaluate import Decision, Evaluator
from fedplace.insight.reasons import rules_key
from fedplace.insight.whatif import decide_workloads

__all__ = ["PAGE_ANSWER", "PageRules", "answer_of", "ask", "rules_key"]

log = logging.getLogger(__name__)

PAGE_ANSWER = ("io", "k8s", "federation", "page", "answer")
def answer_of(decision: Decision) -> dict[str, Any]:
    """The page's answer from OPA's (``{"asks", "errors", "requires", "eligible", "forbidden"}``),
    or ``{"error": why}`` when there is none."""
    if decision.error is not None:
        return {"error": decision.error}
    value = decision.value
    if not isinstance(value, dict) or not isinstance(value.get("forbidden"), dict):
        return {"error": "data.io.k8s.federation.page.answer is undefined (policies/federation/page.rego not "
                         "loaded, or a rule failed)"}
    errors = value.get("errors") if isinstance(value.get("errors"), list) else []
    return {"asks": value.get("asks") is True, "errors": [str(e) for e in errors],
            "requires": str(value.get("requires") or ""),
            "eligible": value.get("eligible") if isinstance(value.get("eligible"), int) else None,
            "forbidden": {str(name): [r for r in reasons if isinstance(r, dict)]
                          for name, reasons in value["forbidden"].items() if isinstance(reasons, list)}}


async def ask(evaluator: Evaluator, objects: Iterable[Mapping[str, Any]],
              asts: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The answer for each object, by :func:`rules_key` (Secrets are sent without their content)."""
    first: dict[str, Mapping[str, Any]] = {}
    for obj in objects:
        first.setdefault(rules_key(obj), obj)
    keys = list(first)
    if not keys:
        return {}
    decided, _ = await decide_workloads(evaluator, PAGE_ANSWER,
                                        [without_secret_content(dict(first[k])) for k in keys], asts)
    return {k: answer_of(d) for k, d in zip(keys, decided, strict=True)}


class PageRules:
    """The answers opa-kube-sync's page shows, kept between pages (see the module docstring).

    After :meth:`forget` the last answers stay (``stale`` is true) until :meth:`refresh` has
    asked every object again and replaces them at once: a page served meanwhile shows the
    answers from before the change (and says so), never a matrix of unasked workloads."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.stale = False
        self._asts: Mapping[str, Any] | None = None
        self._parsed = False

    def forget(self) -> None:
        """The policies or the data the rules read changed: every answer is asked again at the
        next :meth:`refresh` (until then the last ones are kept, ``stale``)."""
        self.stale = True
        self._asts, self._parsed = None, False

    async def refresh(self, evaluator: Evaluator, objects: Sequence[Mapping[str, Any]]) -> int:
        """Ask the answers of the objects that have none — of every object when ``stale`` (the
        policies' AST read once per :meth:`forget`) — and drop those of objects no longer
        given; returns how many distinct objects were asked about. Raises what the evaluator
        raises when OPA cannot be asked (the last answers, and ``stale``, then stay)."""
        keys = {rules_key(o): o for o in objects}
        kept = {} if self.stale else {k: v for k, v in self.answers.items() if k in keys}
        todo = [o for k, o in keys.items() if k not in kept]
        if not todo:
            self.answers, self.stale = kept, False
            return 0
        if not self._parsed:
            self._asts, self._parsed = await evaluator.parse(), True
        kept.update(await ask(evaluator, todo, self._asts))
        self.answers, self.stale = kept, False
        return len(todo)
