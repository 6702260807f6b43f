"""Running hooks: the user's commands (and an embedder's Python callables) at agentkit's events.

One job: run the hooks of one event and say what they decided (docs/approvals.md §4-§5).

A command hook is the user's own trusted program: it runs outside the command sandbox,
by ``/bin/sh -c`` in the workspace, with the scrubbed environment of a command
(agentkit.process.secrets: no API key; ``command_env_passthrough`` and
``command_env_drop`` apply) plus ``AGENTKIT_PROJECT_DIR`` and ``CLAUDE_PROJECT_DIR``
(the workspace), started so that it cannot outlive the agent
(agentkit.process.spawn.start_owned: a pid namespace where there is one) and killed at
its timeout (``timeout`` of the hook, else ``Settings.hook_timeout_seconds``) or when
it prints more than 1 MB on stdout or stderr (agentkit.policy.hook_process). Its stdin
is one JSON object (:meth:`HookRunner.payload`: Claude Code's field names, plus
agentkit's). Then:

* exit 0: go on; stdout, when it is a JSON object, may decide: ``{"decision": "allow" |
  "deny" | "ask", "reason": ..., "additional_context": ...}``, or Claude Code's
  ``{"hookSpecificOutput": {"permissionDecision", "permissionDecisionReason",
  "additionalContext"}}``, ``{"decision": "block" | "approve"}``, ``{"continue": false,
  "stopReason": ...}``. A PreToolUse hook's ``hookSpecificOutput.updatedInput`` (an
  object) replaces the call's input (agentkit.tools.gate checks it against the tool's
  parameters). Plain text is context for UserPromptSubmit and SessionStart;
  elsewhere, and JSON that does not parse, it is ignored with a warning (garbage);
* exit 2: block; stderr is the reason the model is shown;
* any other exit, a timeout, a program that cannot start: a hook error, reported
  (:class:`HookOutcome` ``problems``) and not blocking.

Several matching hooks run at once; the strictest decision wins (``deny`` > ``ask`` >
``allow``) and every ``additional_context`` is kept, in configuration order. Every
reason and context is cut to 10,000 characters, said when cut (agentkit.policy.reasons).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit.policy.hook_config import CommandHook, HookConfig, HookGroup
from agentkit.policy.hook_process import HOOK_ID_VAR, OUTPUT_MAX, run_command_hook
from agentkit.policy.reasons import REASON_MAX, cap_reason

log = logging.getLogger("agentkit")

__all__ = [
    "CONTEXT_MAX",
    "HOOK_ID_VAR",
    "OUTPUT_MAX",
    "HookOutcome",
    "HookRunner",
    "PythonHook",
    "interpret",
    "run_command_hook",
]

CONTEXT_MAX = REASON_MAX
"""Characters of one hook's ``additional_context`` (or reason) kept (Claude Code's cap)."""

_STRICT = {None: 0, "allow": 1, "ask": 2, "deny": 3}
_PLAIN_TEXT_CONTEXT = ("UserPromptSubmit", "SessionStart")
_DECISIONS = {"allow": "allow", "approve": "allow", "ask": "ask", "deny": "deny", "block": "deny"}

PythonHookFunc = Callable[[dict[str, Any]], "Mapping[str, Any] | None"]

_Answer = tuple[str | None, str, str | None, str | None, "dict[str, Any] | str | None"]
"""One hook's ``(decision, reason, context, problem, update)``; ``update`` its
``updatedInput`` (a dict), why that cannot be used (text), or None."""


@dataclass(frozen=True)
class PythonHook:
    """An embedder's hook: ``func(payload) -> None | dict`` (the dict as a command's JSON
    output), for the tool calls whose names ``matcher`` admits (hook_config matchers)."""

    func: PythonHookFunc
    matcher: str = ""


@dataclass
class HookOutcome:
    """What the hooks of one event decided.

    Attributes:
        decision: the strictest hook's ``allow``, ``ask`` or ``deny`` (exit 2 is ``deny``),
            or None when none had an opinion.
        reason: the reasons given with that decision, one per line.
        context: every ``additional_context`` (and plain-text context), in order.
        problems: one line per hook that failed (timeout, error exit, bad output).
        ran: how many hooks ran.
        updated_input: the tool input a PreToolUse hook gave instead of the model's
            (Claude Code's ``hookSpecificOutput.updatedInput``), or None.
        bad_update: why a hook's ``updatedInput`` cannot be used (not an object, two
            hooks disagree), or None; the call is then refused.
    """

    decision: str | None = None
    reason: str = ""
    context: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    ran: int = 0
    updated_input: dict[str, Any] | None = None
    bad_update: str | None = None

    @property
    def blocked(self) -> bool:
        """True when a hook said deny (or exited 2)."""
        return self.decision == "deny"

    def add(self, decision: str | None, reason: str, context: str | None) -> None:
        """Fold one hook's answer in (the strictest decision wins); the reason and the
        context are cut to :data:`CONTEXT_MAX` characters (agentkit.policy.reasons)."""
        reason = cap_reason(reason.strip())
        if _STRICT[decision] > _STRICT[self.decision]:
            self.decision, self.reason = decision, reason
        elif decision is not None and decision == self.decision and reason:
            self.reason = cap_reason("\n".join(r for r in (self.reason, reason) if r))
        if context and context.strip():
            self.context.append(cap_reason(context.strip()))

    def update(self, label: str, update: dict[str, Any] | str | None) -> None:
        """Fold one hook's ``updatedInput`` in (see the attributes)."""
        if isinstance(update, str):
            self.bad_update = self.bad_update or f"{label}: {update}"
        elif update is not None and self.updated_input not in (None, update):
            self.bad_update = "two PreToolUse hooks gave different updatedInput"
        elif update is not None:
            self.updated_input = update


