"""The path of one tool call through the approval rules and the hooks.

One job: :class:`ToolGate`, called by the tool registry (agentkit.tools.base
``ToolRegistry.execute``) once a call's arguments are valid, when the conversation has
approval rules or tool hooks (without either there is no gate: nothing is added to a
call). For one call:

1. the rules (agentkit.policy.approvals): ``deny`` refuses it at once;
2. the PreToolUse hooks: exit 2 or ``deny`` blocks it with their reason, ``ask`` asks;
3. an ``ask`` (a rule's or a hook's) waits for an answer (:data:`Asker`: the session's
   approval broker for the main agent, the parent over the pipe for a sub-agent);
   only this call waits, the other calls of the message go on in their lanes. A denied
   call's result says who denied it and quotes the reason;
4. the tool runs, then the PostToolUse hooks see its result (exit 2 or ``deny``: their
   reason is added to the result the model reads).

What a hook gives as ``additional_context`` follows the tool results as a system
message (``ToolResult.messages``), so it reaches the model's next request.
"""

from __future__ import annotations

import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agentkit import prompts
from agentkit.policy.approvals import ApprovalPolicy
from agentkit.policy.hooks import HookOutcome, HookRunner
from agentkit.tools.base import ToolResult

__all__ = ["AskAnswer", "AskRequest", "Asker", "ToolGate", "say"]


@dataclass(frozen=True)
class AskRequest:
    """A tool call waiting for a person.

    Attributes:
        tool: the tool's name; ``arguments``: its parsed arguments.
        reason: why it asks, one line for the person (the rule, or the hook's reason).
        key: what ``allow_always`` remembers for the conversation: the rule's key (or,
            for a hook's ask, the tool's name).
        call_id: the model's tool call id, when known.
    """

    tool: str
    arguments: dict[str, Any]
    reason: str
    key: str
    call_id: str | None = None


@dataclass(frozen=True)
class AskAnswer:
    """The answer to an AskRequest: ``decision`` ``allow`` or ``deny``; ``note`` the
    person's reason (deny) or the withdrawal's; ``by`` who decided: ``user``, ``always``
    (an earlier allow_always), ``default`` (no one to ask: ``approvals_default``),
    ``timeout``, ``withdrawn`` or ``cancelled``."""

    decision: Literal["allow", "deny"]
    note: str | None = None
    by: str = "user"


Asker = Callable[[AskRequest, threading.Event], AskAnswer]
"""Blocks until ``request`` is answered; the event is the run's cancel (set: give up)."""


class _Values(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def say(language: str, name: str, **values: Any) -> str:
    """Render the text ``name`` of ``prompts/<language>/approvals.txt`` (KeyError: an
    unknown name)."""
    template = prompts.table(language, "approvals.txt")[name]
    return string.Formatter().vformat(template, (), _Values(values))


class ToolGate:
    """Approval rules and tool hooks around the calls of one agent.

    Args:
        policy: the approval rules (an empty policy allows everything).
        ask: how an ``ask`` is answered (see :data:`Asker`).
        hooks: the agent's hooks (PreToolUse, PostToolUse), or None.
        language: of the texts the model reads.
        timeout_seconds: ``approval_timeout_seconds``, for the text of a timeout.
    """

    def __init__(
        self,
        policy: ApprovalPolicy,
        ask: Asker,
        hooks: HookRunner | None,
        language: str,
        timeout_seconds: float | None = None,
    ) -> None:
        self.policy = policy
        self.ask = ask
        self.hooks = hooks
        self.language = language
        self.timeout_seconds = timeout_seconds

    @property
    def active(self) -> bool:
        """True when the gate has something to do (rules, or tool hooks)."""
        hooks = self.hooks
        tool_hooks = hooks is not None and (hooks.has("PreToolUse") or hooks.has("PostToolUse"))
        return not self.policy.empty or tool_hooks

    def run(
        self,
        tool: str,
        arguments: dict[str, Any],
        call_id: str | None,
        cancel: threading.Event,
        execute: Callable[[], ToolResult],
        resolved: str | None = None,
    ) -> ToolResult:
        """Take one validated call through the steps of the module docstring and return
        its result (``execute()`` runs the tool). Never raises.

        ``resolved``: the file the call's path argument reaches after links,
        workspace-relative (agentkit.tools.paths.resolved_subject), or None; the rules
        match it as well as the spelled path, and the hooks get it as ``resolved_path``."""
        verdict = self.policy.decide(tool, arguments, resolved)
        if verdict.decision == "deny":
            return ToolResult.error(
                "denied", say(self.language, "rule_denied", key=verdict.key, tool=tool)
            )
        fields = {"tool_name": tool, "tool_input": arguments, "tool_use_id": call_id}
        if resolved is not None:  # beside Claude Code's fields, which stay as they are
            fields["resolved_path"] = resolved
        before = self._hooks("PreToolUse", tool, fields)
        context = list(before.context)
        if before.blocked:
            result = ToolResult.error(
                "blocked_by_hook",
                say(self.language, "hook_blocked", tool=tool, reason=before.reason or "-"),
            )
            return self._with_context(result, "PreToolUse", context)
        if verdict.decision == "ask" or before.decision == "ask":
            if verdict.decision == "ask":
                reason, key = say(self.language, "rule_asks", key=verdict.key), str(verdict.key)
            else:
                shown = f": {before.reason}" if before.reason else ""
                reason, key = say(self.language, "hook_asks", reason=shown), tool
            answer = self.ask(AskRequest(tool, arguments, reason, key, call_id), cancel)
            if answer.decision != "allow":
                return self._with_context(self._refusal(tool, answer), "PreToolUse", context)
        started = time.monotonic()
        result = execute()
        after = self._hooks(
            "PostToolUse",
            tool,
            {
                **fields,
                "tool_response": result.output,
                "ok": result.ok,
                "error_code": result.error_code,
                "duration_ms": int((time.monotonic() - started) * 1000),
            },
        )
        if after.blocked and after.reason:  # the tool ran: the model reads the objection
            result = result.with_note(say(self.language, "hook_feedback", reason=after.reason))
        self._with_context(result, "PreToolUse", context)
        return self._with_context(result, "PostToolUse", after.context)

    def _hooks(self, event: str, tool: str, fields: dict[str, Any]) -> HookOutcome:
        if self.hooks is None or not self.hooks.has(event):
            return HookOutcome()
        return self.hooks.run(event, tool, fields)

    def _refusal(self, tool: str, answer: AskAnswer) -> ToolResult:
        language = self.language
        if answer.by == "cancelled":
            return ToolResult.error(
                "cancelled", say(language, "withdrawn", tool=tool, reason=answer.note or "-")
            )
        if answer.by == "default":
            return ToolResult.error("denied", say(language, "no_one_denied", tool=tool))
        if answer.by == "timeout":
            seconds = f"{self.timeout_seconds:g}" if self.timeout_seconds else "?"
            return ToolResult.error(
                "denied", say(language, "timeout_denied", tool=tool, seconds=seconds)
            )
        if answer.by == "withdrawn":
            return ToolResult.error(
                "denied", say(language, "withdrawn", tool=tool, reason=answer.note or "-")
            )
        note = f': "{answer.note}"' if answer.note else ""
        return ToolResult.error("denied", say(language, "user_denied", tool=tool, note=note))

    def _with_context(self, result: ToolResult, event: str, context: list[str]) -> ToolResult:
        for text in context:
            message = say(self.language, "hook_context", event=event, text=text)
            result.messages.append({"role": "system", "content": message})
        return result
