"""Which TCP ports listen on the host's loopback: the ports ``command_network = loopback``
bridges into a command's sandbox (the design: :mod:`agentkit.process.sandbox`).

Asked of the kernel per command, so it must be cheap: a netlink ``sock_diag`` dump of
listening sockets only (about 0.1 ms), falling back to ``/proc/net/tcp{,6}``, which the
kernel builds by walking every TCP hash bucket (about 5 ms each on a large machine, even
with a few sockets).

Public API: :func:`listening_ports`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct

__all__ = ["listening_ports"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NETLINK_INET_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_DUMP_REQUEST = 0x301  # NLM_F_REQUEST | NLM_F_DUMP
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_LISTEN = 10
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr


def _netlink_listeners() -> list[tuple[Address, int]] | None:
    """(address, port) of every listening TCP socket, by sock_diag; None when unavailable."""
    found: list[tuple[Address, int]] = []
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_INET_DIAG)
    except (OSError, AttributeError):
        return None
    with sock:
        sock.settimeout(2)
        for family in (socket.AF_INET, socket.AF_INET6):
            # struct inet_diag_req_v2: family, protocol, ext, pad, states, 48-byte sockid
            req = struct.pack("=BBBBI48x", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
            try:
                sock.send(_HEADER.pack(_HEADER.size + len(req), _SOCK_DIAG_BY_FAMILY,
                                       _NLM_F_DUMP_REQUEST, 1, 0) + req)  # fmt: skip
                done = False
                while not done:
                    data, offset = sock.recv(1 << 16), 0
                    while offset + _HEADER.size <= len(data):
                        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
                        if kind == _NLMSG_DONE:
                            done = True
                            break
                        if kind == _NLMSG_ERROR or length < _HEADER.size:
                            return None
                        # struct inet_diag_msg: family, state, timer, retrans, sockid
                        # (sport big-endian at +4, source address at +8)
                        msg = offset + _HEADER.size
                        size = 4 if data[msg] == socket.AF_INET else 16
                        port = struct.unpack_from("!H", data, msg + 4)[0]
                        found.append((ipaddress.ip_address(data[msg + 8 : msg + 8 + size]), port))
                        offset += (length + 3) & ~3
            except (OSError, ValueError, struct.error):
                return None
    return found


def _proc_address(hex_text: str) -> Address:
    # /proc/net/tcp{,6} print each 32-bit word of the address in host (little-endian) order.
    raw = bytes.fromhex(hex_text)
    return ipaddress.ip_address(b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4)))


def _proc_listeners() -> list[tuple[Address, int]]:
    """(address, port) of every listening TCP socket, from /proc/net/tcp{,6}."""
    found: list[tuple[Address, int]] = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name, encoding="ascii") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4 or fields[3] != f"{_TCP_LISTEN:02X}":
                continue
            host, _, port = fields[1].partition(":")
            with contextlib.suppress(ValueError):
                found.append((_proc_address(host), int(port, 16)))
    return found


def _on_loopback(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def listening_ports(limit: int = 1024) -> list[int]:
    """Return the TCP ports (sorted, at most ``limit``) listening on this network
    namespace's loopback or wildcard addresses (a service on one other address only is
    left out: the host's ``127.0.0.1`` does not reach it either); [] where neither
    netlink nor ``/proc`` can tell (not Linux)."""
    listeners = _netlink_listeners()
    if listeners is None:
        listeners = _proc_listeners()
    return sorted({port for address, port in listeners if _on_loopback(address)})[:limit]
