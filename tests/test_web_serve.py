"""``agentkit serve`` as a real process, and its access rules (no browser)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agentkit.testing import FakeOpenAIServer
from agentkit.web.serve import access_token, free_port

pytestmark = pytest.mark.slow


def test_access_token_rule() -> None:
    assert access_token("127.0.0.1", None) is None
    assert access_token("::1", None) is None
    assert access_token("localhost", "given") == "given"
    generated = access_token("192.0.2.7", None)
    assert generated and len(generated) >= 24
    assert access_token("192.0.2.7", None) != generated  # fresh each time
    assert access_token("0.0.0.0", "mine") == "mine"


def test_serve_process_answers_on_loopback_and_stops_on_ctrl_c(workspace: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with FakeOpenAIServer(["hi"]) as model:
        argv = [
            sys.executable,
            "-m",
            "agentkit",
            "serve",
            "-w",
            str(workspace),
            "--port",
            str(port),
            "--model",
            "m",
            "--base-url",
            model.base_url,
            "--api-key",
            "k",
            "--token",
            "tok-123",
        ]
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            first = proc.stdout.readline() if proc.stdout else ""
            assert first.strip() == f"agentkit serve: open http://127.0.0.1:{port}/?token=tok-123"
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 20
            while True:
                try:
                    visit = httpx.get(f"{url}/?token=tok-123", timeout=5)
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            assert visit.status_code == 303 and visit.headers["location"] == "/"
            assert httpx.get(f"{url}/api/conversations", timeout=5).status_code == 401
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err  # the CLI's exit code for Ctrl-C
        assert "tok-123" not in out + err  # printed once (the first line), never logged


def test_token_redacted_from_access_log_lines() -> None:
    import logging

    from agentkit.web.security import RedactTokens

    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/?x=1&token=abc-DEF_123", "1.1", 303), None,
    )  # fmt: skip
    assert RedactTokens().filter(record) is True
    assert record.getMessage() == '127.0.0.1:5000 - "GET /?x=1&token=*** HTTP/1.1" 303'
