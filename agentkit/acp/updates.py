"""agentkit events as ACP ``session/update`` notifications: the mapping of docs/acp.md.

One job: turn one conversation's event stream (agentkit.events) into the updates an
editor shows, keeping what the mapping needs between events (the turn's message id,
whether its text was streamed, the open tool calls, which tool call created which
sub-agent). :class:`UpdateMapper` works in two steps:

* :meth:`UpdateMapper.capture` runs on the thread that publishes the event, at the
  moment it is published: before a ``write_file``/``edit_file`` call runs it reads
  the file's text, after the batch it reads it again (for the diff; nothing else is
  read there, and only regular files under a size bound);
* :meth:`UpdateMapper.updates` runs on the event loop and returns the ACP updates
  (library models) for a captured event, in order.

The mapping in brief: streamed text → ``agent_message_chunk`` (a new ``messageId``
per model reply and per retry); a reply's reasoning → ``agent_thought_chunk``; a tool
call → ``tool_call`` (``pending``) then ``tool_call_update`` (``in_progress``), and
when it ends ``completed``/``failed`` with its content (agentkit.acp.toolcalls); a
sub-agent's progress → updates of the ``create_sub_agent`` card that made it (a
background one's card stays ``in_progress`` until the sub-agent ends, even after
the prompt turn); a round that ends with sub-agents still running says so in a
last message chunk. Messages the editor sent itself are not echoed back.
"""

from __future__ import annotations

import os
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.helpers import start_tool_call, update_tool_call
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    UserMessageChunk,
)

from agentkit import events as ev
from agentkit.acp import toolcalls as tc
from agentkit.acp.isolation import MergeDiffs
from agentkit.settings import Settings

__all__ = ["Captured", "Update", "UpdateMapper", "message_chunk", "thought_chunk"]

_UNKNOWN = "\0unknown"  # a file edit's text that cannot be shown (no file text holds NUL)

Update = AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart | ToolCallProgress
"""The ACP updates this module makes."""


@dataclass(frozen=True)
class Captured:
    """An event as it was published, with what had to be read at that moment:
    ``before``/``after`` hold a file edit's text (see :meth:`UpdateMapper.capture`)."""

    event: ev.Event
    before: str | None = None
    after: str | None = None
    has_diff: bool = False
    merged: tuple[Any, ...] = ()  # a merge_sub_agent call's diffs (agentkit.acp.isolation)


def message_chunk(text: str, message_id: str | None = None) -> AgentMessageChunk:
    """An ``agent_message_chunk`` with ``text``."""
    return AgentMessageChunk(
        session_update="agent_message_chunk",
        content=TextContentBlock(type="text", text=text),
        message_id=message_id,
    )


def thought_chunk(text: str, message_id: str | None = None) -> AgentThoughtChunk:
    """An ``agent_thought_chunk`` with ``text``."""
    return AgentThoughtChunk(
        session_update="agent_thought_chunk",
        content=TextContentBlock(type="text", text=text),
        message_id=message_id,
    )


@dataclass
class _Call:
    name: str
    arguments: dict[str, Any] | None


@dataclass
class _Edits:
    """File edits of the current batch: the text before each target, read as the
    calls started; a second call on one path in one batch gets no diff of its own
    (the first shows the batch's change: the calls run after all have started)."""

    before: dict[str, str | None] = field(default_factory=dict)  # _UNKNOWN: not shown
    owner: dict[str, str] = field(default_factory=dict)  # path -> the call that shows it
    target: dict[str, str] = field(default_factory=dict)  # call id -> its path

    def clear(self) -> None:
        self.before.clear()
        self.owner.clear()
        self.target.clear()


