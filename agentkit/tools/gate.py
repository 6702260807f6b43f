"""The path of one tool call through the approval rules and the hooks.

One job: :class:`ToolGate`, called by the tool registry (agentkit.tools.base
``ToolRegistry.execute``) once a call's arguments are valid, when the conversation has
approval rules or tool hooks (without either there is no gate: nothing is added to a
call). For one call:

1. the rules (agentkit.policy.approvals): ``deny`` refuses it at once;
2. the PreToolUse hooks: exit 2 or ``deny`` blocks it with their reason, ``ask`` asks;
   an ``updatedInput`` replaces the call's input: it is checked against the tool's
   parameters (invalid: the call is refused) and the rules again (the strictest
   answer wins), and the result says the input it ran with;
3. an ``ask`` (a rule's or a hook's) waits for an answer (:data:`Asker`: the session's
   approval broker for the main agent, the parent over the pipe for a sub-agent);
   only this call waits, the other calls of the message go on in their lanes. A denied
   call's result says who denied it and quotes the reason (cut to 10,000 characters).
   What ``allow_always`` remembers is the ask's key (:func:`ask_key`): the rule that
   asked, or the tool and the hook's reason (the exact input when it gave none);
   :func:`always_covers` says it in words for every front end;
4. the tool runs, then the PostToolUse hooks see its result (exit 2 or ``deny``: their
   reason is added to the result the model reads).

What a hook gives as ``additional_context`` follows the tool results as a system
message (``ToolResult.messages``), so it reaches the model's next request.
"""

from __future__ import annotations

import hashlib
import json
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agentkit import prompts
from agentkit.policy.approvals import ApprovalPolicy, Verdict
from agentkit.policy.hooks import HookOutcome, HookRunner
from agentkit.policy.reasons import cap_reason
from agentkit.tools.base import ToolResult

__all__ = [
    "AskAnswer",
    "AskRequest",
    "Asker",
    "Rewrite",
    "ToolGate",
    "always_covers",
    "ask_key",
    "say",
]


