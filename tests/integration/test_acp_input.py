"""``agentkit acp`` fed bad bytes by hand: every bad line gets a JSON-RPC error, none ends it.

The real command runs as a subprocess with its stdin and stdout as pipes; the test
writes raw lines (not JSON, batches, bad ids, unknown methods, wrong params, a prompt
for an unknown session, nesting deep enough to break a recursive parser...) and reads
the answers, then checks the agent still answers a good request and leaves cleanly
at end of input.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("acp")

from acp_helpers import AGENT, agent_env
from cli_helpers import cli_env
from subagent_helpers import Router, call, calls, finish

from agentkit.testing import FakeOpenAIServer

pytestmark = pytest.mark.slow


class RawAgent:
    """``agentkit acp`` with pipes: write lines, read parsed JSON lines; ``base_url``
    None: ``agentkit acp --demo`` with no endpoint or key at all (its scripted model
    answers with no pause: ``AGENTKIT_DEMO_LATENCY=0``)."""

    def __init__(self, cwd: Path, base_url: str | None, *args: str, **env: str) -> None:
        keyless = base_url is None
        self.proc = subprocess.Popen(
            (*AGENT, "--demo", *args) if keyless else (*AGENT, *args),
            cwd=cwd,
            env=cli_env(None, AGENTKIT_TOKENIZER="estimate", AGENTKIT_DEMO_LATENCY="0")
            if base_url is None
            else agent_env(base_url, **env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(
            target=lambda: self.stderr.extend(self.proc.stderr or []), daemon=True
        ).start()

    def _read(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.put(line)

    def write(self, raw: bytes | str | dict[str, Any]) -> None:
        data = json.dumps(raw).encode() if isinstance(raw, dict) else raw
        data = data.encode() if isinstance(data, str) else data
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 60) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        value = json.loads(line)  # every line out is JSON, whatever came in
        assert isinstance(value, dict), line
        return value

    def request(self, method: str, params: Any, request_id: Any) -> dict[str, Any]:
        self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            answer = self.read()
            if answer.get("id") == request_id and "method" not in answer:
                return answer


def error_of(answer: dict[str, Any]) -> tuple[int, str]:
    return answer["error"]["code"], answer["error"]["message"]


def _bad_lines_get_errors(agent: RawAgent, workspace: Path) -> None:
    """Every bad line gets a JSON-RPC error and none ends the agent; it then answers
    a good request (and has made one session, with no title)."""
    bad_lines: list[tuple[bytes | str, int, str]] = [
        ("this is not json", -32700, "Parse error"),
        (b"\xff\xfe not utf-8", -32700, "Parse error"),
        ("[" * 100_000 + "]" * 100_000, -32700, "Parse error"),  # recursion-proof
        ('[{"jsonrpc": "2.0", "id": 1, "method": "initialize"}]', -32600, "batches"),
        ("42", -32600, "JSON object"),
        ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "x": NaN}', -32700, "NaN"),
        ('{"jsonrpc": "2.0", "id": {"x": 1}, "method": "initialize"}', -32600, "id must"),
        ('{"jsonrpc": "2.0", "result": 1}', -32600, "neither a method nor an id"),
    ]
    for raw, code, words in bad_lines:
        agent.write(raw)
        answer = agent.read()
        assert answer["id"] is None, raw
        assert answer["error"]["code"] == code, (raw, answer)
        assert words in answer["error"]["message"]
    agent.write({"id": 5, "method": "initialize", "params": {"protocolVersion": 1}})
    assert agent.read() == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32600, "message": 'Invalid Request: "jsonrpc" must be "2.0"'},
    }
    # A bad notification is never answered (JSON-RPC 2.0): the next answer is
    # the next request's.
    agent.write({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
    agent.write({"method": 3})
    code, message = error_of(agent.request("no/such", {}, "m1"))
    assert (code, message) == (-32601, "Method not found: no/such")
    assert error_of(agent.request("authenticate", {"methodId": "x"}, "m2"))[0] == -32601

    # Regression: session/new before initialize opened a conversation, with the
    # editor's capabilities unknown; every session request is refused until then.
    early = [("session/new", {"cwd": str(workspace), "mcpServers": []}), ("session/list", {})]
    for n, (method, params) in enumerate(early):
        code, message = error_of(agent.request(method, params, f"early{n}"))
        assert (code, message) == (
            -32600,
            "initialize first: send initialize before any session/ request",
        )
    assert not (workspace / ".agentkit" / "conversations").exists()
    init = agent.request("initialize", {"protocolVersion": 1}, "init")
    assert init["result"]["protocolVersion"] == 1
    assert init["result"]["agentCapabilities"]["loadSession"] is True

    code, message = error_of(agent.request("session/new", {"cwd": str(workspace)}, 1))
    assert code == -32602 and "mcpServers" in message
    code, message = error_of(
        agent.request("session/new", {"cwd": "relative/dir", "mcpServers": []}, 2)
    )
    assert code == -32602 and "absolute path" in message
    sse = {"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []}
    code, message = error_of(
        agent.request("session/new", {"cwd": str(workspace), "mcpServers": [sse]}, 3)
    )
    assert code == -32602 and "sse transport is not supported" in message
    prompt = {"sessionId": "conv_nope", "prompt": [{"type": "text", "text": "hi"}]}
    code, message = error_of(agent.request("session/prompt", prompt, 4))
    assert code == -32002 and "conv_nope" in message
    assert error_of(agent.request("session/prompt", "oops", 6))[0] == -32602

    made = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []}, 7)
    sid = made["result"]["sessionId"]
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    code, message = error_of(
        agent.request("session/prompt", {"sessionId": sid, "prompt": [image]}, 8)
    )
    assert code == -32602 and "image content is not supported" in message
    empty = {"sessionId": sid, "prompt": [{"type": "text", "text": "  "}]}
    assert error_of(agent.request("session/prompt", empty, 9))[0] == -32602
    listed = agent.request("session/list", {"cursor": "not-a-number"}, 10)
    assert error_of(listed)[0] == -32602
    for bad_id in ("../../etc/passwd", "conv/../x", ""):  # a path is no session id
        load: dict[str, Any] = {"cwd": str(workspace), "sessionId": bad_id, "mcpServers": []}
        code, message = error_of(agent.request("session/load", load, 11))
        assert code == -32602 and "not a conversation id" in message, (bad_id, message)
    # Text no UTF-8 file can hold is refused before it reaches the conversation.
    half = {"sessionId": sid, "prompt": [{"type": "text", "text": "half \ud800"}]}
    answer = agent.request("session/prompt", half, 12)  # sent as a \\ud800 escape
    assert answer["error"]["code"] == -32602, answer
    assert "lone surrogate" in answer["error"]["message"]

    # Still alive and well: a good request after all that.
    again = agent.request("session/list", {"cwd": str(workspace)}, "last")
    listed = again["result"]["sessions"]
    assert [(s["sessionId"], s.get("title")) for s in listed] == [(sid, None)]
    assert agent.proc.poll() is None


def _tool_output_stays_off_the_protocol(agent: RawAgent, workspace: Path) -> None:
    """A prompt whose tool prints (print, sys.stdout, fd 1), run by the main agent and by
    a sub-agent's worker process: every line the agent writes is still a JSON-RPC message."""
    made = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []}, 1)
    prompt = {
        "sessionId": made["result"]["sessionId"],
        "prompt": [{"type": "text", "text": "go"}],
    }
    agent.write({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
    seen = []
    while (message := agent.read()).get("id") != 2:  # read() requires JSON objects
        assert message["jsonrpc"] == "2.0" and message["method"] == "session/update"
        seen.append(message["params"]["update"])
    # Each prompt's answer says the language in use (docs/acp.md, session/new).
    meta = {"agentkit": {"language": "en"}}
    assert message["result"] == {"stopReason": "end_turn", "_meta": meta}
    ended = [u for u in seen if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in ended] == ["completed", "completed"]


def test_bad_input_and_tool_output_never_break_the_protocol(workspace: Path) -> None:
    """One agent shows both (one process start, not two): bad input gets JSON-RPC
    errors and the agent keeps running; then the output of tools and workers never
    reaches the protocol, and the noise is in its stderr; it leaves cleanly at end of input."""
    router = Router(
        main=[
            calls(call("noisy", text="main")),
            calls(call("create_sub_agent", agent_id=1, summary="noisy worker", task="be noisy")),
            "quiet now",
        ],
        subs={1: [calls(call("noisy", text="worker")), finish()]},
    )
    with FakeOpenAIServer(router) as server:
        agent = RawAgent(workspace, server.base_url, AGENTKIT_TOOLS="acp_noisy_tool:noisy")
        try:
            _bad_lines_get_errors(agent, workspace)
            _tool_output_stays_off_the_protocol(agent, workspace)
        finally:
            assert agent.proc.stdin is not None
            agent.proc.stdin.close()
            code = agent.proc.wait(60)
        noise = b"".join(agent.stderr)
        assert code == 0, noise.decode(errors="replace")
        for words in (b"print from main", b"print from worker", b"raw bytes on fd 1", b"garbage"):
            assert words in noise


def test_acp_demo_answers_with_no_endpoint_or_key(workspace: Path) -> None:
    """``agentkit acp --demo``: an editor can try agentkit with no key, as chat and
    serve can (a new user's trial: it needed a hand-made fake server)."""
    agent = RawAgent(workspace, None)
    try:
        init = agent.request("initialize", {"protocolVersion": 1}, "init")
        assert init["result"]["protocolVersion"] == 1
        made = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []}, 1)
        sid = made["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
        agent.write({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
        chunks: list[str] = []
        while True:
            line = agent.read()
            update = line.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                chunks.append(update["content"]["text"])
            if line.get("id") == 2:
                break
        assert line["result"]["stopReason"] == "end_turn", line
        assert "".join(chunks).strip()
    finally:
        assert agent.proc.stdin is not None
        agent.proc.stdin.close()
        code = agent.proc.wait(60)
    assert code == 0
    assert "SCRIPTED DEMO" in b"".join(agent.stderr).decode(errors="replace")


def test_session_list_without_cwd_lists_the_workspace_w_names_and_unknown_notes_are_quiet(
    workspace: Path, tmp_path: Path
) -> None:
    """Regression (a fresh user's trial): with ``-w DIR``, ``session/list`` without its
    optional ``cwd`` listed nothing, where the editors guide says it lists the saved
    conversations; and a notification no handler takes printed an ERROR with a
    traceback, where JSON-RPC ignores it."""
    first = RawAgent(workspace, None)
    try:
        first.request("initialize", {"protocolVersion": 1}, 0)
        made = first.request("session/new", {"cwd": str(workspace), "mcpServers": []}, 1)
        sid = made["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
        first.request("session/prompt", prompt, 2)
    finally:
        assert first.proc.stdin is not None
        first.proc.stdin.close()
        assert first.proc.wait(60) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = RawAgent(elsewhere, None, "-w", str(workspace))
    try:
        second.request("initialize", {"protocolVersion": 1}, 0)
        second.write({"jsonrpc": "2.0", "method": "no/such/notification", "params": {}})
        listed = second.request("session/list", {}, 1)
    finally:
        assert second.proc.stdin is not None
        second.proc.stdin.close()
        code = second.proc.wait(60)
    assert [s["sessionId"] for s in listed["result"]["sessions"]] == [sid]
    err = b"".join(second.stderr).decode(errors="replace")
    assert code == 0 and "Traceback" not in err and "ERROR" not in err, err


def test_requests_sent_just_before_the_input_ends_are_answered_and_leave_no_lock(
    workspace: Path,
) -> None:
    """Regression (a fresh user's trial): `printf 'initialize\\nsession/new\\n' |
    agentkit acp` answered only initialize, and left the new conversation's .lock
    file behind with no conversation beside it. A session being opened at the end of
    input is now let finish: answered, then closed and saved with the rest."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new",
         "params": {"cwd": str(workspace), "mcpServers": []}},
    ]  # fmt: skip
    with FakeOpenAIServer([]) as server:
        proc = subprocess.run(
            AGENT, cwd=workspace, env=agent_env(server.base_url), capture_output=True,
            input="".join(json.dumps(line) + "\n" for line in lines).encode(), timeout=60,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines()) if "id" in m}
    assert sorted(answers) == [1, 2], answers
    folder = workspace / ".agentkit" / "conversations"
    if "error" in answers[2]:  # it came after the end was seen: refused, in words
        assert "closing" in answers[2]["error"]["message"]
        assert list(folder.glob("conv_*")) == []
    else:
        session_id = answers[2]["result"]["sessionId"]
        assert sorted(p.name for p in folder.glob("conv_*")) == [f"{session_id}.json"]
