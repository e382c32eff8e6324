"""Views of what the policies decide, for people: the ``fedplace`` command (explain, what-if,
report, limits) and the placement page opa-kube-sync serves (docs/insight.md)."""
