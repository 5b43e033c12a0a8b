"""A small synchronous JSON client for commands that read or delete: ``get``, ``list``, completion.

The async ``ShoalClient`` (aiohttp and the pydantic models) takes about a
third of a second to import; a command that prints a table needs neither, so
it sends its one or two requests with the standard library and works on the
JSON the API answered. Errors become ``CliError`` in the user's words: a
``Problem`` for Shoal's problem documents, "not a Shoal API" for a server
that answers something else, "cannot reach" for no answer.
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from typing import Any

from shoal.cli.errors import (
    CliError,
    is_shoal_problem,
    not_shoal,
    problem_message,
    unreachable,
    untrusted,
)
from shoal.client.credentials import Credentials


class Problem(CliError):
    """An error answer of the API, with its problem document."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(problem_message(status, problem))
        self.status = status
        self.problem = problem


class Http:
    """One API URL; every request opens and closes its own connection (a command sends few)."""

    def __init__(
        self, url: str, timeout: float = 30.0, credentials: Credentials | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.credentials = credentials or Credentials.resolve()
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CliError(f"API URL {url!r} must look like http://host:port", 2)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._base = parts.path
        self.timeout = timeout

    def _send(self, method: str, path: str, body: Any = None) -> tuple[int, bytes, str]:
        """One exchange: status, body, content type; no answer at all is "cannot reach"."""
        headers = {"accept": "application/json"}
        token = self.credentials.token
        if token:
            headers["authorization"] = f"Bearer {token}"
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        if self._https:
            return self._send_tls(method, self._base + path, data, headers)
        try:
            return _exchange(
                self._host, self._port or 80, method, self._base + path, data, headers, self.timeout
            )
        except OSError:
            raise unreachable(self.url) from None
        except ValueError:
            raise not_shoal(self.url, "no HTTP answer", path) from None

    def _send_tls(
        self, method: str, path: str, data: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes, str]:
        import http.client
        import ssl

        context = self.credentials.ssl_context()
        connection = http.client.HTTPSConnection(
            self._host, self._port, timeout=self.timeout, context=context
        )
        try:
            connection.request(method, path, body=data or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.read(), response.getheader("content-type") or ""
        except ssl.SSLCertVerificationError as error:
            raise untrusted(self.url, error.verify_message or str(error)) from None
        except (OSError, http.client.HTTPException):
            raise unreachable(self.url) from None
        finally:
            connection.close()

    def request(
        self, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None
    ) -> Any:
        """The decoded JSON answer; a ``Problem``, or a ``CliError`` when it is not Shoal."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        if query:
            path += "?" + urllib.parse.urlencode(query)
        status, content, _ = self._send(method, path, body)
        try:
            document = json.loads(content) if content else None
        except ValueError:
            document = None
        if status >= 400:
            if not is_shoal_problem(document):
                identify(self.url, self)
                raise CliError(f"{self.url} answered {status} to {method} {path}")
            assert isinstance(document, dict)
            raise Problem(status, document)
        if document is None and content:
            identify(self.url, self)
        return document

    def list(self, path: str, params: dict[str, Any] | None = None) -> tuple[list[Any], int]:
        """Every item of a collection (following ``continue``), and the first page's revision."""
        query = dict(params or {})
        items: list[Any] = []
        revision: int | None = None
        while True:
            page = self.request("GET", path, query)
            if not isinstance(page, dict) or not isinstance(page.get("items"), list):
                identify(self.url, self)
                raise CliError(f"{self.url} answered GET {path} with no list")
            items.extend(page["items"])
            metadata = page.get("metadata") or {}
            if revision is None:
                revision = int(metadata.get("resource_version") or 0)
            if not metadata.get("continue"):
                return items, revision
            query["continue"] = metadata["continue"]


def identify(url: str, client: Http | None = None) -> None:
    """Return when ``url`` answers ``/healthz`` as Shoal does; else raise "not a Shoal API"."""
    client = client or Http(url, timeout=5.0)
    status, content, _ = client._send("GET", "/healthz")
    try:
        ok = status == 200 and json.loads(content) == {"status": "ok"}
    except ValueError:
        ok = False
    if not ok:
        raise not_shoal(client.url, status, body=content)


def _exchange(
    host: str,
    port: int,
    method: str,
    path: str,
    data: bytes,
    headers: dict[str, str],
    timeout: float,
) -> tuple[int, bytes, str]:
    """HTTP/1.1 over a socket, the connection closed after the answer.

    The standard library's ``http.client`` costs a quarter of ``shoal get``'s
    start-up (it imports the email parser); a request of a command line and
    its whole answer need only this. HTTPS goes through ``http.client``.
    """
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
    return int(status), content, found.get("content-type", "")


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
