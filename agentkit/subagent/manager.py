"""The sub-agents of one main conversation, and the seed tools' answers.

One job: SubAgentManager is the facade the rest of the package uses. Its
``table`` (agentkit.subagent.table.SubAgentTable) holds the sub-agents (this run's
and earlier runs' of the conversation), their lock and condition; the manager
checks create_sub_agent requests against the limits of docs/specification.md
§1 and §8 (agent_id 1-99 and unique in the conversation, timeout 60-3600 s
from Settings, at most 5 running, no overlapping deliverables) and starts
workers through a Launcher, handing them to the Supervisor (both steps are
agentkit.subagent.starts'), and answers create/terminate/get_status in the
seed's JSON shapes. Watching, killing and
finishing workers is agentkit.subagent.supervisor's; messages, questions, waits and usage
its ``control`` plane's (agentkit.subagent.control); continuing is agentkit.subagent.continuation's;
an isolated sub-agent's merge and discard agentkit.subagent.merging's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentkit import events as ev
from agentkit import prompts
from agentkit.conversation import Conversation, new_conversation_id
from agentkit.errors import ToolError
from agentkit.isolation.types import Changes, MergeReport
from agentkit.settings import Settings
from agentkit.subagent import merging, starts
from agentkit.subagent.admission import Request
from agentkit.subagent.budget import Meter
from agentkit.subagent.claims import Claims
from agentkit.subagent.contract import Launcher
from agentkit.subagent.control import ControlPlane
from agentkit.subagent.endings import write_kept_records
from agentkit.subagent.isolated import choose
from agentkit.subagent.launchers import make_launcher
from agentkit.subagent.record_folder import list_deliverables
from agentkit.subagent.results import asked_result, blocking_result, capped_summary
from agentkit.subagent.state import SubAgent, earlier_rows
from agentkit.subagent.supervisor import ApprovalHandler, Supervisor
from agentkit.subagent.table import SubAgentTable

# Seconds closing waits, in all, for the workers of ended sub-agents to exit.
SHUTDOWN_WAIT = 10.0


class SubAgentManager:
    """Creates and supervises the sub-agents of one main conversation.

    Args:
        workspace: absolute workspace root.
        settings: the main agent's Settings (workers get a copy).
        conversation: the main conversation (ids already used there stay taken).
        emit: event callback (SubAgentStarted/Progress/Finished), for observers.
        launcher: how workers start (default: the one Settings name, see
            agentkit.subagent.launchers).
        on_started: called with each sub-agent once its worker started (after its
            SubAgentStarted event); a chat session saves its file then.
        on_copied: called with an isolated sub-agent before its copy is made and once it
            is made, before its worker starts; a chat session saves its file then, so a
            process killed meanwhile leaves its number taken and its copy listed.
        on_finished: called with each sub-agent once it ended, whichever way (after
            its SubAgentFinished event); a chat session wakes its driver then.
        on_question: called with a sub-agent that asked its parent (after its
            SubAgentQuestion event); a chat session wakes its driver then.
        budget: the conversation's budget meter (session_max_tokens/_cost_usd), if any.
        on_approval: called as ``on_approval(agent, request, reply)`` with a worker's
            ApprovalRequest (its timeout clock paused until ``reply(answer)``;
            agentkit.subagent.supervisor); None: approvals_default answers them (no one to ask).
        worker_extra: returns what each new worker's spec carries besides (its tool
            hooks: agentkit.chat.policy), or None.
        settle_language: while the language is ``auto`` (no text given yet), called
            with the first sub-agent's task; returns the Settings with the
            conversation's language settled (a chat session keeps it in its file).

    All public methods are thread-safe and return the seed's JSON shapes; refusals
    are ``{"success": false, "error": ...}``, never exceptions.
    """

    def __init__(
        self,
        *,
        workspace: Path,
        settings: Settings,
        conversation: Conversation | None = None,
        emit: Callable[[ev.Event], None] | None = None,
        launcher: Launcher | None = None,
        on_started: Callable[[SubAgent], None] | None = None,
        on_finished: Callable[[SubAgent], None] | None = None,
        on_approval: ApprovalHandler | None = None,
        worker_extra: Callable[[], dict[str, Any]] | None = None,
        on_question: Callable[[SubAgent], None] | None = None,
        budget: Meter | None = None,
        settle_language: Callable[[str], Settings] | None = None,
        on_copied: Callable[[SubAgent], None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.language = settings.language
        self.emit = emit or (lambda e: None)
        self.launcher: Launcher = launcher or make_launcher(settings)
        self.claims = Claims()
        # Sub-agents of earlier runs of this conversation (loaded from its file): their
        # ids stay taken, and status and records still show them.
        self.table = SubAgentTable(earlier_rows(conversation.subagents if conversation else []))
        self.supervisor = Supervisor(
            workspace=workspace,
            settings=settings,
            claims=self.claims,
            table=self.table,
            emit=self.emit,
            on_finished=on_finished,
            on_approval=on_approval,
        )
        self.worker_extra = worker_extra
        self.control = self.supervisor.control = ControlPlane(self, budget)
        self.control.on_question = on_question
        self._on_started = on_started
        self.on_copied = on_copied
        self.conversation_id = conversation.id if conversation else None
        # Names this conversation's own deliverables folders (agentkit.subagent.placement).
        self.folder_key = self.conversation_id or new_conversation_id()
        self._mcp_listing: dict[str, Any] | None = None
        self._mcp_lock = threading.Lock()
        self._settle_language = settle_language

    @property
    def agents(self) -> Mapping[int, SubAgent]:
        """This run's sub-agents by id (a read-only view of :attr:`table`'s)."""
        return self.table.agents

    def mcp_tools(self) -> dict[str, Any]:
        """The tools of the MCP servers for sub-agents, listed once per conversation
        (workers then start a server only when one of its tools is called)."""
        if not (self.settings.mcp_servers or self.settings.mcp_config_files):
            return {}
        with self._mcp_lock:  # parallel create calls list once
            if self._mcp_listing is None:
                from agentkit.mcp.tools import listing_for_subagents

                self._mcp_listing = listing_for_subagents(self.workspace, self.settings)
            return self._mcp_listing

    def phrase(self, key: str, **values: Any) -> str:
        """The message ``key`` of agentkit.prompts in the conversation's language."""
        return prompts.phrase(self.language, key, **values)

    def running(self) -> list[SubAgent]:
        """Return the sub-agents still running, by id."""
        return self.table.running()

    # ---------------------------------------------------------------- create
    def create(
        self,
        *,
        agent_id: int,
        summary: str,
        task: str,
        deliverables_dir: str | None = None,
        run_in_background: bool = False,
        timeout_seconds: int = 600,
        cancel: threading.Event | None = None,
        profile: dict[str, Any] | None = None,
        isolation: str | None = None,
    ) -> dict[str, Any]:
        """create_sub_agent (docs/specification.md §1). Blocking: returns when the agent ends, with
        deliverables_files, result_summary, sub_conversation_id and stats.
        Background: returns at once with ``status: running``. ``cancel`` (the main
        run's) ends a blocking wait and terminates the agent. ``profile``: an
        AgentProfile's dict, given to the worker (WorkerSpec.extra). ``isolation``:
        ``shared``/``isolated`` or None (agentkit.subagent.isolated.choose)."""
        if self.language == "auto":  # started from code before any message: its task settles it
            self.adopt(self._settled(task))
        extra = starts.spec_extra(self, profile, run_in_background)
        self.control.check_session_budget()  # its first wrap-up and warning go out unlocked
        with self.table.locked():  # the limits, then the reservation, in one step
            placed = starts.place(
                self,
                Request(agent_id, timeout_seconds, deliverables_dir),
                summary=summary,
                task=task,
                background=run_in_background,
                extra=extra,
                profile=profile,
                isolated=choose(self.settings, isolation, profile),
            )
            if isinstance(placed, str):
                return {"success": False, "agent_id": agent_id, "error": placed}
            agent = placed
        if not starts.start_worker(self, agent):  # unlocked: one turn's creates start in parallel
            return self._result(agent)
        return self.launched(agent, cancel)

    def _settled(self, text: str) -> Settings:
        if self._settle_language is not None:
            return self._settle_language(text)
        from agentkit.language import settle_language

        return self.settings.model_copy(
            update={"language": settle_language(self.settings.language, text)}
        )

    def adopt(self, settings: Settings) -> None:
        """Use ``settings`` from now on (the conversation's language settled, a tool
        added): for new sub-agents, phrases and the supervisor's rules."""
        self.settings = settings
        self.language = settings.language
        self.supervisor.settings = settings

    def launched(self, agent: SubAgent, cancel: threading.Event | None) -> dict[str, Any]:
        """After its worker started: announce it, then the background result at once,
        or wait for its end (or its question) and return the blocking result."""
        spec = agent.spec
        self.emit(ev.SubAgentStarted(info=agent.view_row()))
        if self._on_started is not None:
            self._on_started(agent)
        if agent.background:
            return {
                "success": True,
                "agent_id": spec.agent_id,
                "status": "running",
                "summary": spec.summary,
                "message": self.phrase("started_background", agent_id=spec.agent_id),
                "deliverables_dir": spec.deliverables_dir,
                "sub_conversation_id": spec.sub_conversation_id,
                "background": True,
            }
        question = self._wait(agent, cancel)
        if question is not None:
            return asked_result(agent, question, self.language)
        return self._result(agent)

    def _wait(self, agent: SubAgent, cancel: threading.Event | None) -> str | None:
        """Wait for a blocking agent's end; ``cancel`` set terminates it. Returns the
        question it asked instead (the main agent must answer it: the agent goes on in
        the background), else None."""
        while not agent.done.wait(0.2):
            question = self.table.update(agent, _take_question)
            if question is not None:
                return question
            if cancel is not None and cancel.is_set():
                self.supervisor.kill(agent, "terminated")
                agent.done.wait(10)
                break
        self.table.update(agent, _mark_announced)
        return None

    def _result(self, agent: SubAgent) -> dict[str, Any]:
        """The blocking create_sub_agent result (agentkit.subagent.results)."""
        return blocking_result(agent, self.settings, self.workspace)

    def capped_summary(self, agent: SubAgent) -> str:
        """The agent's result summary, capped (agentkit.subagent.results.capped_summary)."""
        return capped_summary(agent, self.settings)

    def check_main_write(self, path: Path) -> None:
        """Raise ToolError("write_conflict") when the main agent would write a file a
        running sub-agent owns."""
        owner = self.claims.owner_of(path, None)
        if owner is not None:
            raise ToolError("write_conflict", self.supervisor.conflict_message(path, owner))

    def terminate(self, agent_id: int, *, by_user: bool = False) -> dict[str, Any]:
        """terminate_sub_agent (docs/specification.md §1): kill the agent and its processes; files stay.
        ``by_user``: the user stopped it (a UI), not the main agent (its summary says so)."""
        agent, earlier = self.table.find(agent_id)
        if earlier is not None:
            return self._not_running(agent_id, earlier)
        if agent is None:
            error = self.phrase("unknown_agent", agent_id=agent_id)
            return {"success": False, "agent_id": agent_id, "error": error}
        status = self.table.update(agent, _claim_end)
        if status != "running":
            return self._not_running(agent_id, status)
        self.supervisor.kill(agent, "terminated", summary_key="user_summary" if by_user else None)
        status = self.table.update(agent, _unclaim_end)
        if status != "terminated":
            return self._not_running(agent_id, status)
        _, total = list_deliverables(agent.deliverables_path, 1, self.workspace)
        return {
            "success": True,
            "agent_id": agent_id,
            "status": "terminated",
            "message": self.phrase("terminated", agent_id=agent_id),
            "partial_results": total > 0,
            "deliverables_dir": agent.spec.deliverables_dir,
        }

    def earlier_status(self, agent_id: int) -> str | None:
        """The status of sub-agent ``agent_id`` of an earlier run of the conversation
        (not of this one), or None."""
        return self.table.find(agent_id)[1]

    def earlier_row(self, agent_id: int) -> dict[str, Any] | None:
        """The saved row of sub-agent ``agent_id`` of an earlier run, or None."""
        return self.table.earlier_row(agent_id)

    def _not_running(self, agent_id: int, status: str) -> dict[str, Any]:
        error = self.phrase("not_running", agent_id=agent_id, status=status)
        return {"success": False, "agent_id": agent_id, "status": status, "error": error}

    def status(self, agent_ids: list[int]) -> dict[str, Any]:
        """get_sub_agent_status (docs/specification.md §1): agentkit.subagent.results.status_result."""
        return self.table.status(agent_ids, self.settings)

    # ------------------------------------- isolated copies (agentkit.subagent.merging)
    def changes(self, agent_id: int) -> Changes:
        """What isolated sub-agent ``agent_id`` changed (merging.changes; raises)."""
        return merging.changes(self, agent_id)

    def diff(self, agent_id: int) -> str:
        """Its changes as a unified diff (merging.diff; raises)."""
        return merging.diff(self, agent_id)

    def merge(self, agent_id: int, *, dry_run: bool = False) -> MergeReport:
        """Its changes applied onto the workspace (merging.merge; raises)."""
        return merging.merge(self, agent_id, dry_run=dry_run)

    def discard(self, agent_id: int) -> None:
        """Its copy and branch dropped (merging.discard; raises)."""
        merging.discard(self, agent_id)

    def unmerged(self) -> list[dict[str, Any]]:
        """The copies waiting for a merge or a discard (merging.unmerged)."""
        return merging.unmerged(self)

    # ----------------------------------------------------- notifications
    def take_finished(self) -> list[SubAgent]:
        """Return background agents that ended and were not announced yet, marking
        them announced (each completion is announced exactly once)."""
        return self.table.take(_unannounced_end, _mark_announced)

    def has_unannounced(self) -> bool:
        """True when a background agent ended and was not announced yet."""
        return self.table.any(_unannounced_end)

    def any_finishing(self) -> bool:
        """True while a running agent has called finish_task and its end is on the way,
        or an agent's end is being recorded (its copy saved and counted)."""
        return self.table.any(_finishing)

    def wake(self) -> None:
        """Wake threads waiting on the manager's changes (after a cancel)."""
        self.table.notify()

    def records(self) -> list[dict[str, Any]]:
        """Return one summary row per sub-agent, for the main conversation file. A
        final record that did not fit on disk when its agent ended is written first,
        when there is room now (agentkit.subagent.endings.write_kept_records)."""
        kept = self.table.select(lambda a: a.record is not None)
        if kept:
            write_kept_records(self.table, kept)
        return self.table.conversation_rows()

    def terminate_all(self, *, interrupted: bool = False, summary_key: str | None = None) -> None:
        """Terminate every running sub-agent and its processes. ``interrupted``: the
        run was cancelled (their summaries say so); background ones are then
        announced at the start of the next run."""
        for agent in self.running():
            self.supervisor.kill(
                agent, "terminated", interrupted=interrupted, summary_key=summary_key
            )

    def shutdown(self) -> None:
        """Terminate every running sub-agent and refuse new ones (docs/specification.md §8.5: switching
        or closing the conversation ends them all). Idempotent."""
        # Waits for a create inside its admission: terminate_all then sees that agent.
        self.table.close()
        self.terminate_all(summary_key="left_summary")
        # No worker outlives its owner: those that ended may still be exiting.
        self.supervisor.wait_for_workers(list(self.table.agents.values()), SHUTDOWN_WAIT)
        getattr(self.launcher, "close", lambda: None)()  # one holding resources (Ray's pool)


