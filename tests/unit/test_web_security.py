"""extract_webpage security: schemes, private/loopback/link-local/metadata addresses, allow-list,
redirect re-validation, loops, connection pinning (docs/tools.md, docs/architecture.md §6).

No test connects to a non-loopback address: a refusal must happen before connecting,
and the tests would otherwise hang on the connect timeout and fail with another code.
"""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.tools.base import ToolContext, ToolResult
from agentkit.tools.registry import ToolRegistry
from agentkit.tools.web import WEB_TOOLS
from agentkit.tools.web._guard import check_url, is_blocked_address


def make_ctx(workspace: Path, allow: list[str], **extra: Any) -> ToolContext:
    settings = Settings(model="m", api_key="k", language="en", web_allow_hosts=allow, **extra)
    return ToolContext(workspace=workspace, settings=settings)


def run(ctx: ToolContext, url: str) -> ToolResult:
    return ToolRegistry(WEB_TOOLS).execute("extract_webpage", {"url": url}, ctx)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "data:text/html,<p>x</p>",
        "javascript:alert(1)",
        "//x",
    ],
)
def test_only_http_and_https(workspace: Path, url: str) -> None:
    result = run(make_ctx(workspace, []), url)
    assert result.error_code == "invalid_argument", result.output
    assert "http" in result.output


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[::1]/",
        "http://127.0.0.1/",
        "http://127.0.0.2/",
        "http://10.1.2.3/",
        "http://192.168.1.1:8080/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",  # CGNAT
        "http://0.0.0.0/",
        "http://224.0.0.1/",  # multicast
        "http://[fd00::1]/",  # unique local
        "http://[fe80::1]/",  # link local
        "http://[::ffff:127.0.0.1]/",  # IPv4-mapped loopback
        "http://[::ffff:169.254.169.254]/",
        "http://[2002:7f00:1::1]/",  # 6to4 wrapping 127.0.0.1
        "https://localhost/",
        "http://0x7f000001/",  # other spellings of 127.0.0.1
        "http://2130706433/",
        "http://127.1/",
    ],
)
def test_private_addresses_refused_without_connecting(workspace: Path, url: str) -> None:
    started = time.monotonic()
    result = run(make_ctx(workspace, []), url)
    assert result.error_code == "blocked_host", result.output
    assert "web_allow_hosts" in result.output
    assert time.monotonic() - started < 2  # refused before any connect attempt


@pytest.mark.parametrize(
    ("address", "blocked"),
    [
        ("8.8.8.8", False),
        ("1.1.1.1", False),
        ("2606:4700:4700::1111", False),
        ("93.184.216.34", False),
        ("169.254.169.254", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("::", True),
        ("fc00::1", True),
        ("ff02::1", True),
        ("240.0.0.1", True),
        ("255.255.255.255", True),
        ("198.18.0.1", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:8.8.8.8", False),
    ],
)
def test_address_classification(address: str, blocked: bool) -> None:
    assert is_blocked_address(ipaddress.ip_address(address)) is blocked


def test_allow_list_is_exact(workspace: Path) -> None:
    # 127.0.0.1 allowed as an address does not open the rest of 127/8 ...
    with pytest.raises(ToolError) as info:
        check_url("http://127.0.0.2:9/", ["127.0.0.1"], 2)
    assert info.value.code == "blocked_host"
    assert check_url("http://127.0.0.1:9/", ["127.0.0.1"], 2).ip == "127.0.0.1"
    # ... a CIDR network does, and a host name entry allows that name.
    assert check_url("http://127.0.0.2:9/", ["127.0.0.0/8"], 2).ip == "127.0.0.2"
    assert check_url("http://localhost:9/", ["localhost"], 2).host == "localhost"
    assert check_url("http://[::1]:9/", ["::1"], 2).ip == "::1"
