"""A gateway that answers 401 echoing the key it was sent (as written, URL-encoded and
as a Basic credential) must not put the key on any surface: the LLMError, the run's
result, ``agentkit run``'s stderr and ``--json`` (a real subprocess), the conversation
files, a sub-agent's record and transcript, what the main model is told, and the OTLP
export (exception events and stack traces included), content capture off and on.
Real openai client, real FakeOpenAIServer, real workers, a real OTLP receiver."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from cli_helpers import agentkit
from otlp_receiver import CaptureReceiver
from subagent_helpers import Router, call, calls, scripted_settings, step, who
from tracing_helpers import HAVE_SDK, NO_SDK, named

from agentkit import Agent, tracing
from agentkit.errors import LLMError
from agentkit.llm.client import LLMClient
from agentkit.testing import ErrorReply, FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
# Assembled (no key-like literal in the source) and of no known key shape, so only the
# known-secret rule finds it; "/" and "+" make its URL-encoded form differ.
KEY = "gw" + "/Qe5+Lp9Xz4Rv8Nm3Tb7Wk"
CORE = "Lp9Xz4Rv8Nm3"  # a piece of it: found in any spelling but base64
MASK = "[REDACTED]"
USER = [{"role": "user", "content": "hi"}]


def spellings(key: str) -> list[str]:
    """The forms of the key an echo carries."""
    basic = base64.b64encode(f"user:{key}".encode()).decode()
    return [CORE, quote(key, safe=""), basic]


def leaks(text: str) -> list[str]:
    """The spellings of KEY found in ``text``."""
    return [s for s in spellings(KEY) if s in text]


class EchoGateway:
    """A handler answering 401 with what the request's Authorization header carried."""

    def __init__(self) -> None:
        self.server: FakeOpenAIServer | None = None

    def __call__(self, request: dict[str, Any]) -> Any:
        assert self.server is not None
        sent = self.server.records[-1].headers.get("authorization", "")
        key = sent.removeprefix("Bearer ")
        basic = base64.b64encode(f"user:{key}".encode()).decode()
        message = (
            f"Incorrect API key provided: {sent}. Tried as {quote(key, safe='')} "
            f"and as Authorization: Basic {basic}"
        )
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        return ErrorReply(401, body)


def serve(handler: Any) -> FakeOpenAIServer:
    server = FakeOpenAIServer(handler)
    for part in (handler, *getattr(handler, "main", []), *getattr(handler, "subs", {}).get(1, [])):
        if isinstance(part, EchoGateway):
            part.server = server
    return server


def files_leaking(root: Path) -> dict[str, list[str]]:
    """Every file under ``root`` holding a spelling of KEY."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            hits = leaks(path.read_bytes().decode("utf-8", "replace"))
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


def test_the_llm_error_of_an_echoed_key_does_not_hold_it() -> None:
    echo = EchoGateway()
    with serve(echo) as server:
        settings = scripted_settings(server, "en", api_key=KEY)
        with LLMClient(settings) as client, pytest.raises(LLMError) as info:
            client.complete(USER, None)
    error = info.value
    assert server.records[-1].headers["authorization"] == f"Bearer {KEY}"  # it did echo it
    assert error.kind == "authentication" and error.status == 401
    for shown in (error.message, str(error), error.one_line(), repr(error.args)):
        assert leaks(shown) == [], shown
    assert error.message.count(MASK) == 3


def sub_agent_then_main_refused() -> Router:
    """The main agent starts sub-agent 1, which is refused (401 echo); then the main
    agent's own next request is refused the same way."""
    return Router(
        [
            calls(call("create_sub_agent", agent_id=1, summary="probe", task="say hi")),
            EchoGateway(),
        ],
        {1: [EchoGateway()]},
    )


def run_scenario(workspace: Path) -> tuple[Any, FakeOpenAIServer]:
    router = sub_agent_then_main_refused()
    with serve(router) as server:
        settings = scripted_settings(server, "en", api_key=KEY)
        with Agent(workspace=workspace, settings=settings) as agent:
            result = agent.run("go")
    return result, server