class UpdateMapper:
    """The event → update mapping of one ACP session.

    Args:
        workspace: the conversation's workspace (paths are shown absolute).
        settings: returns the session's current Settings (the path guard's rules).
    """

    def __init__(
        self,
        workspace: Path,
        settings: Any,
        changed_files: Callable[[int], list[str]] | None = None,
    ) -> None:
        self.workspace = workspace
        # ``changed_files``: an isolated sub-agent's changed paths, for a merge's diffs.
        self._merges = MergeDiffs(workspace, changed_files) if changed_files else None
        self._settings = settings
        self._message_id = _new_id()
        self._streamed = False
        self._calls: dict[str, _Call] = {}
        self._agent_calls: dict[int, str] = {}  # agent_id -> its create_sub_agent call
        self._background: set[int] = set()
        self._edits = _Edits()
        self._echo: deque[str] = deque(maxlen=64)

    def expect_echo(self, text: str) -> None:
        """``text`` was sent by the editor as a prompt: its UserMessage is not echoed."""
        self._echo.append(text)

    def task_of(self, agent_id: Any) -> str | None:
        """The ``task`` argument of the create_sub_agent call that made ``agent_id``."""
        call = (
            self._calls.get(self._agent_calls.get(agent_id, ""))
            if isinstance(agent_id, int)
            else None
        )
        task = (call.arguments or {}).get("task") if call else None
        return task if isinstance(task, str) else None

    def call_of(self, call_id: str | None) -> tuple[str, dict[str, Any] | None] | None:
        """The ``(name, arguments)`` of an open tool call, or None."""
        call = self._calls.get(call_id or "")
        return (call.name, call.arguments) if call else None

    # -------------------------------------------------- publisher's thread
    def capture(self, event: ev.Event) -> Captured:
        """Read what must be read as ``event`` is published (see the module docstring).
        Runs on the publishing thread; never raises."""
        try:
            if isinstance(event, ev.AssistantMessage):
                self._edits.clear()
            elif isinstance(event, ev.ToolCallStarted):
                return self._capture_start(event)
            elif isinstance(event, ev.ToolCallFinished):
                return self._capture_end(event)
        except Exception:  # a file read must never cost the event
            pass
        return Captured(event)

    def _target(self, name: str, arguments: dict[str, Any] | None) -> str | None:
        settings: Settings = self._settings()
        return tc.edit_target(name, arguments, self.workspace, settings)

    def _capture_start(self, event: ev.ToolCallStarted) -> Captured:
        if self._merges is not None:
            self._merges.start(event.call_id, event.name, event.arguments)
        path = self._target(event.name, event.arguments)
        if path is not None and path not in self._edits.owner:
            self._edits.owner[path] = event.call_id
            self._edits.target[event.call_id] = path
            text = tc.read_text(path)
            # A file that exists but cannot be shown (binary, too large) has no diff;
            # a missing one is a new file (old text None).
            self._edits.before[path] = (
                text if text is not None or not os.path.lexists(path) else _UNKNOWN
            )
        return Captured(event)

    def _capture_end(self, event: ev.ToolCallFinished) -> Captured:
        if self._merges is not None and (merged := self._merges.end(event.call_id, event.output)):
            return Captured(event, merged=tuple(merged))
        path = self._edits.target.get(event.call_id)
        before = self._edits.before.get(path or "", _UNKNOWN)
        after = tc.read_text(path)
        if before is _UNKNOWN or after is None:
            return Captured(event)
        return Captured(event, before, after, has_diff=True)

    # ----------------------------------------------------------- event loop
    def updates(self, captured: Captured, *, prompting: bool) -> list[Update]:
        """The ACP updates for one captured event, in order (``prompting``: an editor's
        prompt is waiting for this round, so a failure goes back as its error instead
        of as a message)."""
        event = captured.event
        if isinstance(event, ev.TextDelta):
            self._streamed = True
            return [message_chunk(event.text, self._message_id)]
        if isinstance(event, ev.AssistantMessage):
            return self._reply(event)
        if isinstance(event, ev.RetryScheduled):
            return self._retry(event)
        if isinstance(event, ev.ToolCallStarted):
            return self._started(event)
        if isinstance(event, ev.ToolCallFinished):
            return self._finished(captured)
        if isinstance(event, (ev.SubAgentStarted, ev.SubAgentProgress, ev.SubAgentFinished)):
            return self._subagent(event)
        if isinstance(event, ev.UserMessage):
            return self._user(event)
        if isinstance(event, ev.RoundFinished):
            return self._round_end(event, prompting)
        return []

    def _reply(self, event: ev.AssistantMessage) -> list[Update]:
        out: list[Update] = []
        if event.reasoning:
            out.append(thought_chunk(event.reasoning, self._message_id))
        if event.content and not self._streamed:
            out.append(message_chunk(event.content, self._message_id))
        self._message_id, self._streamed = _new_id(), False
        return out

    def _retry(self, event: ev.RetryScheduled) -> list[Update]:
        # Text already shown cannot be taken back: the retried reply is a new message.
        self._message_id, self._streamed = _new_id(), False
        note = f"Retrying in {event.delay_seconds:.0f} s (attempt {event.attempt}): {event.message}"
        return [thought_chunk(note, self._message_id)]

    def _user(self, event: ev.UserMessage) -> list[Update]:
        if event.text in self._echo:
            self._echo.remove(event.text)
            return []
        return [
            UserMessageChunk(
                session_update="user_message_chunk",
                content=TextContentBlock(type="text", text=event.text),
            )
        ]

    def _started(self, event: ev.ToolCallStarted) -> list[Update]:
        self._calls[event.call_id] = _Call(event.name, event.arguments)
        if event.name == "create_sub_agent" and isinstance(event.arguments, dict):
            agent_id = event.arguments.get("agent_id")
            if isinstance(agent_id, int) and not isinstance(agent_id, bool):
                self._agent_calls[agent_id] = event.call_id
        view = tc.describe(event.name, event.arguments, event.last_action, self.workspace)
        return [
            start_tool_call(
                event.call_id,
                view.title,
                kind=view.kind,
                status="pending",
                locations=view.locations or None,
                raw_input=event.arguments,
            ),
            update_tool_call(event.call_id, status="in_progress"),
        ]

    def _finished(self, captured: Captured) -> list[Update]:
        event = captured.event
        assert isinstance(event, ev.ToolCallFinished)
        call = self._calls.pop(event.call_id, None)
        arguments = call.arguments if call else None
        content = tc.result_content(
            event.name,
            arguments,
            event.ok,
            event.output,
            workspace=self.workspace,
            before=captured.before,
            after=captured.after if captured.has_diff else None,
        )
        content = [*captured.merged, *content]  # a merge's diffs, then its words
        seed = tc.seed_result(event.output) if event.name in tc.SUBAGENT_TOOLS else None
        if event.ok and event.name == "create_sub_agent" and seed and seed.get("background"):
            agent_id = seed.get("agent_id")
            if isinstance(agent_id, int):
                self._background.add(agent_id)
            # Its card follows the sub-agent: in progress until it ends.
            return [update_tool_call(event.call_id, content=content, raw_output=seed)]
        locations = tc.result_locations(event.name, arguments, event.output, self.workspace)
        return [
            update_tool_call(
                event.call_id,
                status="completed" if event.ok else "failed",
                content=content,
                locations=locations or None,
                raw_output=seed,
            )
        ]

    def _subagent(
        self, event: ev.SubAgentStarted | ev.SubAgentProgress | ev.SubAgentFinished
    ) -> list[Update]:
        info = event.info
        agent_id = info.get("agent_id")
        call_id = self._agent_calls.get(agent_id) if isinstance(agent_id, int) else None
        if call_id is None:
            return []
        content = [tc.text_content(tc.subagent_progress(info))]
        if isinstance(event, ev.SubAgentFinished) and agent_id in self._background:
            self._background.discard(agent_id)
            del self._agent_calls[agent_id]
            status: ToolCallStatus = "completed" if info.get("status") == "completed" else "failed"
            return [update_tool_call(call_id, status=status, content=content, raw_output=info)]
        return [update_tool_call(call_id, content=content)]

    def _round_end(self, event: ev.RoundFinished, prompting: bool) -> list[Update]:
        out: list[Update] = []
        if event.status == "failed" and not prompting:
            out.append(message_chunk(f"\n\nThe round failed: {event.error}", self._message_id))
        if event.background:
            ids = ", ".join(str(i) for i in event.background)
            noun = "Sub-agent" if len(event.background) == 1 else "Sub-agents"
            verb = "is" if len(event.background) == 1 else "are"
            out.append(
                message_chunk(
                    f"\n\n{noun} {ids} {verb} still working in the background; the main agent "
                    "continues by itself when they finish, and you can keep talking meanwhile.",
                    self._message_id,
                )
            )
        self._message_id, self._streamed = _new_id(), False
        return out


def _new_id() -> str:
    return f"msg_{uuid.uuid4().hex[:16]}"