# What the manager does to one sub-agent under the table's lock (SubAgentTable.update).
def _mark_announced(agent: SubAgent) -> None:
    agent.announced = True


def _unannounced_end(agent: SubAgent) -> bool:
    # ``done``: its end is recorded whole (an isolated agent's copy saved and its
    # changes counted); announced earlier, its notification would lack them.
    return agent.background and not agent.announced and agent.ended()


def _finishing(agent: SubAgent) -> bool:
    return (agent.finishing or agent.status != "running") and not agent.done.is_set()


def _take_question(agent: SubAgent) -> str | None:
    """The question a blocking agent asked, now announced by the tool result (its end
    will be announced too: it goes on in the background), or None."""
    question = agent.question if agent.status == "running" else None
    if question is None:
        return None
    question.announced = True
    agent.background = True
    return str(question.text)


def _claim_end(agent: SubAgent) -> str:
    """The agent's status; a running one is marked announced (the main agent asked to
    end it: no notification)."""
    if agent.status == "running":
        agent.announced = True
    return agent.status


def _unclaim_end(agent: SubAgent) -> str:
    """The agent's status after a terminate; when its own end (finish_task) came
    first, that end stands everywhere and is announced as any end."""
    if agent.status != "terminated":
        agent.announced = False
    return agent.status
