"""One quantity grammar for every reader: what the API accepts, the agents, the observer and
the simulated clusters read the same way, and amounts print back as the same amounts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.machinery.quantity import (
    format_bytes,
    format_cpu,
    is_request,
    number,
    parse,
)
from shoal.machinery.resources import amount, format_amount, pod_requests


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", 0.25), ("2", 2.0), ("1.5", 1.5), (".5", 0.5), ("+3", 3.0), ("-1", -1.0),
        ("1Gi", 2**30), ("128Mi", 128 * 2**20), ("1Ei", 2**60), ("1G", 1e9), ("2k", 2000.0),
        ("1E", 1e18), ("1e3", 1000.0), ("1E-3", 0.001), ("100n", 1e-7), ("5u", 5e-6),
        (0.5, 0.5), (3, 3.0),
    ],
)  # fmt: skip
def test_grammar(text: object, value: float) -> None:
    assert parse(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "junk", "1K", "1ki", "1e", "Mi", "1.2.3", "1 Gi", True, None])
def test_not_quantities(text: object) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse(text)
    assert number(text) == 0.0  # what a member cluster reports unreadably counts as nothing


def test_amounts_round_up_as_kubernetes_does() -> None:
    assert amount("cpu", "250m") == 250
    assert amount("cpu", "0.0001") == 1  # never a fraction slips through a fit check
    assert amount("memory", "1.5") == 2
    assert amount("memory", "1G") == 10**9
    assert amount("pods", "110") == 110


def test_printing() -> None:
    assert format_cpu(2000) == "2" and format_cpu(250) == "250m"
    assert format_bytes(512 * 2**30) == "512Gi" and format_bytes(2**40) == "1Ti"
    assert format_bytes(1000) == "1000" and format_bytes(0) == "0"
    assert format_amount("memory", 128 * 2**20) == "128Mi"
    assert format_amount("hugepages-2Mi", 2**21) == "2Mi"
    assert format_amount("pods", 110) == "110"


@given(st.integers(min_value=0, max_value=2**62), st.sampled_from(["cpu", "memory", "pods"]))
def test_printed_amounts_read_back(value: int, resource: str) -> None:
    assert amount(resource, format_amount(resource, value)) == value


def test_pod_requests_count_init_containers_and_overhead() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "200m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "overhead": {"cpu": "10m"},
    }
    assert pod_requests(spec) == {"cpu": 1010, "memory": 2 * 2**30, "pods": 1}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("500m", True), ("128Mi", True), (2, True), (0.5, True), ("+1", True), ("-1", False),
     (-1, False), (" 1", False), ("1\n", False), (float("nan"), False), (True, False),
     (None, False), ("1K", False)],
)  # fmt: skip
def test_what_a_pod_may_request(value: object, expected: bool) -> None:
    assert is_request(value) is expected
