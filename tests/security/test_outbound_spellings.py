"""Spellings of our hosts in a tenant's URL, on the API ``shoal up`` ships (default policy).

Every spelling of loopback, the unspecified address or a private one is refused at write
time with a 422 naming the field and the address it comes to, creates and updates alike:
numeric forms (``0x7f000001``, ``127.1``, ``2130706433``, ``0``), a login before the host,
upper case, and IPv6 addresses that carry an IPv4 one, which a NAT64 gateway
(``64:ff9b::/96``), a 6to4 relay (``2002::/16``) or the host (``::a.b.c.d``) takes to it.
"""

from __future__ import annotations

import pytest

from shoal.machinery import outbound
from tests.security.conftest import Secured
from tests.security.test_outbound import ok, refused

METRICS = "/core/namespaces/a/metricsproviders"


@pytest.fixture(autouse=True)
def _default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(outbound.SETTING, raising=False)


def prometheus(url: str) -> dict[str, object]:
    return {
        "api": "core",
        "kind": "MetricsProvider",
        "metadata": {"name": "p"},
        "spec": {"type": "prometheus", "prometheus": {"url": url}},
    }


async def test_ipv6_addresses_that_carry_our_ipv4_ones_are_refused(secured: Secured) -> None:
    alice = secured["alice"]
    for url, address in (
        ("http://[64:ff9b::7f00:1]:9090", "127.0.0.1, a loopback"),
        ("http://[64:ff9b::a00:7]:9090", "10.0.0.7, a private"),
        ("http://[64:ff9b::a9fe:a9fe]/latest/meta-data", "169.254.169.254, a link-local"),
        ("http://[2002:7f00:1::]:9090", "127.0.0.1, a loopback"),
        ("http://[2002:c0a8:101::1]:9090", "192.168.1.1, a private"),
        ("http://[::7f00:1]:9090", "127.0.0.1, a loopback"),
    ):
        for query in ("?dry_run=true", ""):
            answer = await alice.post(METRICS + query, json=prometheus(url))
            refused(answer, "spec.prometheus.url", address, "outbound policy")
    # an update cannot bring one in either
    stored = await ok(await alice.post(METRICS, json=prometheus("http://[64:ff9b::808:808]:9090")))
    stored["spec"]["prometheus"]["url"] = "http://[64:ff9b::7f00:1]:9090"
    refused(await alice.put(f"{METRICS}/p", json=stored), "spec.prometheus.url", "loopback")
    kept = await ok(await alice.get(f"{METRICS}/p"))
    assert kept["spec"]["prometheus"]["url"] == "http://[64:ff9b::808:808]:9090"


async def test_where_it_connects_the_embedded_address_is_checked() -> None:
    """Checked again in the connection itself: nothing is sent."""
    async with outbound.session(outbound.OutboundPolicy()) as session:
        with pytest.raises(outbound.OutboundRefused, match=r"127\.0\.0\.1, a loopback"):
            await session.get("http://[64:ff9b::7f00:1]:9/")


async def test_numeric_and_disguised_spellings_of_loopback_are_refused(secured: Secured) -> None:
    alice = secured["alice"]
    for url, words in (
        ("http://0x7f000001:9090", ("0x7f000001 resolves to 127.0.0.1", "loopback")),
        ("http://127.1:9090", ("127.1 resolves to 127.0.0.1", "loopback")),
        ("http://2130706433:9090", ("resolves to 127.0.0.1", "loopback")),
        ("http://0177.0.0.1:9090", ("resolves to 127.0.0.1", "loopback")),
        ("http://0:9090", ("resolves to 0.0.0.0",)),
        ("http://[::]:9090", ("::",)),
        ("http://[0:0:0:0:0:ffff:127.0.0.1]:9090", ("127.0.0.1", "loopback")),
        ("http://8.8.8.8@127.0.0.1:9090", ("127.0.0.1", "loopback")),
        ("http://127.0.0.1#@8.8.8.8/", ("127.0.0.1", "loopback")),
        ("http://LOCALHOST:9090", ("localhost resolves to 127.0.0.1", "loopback")),
        ("http://[fe80::1%25eth0]:9090", ("fe80::1", "link-local")),
    ):
        answer = await alice.post(METRICS, json=prometheus(url))
        refused(answer, "spec.prometheus.url", *words, "outbound policy")
    for url in ("file:///etc/passwd", "gopher://127.0.0.1:70/", "HTTP://127.0.0.1/"):
        refused(await alice.post(METRICS, json=prometheus(url)), "spec.prometheus.url")
    assert (await alice.get(f"{METRICS}/p")).status_code == 404