def interpret(
    event: str, code: int, stdout: str, stderr: str
) -> tuple[str | None, str, str | None, str | None]:
    """Read one finished command hook: returns ``(decision, reason, context, problem)``
    (see the module docstring for the rules; ``problem`` is a warning, never a block).
    The reason is cut to :data:`CONTEXT_MAX` characters, said when cut."""
    return _interpret(event, code, stdout, stderr)[:4]


def _interpret(event: str, code: int, stdout: str, stderr: str) -> _Answer:
    if code == 2:
        reason = cap_reason(stderr.strip()) or f"blocked by a {event} hook"
        return "deny", reason, None, None, None
    if code != 0:
        first = (stderr.strip().splitlines() or [""])[0][:300]
        return None, "", None, f"exited with status {code}" + (f": {first}" if first else ""), None
    text = stdout.strip()
    if not text:
        return None, "", None, None, None
    if not text.startswith("{"):
        if event in _PLAIN_TEXT_CONTEXT:
            return None, "", cap_reason(text), None, None
        bad = f"printed text that is not a JSON object, ignored: {text[:80]!r}"
        return None, "", None, bad, None
    try:
        data = json.loads(text)
    except ValueError:
        bad = f"printed output that is not valid JSON, ignored: {text[:80]!r}"
        return None, "", None, bad, None
    if not isinstance(data, dict):
        return None, "", None, "printed JSON that is not an object, ignored", None
    return _decision_of(data, event)


def _decision_of(data: dict[str, Any], event: str) -> _Answer:
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    raw = data.get("decision", specific.get("permissionDecision"))
    reason = data.get("reason") or specific.get("permissionDecisionReason") or ""
    context = data.get("additional_context") or data.get("additionalContext")
    context = context or specific.get("additionalContext")
    problem = None
    decision = _DECISIONS.get(raw) if isinstance(raw, str) else None
    if raw is not None and decision is None:
        problem = f"decision {raw!r} is not allow, deny or ask; ignored"
    if data.get("continue") is False:
        decision, reason = "deny", str(data.get("stopReason") or reason or "stopped by a hook")
    text = context if isinstance(context, str) else (json.dumps(context) if context else None)
    return decision, cap_reason(str(reason)), text, problem, _update_of(specific, event)


def _update_of(specific: dict[str, Any], event: str) -> dict[str, Any] | str | None:
    """A PreToolUse hook's ``hookSpecificOutput.updatedInput``: the object, or why it
    cannot be used; None when there is none (or for another event, where it means
    nothing)."""
    if event != "PreToolUse" or "updatedInput" not in specific:
        return None
    update = specific["updatedInput"]
    if not isinstance(update, dict):
        return (
            f"updatedInput must be a JSON object of the tool's input, not {type(update).__name__}"
        )
    return update


