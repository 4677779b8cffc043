"""Basic auth, CSRF tokens and the Host check of the dashboard.

Every comparison of a secret is constant-time (``hmac.compare_digest``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable

from gq.dashboard.http import Request

CSRF_COOKIE = "gq_csrf"
CSRF_FIELD = "csrf_token"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


class BasicAuth:
    """One user and password, checked on every request but ``/healthz``."""

    def __init__(self, user: str, password: str) -> None:
        self._user = user.encode("utf-8")
        self._password = password.encode("utf-8")

    @classmethod
    def parse(cls, text: str) -> BasicAuth:
        """From ``USER:PASSWORD`` (the password may hold colons); ValueError if malformed."""
        user, colon, password = text.partition(":")
        if not colon or not user or not password:
            raise ValueError("expected USER:PASSWORD, both non-empty")
        return cls(user, password)

    def allows(self, header: str | None) -> bool:
        user, password = _credentials(header)
        # Both compared every time, so the timing says nothing about which one was wrong.
        user_ok = hmac.compare_digest(user, self._user)
        password_ok = hmac.compare_digest(password, self._password)
        return user_ok and password_ok


def _credentials(header: str | None) -> tuple[bytes, bytes]:
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return b"", b""
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return b"", b""
    user, _, password = decoded.partition(b":")
    return user, password


class Csrf:
    """Signed double-submit tokens: ``nonce.HMAC(secret, nonce)`` in a cookie and in each
    form. A POST must carry both, equal and signed. The signature matters because a
    sibling site on the same host (another port) can set our cookie, but cannot sign."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def new_token(self) -> str:
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._sign(nonce)}"

    def valid(self, token: str | None) -> bool:
        nonce, dot, signature = (token or "").partition(".")
        return bool(nonce and dot) and hmac.compare_digest(signature, self._sign(nonce))

    def accepts(self, cookie: str | None, submitted: str | None) -> bool:
        if not cookie or not submitted:
            return False
        same = hmac.compare_digest(cookie.encode(), submitted.encode())
        return same and self.valid(cookie)

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()


def cookie_header(token: str, request: Request) -> tuple[str, str]:
    """The Set-Cookie header that carries ``token``, scoped to the dashboard's path."""
    parts = [
        f"{CSRF_COOKIE}={token}",
        f"Path={request.script_name}/",
        "HttpOnly",
        "SameSite=Strict",
    ]
    if request.secure:
        parts.append("Secure")
    return "Set-Cookie", "; ".join(parts)


def cross_site(request: Request) -> bool:
    """Whether the browser says the request comes from another site (Fetch Metadata):
    a second line behind the token. Absent headers (old browsers, curl) say nothing."""
    return (request.header("Sec-Fetch-Site") or "same-origin") not in ("same-origin", "none")


def host_allowed(request: Request, allowed: Iterable[str]) -> bool:
    """Whether the Host header names one of ``allowed`` (any port): a page of another site
    that resolves its own name to 127.0.0.1 (DNS rebinding) reaches us with its name."""
    host = request.host.strip().lower()
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    else:
        name = host.rpartition(":")[0] if host.count(":") == 1 else host
    return name in {h.lower().strip("[]") for h in allowed}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (for ``--host``) is this machine only: the name localhost, or an
    address that parses as a loopback IP. Any other name needs auth, whatever it looks
    like: "127.example.com" resolves wherever its owner points it."""
    name = host.strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # a host name, not an address
        return False
