"""The loopback relay and its folders (agentkit/process/loopback/relay.py,
_loopback_folders.py) with real Unix and TCP sockets on 127.0.0.1 and real processes:
only the canonical header of a listed port is relayed, connections are capped, close
ends every connection on both sides, and folders of a killed owner are swept."""

from __future__ import annotations

import pytest

from agentkit.process.loopback import relay as _loopback_relay


@pytest.mark.parametrize(
    "line",
    [b"80", b"080", b"0080", b"+80", b"-80", b" 80", b"80 ", b"80\r", b"8_0", b"80.0", b"0x50",
     "\uff18\uff10".encode(), "\u0668\u0660".encode(), b"", b"81", b"65616", b"0", b"00000"],
)  # fmt: skip
def test_only_the_canonical_decimal_of_a_listed_port_is_a_header(line: bytes) -> None:
    assert _loopback_relay.header_port(line, frozenset({80, 443})) == (
        80 if line == b"80" else None
    )
    assert _loopback_relay.header_port(b"443", frozenset({80, 443})) == 443
