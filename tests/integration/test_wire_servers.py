"""Messages encoded once (agentkit.llm.wire) and the ContextWindow that keeps them:
the request bodies stay byte for byte what encoding them whole gives, over a long run
with shrinking, compaction, a context-length refusal and repairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wire_tools import registry, whole

from agentkit import events as ev
from agentkit.conversation import Conversation
from agentkit.engine import Engine, Hooks, Step
from agentkit.llm import LLMClient
from agentkit.settings import Settings
from agentkit.testing import ErrorReply, FakeOpenAIServer, Reply
from agentkit.tools.base import ToolContext

# ------------------------------------------------------------------ a long run


OVERFLOW = ErrorReply(
    400,
    {
        "error": {
            "message": "This model's maximum context length is 1800 tokens. "
            "However, your messages resulted in 2600 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)
TURNS = 36


class Script:
    """A deterministic model: by the number of replies given, a large tool output, a
    long argument, one context-length refusal, and refusals of system messages after
    the first (the client then sends them as user messages)."""

    def __init__(self) -> None:
        self.step = 0
        self.overflowed = False

    def __call__(self, request: dict[str, Any]) -> Any:
        if any(m["role"] == "system" for m in request["messages"][1:]):
            return ErrorReply(400, {"error": {"message": "system only at the start"}})
        step = self.step
        if step == 20 and not self.overflowed:
            self.overflowed = True
            return OVERFLOW
        self.step += 1
        if step >= TURNS:
            return "done"
        if step % 3 == 1:
            call = {"name": "echo", "arguments": {"text": f"{step} " + "long argument " * 80}}
        else:
            call = {"name": "big", "arguments": {"text": f"{step} abcdefghij "}}
        return Reply(tool_calls=[{**call, "id": f"call_{step}"}])


class Notes(Hooks):
    """After some batches: a system note (refused by the server, then sent as a user
    message) and a message put straight into the history (not through append)."""

    def after_tool_results(self, engine: Engine) -> Step:
        turns = engine.conversation.stats.turns
        if turns == 5:
            return Step(messages=[{"role": "system", "content": "NOTICE"}])
        if turns == 9:
            engine.conversation.messages.append({"role": "user", "content": "a nudge"})
        return Step()


class Fresh:
    """The reference model: sends the wire form of the stored messages, made afresh
    for each request as plain dicts (what the client encoded whole before)."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self.engine: Engine | None = None

    def complete(self, messages: list[dict[str, Any]], tools: Any, **kwargs: Any) -> Any:
        assert self.engine is not None
        window = self.engine.window
        fresh = [window._to_wire(m) for m in self.engine.conversation.messages]
        assert all(type(m) is dict for m in fresh)
        return self.client.complete(fresh, tools, **kwargs)


def long_run(workspace: Path, reference: bool) -> tuple[list[bytes], list[str], Conversation]:
    with FakeOpenAIServer(Script()) as server:
        settings = Settings(
            model="m",
            base_url=server.base_url,
            api_key="k",
            language="en",
            context_window=2048,
            max_retries=0,
            max_turns=TURNS + 5,
        )
        client = LLMClient(settings)
        model: Any = Fresh(client) if reference else client
        conversation = Conversation(
            messages=[
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "work through the steps"},
                # An interrupted call: the engine answers it first (a repair).
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_x",
                            "type": "function",
                            "function": {"name": "echo", "arguments": '{"text": "x"}'},
                        }
                    ],
                },
            ]
        )
        events: list[ev.Event] = []
        engine = Engine(
            model=model,
            registry=registry(),
            conversation=conversation,
            ctx=ToolContext(workspace=workspace, settings=settings),
            hooks=Notes(),
            emit=events.append,
        )
        if reference:
            model.engine = engine
        result = engine.run()
        engine.close()
        client.close()
        bodies = [r.raw_body for r in server.records if r.path.endswith("/chat/completions")]
    assert result.status == "done", result
    how = [e.how for e in events if isinstance(e, ev.ContextCompacted)]
    return bodies, how, conversation


def test_request_bodies_are_byte_identical_over_a_long_run_with_compaction(
    workspace: Path,
) -> None:
    bodies, how, conversation = long_run(workspace, reference=False)
    expected, expected_how, _ = long_run(workspace, reference=True)
    assert {"shrink", "shrink arguments", "compact"} <= set(how), how
    assert how == expected_how
    assert len(bodies) == len(expected) > TURNS
    for sent, reference in zip(bodies, expected, strict=True):
        assert sent == reference
        assert sent == whole(json.loads(sent))  # and the canonical compact JSON
    # The refusals were answered as the script says: the overflow, the system note.
    texts = [b.decode() for b in bodies]
    assert any(
        '"content":"NOTICE"' in t and '"role":"system","content":"NOTICE"' not in t for t in texts
    )
    assert any("a nudge" in t for t in texts)
    assert conversation.archive
