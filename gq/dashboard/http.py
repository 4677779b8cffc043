"""Just enough WSGI for the dashboard: a request, a response and the security headers.

The dashboard is a handful of routes, so it carries no web framework: that keeps
`gq[dashboard]` to Jinja2 alone and lets it mount in Flask, Django or any WSGI server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from gq.display import json_safe

# A form post is a few ids and a token; anything much larger is not ours.
MAX_BODY = 1 << 20

# Every response: no inline script or style, no framing, nothing cached (the pages show
# job data), and no MIME sniffing of JSON or SVG.
SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]

REASONS = {
    200: "OK",
    303: "See Other",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HTTPError(Exception):
    """Ends a request with ``status`` and a fixed, generic ``message`` (never user input)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _wsgi_text(value: str) -> str:
    """A PEP 3333 string (bytes read as latin-1) as the UTF-8 text it holds."""
    return value.encode("latin-1").decode("utf-8", "replace")


class Request:
    """The parts of a WSGI request the dashboard reads."""

    def __init__(self, environ: dict[str, Any]) -> None:
        self.environ = environ
        self.method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        self.path = _wsgi_text(environ.get("PATH_INFO", "")) or "/"
        self.script_name = _wsgi_text(environ.get("SCRIPT_NAME", "")).rstrip("/")
        self.query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        self._form: dict[str, list[str]] | None = None

    def header(self, name: str) -> str | None:
        key = "HTTP_" + name.upper().replace("-", "_")
        value = self.environ.get(key)
        return None if value is None else str(value)

    @property
    def host(self) -> str:
        return self.header("Host") or str(self.environ.get("SERVER_NAME", ""))

    @property
    def secure(self) -> bool:
        return self.environ.get("wsgi.url_scheme") == "https"

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def cookie(self, name: str) -> str | None:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(self.header("Cookie") or "")
        except CookieError:
            return None
        morsel = jar.get(name)
        return None if morsel is None else morsel.value

    def form(self) -> dict[str, list[str]]:
        """The urlencoded body of a POST (read once)."""
        if self._form is None:
            self._form = parse_qs(self._body().decode("utf-8", "replace"), keep_blank_values=True)
        return self._form

    def _body(self) -> bytes:
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise HTTPError(400, "bad Content-Length") from None
        if length > MAX_BODY:
            raise HTTPError(413, "request too large")
        return bytes(self.environ["wsgi.input"].read(length)) if length > 0 else b""


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def status_line(self) -> str:
        return f"{self.status} {REASONS.get(self.status, 'Unknown')}"

    def all_headers(self) -> list[tuple[str, str]]:
        return [
            ("Content-Type", self.content_type),
            ("Content-Length", str(len(self.body))),
            *self.headers,
            *SECURITY_HEADERS,
        ]


def json_response(value: Any, status: int = 200) -> Response:
    body = json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False).encode("utf-8")
    return Response(status, body, "application/json; charset=utf-8")


def text_response(text: str, status: int = 200) -> Response:
    return Response(status, text.encode("utf-8"), "text/plain; charset=utf-8")


def redirect(location: str) -> Response:
    return Response(303, b"", "text/plain; charset=utf-8", [("Location", location)])
