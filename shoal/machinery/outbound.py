"""The outbound policy: which hosts a URL given by a tenant may make Shoal reach.

A tenant names URLs that Shoal's processes fetch (infrastructure providers,
TOSCA templates, metrics providers). Left alone, such a URL reaches whatever
the fetching host reaches: its loopback services, the simulator's admin API,
a cloud's metadata address, the private network. The administrator's policy
says where a tenant's URL may go:

- ``schemes``: the URL schemes allowed (``http`` and ``https``);
- ``hosts``: host names allowed whatever they resolve to (``im.example.org``,
  or ``*.example.org`` for every name under it);
- ``networks``: address ranges allowed although they are loopback, link-local
  or private (``10.20.0.0/16``);
- ``public``: whether any other globally routable address is allowed (with
  ``false`` the policy is a strict allow-list of ``hosts`` and ``networks``).

Every other address (loopback, link-local, private, shared, reserved,
multicast, unspecified) is refused, and so is an IPv6 address that carries one
(IPv4-mapped, IPv4-compatible, NAT64, 6to4). A host name passes only when every address
it resolves to passes. The check is made where the connection is made
(``session``): the addresses checked are the ones connected to, so a name that
resolves differently between a check and a connection (DNS rebinding) gains
nothing, and a redirect is checked like the first URL.

The policy is read from the YAML file that ``SHOAL_OUTBOUND`` names (the
defaults above when unset); ``shoal up`` writes one for the processes it runs.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import ipaddress
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from pydantic import BaseModel, ConfigDict, Field, IPvAnyNetwork, field_validator

from shoal.machinery import config
from shoal.machinery.files import write_atomically

SETTING = "SHOAL_OUTBOUND"
"""The environment variable that names the policy's file."""
FILE_NAME = "outbound.yaml"
"""The name ``shoal up`` gives the policy's file, in its data directory."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(aiohttp.ClientConnectionError):
    """A URL the outbound policy refuses: nothing was sent to it."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason} (refused by the outbound policy, {SETTING})")
        self.url = url
        self.reason = reason


class OutboundPolicy(BaseModel):
    """Where a tenant's URL may reach (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schemes: tuple[str, ...] = Field(
        default=("http", "https"), description="URL schemes allowed."
    )
    hosts: tuple[str, ...] = Field(
        default=(),
        description="Host names allowed whatever they resolve to; `*.example.org` allows "
        "every name under example.org.",
    )
    networks: tuple[IPvAnyNetwork, ...] = Field(
        default=(),
        description="Address ranges allowed although loopback, link-local or private.",
    )
    public: bool = Field(
        default=True, description="Whether other globally routable addresses are allowed."
    )

    @field_validator("schemes", "hosts")
    @classmethod
    def _lower(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(value.strip().lower().rstrip(".") for value in values)

    def host_listed(self, host: str) -> bool:
        """Whether ``host`` (a name or an address as written) is in ``hosts``."""
        name = host.lower().rstrip(".").strip("[]")
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.hosts)

    def address_refusal(self, address: str) -> str | None:
        """Why connecting to ``address`` is refused; None when it is allowed."""
        ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
        if any(ip in network for network in self.networks):
            return None
        ip = _embedded_ipv4(ip)
        if any(ip in network for network in self.networks):
            return None
        if not ip.is_global or ip.is_multicast:
            return f"{ip}, a {_range_name(ip)} address"
        if not self.public:
            return f"{ip}, in no network the policy lists"
        return None

    def url_refusal(self, url: str) -> str | None:
        """Why ``url`` is refused before any name is resolved: its scheme, a missing
        host, or an address written in it. None when only its name is left to check."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError as error:
            return f"not a URL: {error}"
        if parts.scheme.lower() not in self.schemes:
            return f"the scheme {parts.scheme or '(none)'!r} is not one of {list(self.schemes)}"
        if not host:
            return "it names no host"
        if self.host_listed(host):
            return None
        literal = _literal(host)
        if literal is not None:
            reason = self.address_refusal(literal)
            return None if reason is None else f"it names {reason}"
        if not self.public and not self.networks:
            return f"{host} is not one of the hosts the policy lists"
        return None

    async def refusal(self, url: str, timeout: float = 2.0) -> str | None:
        """Why ``url`` is refused, resolving its host name (every address it resolves to
        must pass). A name that does not resolve is not refused here: the process that
        fetches checks it again when it connects."""
        found = self.url_refusal(url)
        if found is not None:
            return found
        host = urlsplit(url).hostname or ""
        if self.host_listed(host) or _literal(host) is not None:
            return None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout), _lookups(loop):
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError):
            return None
        return self.addresses_refusal(host, [str(info[4][0]) for info in infos])

    def addresses_refusal(self, host: str, addresses: list[str]) -> str | None:
        for address in addresses:
            reason = self.address_refusal(address)
            if reason is not None:
                return f"{host} resolves to {reason}"
        return None


_LOOKUPS: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


