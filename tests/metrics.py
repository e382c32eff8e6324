"""Reading this process's Prometheus metrics in tests."""

from __future__ import annotations

from prometheus_client import REGISTRY

__all__ = ["metric", "metric_total"]


def metric(name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (labels given exactly), 0 when it has never been set."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def metric_total(name: str) -> float:
    """The sum of the samples ``name`` over every label value (a counter's ``name`` ends in
    ``_total``), 0 when there are none."""
    return sum(s.value for family in REGISTRY.collect() for s in family.samples if s.name == name)
