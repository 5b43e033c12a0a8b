"""The ASGI plumbing of a simulated cluster's API: one request (its path, query, body in
JSON, YAML or protobuf) and the answers (JSON, an ``ApiError`` as a Status, a dropped
connection).

Shared by the cluster's REST API (``rest``) and the server that routes to it
(``server``); no framework, so that a 5,000-node list stays cheap.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import parse_qsl

import orjson
import yaml

from shoal.machinery.asgi import Receive, Scope, Send
from shoal.sim import protobuf
from shoal.sim.store import ApiError


class Request:
    """The parts of an HTTP request the handlers need."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.method: str = scope["method"]
        self.path = path
        raw_q = scope.get("query_string", b"").decode("latin-1")
        self.query: dict[str, str] = dict(parse_qsl(raw_q, keep_blank_values=True))
        self.headers: dict[str, str] = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        self._body: bytes | None = None

    async def body(self) -> bytes:
        if self._body is None:
            chunks = []
            while True:
                msg = await self.receive()
                if msg["type"] == "http.disconnect":
                    break
                chunks.append(msg.get("body", b""))
                if not msg.get("more_body"):
                    break
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        raw = await self.body()
        if not raw.strip():
            return {}
        ctype = self.headers.get("content-type", "")
        if "protobuf" in ctype:
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise ApiError(415, "UnsupportedMediaType",
                               f"{exc}; send JSON (kubectl apply / create -f)") from exc
        if "cbor" in ctype:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media "
                           f"types include: application/json, application/yaml "
                           f"(got {ctype})")
        try:
            if "yaml" in ctype:
                return load_yaml(raw)
            return orjson.loads(raw)
        except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"invalid request body: {exc}") from exc

    def flag(self, name: str) -> bool:
        return self.query.get(name, "").lower() in ("1", "true", "yes")

    def wants_table(self) -> bool:
        accept = self.headers.get("accept", "")
        return "as=Table" in accept


def load_yaml(raw: bytes) -> Any:
    """A YAML body; JSON (what client libraries send for server-side apply) read as JSON.

    JSON is YAML, and PyYAML's pure-Python parser cost 16 % of the simulator's time
    under a burst of applies; orjson reads the same body about a hundred times faster.
    """
    if raw.lstrip()[:1] in (b"{", b"["):
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(raw)
    return yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


async def respond(send: Send, status: int, body: Any, content_type: str = "application/json",
                  ) -> None:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(data)).encode()),
            (b"cache-control", b"no-cache, private"),
        ],
    })
    await send({"type": "http.response.body", "body": data})


async def respond_error(send: Send, err: ApiError) -> None:
    await respond(send, err.code, err.status())


def abort_connection(send: Send) -> None:
    """Drop the TCP connection without an HTTP response, like an unreachable host.

    uvicorn's ``send`` is a bound method of the request cycle, which holds the
    transport; other ASGI servers (or in-process transports) get an exception.
    """
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:
        raise ConnectionResetError("simulated cluster is unreachable")
    with contextlib.suppress(AttributeError):
        cycle.disconnected = True  # type: ignore[union-attr]
    transport.abort()