def _lookups(loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
    """At most four lookups at once per loop: they run on the loop's few resolver threads,
    which a flood of slow names must not take from everyone else."""
    found = _LOOKUPS.get(loop)
    if found is None:
        if len(_LOOKUPS) > 16:
            _LOOKUPS.clear()  # loops of finished tests
        found = _LOOKUPS[loop] = asyncio.Semaphore(4)
    return found


def _literal(host: str) -> str | None:
    """``host`` when it is an IP address as written in a URL (brackets stripped)."""
    bare = host.strip("[]")
    try:
        ipaddress.ip_address(bare.split("%", 1)[0])
    except ValueError:
        return None
    return bare


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_6TO4 = ipaddress.IPv6Network("2002::/16")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _embedded_ipv4(ip: Address) -> Address:
    """The IPv4 address an IPv6 address carries and a host or gateway may forward to:
    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), NAT64
    (``64:ff9b::a.b.c.d``) and 6to4 (``2002:AABB:CCDD::``); ``ip`` itself otherwise.
    ``64:ff9b::7f00:1`` is global to ``ipaddress``, yet a NAT64 gateway takes it to
    127.0.0.1 (its own) or to a private address of its network."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _COMPATIBLE and int(ip) > 1):  # not :: nor ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def _range_name(ip: Address) -> str:
    for name in ("loopback", "link_local", "private", "multicast", "unspecified", "reserved"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    return "non-public"


# the policy of this process ----------------------------------------------------------


def policy() -> OutboundPolicy:
    """This process's policy: the file ``SHOAL_OUTBOUND`` names, else the defaults."""
    return _load(os.environ.get(SETTING) or "")


@functools.cache
def _load(path: str) -> OutboundPolicy:
    return config.load(OutboundPolicy, Path(path) if path else None)


def write_default(path: Path) -> Path:
    """The default policy, spelt out in a file an administrator edits (``shoal up``)."""
    text = (
        "# Where URLs that tenants give may make Shoal connect (docs/security.md).\n"
        "# Loopback, link-local and private addresses are refused unless listed.\n"
        "schemes: [http, https]\n"
        "hosts: []      # names allowed whatever they resolve to: im.example.org, *.example.org\n"
        "networks: []   # ranges allowed although private: 10.20.0.0/16\n"
        "public: true   # false: only the hosts and networks above\n"
    )
    if not path.exists():
        write_atomically(path, text)
    return path


# connections under the policy --------------------------------------------------------


class _CheckedResolver(AbstractResolver):
    """Resolves as aiohttp does, then refuses the name unless every address passes."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self.policy = policy
        self.inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self.inner.resolve(host, port, family)
        if not self.policy.host_listed(host):
            reason = self.policy.addresses_refusal(host, [r["host"] for r in found])
            if reason is not None:
                raise OutboundRefused(host, reason)
        return found

    async def close(self) -> None:
        await self.inner.close()


class _CheckedConnector(aiohttp.TCPConnector):
    """Every connection, redirects included, first passes the policy: the URL's scheme and
    written address here, a name's addresses in the resolver (the ones connected to)."""

    def __init__(self, policy: OutboundPolicy, **options: Any) -> None:
        super().__init__(resolver=_CheckedResolver(policy), use_dns_cache=False, **options)
        self.policy = policy

    async def connect(self, req: Any, traces: Any, timeout: Any) -> Any:
        url = str(req.url)
        reason = self.policy.url_refusal(url)
        if reason is not None:
            raise OutboundRefused(url, reason)
        return await super().connect(req, traces, timeout)


def connector(policy_: OutboundPolicy | None = None, **options: Any) -> aiohttp.TCPConnector:
    """A connector that connects only where ``policy_`` (this process's by default) allows."""
    return _CheckedConnector(policy_ or policy(), **options)


def session(policy_: OutboundPolicy | None = None, **options: Any) -> aiohttp.ClientSession:
    """A client session for tenants' URLs: it connects only where the policy allows."""
    limit = options.pop("limit", 100)
    return aiohttp.ClientSession(connector=connector(policy_, limit=limit), **options)


class Sessions:
    """The two sessions of a process that fetches URLs: one for the administrator's (those of
    cluster-wide objects, which only administrators write), one for tenants' (the policy)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.policy = policy()  # read now: a broken file stops the process as it starts
        self._admin: aiohttp.ClientSession | None = None
        self._tenant: aiohttp.ClientSession | None = None

    def of(self, tenant: bool) -> aiohttp.ClientSession:
        """The session for a URL of a tenant (``tenant``) or of the administrator."""
        if tenant:
            if self._tenant is None:
                self._tenant = session(self.policy, **self.options)
            return self._tenant
        if self._admin is None:
            self._admin = aiohttp.ClientSession(**self.options)
        return self._admin

    async def close(self) -> None:
        for each in (self._admin, self._tenant):
            if each is not None:
                await each.close()
        self._admin = self._tenant = None


async def read_at_most(content: aiohttp.StreamReader, limit: int) -> bytes:
    """A body up to its end or to ``limit + 1`` bytes, whichever comes first (a single
    ``read(n)`` gives what has arrived so far, which may be less than the body)."""
    raw = b""
    while len(raw) <= limit:
        chunk = await content.read(limit + 1 - len(raw))
        if not chunk:
            break
        raw += chunk
    return raw


class FetchFailed(Exception):
    """A tenant's URL that gave no document: refused, unreachable, not 200, or too big."""


async def fetch(url: str, limit: int, timeout: float = 10.0) -> bytes:
    """The body of ``GET url`` (a tenant's URL: connected under this process's policy, no
    redirect followed), at most ``limit`` bytes; ``FetchFailed`` says why there is none."""
    limits = aiohttp.ClientTimeout(total=timeout)
    try:
        async with (
            session(timeout=limits) as client,
            client.get(url, allow_redirects=False) as got,
        ):
            raw = await read_at_most(got.content, limit)
            if got.status != 200:
                raise FetchFailed(f"{url} answered HTTP {got.status}")
    except OutboundRefused as error:
        raise FetchFailed(str(error)) from error
    except TimeoutError as error:
        raise FetchFailed(f"{url} gave no answer within {timeout:g} s") from error
    except (aiohttp.ClientError, OSError, ValueError) as error:
        raise FetchFailed(f"{url} could not be read: {error}") from error
    if len(raw) > limit:
        raise FetchFailed(f"{url} holds more than {limit} bytes")
    return raw
