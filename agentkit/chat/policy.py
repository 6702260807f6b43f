"""A conversation's approvals and hooks, as its session uses them.

One job: put agentkit.policy to work for one chat session (docs/approvals.md): the
approval broker (agentkit.chat.approvals), the hook runner over the hooks files,
``Settings.hooks`` and the embedder's Python hooks, the :class:`~agentkit.tools.gate.ToolGate`
of each round (None when the conversation has no rules and no tool hooks: then
nothing about a call changes), the session's own hook events (SessionStart,
SessionEnd, UserPromptSubmit, Stop, SubagentStart, SubagentStop), what workers are
given (their tool hooks, in the spec) and the context hooks owe the model's next round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit.chat.approvals import Answerer, ApprovalBroker
from agentkit.chat.setup import check_policy
from agentkit.conversation import state_path
from agentkit.errors import ConfigurationError
from agentkit.policy.approvals import ApprovalPolicy
from agentkit.policy.hook_config import HOOK_EVENTS, TOOL_EVENTS, HookConfigError, load_hooks
from agentkit.policy.hooks import HookRunner, PythonHook
from agentkit.settings import user_config_dir
from agentkit.subagent.record import record_path
from agentkit.tools.gate import AskAnswer, AskRequest, ToolGate, say

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.settings import Settings
    from agentkit.subagent.contract import ApprovalRequest
    from agentkit.subagent.state import SubAgent

__all__ = ["STOP_HOOK_MAX", "ConversationPolicy", "python_hooks"]

STOP_HOOK_MAX = 3
"""Times in a row a Stop hook may send the main agent back to work in one round."""


def python_hooks(given: Mapping[str, Any] | None) -> dict[str, list[PythonHook]]:
    """An embedder's hooks as ``{event: [PythonHook]}``: each value a PythonHook, a
    callable, or a list of them. Raises ConfigurationError for an unknown event or a
    value that is not callable."""
    found: dict[str, list[PythonHook]] = {}
    for event, value in (given or {}).items():
        if event not in HOOK_EVENTS:
            raise ConfigurationError(
                f"hooks: {event!r} is not a hook event; known: {', '.join(HOOK_EVENTS)}"
            )
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, PythonHook) and not callable(item):
                raise ConfigurationError(f"hooks[{event!r}]: {item!r} is not callable")
            found.setdefault(event, []).append(
                item if isinstance(item, PythonHook) else PythonHook(item)
            )
    return found


class ConversationPolicy:
    """Approvals and hooks of one conversation.

    Args:
        workspace: the workspace (the hooks' working folder; its ``.agentkit/hooks.json``).
        conversation: the conversation.
        settings: returns the session's current Settings.
        emit: the session's event callback.
        save: writes the conversation file now.
        python: the embedder's hooks by event (kept by reference: add_hook adds to it).
        transcript_path: the conversation's file (hooks' ``transcript_path``).
        wake: wakes the session's driver (a sub-agent ended).

    Raises ConfigurationError naming the file and the field for a malformed hooks file.
    """

    def __init__(
        self,
        *,
        workspace: Path,
        conversation: Conversation,
        settings: Callable[[], Settings],
        emit: Callable[[ev.Event], None],
        save: Callable[[], None],
        python: dict[str, list[PythonHook]],
        transcript_path: Path,
        wake: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._emit = emit
        self._save = save
        self._wake = wake
        current = settings()
        check_policy(current)  # also for a session given its own model (no check_settings)
        try:
            user_dir = user_config_dir() if current.user_files else None
            config = load_hooks(state_path(workspace), current.hooks, user_dir)
        except HookConfigError as exc:
            raise ConfigurationError(f"hooks: {exc}") from None
        self.broker = ApprovalBroker(conversation, settings=settings, emit=emit, save=save)
        self.hooks = HookRunner(
            config,
            workspace=workspace,
            settings=current,
            base={
                "conversation_id": conversation.id,
                "transcript_path": str(transcript_path),
                "agent_id": None,
            },
            python=python,
            on_problem=self._problem,
        )
        self._owed: list[str] = []
        self._owed_lock = threading.Lock()
        self.stop_continues = 0

    # ------------------------------------------------------------- the gate
    def gate(self) -> ToolGate | None:
        """The main agent's gate for a round, or None when there is nothing to check."""
        settings = self._settings()
        self.hooks.settings = settings
        gate = ToolGate(
            ApprovalPolicy(settings.approvals),
            self.broker.ask,
            self.hooks,
            settings.language,
            settings.approval_timeout_seconds,
        )
        return gate if gate.active else None

    # ---------------------------------------------------- session hook events
    def start(self, *, resumed: bool, answerer: Answerer | None) -> None:
        """The session started: withdraw what a dead process left pending (a reopened
        conversation), subscribe its ``answerer``, run the SessionStart hooks (source
        ``resume`` or ``startup``; their context waits for the first round)."""
        self.broker.restore()
        if answerer is not None:
            self.broker.subscribe(answerer)
        source = "resume" if resumed else "startup"
        if self.hooks.has("SessionStart"):
            outcome = self.hooks.run("SessionStart", source, {"source": source})
            self._owe("SessionStart", outcome.context)

    def close(self) -> None:
        """The session is closing: withdraw every pending request, run the SessionEnd
        hooks (reason ``close``; their answers are ignored)."""
        self.broker.withdraw_all(say(self._settings().language, "closed_withdrawn"))
        if self.hooks.has("SessionEnd"):
            self.hooks.run("SessionEnd", "close", {"reason": "close"})

    def prompt(self, text: str) -> str | None:
        """Run the UserPromptSubmit hooks on a user message; returns the context to add
        after it (None: none). Raises ConfigurationError when a hook blocks it."""
        if not self.hooks.has("UserPromptSubmit"):
            return None
        outcome = self.hooks.run("UserPromptSubmit", "", {"prompt": text})
        if outcome.blocked:
            raise ConfigurationError(
                f"a UserPromptSubmit hook refused the message: {outcome.reason or '-'}"
            )
        return self._joined("UserPromptSubmit", outcome.context)

    def stop(self, final_text: str | None, background: list[int]) -> str | None:
        """Run the Stop hooks when the main agent answers; returns the system message
        that sends it back to work when one blocks (at most STOP_HOOK_MAX in a row),
        else None (the round ends; their context waits for the next round)."""
        if not self.hooks.has("Stop"):
            return None
        fields = {
            "stop_hook_active": self.stop_continues > 0,
            "last_assistant_message": final_text,
            "background_tasks": background,
        }
        outcome = self.hooks.run("Stop", "", fields)
        self._owe("Stop", outcome.context)
        if outcome.blocked and self.stop_continues < STOP_HOOK_MAX:
            self.stop_continues += 1
            return say(self._settings().language, "stop_hook", reason=outcome.reason or "-")
        self.stop_continues = 0
        return None

    # ------------------------------------------------------------ sub-agents
    def worker_extra(self) -> dict[str, Any]:
        """What a new worker's spec carries: its tool hooks and the main conversation's
        fields for their payload (nothing when there are no tool hooks)."""
        config = self.hooks.config.only(*TOOL_EVENTS)
        if config.empty:
            return {}
        base = {k: self.hooks.base[k] for k in ("conversation_id", "transcript_path")}
        return {"hooks": {"config": config.to_dict(), "base": base}}

    def subagent_started(self, agent: SubAgent) -> None:
        """Save the conversation file now (it lists the agent at once: a process group
        killed now still leaves its row, so the next opening can sweep its record), then
        run the SubagentStart hooks in a thread of their own (the start is not held up;
        they only observe)."""
        self._save()
        if self.hooks.has("SubagentStart"):
            fields = {
                **_agent_fields(agent),
                "summary": agent.spec.summary,
                "task": agent.spec.task,
            }
            threading.Thread(
                target=self.hooks.run,
                args=("SubagentStart", fields["agent_type"], fields),
                name="agentkit-hook-subagentstart",
                daemon=True,
            ).start()

    def subagent_ended(self, agent: SubAgent) -> None:
        """Withdraw the sub-agent's pending approvals, run the SubagentStop hooks (their
        context reaches the main agent's next round), then wake the session's driver."""
        language = self._settings().language
        reason = say(language, "agent_ended_withdrawn", agent_id=agent.spec.agent_id)
        self.broker.withdraw_agent(agent.spec.agent_id, reason)
        if self.hooks.has("SubagentStop"):
            fields = {
                **_agent_fields(agent),
                "status": agent.status,
                "result_summary": agent.result_summary,
                "last_assistant_message": agent.result_summary,
                "deliverables_dir": agent.spec.deliverables_dir,
                "agent_transcript_path": str(record_path(Path(agent.spec.deliverables_path))),
                "stop_hook_active": False,
            }
            self._owe(
                "SubagentStop", self.hooks.run("SubagentStop", fields["agent_type"], fields).context
            )
        self._wake()

    def from_worker(
        self, agent: SubAgent, message: ApprovalRequest, reply: Callable[[AskAnswer], bool]
    ) -> None:
        """A sub-agent's ApprovalRequest (the supervisor paused its clock; ``reply``
        sends the answer and resumes it)."""
        request = AskRequest(
            message.tool, dict(message.arguments), message.reason, message.key, message.call_id
        )
        self.broker.submit(request, agent.spec.agent_id, reply)

    def on_approval(self, answerer: Answerer) -> Callable[[], None]:
        """Subscribe an answerer (agentkit.chat.approvals.Answerer); returns the unsubscribe."""
        return self.broker.subscribe(answerer)

    # ---------------------------------------------------------- owed context
    def take_owed(self) -> list[str]:
        """The hook context owed to the model's next round (system notes), once."""
        with self._owed_lock:
            owed, self._owed = self._owed, []
        return owed

    def _owe(self, event: str, context: list[str]) -> None:
        text = self._joined(event, context)
        if text:
            with self._owed_lock:
                self._owed.append(text)

    def _joined(self, event: str, context: list[str]) -> str | None:
        if not context:
            return None
        language = self._settings().language
        return "\n".join(say(language, "hook_context", event=event, text=t) for t in context)

    def _problem(self, event: str, hook: str, problem: str) -> None:
        self._emit(ev.HookFailed(hook_event_name=event, hook=hook, problem=problem))


def _agent_fields(agent: SubAgent) -> dict[str, Any]:
    profile = agent.spec.extra.get("profile") or {}
    name = profile.get("name") if isinstance(profile, dict) else None
    return {"agent_id": agent.spec.agent_id, "agent_type": name or "default"}
