"""The guard of Timestone's HTTP servers (MCP over HTTP, the web view of ``timestone ui``).

Both apply the same rules (docs/production.md):

- The bind: off the loopback interface a token is required (``check_exposure``);
  whether an address is loopback is decided on the address itself, normalised with
  ``ipaddress`` (``127.0.0.2``, ``LOCALHOST``, ``0:0:0:0:0:0:0:1`` and
  ``::ffff:127.0.0.1`` are all loopback), never by comparing strings.
- Every request: its ``Host`` header must name the server (``HostGuard``): a name
  or address derived from the bind, or one the user allowed (``--allow-host``).
  Anything else is answered 421, so a web page that rebinds its own domain name to
  127.0.0.1 cannot reach the memory. A request that carries an ``Origin`` (a
  browser's cross-site request) must come from the same host and port as its
  ``Host``, else 403.
- The token, when one is set, is compared in constant time (``tokens_match``).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import socket
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidInput

__all__ = [
    "MIN_TOKEN_LENGTH",
    "HostGuard",
    "check_allowed_host",
    "check_exposure",
    "check_token",
    "is_loopback",
    "normalise_host",
    "tokens_match",
    "url_host",
]

MIN_TOKEN_LENGTH = 16
MAKE_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NUMERIC_IPV4 = re.compile(r"(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}")
_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")


def _address(text: str) -> Address | None:
    """The IP address ``text`` spells, in any of its spellings, or ``None`` for a name.

    IPv4 shorthands a browser or ``inet_aton`` accepts (``127.1``, ``2130706433``,
    ``0x7f.0.0.1``) count; an IPv4-mapped IPv6 address is its IPv4 address."""
    try:
        found: Address = ipaddress.ip_address(text)
    except ValueError:
        if not _NUMERIC_IPV4.fullmatch(text):
            return None
        try:
            found = ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        return found.ipv4_mapped
    return found


def normalise_host(host: str) -> str:
    """One spelling per host: an address in its canonical form (IPv6 compressed, IPv4-mapped
    as IPv4), a name in lower case without its final dot; brackets and spaces dropped."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.rstrip(".").casefold() if text != "." else text
    found = _address(text)
    return text if found is None else found.compressed


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only: ``localhost`` or a loopback
    address (127.0.0.0/8, ::1, in any spelling). Any other name or address may be reached
    from outside."""
    text = normalise_host(host)
    found = _address(text)
    return text == "localhost" if found is None else found.is_loopback


def url_host(host: str) -> str:
    """``host`` as it goes in a URL: an IPv6 address in brackets."""
    text = host.strip()
    return f"[{text}]" if ":" in text and not text.startswith("[") else text


def check_token(token: str, what: str = "the MCP token") -> str:
    """A bearer token as a server will demand it: printable ASCII without spaces, at least
    ``MIN_TOKEN_LENGTH`` characters."""
    if len(token) < MIN_TOKEN_LENGTH or not all("!" <= c <= "~" for c in token):
        raise InvalidInput(
            f"{what} must be at least {MIN_TOKEN_LENGTH} printable ASCII characters "
            f"without spaces; make one with {MAKE_TOKEN}"
        )
    return token


def check_exposure(
    host: str,
    token: str | None,
    *,
    server: str = "MCP over HTTP",
    variable: str = "TIMESTONE_MCP_TOKEN",
    access: str = "read and write",
) -> str | None:
    """Refuse to serve beyond this machine without a token; return the checked token.

    On loopback a token is optional, and demanded when given."""
    what = "the MCP token" if variable == "TIMESTONE_MCP_TOKEN" else f"the token ({variable})"
    if token is not None and token != "":
        return check_token(token, what)
    if not is_loopback(host):
        raise InvalidInput(
            f"refusing to serve {server} on {host} without a token: anyone who reaches "
            f"the port could {access} the memory. Set {variable} (or --token) to a secret, "
            f"e.g. from {MAKE_TOKEN}, give it to the clients as "
            "'Authorization: Bearer <token>', and put a TLS proxy in front "
            "(docs/production.md)"
        )
    return None


def check_allowed_host(value: str) -> str:
    """A host name or address for ``--allow-host``, normalised; refused with its value when
    it carries a scheme, a port, a path or characters a host name cannot have."""
    text = normalise_host(value)
    if _address(text) is None and not _NAME.fullmatch(text):
        raise InvalidInput(
            f"--allow-host takes a host name or address without scheme, port or path "
            f"(e.g. memory.example.org), got {value!r:.80}"
        )
    return text


def tokens_match(given: str, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), expected.encode("utf-8", "surrogateescape")
    )


def _split_authority(authority: str) -> tuple[str, int | None] | None:
    """(normalised host, port) of a ``Host`` header or an origin's authority; ``None`` when
    it is not one."""
    text = authority.strip()
    if not text or any(c in text for c in "/?#@\\ \t"):
        return None
    if text.count(":") > 1 and not text.startswith("["):  # a bare IPv6 address
        return (normalise_host(text), None) if _address(text) is not None else None
    try:
        parts = urllib.parse.urlsplit("//" + text)
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None or parts.hostname == "":
        return None
    return normalise_host(parts.hostname), port


_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostGuard:
    """Which ``Host`` and ``Origin`` headers a server bound to ``bind`` answers.

    Allowed hosts, derived from the bind: on a loopback bind ``localhost`` and every
    loopback address; on a specific address or name that one; on a wildcard bind
    (``0.0.0.0``, ``::``) ``localhost`` and any address written as such (a request that
    names an address cannot come from a rebound domain name). Plus ``allow``: names or
    addresses the user lists, e.g. the public name a reverse proxy forwards."""

    bind: str
    allow: frozenset[str] = frozenset()

    @classmethod
    def of(cls, bind: str, allow: Iterable[str] = ()) -> HostGuard:
        return cls(bind, frozenset(check_allowed_host(a) for a in allow))

    def allows_host(self, host: str) -> bool:
        """Whether the (normalised) host name or address is one this server answers to."""
        if host in self.allow:
            return True
        found = _address(host)
        bind = normalise_host(self.bind)
        bound = _address(bind)
        if is_loopback(bind):
            return host == "localhost" or (found is not None and found.is_loopback)
        if bound is not None and bound.is_unspecified:
            return host == "localhost" or found is not None
        return host == bind

    def refusal(self, headers: Iterable[tuple[str, str]]) -> tuple[int, str] | None:
        """``None`` when the request's ``Host`` and ``Origin`` pass, else the status (421
        or 403) and a one-line reason. ``headers``: the request's (name, value) pairs; a
        ``Host`` or ``Origin`` given twice is refused."""
        seen: dict[str, list[str]] = {"host": [], "origin": []}
        for name, value in headers:
            if name.lower() in seen:
                seen[name.lower()].append(value)
        if len(seen["host"]) > 1 or len(seen["origin"]) > 1:
            return 421, "a request with more than one Host or Origin header is refused"
        raw = seen["host"][0] if seen["host"] else None
        authority = _split_authority(raw) if raw else None
        if authority is None or not self.allows_host(authority[0]):
            shown = "a request without a Host header" if not raw else f"Host {raw!r:.80}"
            return 421, (
                f"{shown}: not a name of this server; allow a name the clients use with "
                "--allow-host (docs/production.md)"
            )
        origin = seen["origin"][0] if seen["origin"] else None
        if origin is not None and not self._same_origin(origin, authority):
            return 403, f"requests from the web page at {origin!r:.80} are not accepted"
        return None

    def _same_origin(self, origin: str, authority: tuple[str, int | None]) -> bool:
        """Whether the ``Origin`` is this server as the request's ``Host`` names it."""
        try:
            parts = urllib.parse.urlsplit(origin.strip())
        except ValueError:
            return False
        default = _DEFAULT_PORTS.get(parts.scheme)
        if default is None or parts.path or parts.query:
            return False
        found = _split_authority(parts.netloc)
        if found is None:
            return False
        host, port = authority
        return found[0] == host and (found[1] or default) == (port or default)
