"""Reading this process's Prometheus metrics in tests."""

from __future__ import annotations

from prometheus_client import REGISTRY

__all__ = ["metric"]


def metric(name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (labels given exactly), 0 when it has never been set."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
