"""One synchronous HTTP exchange for command lines: the ``shoal`` CLI's reads and the
sim's admin commands.

A command sends one or two requests and exits: an async client (aiohttp, a third of a
second to import) or even ``http.client`` (it imports the email parser: a quarter of
``shoal get``'s start-up) costs more than the exchange. Plain HTTP goes over a socket
here, the connection closed after the answer; HTTPS goes through ``http.client``. The
caller says what a failure means to its user: no answer is ``Unreachable``, an answer
that is not HTTP is ``NotHttp``, a certificate not trusted is ``Untrusted``.
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl


class Unreachable(Exception):
    """No answer: nothing listens there, or the connection broke."""


class NotHttp(Exception):
    """Something answered, but not in HTTP."""


class Untrusted(Exception):
    """The server's certificate did not verify; the message says why."""


class Answer:
    """The status, body and content type of an answer (a plain class: no dataclasses to
    import at a command's start)."""

    __slots__ = ("body", "content_type", "status")

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def with_query(path: str, params: dict[str, Any] | None) -> str:
    """``path`` with the parameters that are not None as its query."""
    query = {k: v for k, v in (params or {}).items() if v is not None}
    return path + "?" + urllib.parse.urlencode(query) if query else path


def send(
    method: str,
    url: str,
    *,
    body: Any = None,
    token: str | None = None,
    timeout: float = 30.0,
    context: ssl.SSLContext | None = None,
) -> Answer:
    """One request to ``url`` (JSON ``body`` if given, a bearer ``token`` if given); the
    answer whatever its status. ``context``: how an https URL is trusted (default: the
    system's certificate authorities)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"URL {url!r} must look like http://host:port")
    headers = {"accept": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        headers["content-type"] = "application/json"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    if parts.scheme == "https":
        return _send_tls(parts.hostname, parts.port, method, path, data, headers, timeout,
                         context)  # fmt: skip
    try:
        return _exchange(parts.hostname, parts.port or 80, method, path, data, headers, timeout)
    except OSError as error:
        raise Unreachable(str(error)) from None
    except ValueError as error:
        raise NotHttp(str(error)) from None


def _send_tls(
    host: str,
    port: int | None,
    method: str,
    path: str,
    data: bytes,
    headers: dict[str, str],
    timeout: float,
    context: ssl.SSLContext | None,
) -> Answer:
    import http.client
    import ssl

    connection = http.client.HTTPSConnection(
        host, port, timeout=timeout, context=context or ssl.create_default_context()
    )
    try:
        connection.request(method, path, body=data or None, headers=headers)
        response = connection.getresponse()
        return Answer(response.status, response.read(), response.getheader("content-type") or "")
    except ssl.SSLCertVerificationError as error:
        raise Untrusted(error.verify_message or str(error)) from None
    except (OSError, http.client.HTTPException) as error:
        raise Unreachable(str(error)) from None
    finally:
        connection.close()


def _exchange(
    host: str,
    port: int,
    method: str,
    path: str,
    data: bytes,
    headers: dict[str, str],
    timeout: float,
) -> Answer:
    """HTTP/1.1 over a socket, the connection closed after the answer."""
    lines = [f"{method} {path} HTTP/1.1", f"host: {host}:{port}", "connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"content-length: {len(data)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + data
    chunks = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, separator, content = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    version, status, *_ = [*status_line.split(" ", 2), ""]
    if not separator or not version.startswith("HTTP/") or not status.isdigit():
        raise ValueError("not an HTTP answer")
    found = {}
    for field in fields:
        name, _, value = field.partition(":")
        found[name.strip().lower()] = value.strip()
    if "chunked" in found.get("transfer-encoding", "").lower():
        content = _dechunk(content)
    return Answer(int(status), content, found.get("content-type", ""))


def _dechunk(content: bytes) -> bytes:
    body = []
    while content:
        size_line, _, rest = content.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body.append(rest[:size])
        content = rest[size + 2 :]
    return b"".join(body)