class HookRunner:
    """Runs the hooks of one agent (the main agent's session, or one sub-agent's worker).

    Args:
        config: the command hooks (agentkit.policy.hook_config.load_hooks).
        workspace: the working folder of every hook.
        settings: for ``hook_timeout_seconds`` and the environment rules.
        base: fields of every payload (``conversation_id``, ``transcript_path``,
            ``agent_id``, ``agent_type``; see :meth:`payload`).
        python: an embedder's hooks by event (:class:`PythonHook`).
        on_problem: called as ``on_problem(event, hook, problem)`` for each failed hook
            (the session emits HookFailed); problems are logged as warnings anyway.
    """

    def __init__(
        self,
        config: HookConfig,
        *,
        workspace: Path,
        settings: Any,
        base: dict[str, Any] | None = None,
        python: dict[str, list[PythonHook]] | None = None,
        on_problem: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.settings = settings
        self.base = dict(base or {})
        self.python: dict[str, list[PythonHook]] = python if python is not None else {}
        self.on_problem = on_problem
        self._env: dict[str, str] | None = None

    def has(self, event: str) -> bool:
        """True when a command or Python hook is configured for ``event``."""
        return self.config.has(event) or bool(self.python.get(event))

    def payload(self, event: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The hook's stdin object: ``hook_event_name``, ``session_id`` and
        ``conversation_id`` (the main conversation's id: one agentkit conversation is
        one Claude Code session), ``transcript_path``, ``cwd`` (the workspace),
        ``agent_id`` (None for the main agent), then ``fields``."""
        conversation = self.base.get("conversation_id", "")
        return {
            "hook_event_name": event,
            "session_id": conversation,
            "cwd": str(self.workspace),
            **self.base,
            **fields,
        }

    def run(
        self, event: str, name: str = "", fields: Mapping[str, Any] | None = None
    ) -> HookOutcome:
        """Run every hook of ``event`` whose matcher admits ``name`` (a tool name, a
        profile, a source) with the payload of ``fields``; returns their combined
        outcome. Never raises."""
        commands = self.config.matching(event, name)
        python = [h for h in self.python.get(event, ()) if HookGroup(h.matcher, ()).matches(name)]
        outcome = HookOutcome()
        if not commands and not python:
            return outcome
        payload = self.payload(event, fields or {})
        data = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")
        jobs: list[Callable[[], tuple[str, _Answer]]] = [
            *(lambda h=h: (h.command, self._command(event, h, data)) for h in commands),
            *(lambda h=h: (_name(h.func), _call_python(h.func, payload, event)) for h in python),
        ]
        if len(jobs) == 1:
            answers = [jobs[0]()]
        else:
            with ThreadPoolExecutor(len(jobs), thread_name_prefix="agentkit-hook") as pool:
                answers = list(pool.map(lambda job: job(), jobs))
        for label, (decision, reason, context, problem, update) in answers:
            outcome.ran += 1
            outcome.add(decision, reason, context)
            outcome.update(label, update)
            if problem:
                problem = cap_reason(problem)  # an embedder's exception text, too
                outcome.problems.append(f"{label}: {problem}")
                self._report(event, label, problem)
        return outcome

    def _command(self, event: str, hook: CommandHook, data: bytes) -> _Answer:
        timeout = hook.timeout or float(self.settings.hook_timeout_seconds)
        code, out, err, problem = run_command_hook(hook, data, self.workspace, self.env(), timeout)
        if code is None:
            return None, "", None, problem, None
        return _interpret(event, code, out, err)

    def env(self) -> dict[str, str]:
        """The hooks' environment (built once): this process's, scrubbed of secrets,
        plus AGENTKIT_PROJECT_DIR and CLAUDE_PROJECT_DIR."""
        if self._env is None:
            from agentkit.process.secrets import scrub_env

            settings = self.settings
            env = scrub_env(
                os.environ,
                passthrough=settings.command_env_passthrough,
                drop=settings.command_env_drop,
                hidden_values=(settings.api_key,),
            )
            env["AGENTKIT_PROJECT_DIR"] = env["CLAUDE_PROJECT_DIR"] = str(self.workspace)
            self._env = env
        return self._env

    def _report(self, event: str, label: str, problem: str) -> None:
        log.warning("agentkit: %s hook %s %s", event, label, problem)
        if self.on_problem is not None:
            try:
                self.on_problem(event, label, problem)
            except Exception:  # a reporting callback must not break the call
                log.debug("hook problem callback failed", exc_info=True)


def _name(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _call_python(func: PythonHookFunc, payload: dict[str, Any], event: str) -> _Answer:
    try:
        answer = func(dict(payload))
    except Exception as exc:  # an embedder's bug is a hook error, not a crash
        return None, "", None, f"raised {type(exc).__name__}: {exc}", None
    if answer is None:
        return None, "", None, None, None
    if not isinstance(answer, Mapping):
        bad = f"returned {type(answer).__name__}, not a dict or None; ignored"
        return None, "", None, bad, None
    return _decision_of(dict(answer), event)
