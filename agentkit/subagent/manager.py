"""The parent side of sub-agents: create, watch, time out, terminate, announce.

One SubAgentManager per main conversation. Each sub-agent gets a worker process
(through a Launcher) and a monitor thread that reads its pipe, answers write
claims, sends the wrap-up message and enforces the timeout. Limits are the
seed's (§1, §8): agent_id 1-99 and unique in the conversation, timeout 60-3600 s
(Settings), at most 5 running, no overlapping deliverables, no two agents
writing one file.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkit import events as ev
from agentkit import prompts
from agentkit.conversation import Conversation, new_conversation_id, utc_now
from agentkit.errors import ToolError
from agentkit.proctree import kill_tree
from agentkit.settings import Settings
from agentkit.subagent.claims import Claims
from agentkit.subagent.launcher import Launcher, LocalLauncher, WorkerHandle, WorkerSpec
from agentkit.subagent.records import (
    archive_record,
    clean_temp_files,
    folder_in_use,
    list_deliverables,
    read_record,
    write_record,
)

COUNTERS = ("files_read", "searches", "web_pages", "commands")
STATUS_KEYS = (
    "agent_id",
    "summary",
    "status",
    "runtime_seconds",
    *COUNTERS,
    "last_action",
    "deliverables_dir",
)


@dataclass
class SubAgent:
    """Parent-side state of one sub-agent (times in seconds, monotonic clock)."""

    agent_id: int
    summary: str
    task: str
    deliverables_dir: str
    deliverables_path: Path
    timeout_seconds: int
    background: bool
    sub_conversation_id: str
    process_mark: str
    started: float
    created_at: str
    status: str = "running"
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    last_action: str = ""
    result_summary: str | None = None
    error: str | None = None
    runtime_seconds: int | None = None
    token_usage: dict[str, int] = field(default_factory=dict)
    handle: WorkerHandle | None = None
    done: threading.Event = field(default_factory=threading.Event)
    announced: bool = False
    kill_reason: str | None = None

    def runtime(self) -> int:
        """Seconds since start (frozen at the end)."""
        if self.runtime_seconds is not None:
            return self.runtime_seconds
        return int(time.monotonic() - self.started)

    def status_row(self) -> dict[str, Any]:
        """Return the get_sub_agent_status row (seed §1)."""
        return {
            "agent_id": self.agent_id,
            "summary": self.summary,
            "status": self.status,
            "runtime_seconds": self.runtime(),
            **{k: self.counters.get(k, 0) for k in COUNTERS},
            "last_action": self.last_action,
            "deliverables_dir": self.deliverables_dir,
        }

    def stats(self) -> dict[str, int]:
        """Return the seed's ``stats`` object."""
        return {"runtime_seconds": self.runtime(), **{k: self.counters.get(k, 0) for k in COUNTERS}}


