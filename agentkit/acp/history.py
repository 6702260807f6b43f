"""A conversation's messages as ACP updates: ``session/load``'s replay, and a sub-agent's
child session as its record grows.

One job: walk OpenAI-shape messages (as agentkit saves them) and return the updates
that draw them: a user message → ``user_message_chunk``; an assistant reply → its
reasoning as ``agent_thought_chunk``, its text as ``agent_message_chunk``, and each
tool call as a ``tool_call``: ``completed`` or ``failed`` with its result when the
result is there (agentkit.acp.toolcalls; no diff: the file's earlier text is not
kept), else ``in_progress`` until a later :meth:`Transcript.feed` brings the result
(a sub-agent's record is read while it works). A background sub-agent's card takes
its final status from the conversation's sub-agent rows. System messages (the prompt,
notes) and the notifications the main agent was given about sub-agents
(agentkit.subagent.notify) are not the user's words and are left out, as in the
terminal and web chats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp.helpers import start_tool_call, update_tool_call
from acp.schema import TextContentBlock, UserMessageChunk

from agentkit import prompts
from agentkit.acp import toolcalls as tc
from agentkit.acp.updates import Update, message_chunk, thought_chunk
from agentkit.subagent.notify import is_notification

__all__ = ["Transcript", "replay"]


class Transcript:
    """Messages turned into updates, a growing list at a time.

    Args:
        workspace: the conversation's workspace (paths are shown absolute).
        language: its language (tool titles are its progress phrases).
        subagents: its sub-agent rows (agentkit.chat.Session.subagents), for the
            final status of background sub-agents.
        prefix: makes the replayed message ids unique (one per conversation).
    """

    def __init__(
        self,
        workspace: Path,
        language: str,
        subagents: list[dict[str, Any]] | None = None,
        prefix: str = "replay",
    ) -> None:
        self.workspace = workspace
        self.language = language
        self.ended = {r.get("agent_id"): r for r in subagents or [] if isinstance(r, dict)}
        self.prefix = prefix
        self.seen = 0
        self._open: dict[str, tuple[str, dict[str, Any] | None]] = {}  # calls without result

    def feed(self, messages: list[dict[str, Any]]) -> list[Update]:
        """The updates for the messages after those already fed (``messages`` is the
        whole list so far)."""
        results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
        out: list[Update] = []
        for index in range(self.seen, len(messages)):
            message = messages[index]
            role = message.get("role")
            content = message.get("content")
            text = content if isinstance(content, str) else ""
            if role == "user" and text and not is_notification(message):
                out.append(
                    UserMessageChunk(
                        session_update="user_message_chunk",
                        content=TextContentBlock(type="text", text=text),
                    )
                )
            elif role == "assistant":
                out += self._reply(message, text, results, f"{self.prefix}_{index}")
            elif role == "tool" and message.get("tool_call_id") in self._open:
                out.append(self._result(str(message["tool_call_id"]), message))
        self.seen = len(messages)
        return out

    def close(self) -> list[Update]:
        """Updates marking ``failed`` the calls that never got a result (the run was
        interrupted: the conversation or the sub-agent has ended)."""
        open_calls, self._open = self._open, {}
        return [update_tool_call(call_id, status="failed") for call_id in open_calls]

    def _reply(
        self, message: dict[str, Any], text: str, results: dict[Any, Any], message_id: str
    ) -> list[Update]:
        out: list[Update] = []
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out.append(thought_chunk(reasoning, message_id))
        if text:
            out.append(message_chunk(text, message_id))
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                out.append(self._call(call, results))
        return out

    def _call(self, call: dict[str, Any], results: dict[Any, dict[str, Any]]) -> Update:
        raw = call.get("function")
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        name = str(function.get("name") or "tool")
        arguments = _arguments(function.get("arguments"))
        call_id = str(call.get("id") or "")
        action = prompts.last_action(self.language, name, arguments)
        view = tc.describe(name, arguments, action, self.workspace)
        result = results.get(call_id)
        if result is None:
            self._open[call_id] = (name, arguments)
        status, content, seed = self._outcome(name, arguments, result)
        return start_tool_call(
            call_id,
            view.title,
            kind=view.kind,
            status=status,
            content=content or None,
            locations=view.locations or None,
            raw_input=arguments,
            raw_output=seed,
        )

    def _result(self, call_id: str, result: dict[str, Any]) -> Update:
        name, arguments = self._open.pop(call_id)
        status, content, seed = self._outcome(name, arguments, result)
        return update_tool_call(call_id, status=status, content=content, raw_output=seed)

    def _outcome(
        self, name: str, arguments: dict[str, Any] | None, result: dict[str, Any] | None
    ) -> tuple[Any, list[Any], dict[str, Any] | None]:
        """``(status, content, seed JSON)`` of a call whose ``result`` message came
        (``in_progress`` and nothing while it has not)."""
        if result is None:
            return "in_progress", [], None
        output = str(result.get("content") or "")
        ok = not output.startswith("Error:")
        seed = tc.seed_result(output) if name in tc.SUBAGENT_TOOLS else None
        content = tc.result_content(name, arguments, ok, output, workspace=self.workspace)
        if seed is not None:
            ok = seed.get("success") is not False
            row = self.ended.get(seed.get("agent_id")) if seed.get("background") else None
            if row is not None:  # a background sub-agent: how it ended, not how it started
                ok = row.get("status") == "completed"
                words = [tc.subagent_progress(row), str(row.get("result_summary") or "")]
                content = [tc.text_content("\n".join(w for w in words if w))]
        return ("completed" if ok else "failed"), content, seed


def replay(
    messages: list[dict[str, Any]],
    *,
    workspace: Path,
    language: str,
    subagents: list[dict[str, Any]] | None = None,
) -> list[Update]:
    """The updates that show a whole conversation (``session/load``), in order
    (see :class:`Transcript`)."""
    transcript = Transcript(workspace, language, subagents)
    return transcript.feed(messages) + transcript.close()


def _arguments(raw: Any) -> dict[str, Any] | None:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None
