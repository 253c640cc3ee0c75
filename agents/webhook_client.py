"""The webhooks' outbound HTTP: one POST, guarded against server-side request forgery.

A webhook's host must not be (or resolve to) a loopback, private, link-local, multicast or
reserved address. The URL is checked when a job is started (:func:`check_url`), and again
where it matters, when connecting: the connection's resolver drops the refused addresses
from what DNS answers, so the address connected to is always one that was checked (a name
that resolves to a public address at the start and a private one later, DNS rebinding,
gets no connection). Redirects are not followed. ``WEBHOOK_ALLOW_PRIVATE`` lifts the
address check (development and tests).
"""

import asyncio
import errno
import ipaddress
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from django.conf import settings

from core.exceptions import InvalidWebhookUrl

#: A receiver answers within this many seconds, or the attempt failed.
TIMEOUT_SECONDS = 10.0
#: How much of an answer is kept with its attempt.
ANSWER_BYTES = 1024


def refused_address(address: str) -> str | None:
    """Why a webhook may not connect to ``address`` (an IP address), or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_private or ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return f"{ip} is a private or reserved address"
    return None


def _host_and_port(url: str) -> tuple[str, int]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidWebhookUrl(url, f"it is not a valid URL ({exc}).") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidWebhookUrl(url, "it must be an absolute http or https URL.")
    if not parts.hostname:
        raise InvalidWebhookUrl(url, "it has no host.")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _literal_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def check_url(url: str) -> None:
    """Raises :class:`InvalidWebhookUrl` unless ``url`` is an absolute http(s) URL whose host
    resolves to addresses a webhook may connect to (all of them)."""
    host, port = _host_and_port(url)
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return
    if _literal_ip(host):
        addresses = [host]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise InvalidWebhookUrl(url, f"its host does not resolve ({exc}).") from None
        addresses = sorted({info[4][0] for info in infos})
    for address in addresses:
        reason = refused_address(address)
        if reason:
            raise InvalidWebhookUrl(url, f"{host} resolves to {reason}.")


class GuardedResolver(AbstractResolver):
    """DNS as usual, minus the addresses a webhook may not connect to."""

    def __init__(self) -> None:
        self._resolver = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        allowed = [info for info in found if refused_address(info["host"]) is None]
        if not allowed:
            reasons = "; ".join(str(refused_address(info["host"])) for info in found)
            message = f"{host} resolves to no address a webhook may use: {reasons}"
            raise OSError(errno.EACCES, message)
        return allowed

    async def close(self) -> None:
        await self._resolver.close()


@dataclass
class Outcome:
    """What one POST came to: a status code (None when no answer came), the first KiB of
    the answer, the time it took and what went wrong."""

    status_code: int | None
    latency: float
    response: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(url: str, *, body: bytes, headers: dict[str, str]) -> Outcome:
    """POSTs ``body`` to ``url`` once, within :data:`TIMEOUT_SECONDS`, following no redirect."""
    started = time.monotonic()
    try:
        status, answer = asyncio.run(_post(url, body, headers))
    except InvalidWebhookUrl as exc:
        return Outcome(None, time.monotonic() - started, error=exc.message)
    except TimeoutError:
        error = f"No answer within {TIMEOUT_SECONDS:g} s."
        return Outcome(None, time.monotonic() - started, error=error)
    except (aiohttp.ClientError, OSError) as exc:
        return Outcome(None, time.monotonic() - started, error=f"{type(exc).__name__}: {exc}")
    latency = time.monotonic() - started
    text = answer.decode("utf-8", "replace")
    error = "" if 200 <= status < 300 else f"HTTP {status}"
    return Outcome(status, latency, response=text, error=error)


async def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    host, _ = _host_and_port(url)
    guarded = not settings.WEBHOOK_ALLOW_PRIVATE
    if guarded and _literal_ip(host) and (reason := refused_address(host)):
        raise InvalidWebhookUrl(url, reason)
    options: dict[str, Any] = {"resolver": GuardedResolver()} if guarded else {}
    connector = aiohttp.TCPConnector(force_close=True, **options)
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
    async with (
        aiohttp.ClientSession(connector=connector, timeout=timeout) as session,
        session.post(url, data=body, headers=headers, allow_redirects=False) as answer,
    ):
        return answer.status, await answer.content.read(ANSWER_BYTES)
