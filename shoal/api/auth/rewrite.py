"""Answers rewritten to what their reader may see: list-all and watch-all keep only the
namespaces the reader may list or watch, a cluster identity sees only its own objects,
and secret fields are redacted for readers without the ``secrets`` verb.

The guard (``guard``) decides who reads what; this module only applies it to the bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from shoal.api.auth.rbac import Grant
from shoal.api.auth.secrets import Path_, redact
from shoal.machinery.asgi import Message, Send
from shoal.machinery.problems import problem


@dataclass
class Rewrite:
    """Filters list and watch answers by namespace and redacts secret fields.

    JSON answers are rewritten whole; ndjson watch streams line by line.
    """

    _send: Send
    visible: Grant | None
    secrets: tuple[Path_, ...] | None
    clear: Grant | None
    own: Callable[[Any], bool] | None = None  # a cluster identity's field rule
    mode: str = ""
    start: Message | None = None
    body: list[bytes] = field(default_factory=list)
    partial: bytes = b""

    def _keep(self, obj: Any) -> bool:
        """False: drop the object; redacts it in place when the reader may not see secrets."""
        if not isinstance(obj, dict):
            return True
        if self.own is not None and not self.own(obj):
            return False
        namespace = (obj.get("metadata") or {}).get("namespace")
        if self.visible is not None and not self.visible.allows(namespace):
            return False
        if self.secrets is not None and not (self.clear and self.clear.allows(namespace)):
            redact(obj, self.secrets)
        return True

    def _document(self, raw: bytes) -> bytes | None:
        """The answer rewritten; None: one object the reader may not see (a cluster
        identity's field rule answers that it does not exist)."""
        data = orjson.loads(raw)
        if isinstance(data, dict) and isinstance(data.get("items"), list):
            data["items"] = [item for item in data["items"] if self._keep(item)]
        elif not self._keep(data):
            return None if self.own is not None else b"{}"
        return orjson.dumps(data)

    def _lines(self, chunk: bytes) -> bytes:
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        out = []
        for line in lines:
            if not line:
                out.append(b"\n")
                continue
            event = orjson.loads(line)
            if self._keep(event.get("object")):
                out.append(orjson.dumps(event) + b"\n")
        return b"".join(out)

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            types = [v for k, v in message.get("headers", ()) if k == b"content-type"]
            kind = types[0] if types else b""
            if message["status"] >= 300:
                self.mode = "pass"
            elif kind.startswith(b"application/x-ndjson"):
                self.mode = "lines"
            elif kind.startswith(b"application/json"):
                self.mode = "document"
            else:
                self.mode = "pass"
            if self.mode != "document":
                await self._send(message)
            else:
                self.start = message
            return
        if message["type"] != "http.response.body" or self.mode == "pass":
            await self._send(message)
        elif self.mode == "lines":
            await self._send({**message, "body": self._lines(message.get("body", b""))})
        else:
            self.body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = self._document(b"".join(self.body))
            assert self.start is not None
            start = self.start
            if body is None:
                hidden = problem(404, "not found")
                body = bytes(hidden.body)
                start = {**start, "status": 404, "headers": hidden.raw_headers}
            headers = [(k, v) for k, v in start.get("headers", ()) if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await self._send({**start, "headers": headers})
            await self._send({"type": "http.response.body", "body": body})