def check_files_and_model(workspace: Path, result: Any, server: FakeOpenAIServer) -> None:
    assert result.status == "failed" and result.error_kind == "authentication"
    assert leaks(result.error) == [] and MASK in result.error
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.records)
    # What the main model was told of the sub-agent's failure.
    (second,) = [r for r in server.requests if who(r) is None and step(r) == 1]
    told = json.dumps(second["messages"][-1])
    assert leaks(told) == [] and "authentication" in told and MASK in told
    # The conversation files, the sub-agent's record and transcript: every file.
    assert files_leaking(workspace) == {}
    (record,) = workspace.rglob(".subagent/conversations.json")  # the sub-agent's record
    text = record.read_text(encoding="utf-8")
    assert '"failed"' in text and "authentication" in text and MASK in text
    (conversation,) = (workspace / ".agentkit" / "conversations").glob("*.json")
    assert MASK in conversation.read_text(encoding="utf-8")


def test_a_sub_agent_and_its_parent_refused_by_an_echoing_gateway_keep_no_key(
    workspace: Path,
) -> None:
    result, server = run_scenario(workspace)
    check_files_and_model(workspace, result, server)


# ------------------------------------------------------------------- traces
needs_sdk = pytest.mark.skipif(not HAVE_SDK, reason=NO_SDK)


@pytest.fixture(scope="module")
def receiver() -> Iterator[CaptureReceiver]:
    with CaptureReceiver() as running:
        yield running


@needs_sdk
@pytest.mark.parametrize("capture", [False, True], ids=["content-off", "content-on"])
def test_the_trace_of_a_refused_run_holds_no_key(
    receiver: CaptureReceiver, workspace: Path, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    receiver.clear()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", str(capture).lower())
    assert tracing.configure()
    try:
        result, server = run_scenario(workspace)
    finally:
        tracing.shutdown()
    check_files_and_model(workspace, result, server)

    def arrived(spans: list[dict[str, Any]]) -> bool:
        chats = named(spans, "chat fake-model")
        return len(chats) >= 3 and bool(named(spans, "invoke_agent sub-agent 1"))

    spans = receiver.wait_for(arrived)
    assert arrived(spans), [s["name"] for s in spans]
    assert leaks(json.dumps(spans)) == []
    refused = [s for s in named(spans, "chat fake-model") if s["status"]["code"] == 2]
    assert len(refused) == 2  # the sub-agent's request (in its worker) and the main one
    for span in refused:
        (event,) = [e for e in span["events"] if e["name"] == "exception"]
        attributes = event["attributes"]
        assert attributes["exception.type"] == "agentkit.errors.LLMError"
        assert MASK in attributes["exception.message"]
        assert "Traceback" in attributes["exception.stacktrace"]
        assert MASK in attributes["exception.stacktrace"]
        assert MASK in span["status"]["message"]
    assert len({s["resource"]["process.pid"] for s in refused}) == 2  # a worker's and ours


# ---------------------------------------------------------------- the CLI
def cli_env(base_url: str, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "AGENTKIT_", "PYTEST", "OTEL_"))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(
        AGENTKIT_MAX_RETRIES="0",
        AGENTKIT_LANGUAGE="en",
        PYTHONUNBUFFERED="1",
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY=KEY,
        AGENTKIT_MODEL="fake-model",
    )
    env.update(extra)
    return env


@needs_sdk
def test_agentkit_run_shows_no_echoed_key_on_stderr_json_files_or_trace(
    receiver: CaptureReceiver, workspace: Path
) -> None:
    receiver.clear()
    echo = EchoGateway()
    with serve(echo) as server:
        env = cli_env(
            server.base_url,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            OTEL_BSP_SCHEDULE_DELAY="50",
        )
        proc = agentkit("run", "hi", "-w", str(workspace), "--json", env=env, timeout=120)
    assert server.records and server.records[-1].headers["authorization"] == f"Bearer {KEY}"
    assert proc.returncode == 2, proc.stderr  # the endpoint refused the first request
    assert leaks(proc.stderr) == [] and MASK in proc.stderr
    data = json.loads(proc.stdout)
    assert data["error_kind"] == "authentication" and MASK in data["error"]
    assert leaks(proc.stdout) == []
    conversations = list((workspace / ".agentkit" / "conversations").glob("*.json"))
    assert conversations and MASK in conversations[0].read_text(encoding="utf-8")
    assert files_leaking(workspace) == {}
    spans = receiver.wait_for(lambda s: bool(named(s, "chat fake-model")))
    (chat,) = named(spans, "chat fake-model")
    assert any(e["name"] == "exception" for e in chat["events"])
    assert leaks(json.dumps(spans)) == []
