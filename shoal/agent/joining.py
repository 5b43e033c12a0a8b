"""The member side of a join: pin the hub's CA, exchange the token, keep and renew the
credential.

The CA is learnt as kubeadm learns it: read from the API's ``/cluster-info``
over TLS not yet verified, accepted only when the hash of its public key is the
one given (``--ca-hash``), then every connection verifies the API against it. The
credential is kept in a file under the state directory (0600 in a 0700 folder),
with the CA, so that a restarted agent resumes without the token; it is renewed
at half its life.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from shoal.client.rest import ApiError, ShoalClient, Unreachable
from shoal.machinery.backoff import Backoff
from shoal.machinery.files import write_atomically
from shoal.machinery.tls import ca_hash

log = logging.getLogger(__name__)

STATE_FILE = "credential.json"
CLUSTER_INFO = "/cluster-info"


REVOKED = "credential revoked"
"""How the API's refusal of a credential revoked for good begins (a 401)."""


def revoked(error: BaseException) -> bool:
    """Whether ``error`` is the API refusing the credential for good: its cluster was
    deleted or its credentials revoked. Retrying cannot help; only a new join token can."""
    return (
        isinstance(error, ApiError) and error.status == 401 and error.detail.startswith(REVOKED)
    )


def set_aside(state_dir: Path) -> Path:
    """Move a revoked credential out of the way (``credential.revoked.json``), so that the
    next ``shoal join`` in ``state_dir`` joins with its token; the record of what the
    agent ran there stays (it prunes what is left on connecting)."""
    path = state_dir / STATE_FILE
    aside = state_dir / "credential.revoked.json"
    if path.exists():
        path.replace(aside)
    return aside


class JoinError(Exception):
    """The join cannot go on; the message says why and what to do."""


class WrongCa(JoinError):
    """The API's CA is not the one pinned by ``--ca-hash``."""


@dataclass(frozen=True)
class Kept:
    """What the member keeps: the API, its CA, which cluster it is, its credential."""

    api: str
    ca: str
    namespace: str
    name: str
    credential: str
    expires: float  # seconds since the epoch


def load(state_dir: Path) -> Kept | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    return Kept(**orjson.loads(path.read_bytes()))


def save(state_dir: Path, kept: Kept) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    state_dir.chmod(0o700)
    write_atomically(state_dir / STATE_FILE, orjson.dumps(asdict(kept)), private=True)


def trust(ca: str) -> ssl.SSLContext:
    """A client context that trusts ``ca`` alone, and checks the API's host name."""
    return ssl.create_default_context(cadata=ca)


def check_pin(ca: str, wanted: str) -> None:
    found = ca_hash(ca)
    if found != wanted.strip().lower():
        raise WrongCa(f"the API's CA has the hash {found}, not the pinned {wanted}: refused")


async def pinned_ca(api: str, wanted: str) -> str:
    """The API's CA (PEM), fetched before it can be verified and accepted by its hash."""
    if not api.startswith("https://"):
        raise JoinError(f"--api {api}: must be https:// (the CA is pinned on TLS)")
    if not wanted.startswith("sha256:"):
        raise JoinError("--ca-hash: must read sha256:<hex> (shoal up prints it)")
    blind = ssl.create_default_context()
    blind.check_hostname = False
    blind.verify_mode = ssl.CERT_NONE  # only to read the CA, checked by its hash below
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(api.rstrip("/") + CLUSTER_INFO, ssl=blind) as answer:
                info = await answer.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        raise JoinError(f"{api}{CLUSTER_INFO}: {error}") from error
    ca = info.get("ca") if isinstance(info, dict) else None
    if not isinstance(ca, str) or not ca:
        raise JoinError(f"{api} serves no CA to pin (its TLS has no client_ca)")
    check_pin(ca, wanted)
    return ca


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _kept(api: str, ca: str, answer: dict[str, Any]) -> Kept:
    return Kept(api, ca, answer["namespace"], answer["name"], answer["credential"],
                _seconds(answer["expires"]))  # fmt: skip


async def exchange(
    api: str, ca: str, token: str, name: str, labels: dict[str, str], version: str
) -> Kept:
    """Register the cluster with the join token; its own credential."""
    async with ShoalClient(api, token="", ssl_context=trust(ca)) as hub:
        body = {"token": token, "name": name, "labels": labels, "agent_version": version}
        try:
            answer = await hub.request("POST", "/kubernetes/join", body=body)
        except ApiError as error:
            raise JoinError(f"join refused: {error}") from error
        except Unreachable as error:
            raise JoinError(f"join: {error}") from error
    return _kept(api, ca, answer)


async def renew(client: ShoalClient, kept: Kept) -> Kept:
    """A fresh credential for the valid one ``client`` sends."""
    path = f"/kubernetes/namespaces/{kept.namespace}/clusters/{kept.name}/credential"
    return _kept(kept.api, kept.ca, await client.request("POST", path))


async def keep_renewed(
    client: ShoalClient,
    kept: Kept,
    state_dir: Path,
    clock: Callable[[], float] = time.time,
    retry: float = 1.0,
) -> None:
    """Renew at half the credential's remaining life, keep it, use it; until cancelled.

    A failed renewal is tried again (after ``retry`` seconds, doubling up to a minute)
    until the credential expires; then the agent stops: only a new join token registers
    it again."""
    backoff = Backoff(retry, 60.0)
    while True:
        left = kept.expires - clock()
        if left <= 0:
            raise JoinError(f"the credential of {kept.namespace}/{kept.name} expired before "
                            "it could be renewed: join again with a new token")  # fmt: skip
        await asyncio.sleep(min(backoff.current, left) if backoff.failures else max(left / 2, 0.0))
        try:
            kept = await renew(client, kept)
        except (ApiError, Unreachable) as error:
            log.warning("credential of %s/%s not renewed: %s", kept.namespace, kept.name, error)
            backoff.failed()
            continue
        backoff.succeeded()
        save(state_dir, kept)
        client.use_token(kept.credential)
        log.info("credential of %s/%s renewed until %s", kept.namespace, kept.name,
                 datetime.fromtimestamp(kept.expires).isoformat())  # fmt: skip