class SubAgentManager:
    """Creates and supervises the sub-agents of one main conversation.

    Args:
        workspace: absolute workspace root.
        settings: the main agent's Settings (workers get a copy).
        conversation: the main conversation (ids already used there stay taken).
        emit: event callback (SubAgentStarted/Progress/Finished).
        launcher: how workers start (default LocalLauncher).
        cancel: the main run's cancel event (ends blocking waits).

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
        self.launcher: Launcher = launcher or LocalLauncher(settings.subagent_start_method)
        self.claims = Claims()
        self.agents: dict[int, SubAgent] = {}
        self._used_ids: dict[int, str] = {}
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        # Sub-agents of earlier runs of this conversation (loaded from its file): their
        # ids stay taken, and status and records still show them.
        self._previous: dict[int, dict[str, Any]] = {}
        if conversation is not None:
            for row in conversation.subagents:
                if isinstance(row, dict) and isinstance(row.get("agent_id"), int):
                    row = dict(row)
                    if row.get("status") == "running":  # its process ended with that run
                        row["status"] = "terminated"
                    self._previous[row["agent_id"]] = row
                    self._used_ids[row["agent_id"]] = str(row.get("summary", ""))

    # --------------------------------------------------------------- helpers
    def _phrase(self, key: str, **values: Any) -> str:
        return prompts.phrase(self.language, key, **values)

    def _refuse(self, message: str, **fields: Any) -> dict[str, Any]:
        return {"success": False, **fields, "error": message}

    def running(self) -> list[SubAgent]:
        """Return the sub-agents still running."""
        with self._lock:
            return [a for a in self.agents.values() if a.status == "running"]

    def _resolve_deliverables(self, agent_id: int, given: str | None) -> tuple[str, Path] | str:
        rel = given.strip() if given and given.strip() else f"sub_agent_results/agent_{agent_id}"
        if "\x00" in rel:
            return "NUL byte in path"
        if Path(rel).is_absolute() or rel.startswith("~"):
            return "absolute paths are not allowed"
        root = self.workspace
        target = (root / rel).resolve()
        if target == root or root not in target.parents:
            return (
                "it must be a folder inside the workspace, not the workspace itself or outside it"
            )
        return rel.rstrip("/"), target

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
    ) -> dict[str, Any]:
        """create_sub_agent (seed §1). Blocking: returns when the agent ends, with
        deliverables_files, result_summary, sub_conversation_id and stats.
        Background: returns at once with ``status: running``."""
        s = self.settings
        with self._lock:
            if self._closed:
                return self._refuse("the agent is closing; no new sub-agents", agent_id=agent_id)
            if not 1 <= agent_id <= 99:
                return self._refuse(self._phrase("bad_id", agent_id=agent_id), agent_id=agent_id)
            if agent_id in self._used_ids:
                return self._refuse(
                    self._phrase(
                        "duplicate_id", agent_id=agent_id, summary=self._used_ids[agent_id]
                    ),
                    agent_id=agent_id,
                )
            if not s.subagent_timeout_min <= timeout_seconds <= s.subagent_timeout_max:
                return self._refuse(
                    self._phrase(
                        "bad_timeout",
                        min=s.subagent_timeout_min,
                        max=s.subagent_timeout_max,
                        value=timeout_seconds,
                    ),
                    agent_id=agent_id,
                )
            running = self.running()
            if len(running) >= s.max_concurrent_subagents:
                names = ", ".join(f"{a.agent_id} ({a.summary})" for a in running)
                return self._refuse(
                    self._phrase(
                        "too_many",
                        count=len(running),
                        running=names,
                        max=s.max_concurrent_subagents,
                    ),
                    agent_id=agent_id,
                )
            resolved = self._resolve_deliverables(agent_id, deliverables_dir)
            if isinstance(resolved, str):
                return self._refuse(
                    self._phrase("bad_dir", reason=resolved, agent_id=agent_id), agent_id=agent_id
                )
            rel, path = resolved
            busy = folder_in_use(path)
            if busy is not None:  # another Agent (or process) is using this folder now
                return self._refuse(
                    self._phrase("folder_busy", dir=rel, other=busy), agent_id=agent_id
                )
            owner = self.claims.folder_overlap(path)
            if owner is not None:
                other = self.agents[owner]
                return self._refuse(
                    self._phrase(
                        "overlap_dir",
                        dir=rel,
                        other_id=owner,
                        other_summary=other.summary,
                        other_dir=other.deliverables_dir,
                    ),
                    agent_id=agent_id,
                )
            agent = SubAgent(
                agent_id=agent_id,
                summary=summary,
                task=task,
                deliverables_dir=rel,
                deliverables_path=path,
                timeout_seconds=timeout_seconds,
                background=run_in_background,
                sub_conversation_id=new_conversation_id(),
                process_mark=f"agentkit-{uuid.uuid4().hex}",
                started=time.monotonic(),
                created_at=utc_now(),
            )
            self.claims.claim_folder(agent_id, path)
            self._used_ids[agent_id] = summary
            self.agents[agent_id] = agent
            spec = WorkerSpec(
                agent_id=agent_id,
                summary=summary,
                task=task,
                timeout_seconds=timeout_seconds,
                deliverables_dir=rel,
                deliverables_path=str(path),
                workspace=str(self.workspace),
                sub_conversation_id=agent.sub_conversation_id,
                settings=s.model_dump(),
                process_mark=agent.process_mark,
                created_at=agent.created_at,
            )
            try:
                path.mkdir(parents=True, exist_ok=True)
                archive_record(path)
                agent.handle = self.launcher.start(spec)
            except Exception as exc:  # cannot start: the agent fails, the main loop goes on
                self._finish(agent, "failed", error=f"could not start the worker: {exc}")
                return self._result(agent)
            threading.Thread(
                target=self._monitor,
                args=(agent,),
                name=f"agentkit-monitor-{agent_id}",
                daemon=True,
            ).start()
        self.emit(ev.SubAgentStarted(info=agent.status_row()))
        if run_in_background:
            return {
                "success": True,
                "agent_id": agent_id,
                "status": "running",
                "summary": summary,
                "message": self._phrase("started_background", agent_id=agent_id),
                "deliverables_dir": rel,
                "sub_conversation_id": agent.sub_conversation_id,
                "background": True,
            }
        while not agent.done.wait(0.2):
            if cancel is not None and cancel.is_set():
                self._kill(agent, "terminated")
                agent.done.wait(10)
                break
        with self._lock:
            agent.announced = True
        return self._result(agent)

    def _result(self, agent: SubAgent) -> dict[str, Any]:
        """The blocking create_sub_agent result (seed §1), also used for failures."""
        files, total = list_deliverables(
            agent.deliverables_path, self.settings.deliverables_list_max
        )
        if total > len(files):
            files.append(self._phrase("files_cut", more=total - len(files)))
        status = agent.status
        if status == "completed":
            message = self._phrase("completed", agent_id=agent.agent_id)
        elif status == "timeout":
            message = self._phrase(
                "timeout", agent_id=agent.agent_id, timeout_seconds=agent.timeout_seconds
            )
        elif status == "terminated":
            message = self._phrase("terminated", agent_id=agent.agent_id)
        else:
            message = self._phrase("failed", agent_id=agent.agent_id, reason=agent.error or status)
        return {
            "success": status == "completed",
            "agent_id": agent.agent_id,
            "status": status,
            "summary": agent.summary,
            "message": message,
            "deliverables_dir": agent.deliverables_dir,
            "deliverables_files": files,
            "result_summary": self.capped_summary(agent),
            "sub_conversation_id": agent.sub_conversation_id,
            "stats": agent.stats(),
        }

    def capped_summary(self, agent: SubAgent) -> str:
        """Return the agent's result summary cut to ``result_summary_max_chars``, with a
        note naming the record that holds the whole text."""
        text = agent.result_summary or ""
        limit = self.settings.result_summary_max_chars
        if len(text) <= limit:
            return text
        where = f"{agent.deliverables_dir}/.subagent/conversations.json"
        return text[:limit] + self._phrase("summary_cut", total=len(text), path=where)

    # ---------------------------------------------------------------- monitor
    def _monitor(self, agent: SubAgent) -> None:
        handle = agent.handle
        assert handle is not None
        conn = handle.conn
        deadline = agent.started + agent.timeout_seconds
        wrapup_at = agent.started + agent.timeout_seconds * self.settings.subagent_wrapup_at
        wrapup_sent = False
        result: dict[str, Any] | None = None
        while agent.status == "running":
            now = time.monotonic()
            if now >= deadline:
                self._kill(agent, "timeout")
                break
            if not wrapup_sent and now >= wrapup_at:
                wrapup_sent = True
                self._send(agent, ("wrapup", int(deadline - now)))
            wait = max(0.0, min(deadline, wrapup_at if not wrapup_sent else deadline) - now)
            try:
                if not conn.poll(min(wait, 0.5)):
                    continue
                message = conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind == "progress":
                self._progress(agent, message[1])
            elif kind == "claim":
                self._answer_claim(agent, message[1], Path(message[2]))
            elif kind == "result":
                result = message[1]
                break
        if result is not None and agent.status == "running" and agent.kill_reason is None:
            # Announce first: the worker's exit and the leftover sweep come after,
            # off the critical path of whoever waits for this agent.
            self._progress(agent, result, emit=False)
            agent.token_usage = result.get("token_usage") or {}
            self._finish(
                agent,
                result.get("status", "failed"),
                result_summary=result.get("result_summary"),
                error=result.get("error"),
            )
        handle.join(5)
        # The worker and anything it started (commands left running) end here.
        kill_tree(
            handle.pid if handle.is_alive() else None,
            agent.process_mark,
            grace=self.settings.command_kill_grace,
        )
        try:
            conn.close()
        except OSError:
            pass
        if agent.status == "running" and agent.kill_reason is None:
            code = getattr(getattr(handle, "process", None), "exitcode", None)
            self._finish(
                agent,
                "failed",
                error=f"the worker process ended without a result (exit code {code})",
            )

    def _send(self, agent: SubAgent, message: tuple[Any, ...]) -> None:
        if agent.handle is None:
            return
        try:
            agent.handle.conn.send(message)
        except (OSError, ValueError):
            pass

    def _progress(self, agent: SubAgent, row: dict[str, Any], emit: bool = True) -> None:
        with self._lock:
            for key in COUNTERS:
                if isinstance(row.get(key), int):
                    agent.counters[key] = row[key]
            if row.get("last_action"):
                agent.last_action = str(row["last_action"])
        if emit:
            self.emit(ev.SubAgentProgress(info=agent.status_row()))

    def _answer_claim(self, agent: SubAgent, request: int, path: Path) -> None:
        owner = self.claims.claim_file(agent.agent_id, path)
        error = None
        if owner is not None:
            other = self.agents.get(owner)
            error = self._phrase(
                "write_conflict",
                path=self._display(path),
                owner=owner,
                summary=other.summary if other else "",
            )
        self._send(agent, ("claim_reply", request, error))

    def _display(self, path: Path) -> str:
        try:
            return path.relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)

    def check_main_write(self, path: Path) -> None:
        """Raise ToolError("write_conflict") when the main agent would write a file a
        running sub-agent owns."""
        owner = self.claims.owner_of(path, None)
        if owner is not None:
            other = self.agents.get(owner)
            raise ToolError(
                "write_conflict",
                self._phrase(
                    "write_conflict",
                    path=self._display(path),
                    owner=owner,
                    summary=other.summary if other else "",
                ),
            )

    # ------------------------------------------------------------ endings
    def _kill(self, agent: SubAgent, status: str, *, interrupted: bool = False) -> None:
        """End a running agent by force (timeout, terminate, shutdown)."""
        with self._lock:
            if agent.status != "running":
                return
            agent.kill_reason = status
        handle = agent.handle
        kill_tree(handle.pid if handle else None, agent.process_mark, grace=0.5)
        files, _ = list_deliverables(agent.deliverables_path, self.settings.deliverables_list_max)
        shown = ", ".join(files) if files else self._phrase("no_files")
        key = "timeout_summary" if status == "timeout" else "terminated_summary"
        if interrupted:
            key = "interrupted_summary"
        self._finish(agent, status, result_summary=self._phrase(key, files=shown), error=status)

    def _finish(
        self,
        agent: SubAgent,
        status: str,
        *,
        result_summary: str | None = None,
        error: str | None = None,
    ) -> None:
        with self._lock:
            if agent.status != "running":
                return
            agent.status = status
            # The parent's clock: it includes the worker's start-up.
            agent.runtime_seconds = int(time.monotonic() - agent.started)
            if status != "completed":
                # The seed's notification templates say "finished"; the summary they
                # carry says how, so a failure never reads as a success.
                reason = error if status == "failed" and error and error != result_summary else ""
                if status == "failed" and not reason and not result_summary:
                    reason = self._phrase("crashed_summary", reason="unknown")
                note = self._phrase("status_note", status=status, reason=reason).strip()
                result_summary = f"{note}\n{result_summary}" if result_summary else note
            agent.result_summary = result_summary
            agent.error = error
            self.claims.release(agent.agent_id)
        self._finalise_record(agent)
        agent.done.set()
        with self._changed:
            self._changed.notify_all()
        self.emit(
            ev.SubAgentFinished(info={**agent.status_row(), "result_summary": agent.result_summary})
        )

    def _finalise_record(self, agent: SubAgent) -> None:
        """Make the record say how the agent ended when the worker could not (killed)."""
        clean_temp_files(agent.deliverables_path)
        record = read_record(agent.deliverables_path)
        if record is not None and record.get("status") == agent.status:
            return
        if record is None:
            record = {
                "agent_id": agent.agent_id,
                "summary": agent.summary,
                "created_at": agent.created_at,
                "messages": [],
                "sub_conversation_id": agent.sub_conversation_id,
                "task": agent.task,
                "deliverables_dir": agent.deliverables_dir,
                "stats": {},
            }
        stats = dict(record.get("stats") or {})
        stats.update(agent.stats())
        stats.setdefault(
            "token_usage", agent.token_usage or {"prompt": 0, "completion": 0, "total": 0}
        )
        record.update(
            status=agent.status,
            completed_at=utc_now(),
            result_summary=agent.result_summary,
            error=agent.error,
            stats=stats,
        )
        try:
            write_record(agent.deliverables_path, record)
        except OSError:
            pass

    def terminate(self, agent_id: int) -> dict[str, Any]:
        """terminate_sub_agent (seed §1): kill the agent and its processes; files stay."""
        with self._lock:
            agent = self.agents.get(agent_id)
            if agent is None and agent_id in self._previous:
                status = self._previous[agent_id].get("status", "completed")
                return self._refuse(
                    self._phrase("not_running", agent_id=agent_id, status=status),
                    agent_id=agent_id,
                    status=status,
                )
            if agent is None:
                return self._refuse(
                    self._phrase("unknown_agent", agent_id=agent_id), agent_id=agent_id
                )
            if agent.status != "running":
                return self._refuse(
                    self._phrase("not_running", agent_id=agent_id, status=agent.status),
                    agent_id=agent_id,
                    status=agent.status,
                )
            agent.announced = True  # the main agent asked: no notification
        self._kill(agent, "terminated")
        _, total = list_deliverables(agent.deliverables_path, 1)
        return {
            "success": True,
            "agent_id": agent_id,
            "status": "terminated",
            "message": self._phrase("terminated", agent_id=agent_id),
            "partial_results": total > 0,
            "deliverables_dir": agent.deliverables_dir,
        }

    def status(self, agent_ids: list[int]) -> dict[str, Any]:
        """get_sub_agent_status (seed §1). Unknown ids get a row with status
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
            return sorted(done, key=lambda a: a.agent_id)

    def has_pending(self) -> bool:
        """True while a background agent runs or ended unannounced."""
        with self._lock:
            return any(
                a.background and (a.status == "running" or not a.announced)
                for a in self.agents.values()
            )

    def wait_finished(self, cancel: threading.Event) -> list[SubAgent]:
        """Block until a background agent ends (or ``cancel`` is set); return the
        unannounced ones (possibly several that ended together)."""
        with self._changed:
            while not cancel.is_set():
                done = self.take_finished()
                if done:
                    return done
                if not any(a.background and a.status == "running" for a in self.agents.values()):
                    return []
                self._changed.wait(0.5)
        return []

    def wake(self) -> None:
        """Wake threads blocked in wait_finished (after a cancel)."""
        with self._changed:
            self._changed.notify_all()

    def records(self) -> list[dict[str, Any]]:
        """Return one summary row per sub-agent, for the main conversation file."""
        with self._lock:
            earlier = [r for i, r in sorted(self._previous.items()) if i not in self.agents]
            return earlier + [
                {
                    **a.status_row(),
                    "background": a.background,
                    "sub_conversation_id": a.sub_conversation_id,
                    "result_summary": a.result_summary,
                    "transcript": f"{a.deliverables_dir}/.subagent/conversations.json",
                }
                for a in sorted(self.agents.values(), key=lambda a: a.agent_id)
            ]

    def terminate_all(self, *, interrupted: bool = False) -> None:
        """Terminate every running sub-agent and its processes. ``interrupted``: the
        run was cancelled (their summaries say so); background ones are then
        announced at the start of the next run."""
        for agent in self.running():
            self._kill(agent, "terminated", interrupted=interrupted)

    def shutdown(self) -> None:
        """Terminate every running sub-agent and refuse new ones (seed §8.5: switching
        or closing the conversation ends them all). Idempotent."""
        with self._lock:
            self._closed = True
        self.terminate_all()
