"""The sub-agents of one main conversation, and the seed tools' answers.

One job: SubAgentManager is the facade the rest of the package uses. It keeps
the collection of sub-agents (this run's and earlier runs' of the conversation),
checks create_sub_agent requests against the limits of docs/specification.md
§1 and §8 (agent_id 1-99 and unique in the conversation, timeout 60-3600 s
from Settings, at most 5 running, no overlapping deliverables), starts
workers through a Launcher and hands them to the Supervisor, and answers
create/terminate/get_status in the seed's JSON shapes. Watching, killing and
finishing workers is agentkit.subagent.supervisor's job.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentkit import events as ev
from agentkit import prompts
from agentkit.confined import folder as confined_folder
from agentkit.conversation import Conversation, new_conversation_id, utc_now
from agentkit.errors import ToolError
from agentkit.settings import Settings
from agentkit.subagent.admission import Request, admit
from agentkit.subagent.claims import Claims
from agentkit.subagent.contract import Launcher, WorkerSpec
from agentkit.subagent.launchers import make_launcher
from agentkit.subagent.record import (
    Ending,
    archive_record,
    list_deliverables,
    record_relpath,
)
from agentkit.subagent.state import STATUS_KEYS, SubAgent, earlier_rows
from agentkit.subagent.supervisor import Supervisor
from agentkit.subagent.sweep import sweep_record


class SubAgentManager:
    """Creates and supervises the sub-agents of one main conversation.

    Args:
        workspace: absolute workspace root.
        settings: the main agent's Settings (workers get a copy).
        conversation: the main conversation (ids already used there stay taken).
        emit: event callback (SubAgentStarted/Progress/Finished).
        launcher: how workers start (default: the one Settings name, see
            agentkit.subagent.launchers).

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
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.language = settings.language
        self.emit = emit or (lambda e: None)
        self.launcher: Launcher = launcher or make_launcher(settings)
        self.claims = Claims()
        self.agents: dict[int, SubAgent] = {}
        self._used_ids: dict[int, str] = {}
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self.supervisor = Supervisor(
            workspace=workspace,
            settings=settings,
            claims=self.claims,
            agents=self.agents,
            changed=self._changed,
            emit=self.emit,
        )
        # Sub-agents of earlier runs of this conversation (loaded from its file): their
        # ids stay taken, and status and records still show them.
        self._previous = earlier_rows(conversation.subagents if conversation else [])
        self._mcp_listing: dict[str, Any] | None = None
        self._mcp_lock = threading.Lock()
        self._used_ids.update({i: str(r.get("summary", "")) for i, r in self._previous.items()})

    def _mcp_tools(self) -> dict[str, Any]:
        """The tools of the MCP servers for sub-agents, listed once per conversation
        (workers then start a server only when one of its tools is called)."""
        if not (self.settings.mcp_servers or self.settings.mcp_config_files):
            return {}
        with self._mcp_lock:  # parallel create calls list once
            if self._mcp_listing is None:
                from agentkit.mcp.tools import listing_for_subagents

                self._mcp_listing = listing_for_subagents(self.workspace, self.settings)
            return self._mcp_listing

    def _phrase(self, key: str, **values: Any) -> str:
        return prompts.phrase(self.language, key, **values)

    def running(self) -> list[SubAgent]:
        """Return the sub-agents still running."""
        with self._lock:
            return [a for a in self.agents.values() if a.status == "running"]

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
    ) -> dict[str, Any]:
        """create_sub_agent (docs/specification.md §1). Blocking: returns when the agent ends, with
        deliverables_files, result_summary, sub_conversation_id and stats.
        Background: returns at once with ``status: running``. ``cancel`` (the main
        run's) ends a blocking wait and terminates the agent. ``profile``: an
        AgentProfile's dict, given to the worker (WorkerSpec.extra)."""
        extra: dict[str, Any] = {"profile": profile} if profile else {}
        if listing := self._mcp_tools():
            extra["mcp_tools"] = listing
        with self._lock:
            admitted = (
                "the agent is closing; no new sub-agents"
                if self._closed
                else admit(
                    Request(agent_id, timeout_seconds, deliverables_dir),
                    workspace=self.workspace,
                    settings=self.settings,
                    used_ids=self._used_ids,
                    running=self.running(),
                    agents=self.agents,
                    claims=self.claims,
                )
            )
            if isinstance(admitted, str):
                return {"success": False, "agent_id": agent_id, "error": admitted}
            rel, path = admitted
            spec = WorkerSpec(
                agent_id=agent_id,
                summary=summary,
                task=task,
                timeout_seconds=timeout_seconds,
                deliverables_dir=rel,
                deliverables_path=str(path),
                workspace=str(self.workspace),
                sub_conversation_id=new_conversation_id(),
                settings=self.settings.model_dump(),
                process_mark=f"agentkit-{uuid.uuid4().hex}",
                created_at=utc_now(),
                extra=extra,
            )
            agent = SubAgent(spec=spec, background=run_in_background, started=time.monotonic())
            self.claims.claim_folder(agent_id, path)
            self._used_ids[agent_id] = summary
            self.agents[agent_id] = agent
            try:
                # Through no link below the workspace: a command may have swapped it.
                with confined_folder(self.workspace, path, create=True):
                    pass
                sweep_record(path, self.workspace)  # one a killed process group left "running"
                archive_record(path, self.workspace)
                agent.handle = self.launcher.start(spec)
            except Exception as exc:  # cannot start: the agent fails, the main loop goes on
                why = f"could not start the worker: {exc}"
                self.supervisor.finish(agent, "failed", Ending(None, why))
                return self._result(agent)
            self.supervisor.watch(agent)
        self.emit(ev.SubAgentStarted(info=agent.status_row()))
        if run_in_background:
            return {
                "success": True,
                "agent_id": agent_id,
                "status": "running",
                "summary": summary,
                "message": self._phrase("started_background", agent_id=agent_id),
                "deliverables_dir": rel,
                "sub_conversation_id": spec.sub_conversation_id,
                "background": True,
            }
        while not agent.done.wait(0.2):
            if cancel is not None and cancel.is_set():
                self.supervisor.kill(agent, "terminated")
                agent.done.wait(10)
                break
        with self._lock:
            agent.announced = True
        return self._result(agent)

    def _result(self, agent: SubAgent) -> dict[str, Any]:
        """The blocking create_sub_agent result (docs/specification.md §1), also used for failures."""
        spec = agent.spec
        files, total = list_deliverables(
            agent.deliverables_path, self.settings.deliverables_list_max, self.workspace
        )
        if total > len(files):
            files.append(self._phrase("files_cut", more=total - len(files)))
        status = agent.status
        if status == "completed":
            message = self._phrase("completed", agent_id=spec.agent_id)
        elif status == "timeout":
            message = self._phrase(
                "timeout", agent_id=spec.agent_id, timeout_seconds=spec.timeout_seconds
            )
        elif status == "terminated":
            message = self._phrase("terminated", agent_id=spec.agent_id)
        else:
            message = self._phrase("failed", agent_id=spec.agent_id, reason=agent.error or status)
        return {
            "success": status == "completed",
            "agent_id": spec.agent_id,
            "status": status,
            "summary": spec.summary,
            "message": message,
            "deliverables_dir": spec.deliverables_dir,
            "deliverables_files": files,
            "result_summary": self.capped_summary(agent),
            "sub_conversation_id": spec.sub_conversation_id,
            "stats": agent.stats(),
        }

    def capped_summary(self, agent: SubAgent) -> str:
        """Return the agent's result summary cut to ``result_summary_max_chars``, with a
        note naming the record that holds the whole text."""
        text = agent.result_summary or ""
        limit = self.settings.result_summary_max_chars
        if len(text) <= limit:
            return text
        where = record_relpath(agent.spec.deliverables_dir)
        return text[:limit] + self._phrase("summary_cut", total=len(text), path=where)

    def check_main_write(self, path: Path) -> None:
        """Raise ToolError("write_conflict") when the main agent would write a file a
        running sub-agent owns."""
        owner = self.claims.owner_of(path, None)
        if owner is not None:
            raise ToolError("write_conflict", self.supervisor.conflict_message(path, owner))

    def terminate(self, agent_id: int, *, by_user: bool = False) -> dict[str, Any]:
        """terminate_sub_agent (docs/specification.md §1): kill the agent and its processes; files stay.
        ``by_user``: the user stopped it (a UI), not the main agent (its summary says so)."""
        with self._lock:
            agent = self.agents.get(agent_id)
            if agent is None and agent_id in self._previous:
                status = self._previous[agent_id].get("status", "completed")
                return self._not_running(agent_id, status)
            if agent is None:
                error = self._phrase("unknown_agent", agent_id=agent_id)
                return {"success": False, "agent_id": agent_id, "error": error}
            if agent.status != "running":
                return self._not_running(agent_id, agent.status)
            agent.announced = True  # the main agent asked: no notification
        self.supervisor.kill(agent, "terminated", summary_key="user_summary" if by_user else None)
        _, total = list_deliverables(agent.deliverables_path, 1, self.workspace)
        return {
            "success": True,
            "agent_id": agent_id,
            "status": "terminated",
            "message": self._phrase("terminated", agent_id=agent_id),
            "partial_results": total > 0,
            "deliverables_dir": agent.spec.deliverables_dir,
        }

    def _not_running(self, agent_id: int, status: str) -> dict[str, Any]:
        error = self._phrase("not_running", agent_id=agent_id, status=status)
        return {"success": False, "agent_id": agent_id, "status": status, "error": error}

    def status(self, agent_ids: list[int]) -> dict[str, Any]:
        """get_sub_agent_status (docs/specification.md §1). Unknown ids get a row with status
        ``not_found``; if every id is unknown the result is a refusal."""
        rows: list[dict[str, Any]] = []
        with self._lock:
            for agent_id in agent_ids:
                agent = self.agents.get(agent_id)
                if agent is None and agent_id in self._previous:
                    earlier = self._previous[agent_id]
                    rows.append({key: earlier.get(key) for key in STATUS_KEYS})
                elif agent is None:
                    rows.append(
                        {
                            "agent_id": agent_id,
                            "status": "not_found",
                            "error": self._phrase("unknown_agent", agent_id=agent_id),
                        }
                    )
                else:
                    rows.append(agent.status_row())
        if rows and all(r["status"] == "not_found" for r in rows):
            return {"success": False, "agents": rows, "error": rows[0]["error"]}
        return {"success": True, "agents": rows}

    # ----------------------------------------------------- notifications
    def take_finished(self) -> list[SubAgent]:
        """Return background agents that ended and were not announced yet, marking
        them announced (each completion is announced exactly once)."""
        with self._lock:
            done = [
                a
                for a in self.agents.values()
                if a.background and not a.announced and a.status != "running"
            ]
            for agent in done:
                agent.announced = True
            return sorted(done, key=lambda a: a.spec.agent_id)

    def has_unannounced(self) -> bool:
        """True when a background agent ended and was not announced yet."""
        with self._lock:
            return any(
                a.background and not a.announced and a.status != "running"
                for a in self.agents.values()
            )

    def any_finishing(self) -> bool:
        """True while a running agent has called finish_task and its end is on the way."""
        with self._lock:
            return any(a.finishing and a.status == "running" for a in self.agents.values())

    def wake(self) -> None:
        """Wake threads waiting on the manager's changes (after a cancel)."""
        with self._changed:
            self._changed.notify_all()

    def records(self) -> list[dict[str, Any]]:
        """Return one summary row per sub-agent, for the main conversation file."""
        with self._lock:
            earlier = [r for i, r in sorted(self._previous.items()) if i not in self.agents]
            ordered = sorted(self.agents.values(), key=lambda a: a.spec.agent_id)
            return earlier + [a.conversation_row() for a in ordered]

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
        with self._lock:
            self._closed = True
        self.terminate_all(summary_key="left_summary")
