"""SSRF guard for extract_webpage: URL checks, address classification, allow-list, DNS.

Rule source: docs/tools.md §9 (extract_webpage) and docs/architecture.md §6. Only ``http`` and
``https`` URLs are fetched; every address a host resolves to must be public
unless the host or address is allow-listed in ``Settings.web_allow_hosts``.
The caller then connects to the checked address only (see ``fetch.py``), so a
DNS answer that changes between check and connect (rebinding) cannot redirect
the request to a private address.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agentkit.errors import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Python's is_global misses these (CGNAT is handled by is_global already; kept explicit for readers).
_EXTRA_BLOCKED: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("100.64.0.0/10"),  # CGNAT (RFC 6598)
    ipaddress.ip_network("192.0.0.0/24"),  # IETF protocol assignments
    ipaddress.ip_network("198.18.0.0/15"),  # benchmarking
)


@dataclass(frozen=True)
class Target:
    """A checked URL: ``scheme``, ``host`` (lower case, no brackets), ``port`` and the
    address ``ip`` to connect to (a string, IPv6 without brackets)."""

    url: str
    scheme: str
    host: str
    port: int
    ip: str


def parse_url(url: str) -> tuple[str, str, int]:
    """Return ``(scheme, host, port)`` of an http(s) URL.

    Raises ToolError("invalid_argument") for another scheme (file://, ftp://, data:...),
    a missing host or a bad port.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ToolError("invalid_argument", f"not a valid URL: {url!r} ({exc})") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise ToolError("invalid_argument", f"the URL needs http:// or https:// in front: {url}")
    if scheme not in ("http", "https"):
        shown = scheme
        raise ToolError(
            "invalid_argument",
            f"only http:// and https:// URLs can be fetched, not scheme {shown!r}: {url}",
        )
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise ToolError("invalid_argument", f"the URL has no host: {url}")
    return scheme, host, port or (443 if scheme == "https" else 80)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    # 6to4 (2002::/16) and Teredo addresses carry an IPv4 address
    # that the kernel or a relay may end up reaching.
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def is_blocked_address(ip: IPAddress) -> bool:
    """Return True when ``ip`` is not a public unicast address.

    Blocked: private (RFC 1918), loopback, link-local (169.254/16 incl. the cloud
    metadata address, fe80::/10), CGNAT 100.64/10, unique-local fc00::/7, multicast,
    reserved, unspecified and broadcast addresses, and IPv6 forms embedding such an
    IPv4 address (IPv4-mapped, 6to4, Teredo).
    """
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # the kernel connects to the IPv4 address itself
            return is_blocked_address(ip.ipv4_mapped)
        inner = _embedded_ipv4(ip)
        if inner is not None and is_blocked_address(inner):
            return True
    if not ip.is_global or ip.is_multicast or ip.is_reserved or ip.is_unspecified:
        return True
    if ip.is_private or ip.is_loopback or ip.is_link_local:
        return True
    return any(ip.version == net.version and ip in net for net in _EXTRA_BLOCKED)


def _parse_allow(entries: list[str]) -> tuple[set[str], list[IPNetwork]]:
    hosts: set[str] = set()
    nets: list[IPNetwork] = []
    for entry in entries:
        item = entry.strip().lower().strip("[]").rstrip(".")
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            hosts.add(item)
    return hosts, nets


def resolve(host: str, port: int, timeout: float) -> list[str]:
    """Resolve ``host`` with ``socket.getaddrinfo`` and return its addresses (strings).

    Runs in a daemon thread so a stuck resolver cannot outlive ``timeout`` seconds.
    Raises ToolError("http_error") when the name does not resolve, ToolError("timeout")
    when the resolver does not answer in time.
    """
    try:  # a literal address needs no resolver
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            box["error"] = exc

    thread = threading.Thread(target=work, name="agentkit-dns", daemon=True)
    thread.start()
    thread.join(max(timeout, 0.01))
    if thread.is_alive():
        raise ToolError("timeout", f"DNS lookup of {host} did not answer within {timeout:.0f} s")
    if "error" in box:
        raise ToolError("http_error", f"cannot resolve host {host}: {box['error']}")
    infos = box.get("infos") or []
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise ToolError("http_error", f"cannot resolve host {host}: no addresses")
    return addresses


def check_url(url: str, allow: list[str], timeout: float) -> Target:
    """Validate ``url`` and pick the address to connect to.

    Args:
        url: the URL to fetch (http or https).
        allow: ``Settings.web_allow_hosts``: host names or CIDR networks / addresses
            that may be reached although private or loopback.
        timeout: seconds left for DNS resolution.

    Returns:
        a Target whose ``ip`` passed the check (the first address of the answer).

    Raises:
        ToolError("invalid_argument") for a non-http(s) URL; ToolError("blocked_host")
        when any resolved address is private/loopback/link-local/... and not allowed;
        ToolError("http_error"/"timeout") when the name does not resolve.
    """
    scheme, host, port = parse_url(url)
    allowed_hosts, allowed_nets = _parse_allow(allow)
    addresses = resolve(host, port, timeout)
    if host not in allowed_hosts:
        for address in addresses:
            ip = ipaddress.ip_address(address)
            if any(ip.version == n.version and ip in n for n in allowed_nets):
                continue
            if is_blocked_address(ip):
                where = (
                    f"{address} is" if host == address else f"host {host} resolves to {address},"
                )
                raise ToolError(
                    "blocked_host",
                    f"refusing to fetch {url}: {where} a private, "
                    "loopback, link-local or otherwise non-public address. "
                    "Add it to web_allow_hosts (AGENTKIT_WEB_ALLOW_HOSTS) if this is intended.",
                )
    return Target(url=url, scheme=scheme, host=host, port=port, ip=addresses[0])