@dataclass(frozen=True)
class AskRequest:
    """A tool call waiting for a person.

    Attributes:
        tool: the tool's name; ``arguments``: its parsed arguments.
        reason: why it asks, one line for the person (the rule, or the hook's reason).
        key: what ``allow_always`` remembers for the conversation (:func:`ask_key`).
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

Rewrite = Callable[[dict[str, Any]], "tuple[str | None, str | None]"]
"""Checks a hook's ``updatedInput`` against the tool's parameters and makes it the input
``execute()`` runs with; returns ``(why it is not valid or None, its resolved path or
None)``."""

_HOOK_REASON, _HOOK_INPUT, _BOTH = "hook-reason:", "hook-input:", " & "
_INPUT_KEPT = 1_000  # characters of an input kept in a key; a longer one by its digest


def ask_key(
    tool: str, rule_key: str | None, hook_reason: str | None, arguments: dict[str, Any]
) -> str:
    """What ``allow_always`` remembers for one ask: ``rule_key`` when only a rule asks;
    ``hook-reason:<tool>:<reason>`` when only a hook asks with a reason, else
    ``hook-input:<tool>:<the input as sorted JSON>`` (that exact call; ``sha256:<hex>``
    of that JSON when it is longer than 1,000 characters); both joined by
    `` & `` when a rule and a hook ask. Hook keys cannot be rule keys (check_rules
    refuses a ``hook-...:`` key), so a hook's "always" never covers a rule's ask, nor
    one reason's another's."""
    hook = None
    if hook_reason is not None:
        if hook_reason.strip():
            hook = f"{_HOOK_REASON}{tool}:{hook_reason.strip()}"
        else:
            shown = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
            if len(shown) > _INPUT_KEPT:  # a file's content: the key stays short
                shown = "sha256:" + hashlib.sha256(shown.encode("utf-8")).hexdigest()
            hook = f"{_HOOK_INPUT}{tool}:{shown}"
    return _BOTH.join(k for k in (rule_key, hook) if k) or tool


def always_covers(key: str) -> str:
    """In words, what answering "always" to an ask of ``key`` (:func:`ask_key`) allows
    for the rest of the conversation (one line, at most about 400 characters)."""
    both = _BOTH + "hook-"
    rule, _, hook = key.partition(both) if both in key else ("", "", key)
    hook = "hook-" + hook if rule else hook
    if not hook.startswith((_HOOK_REASON, _HOOK_INPUT)):
        return f"every call the approvals rule {_short(key)} asks about"
    kind, _, rest = hook.partition(":")
    tool, _, what = rest.partition(":")
    if kind + ":" == _HOOK_REASON:
        text = f"{tool} calls a PreToolUse hook asks about with the reason {_short(what)}"
    else:
        text = f"this exact {tool} call (input {_short(what)}) when a hook asks about it"
    return f"{text}, where the approvals rule {_short(rule)} asks too" if rule else text


def _short(text: str, limit: int = 160) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


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
        rewrite: Rewrite | None = None,
    ) -> ToolResult:
        """Take one validated call through the steps of the module docstring and return
        its result (``execute()`` runs the tool; ``rewrite`` takes a hook's
        ``updatedInput``: without it such a call is refused). Never raises.

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
        rewritten = before.updated_input is not None or before.bad_update is not None
        if rewritten:
            refused, verdict, resolved = self._rewrite(tool, before, verdict, rewrite)
            if refused is not None:
                return self._with_context(refused, "PreToolUse", context)
            arguments = fields["tool_input"] = before.updated_input or {}
            fields.pop("resolved_path", None)
            if resolved is not None:
                fields["resolved_path"] = resolved
        if verdict.decision == "ask" or before.decision == "ask":
            answer = self.ask(self._request(tool, arguments, call_id, verdict, before), cancel)
            if answer.decision != "allow":
                return self._with_context(self._refusal(tool, answer), "PreToolUse", context)
        started = time.monotonic()
        result = execute()
        return self._after(tool, fields, arguments if rewritten else None, started, result, context)

    def _after(
        self,
        tool: str,
        fields: dict[str, Any],
        rewritten: dict[str, Any] | None,
        started: float,
        result: ToolResult,
        context: list[str],
    ) -> ToolResult:
        """After the tool ran (``started``: its monotonic start): the input a hook
        rewrote (``rewritten``) noted for the model, PostToolUse run, its objection
        and both hooks' additional context (PreToolUse's ``context``) attached."""
        if rewritten is not None:  # the model (and the transcript) read the input that ran
            used = cap_reason(json.dumps(rewritten, ensure_ascii=False, default=str))
            result = result.with_note(say(self.language, "hook_rewrote", arguments=used))
            result.meta["updated_input"] = rewritten
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

    def _rewrite(
        self, tool: str, before: HookOutcome, verdict: Verdict, rewrite: Rewrite | None
    ) -> tuple[ToolResult | None, Verdict, str | None]:
        """Check a hook's updatedInput: ``(the refusal, or None when it can run; the
        rules' verdict on the new input when it asks, else the old one; the new input's
        resolved path)``."""
        problem, resolved = before.bad_update, None
        if problem is None and rewrite is None:
            problem = f"{tool} calls cannot take a new input here"
        if problem is None and before.updated_input is not None and rewrite is not None:
            problem, resolved = rewrite(before.updated_input)
        if problem is not None:
            text = say(self.language, "hook_bad_input", tool=tool, reason=cap_reason(problem))
            return ToolResult.error("invalid_argument", text), verdict, None
        again = self.policy.decide(tool, before.updated_input or {}, resolved)
        if again.decision == "deny":
            text = say(self.language, "rule_denied", key=again.key, tool=tool)
            return ToolResult.error("denied", text), again, resolved
        return None, again if again.decision == "ask" else verdict, resolved

    def _request(
        self,
        tool: str,
        arguments: dict[str, Any],
        call_id: str | None,
        verdict: Verdict,
        before: HookOutcome,
    ) -> AskRequest:
        """The AskRequest of a call a rule or a hook (or both) asks about."""
        reasons, rule_key, hook_reason = [], None, None
        if verdict.decision == "ask":
            rule_key = str(verdict.key)
            reasons.append(say(self.language, "rule_asks", key=verdict.key))
        if before.decision == "ask":
            hook_reason = before.reason
            shown = f": {before.reason}" if before.reason else ""
            reasons.append(say(self.language, "hook_asks", reason=shown))
        key = ask_key(tool, rule_key, hook_reason, arguments)
        return AskRequest(tool, arguments, "; ".join(reasons), key, call_id)

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
        note = f': "{cap_reason(answer.note)}"' if answer.note else ""
        return ToolResult.error("denied", say(language, "user_denied", tool=tool, note=note))

    def _with_context(self, result: ToolResult, event: str, context: list[str]) -> ToolResult:
        for text in context:
            message = say(self.language, "hook_context", event=event, text=text)
            result.messages.append({"role": "system", "content": message})
        return result
