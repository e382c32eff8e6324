"""devstack.kube.quantity against what kube-apiserver 1.24 stores for each input.

Each pair was measured on a real kube-apiserver 1.24 (a LimitRange item's ResourceList;
test_defaults.py stores a subset in both modes)."""

from __future__ import annotations

import pytest

from devstack.kube.quantity import QuantityError, parse, resource_list_value

STORED = [
    ("0.5", "500m"), ("1000m", "1"), ("1000M", "1G"), ("0.0001", "1m"), ("1048576", "1048576"), ("1.5", "1500m"),
    ("1.5Gi", "1536Mi"), ("1024Mi", "1Gi"), ("1e3", "1e3"), ("1E3", "1E3"), ("1000", "1k"), ("100", "100"),
    ("1024", "1024"), ("1023Ki", "1023Ki"), ("0", "0"), ("0.0", "0"), ("1Ki", "1Ki"), ("1536Mi", "1536Mi"),
    ("2048", "2048"), ("1e-3", "1e-3"), ("1.5e3", "1500"), ("12e2", "1200"), ("5000000000", "5G"),
    ("1.1Mi", "1153433600m"), ("0.1Ki", "102400m"), ("1000Ki", "1000Ki"), ("1k", "1k"), ("100m", "100m"),
    ("1500m", "1500m"), ("+1", "+1"), ("1n", "1m"), ("1u", "1m"), ("10u", "1m"), ("1.0001", "1001m"),
    ("123456789", "123456789"), ("1E", "1E"), ("8Ei", "9223372036854775807"), ("1P", "1P"), ("1T", "1T"),
    ("2.5G", "2500M"), ("0.3333", "334m"), ("-1", "-1"), ("1e6", "1e6"), ("1e9", "1e9"), ("1500e-3", "1500e-3"),
    ("3.000", "3"), ("1e+3", "1e+3"), (1, "1"), (0.5, "500m"), (2048, "2048"), (1.25, "1250m"),
    ("1.23456789", "1235m"), ("7.77Gi", "8342973972480m"), ("100Mi", "100Mi"), ("1Mi", "1Mi"), ("999m", "999m"),
    ("1001m", "1001m"), ("1e0", "1e0"), ("15e-1", "1500e-3"),
]


@pytest.mark.parametrize("sent,stored", STORED)
def test_resource_list_values_as_kube_apiserver_stores_them(sent, stored):
    assert resource_list_value(sent) == stored


@pytest.mark.parametrize("sent,message", [
    ("1K", "unable to parse quantity's suffix"), ("--1", "unable to parse quantity's suffix"),
    ("abc", "quantities must match"), ("1.2.3", "quantities must match"), ("1x", "quantities must match"),
    ("", "quantities must match"), ("1 k", "quantities must match"),
])
def test_what_kube_apiserver_cannot_decode(sent, message):
    with pytest.raises(QuantityError) as info:
        parse(sent)
    assert str(info.value).startswith(message)


def test_values_for_comparisons():
    assert parse("1.5Gi").int_value() == 1610612736
    assert parse("0.0001").milli_value() == 1  # rounded up
    assert parse("100m").value < parse("0.2").value
