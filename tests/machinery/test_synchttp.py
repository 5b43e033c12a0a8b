"""The one synchronous HTTP exchange of the CLI and the sim's CLI, against real servers:
a standard-library HTTP server (plain and chunked answers), a socket that answers
something else, and a port where nothing listens."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from shoal.machinery.synchttp import NotHttp, Unreachable, send, with_query
from shoal.testing.launch import free_port
from tests.util import serving


class Echo(BaseHTTPRequestHandler):
    """Answers what it was asked: method, path, token and body; chunked under /chunked."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        asked = {
            "method": self.command,
            "path": self.path,
            "authorization": self.headers.get("authorization"),
            "body": json.loads(self.rfile.read(length)) if length else None,
        }
        data = json.dumps(asked).encode()
        status = 404 if self.path.startswith("/missing") else 200
        self.send_response(status)
        self.send_header("content-type", "application/json")
        if self.path.startswith("/chunked"):
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for part in (data[:7], data[7:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        self.close_connection = True

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def echo() -> Iterator[str]:
    with serving(Echo) as url:
        yield url


@pytest.mark.parametrize(
    ("method", "path", "params", "body", "token", "status", "asked_path"),
    [
        ("GET", "/things", {"a": "1", "skip": None}, None, None, 200, "/things?a=1"),
        ("POST", "/things", None, {"name": "x"}, "s3cret", 200, "/things"),
        ("DELETE", "/chunked/x", {"node": "n1"}, None, "t", 200, "/chunked/x?node=n1"),
        ("GET", "/missing", None, None, None, 404, "/missing"),
    ],
)
def test_a_request_reaches_the_server_as_sent_and_the_answer_comes_back_whole(
    echo: str, method: str, path: str, params: dict[str, str | None] | None,
    body: object, token: str | None, status: int, asked_path: str,
) -> None:
    answer = send(method, echo + with_query(path, params), body=body, token=token, timeout=10)
    assert answer.status == status
    assert answer.content_type == "application/json"
    assert answer.json() == {
        "method": method,
        "path": asked_path,
        "authorization": f"Bearer {token}" if token else None,
        "body": body,
    }


def test_nothing_listening_is_unreachable() -> None:
    with pytest.raises(Unreachable):
        send("GET", f"http://127.0.0.1:{free_port()}/healthz", timeout=5)


def test_an_answer_that_is_not_http_is_told_apart() -> None:
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_garbage() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    thread = threading.Thread(target=answer_garbage, daemon=True)
    thread.start()
    try:
        with pytest.raises(NotHttp):
            send("GET", f"http://127.0.0.1:{listener.getsockname()[1]}/", timeout=5)
    finally:
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("url", ["ftp://host/x", "http:///nohost", "not a url"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="must look like http://host:port"):
        send("GET", url)
