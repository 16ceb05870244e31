"""Which ``Host`` headers a litrag server answers (the API and the chat): DNS rebinding.

A web page on another site can point its own name at 127.0.0.1 once loaded; the browser then
sends that page's requests to the local server as same-origin, and a keyless loopback API would
answer them. The request still carries the page's name in ``Host``, so a server that answers only
the names it is reached by (``localhost``, its address, those the operator lists) refuses it.
A server bound to every address (``0.0.0.0``, ``::``) needs a key (``litrag.app.serve``), which no
rebinding page has, and answers any name unless the operator lists some.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
ANY = "*"
FIX = "add it with --allowed-hosts or LITRAG_ALLOWED_HOSTS"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_wildcard(host: str) -> bool:
    """Whether ``host`` binds every address (``0.0.0.0``, ``::``, or empty)."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def allowed_hosts(bind: str, configured: str | None) -> frozenset[str]:
    """The names served: the configured ones (comma-separated; ``*``: any), else the loopback
    names and the bound address, or any for a wildcard bind."""
    if configured:
        names = [n.strip() for n in configured.split(",") if n.strip()]
    elif is_wildcard(bind):
        names = [ANY]
    else:
        names = [*LOOPBACK_NAMES, bind]
    return frozenset(_bare(n) for n in names)


def _bare(host: str) -> str:
    """``Example.org:8000`` -> ``example.org``; ``[::1]:80`` -> ``::1``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:  # a name or IPv4 address with a port (a bare IPv6 has several)
        return host.split(":", 1)[0]
    return host


def host_allowed(header: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request whose ``Host`` is ``header`` is served."""
    allowed = set(allowed)
    if ANY in allowed:
        return True
    return bool(header) and _bare(header or "") in allowed


def refusal_line(header: str | None, allowed: Iterable[str]) -> str:
    names = ", ".join(sorted(allowed))
    got = repr(header[:100]) if header else "none"
    return f"the Host header {got} is not a name this server answers to ({names}); {FIX}"


class HostCheck:
    """ASGI middleware: a request whose ``Host`` is not allowed gets ``respond(line)`` (an
    ASGI app) instead of the app. Plain ASGI, not ``BaseHTTPMiddleware``: a stream keeps
    seeing the client leave."""

    def __init__(
        self, app: ASGIApp, allowed: Iterable[str], respond: Callable[[str], ASGIApp]
    ) -> None:
        self.app, self.allowed, self.respond = app, frozenset(allowed), respond

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = next(
                (v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None
            )
            if not host_allowed(header, self.allowed):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await self.respond(refusal_line(header, self.allowed))(scope, receive, send)
                return
        await self.app(scope, receive, send)
