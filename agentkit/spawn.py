"""Delegating from code: start a sub-agent of the current conversation and hold it.

One job: ``agent.spawn(task, ...)`` / ``await agent.aspawn(task, ...)`` (agentkit.agent)
start a sub-agent the way the main model's ``create_sub_agent`` does, through the
same path (the tool's argument rules, then ``SubAgentManager.create`` in the
background: the same limits, deliverables folder choice, records, events and
completion notification), and hand back a handle (agentkit.spawn_handles:
:class:`SubAgentHandle` for threads, :class:`AsyncSubAgentHandle` for asyncio, and
:class:`SubAgentResult`, how it ended; importable from here too, as agentkit.agent
does).

The sub-agent runs in the background as far as the conversation is concerned:
waiting for it from code does not take its completion from the main agent, which is
told as of any background sub-agent (a round starts for it), and ``cancel`` and
``message`` are the user's control calls (agentkit.chat.control), so the main agent
hears of them at its next round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from agentkit import prompts
from agentkit.errors import AgentkitError, Cancelled
from agentkit.spawn_handles import AsyncSubAgentHandle, SubAgentHandle, SubAgentResult
from agentkit.subagent.isolated import refusal

if TYPE_CHECKING:
    from agentkit.chat.session import Session
    from agentkit.profiles import AgentProfile

__all__ = [
    "AsyncSubAgentHandle",
    "SubAgentHandle",
    "SubAgentRefused",
    "SubAgentResult",
    "spawn_in",
]

_SUMMARY_CHARS = 30  # the seed's summary is 10-30 characters; one made from the task
_NOTE_TASK_CHARS = 1000  # of the task, in the note telling the main agent of the start


class SubAgentRefused(AgentkitError):
    """The sub-agent was not started: the refusal the model's create_sub_agent would
    get (a bad argument, an id in use, ``max_concurrent_subagents`` running, a folder
    held, the conversation's budget spent, a closing Agent).

    Attributes:
        error: the refusal text, word for word the tool's.
        result: the tool's JSON refusal (``{"success": false, "error": ...}``).
    """

    def __init__(self, error: str, result: dict[str, Any]) -> None:
        super().__init__(error)
        self.error = error
        self.result = result


# ------------------------------------------------------------------ starting
def spawn_in(
    session: Session,
    task: str,
    *,
    summary: str | None = None,
    profile: str | AgentProfile | None = None,
    deliverables_dir: str | None = None,
    timeout_seconds: int | None = None,
    isolation: Literal["shared", "isolated"] | None = None,
) -> SubAgentHandle:
    """Start a background sub-agent of ``session``'s conversation on ``task``, as
    create_sub_agent does, with the next free id.

    Args:
        session: the conversation (an Agent's current session).
        task: what the sub-agent is to do (non-empty).
        summary: its task summary (the seed asks 10-30 characters; at most 200);
            None: the task's first 30 characters.
        profile: an agent profile's name (as create_sub_agent's ``profile``) or an
            AgentProfile; None: none.
        deliverables_dir: its folder, workspace-relative; None: the default
            (``sub_agent_results/agent_{id}``, or the manager's choice when shared).
        timeout_seconds: 60-3600 (``subagent_timeout_min``/``_max``); None: the
            profile's, else ``Settings.subagent_default_timeout`` (600 s).
        isolation: ``isolated`` (its own copy of the workspace, merged back later) or
            ``shared``; None: as ``subagent_isolation`` and the profile say
            (agentkit.subagent.isolated.choose). Asking what the setting rules out
            (``isolated`` with it off, ``shared`` with ``always``) is refused.

    Returns the SubAgentHandle once its worker started. Raises SubAgentRefused with
    the tool's refusal when it cannot start, Cancelled when the session is closed.
    """
    if session.closed:
        raise Cancelled("the conversation is closed")
    if isinstance(task, str) and task.strip():
        session.settle_language(task)  # the conversation's first text settles an auto one
    manager = session.manager
    why = refusal(session.settings, isolation)
    if why is not None:
        raise SubAgentRefused(why, {"success": False, "error": why})
    profile_dict, timeout = _profile_and_timeout(session, profile, timeout_seconds)
    first = summary if summary is not None else _summary_of(task)
    arguments = _checked(session, task, first, deliverables_dir, timeout)
    before = session.bus.last_seq  # what events() replays from
    arguments["isolation"] = isolation
    result, agent_id = session.outside_round(lambda: _create(session, profile_dict, arguments))
    refused = "status" not in result  # a worker that could not start has one: "failed"
    if refused:
        error = str(result.get("error") or "the sub-agent was not started")
        raise SubAgentRefused(error, result)
    # Nothing behind the main agent's back: it hears of the start at its next round.
    shown = (
        arguments["task"]
        if len(arguments["task"]) <= _NOTE_TASK_CHARS
        else (arguments["task"][:_NOTE_TASK_CHARS] + "...")
    )
    session.note(
        prompts.phrase(
            session.settings.language,
            "user_started",
            agent_id=agent_id,
            summary=arguments["summary"],
            task=shown,
        )
    )
    return SubAgentHandle(session, manager.agents[agent_id], result, first_seq=before)


def _create(
    session: Session, profile: dict[str, Any] | None, arguments: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """create_sub_agent in the background with the lowest free id: its JSON and the id.
    When another start (the model's, another thread's) took that id meanwhile, the
    next free one is tried."""
    while True:
        agent_id = _free_id(session)
        result = session.manager.create(
            agent_id=agent_id, run_in_background=True, profile=profile, **arguments
        )
        if "status" in result or agent_id == 0 or not _taken_by_other(session, agent_id):
            return result, agent_id


def _summary_of(task: str) -> str:
    line = " ".join(task.split()) if isinstance(task, str) else ""
    return line[:_SUMMARY_CHARS] or line


def _checked(
    session: Session, task: str, summary: str, deliverables_dir: str | None, timeout: int
) -> dict[str, Any]:
    """The arguments under create_sub_agent's rules (agentkit.subagent.inputs), or
    SubAgentRefused with its refusal."""
    from agentkit.subagent import inputs
    from agentkit.subagent.seed_tools import CreateSubAgentParams

    given = {
        "agent_id": 1,  # chosen later; the rules are the id's too
        "summary": summary,
        "task": task,
        "deliverables_dir": deliverables_dir,
        "timeout_seconds": timeout,
    }
    try:
        p = CreateSubAgentParams.model_validate(given)
    except ValidationError as exc:
        refusal = inputs.refusal("create_sub_agent", {})(exc, {}, session.settings.language)
        raise SubAgentRefused(refusal["error"], refusal) from None
    return {
        "summary": p.summary,
        "task": p.task,
        "deliverables_dir": p.deliverables_dir,
        "timeout_seconds": p.timeout_seconds,
    }


def _profile_and_timeout(
    session: Session, profile: str | AgentProfile | None, timeout: int | None
) -> tuple[dict[str, Any] | None, int]:
    """The profile's dict (a name looked up as create_sub_agent does) and the timeout:
    the one given, else the profile's, else ``subagent_default_timeout``."""
    default = session.settings.subagent_default_timeout
    if profile is None:
        return None, timeout if timeout is not None else default
    if isinstance(profile, str):
        from agentkit.subagent.seed_tools import _profile

        chosen = _profile(profile, (session.workspace, session.settings))
        if isinstance(chosen, str):
            error = f"profile {profile!r} cannot be used: {chosen}"
            raise SubAgentRefused(error, {"success": False, "error": error})
        profile = chosen
    if timeout is None:
        timeout = profile.timeout_seconds or default
    return profile.to_dict(), timeout


def _free_id(session: Session) -> int:
    """The lowest id (1-99) no sub-agent of the conversation has; 0 when none is free
    (admission then refuses it, naming the range)."""
    from agentkit.subagent.inputs import AGENT_ID_MAX, AGENT_ID_MIN

    used = session.manager.table.used_ids()
    return next((i for i in range(AGENT_ID_MIN, AGENT_ID_MAX + 1) if i not in used), 0)


def _taken_by_other(session: Session, agent_id: int) -> bool:
    return agent_id in session.manager.table.used_ids()
