"""The sub-agent process: the shared Engine with the base tools and finish_task.

Talks to its parent over one duplex pipe (DESIGN §4). Worker → parent:
``("progress", row)`` after every tool call, ``("claim", id, path)`` before a
write, ``("result", row)`` at the end. Parent → worker: ``("claim_reply", id,
error_or_None)`` and ``("wrapup", seconds_left)``. When the pipe closes (the
parent died, even by SIGKILL) the worker kills every process carrying its
mark and exits: no orphans.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# Imported at module level on purpose: the forkserver preloads this module, so
# workers start with openai, the tools and the tokenizer already loaded (import
# openai alone takes over a second here).
import httpx  # noqa: F401
import openai  # noqa: F401
import pydantic  # noqa: F401

import agentkit.llm.client  # noqa: F401
import agentkit.tools
import agentkit.tools.files  # noqa: F401
import agentkit.tools.search  # noqa: F401
import agentkit.tools.shell  # noqa: F401
import agentkit.tools.web  # noqa: F401
from agentkit import prompts
from agentkit.conversation import Conversation, utc_now
from agentkit.engine import Engine, Hooks, Step
from agentkit.environment import prompt_values
from agentkit.errors import ToolError
from agentkit.jsonfile import JsonFileWriter
from agentkit.llm.turns import AssistantTurn
from agentkit.settings import Settings
from agentkit.subagent.launcher import WorkerSpec
from agentkit.subagent.records import record_path, write_record
from agentkit.subagent.tools import make_finish_tool
from agentkit.tokens import count_text
from agentkit.tools.base import ToolContext, ToolRegistry

count_text("warm up the tokenizer tables once, in the forkserver")
# Building a client imports the HTTP transport modules (lazily loaded by openai).
openai.OpenAI(api_key="preload", base_url="http://127.0.0.1:9/v1", max_retries=0).close()
# Tool schemas are cached per process; build them once here for both languages.
for _language in ("zh", "en"):
    ToolRegistry(agentkit.tools.base_tools()).schemas(_language)

MARK_VARIABLE = "AGENTKIT_PROCESS_MARK"
CLAIM_TIMEOUT = 30.0


class Channel:
    """The worker's side of the pipe: thread-safe sends, one reader thread."""

    def __init__(self, conn: Connection, mark: str) -> None:
        self.conn = conn
        self.mark = mark
        self._send_lock = threading.Lock()
        self._replies: dict[int, queue.Queue[str | None]] = {}
        self._next_id = 0
        self.wrapup = threading.Event()
        self.wrapup_seconds = 0

    def send(self, message: tuple[Any, ...]) -> None:
        """Send one message; a broken pipe means the parent is gone: exit."""
        try:
            with self._send_lock:
                self.conn.send(message)
        except (OSError, ValueError):
            parent_gone(self.mark)

    def start_reader(self) -> None:
        """Start the thread that reads the parent's messages and watches for its death."""
        threading.Thread(target=self._read, name="agentkit-parent-watch", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                parent_gone(self.mark)
                return
            kind = message[0]
            if kind == "claim_reply":
                box = self._replies.get(message[1])
                if box is not None:
                    box.put(message[2])
            elif kind == "wrapup":
                self.wrapup_seconds = int(message[1])
                self.wrapup.set()

    def claim(self, path: Path) -> None:
        """Ask the parent for the right to write ``path``; raises ToolError on conflict."""
        with self._send_lock:
            self._next_id += 1
            request = self._next_id
        box: queue.Queue[str | None] = queue.Queue(maxsize=1)
        self._replies[request] = box
        self.send(("claim", request, str(path)))
        try:
            error = box.get(timeout=CLAIM_TIMEOUT)
        except queue.Empty:
            error = "the parent process did not answer the write claim in time; try again"
        finally:
            self._replies.pop(request, None)
        if error:
            raise ToolError("write_conflict", error)


_on_parent_gone: list[Any] = []


def parent_gone(mark: str) -> None:
    """Record the end, kill every process this worker started (by mark), exit at once."""
    from agentkit.proctree import kill_tree

    try:
        for callback in _on_parent_gone:
            callback()
        kill_tree(None, mark, grace=0.5)
    finally:
        os._exit(3)


class SubAgentHooks(Hooks):
    """Sub-agent behaviour: stop after finish_task; nudge (seed §4) on an answer
    without tool calls; pass on the parent's wrap-up request once."""

    def __init__(self, spec: WorkerSpec, settings: Settings, channel: Channel) -> None:
        self.spec = spec
        self.settings = settings
        self.channel = channel
        self.finished: tuple[bool, str] | None = None
        self.nudges = 0
        self.gave_up = False
        self._wrapup_sent = False

    def _wrapup(self) -> list[dict[str, Any]]:
        if self._wrapup_sent or not self.channel.wrapup.is_set():
            return []
        self._wrapup_sent = True
        text = prompts.phrase(
            self.settings.language,
            "wrapup",
            remaining=self.channel.wrapup_seconds,
            deliverables_dir=self.spec.deliverables_dir,
        )
        return [{"role": "user", "content": text}]

    def after_tool_results(self, engine: Engine) -> Step:
        if self.finished is not None:
            return Step(stop=True)
        return Step(messages=self._wrapup())

    def on_final_answer(self, engine: Engine, turn: AssistantTurn) -> Step:
        if self.nudges >= self.settings.subagent_max_nudges:
            self.gave_up = True
            return Step(stop=True)
        self.nudges += 1
        nudge = prompts.render(self.settings.language, "subagent/nudge.txt")
        return Step(messages=[*self._wrapup(), {"role": "user", "content": nudge}])


def _progress_row(conv: Conversation, last_action: str) -> dict[str, Any]:
    stats = conv.stats
    return {
        "files_read": stats.files_read,
        "searches": stats.searches,
        "web_pages": stats.web_pages,
        "commands": stats.commands,
        "turns": stats.turns,
        "token_usage": stats.token_usage(),
        "last_action": last_action,
    }


def build_record(
    spec: WorkerSpec, conv: Conversation, status: str, started: float, **extra: Any
) -> dict[str, Any]:
    """Return the conversations.json document (seed §6 fields plus status)."""
    stats = conv.stats
    record: dict[str, Any] = {
        "agent_id": spec.agent_id,
        "summary": spec.summary,
        "created_at": spec.created_at,
        "completed_at": None,
        "status": status,
        "result_summary": None,
        "sub_conversation_id": spec.sub_conversation_id,
        "task": spec.task,
        "deliverables_dir": spec.deliverables_dir,
        "worker_pid": os.getpid(),
        "messages": conv.messages,
        "stats": {
            "runtime_seconds": int(time.monotonic() - started),
            "files_read": stats.files_read,
            "searches": stats.searches,
            "web_pages": stats.web_pages,
            "commands": stats.commands,
            "turns": stats.turns,
            "tool_calls": dict(stats.tool_calls),
            "token_usage": stats.token_usage(),
            "usage_estimated": stats.usage_estimated,
        },
    }
    record.update(extra)
    return record


def worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """Process entry point: run one sub-agent to its end, then exit.

    Never raises: any failure is written to the record and reported as
    ``status: failed`` with the reason.
    """
    started = time.monotonic()
    # Ctrl-C on a terminal reaches the whole process group; the parent decides how
    # its sub-agents end (terminated), so the worker ignores SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (to the whole process group, by a supervisor or `timeout`): end like an
    # orphan, recording it and killing the commands it started.
    signal.signal(signal.SIGTERM, lambda signum, frame: parent_gone(spec.process_mark))
    os.environ[MARK_VARIABLE] = spec.process_mark
    channel = Channel(conn, spec.process_mark)
    channel.start_reader()
    deliverables = Path(spec.deliverables_path)
    writer = JsonFileWriter(record_path(deliverables))
    conv = Conversation(id=spec.sub_conversation_id)
    status = "failed"
    result_summary = ""
    error: str | None = None
    try:
        # Validated by the parent already; constructing skips re-reading the environment.
        settings = Settings.model_construct(**spec.settings)
        conv.model = settings.model
        language = settings.language
        deliverables.mkdir(parents=True, exist_ok=True)
        values = prompt_values(Path(spec.workspace))
        conv.messages = [
            {
                "role": "system",
                "content": prompts.render(language, "subagent/system.txt", **values),
            },
            {
                "role": "user",
                "content": prompts.render(
                    language,
                    "subagent/initial_user.txt",
                    agent_id=spec.agent_id,
                    summary=spec.summary,
                    task=spec.task,
                    deliverables_dir=spec.deliverables_dir,
                    timeout_seconds=spec.timeout_seconds,
                ),
            },
        ]
        hooks = SubAgentHooks(spec, settings, channel)

        def on_finish(success: bool, summary: str) -> str | None:
            if hooks.finished is None:  # a second finish_task in one message: the first wins
                hooks.finished = (success, summary)
            return None

        from agentkit.llm import LLMClient
        from agentkit.tools import base_tools

        registry = ToolRegistry([*base_tools(), make_finish_tool(on_finish, language)])

        def save(c: Conversation) -> None:
            writer.submit(build_record(spec, c, "running", started))

        def orphaned() -> None:
            # The main process died (even by SIGKILL): say so in the record.
            try:
                writer.flush(1.0)
            except OSError:
                pass
            record = build_record(
                spec,
                conv,
                "terminated",
                started,
                completed_at=utc_now(),
                error="stopped: the main process ended or stopped this worker",
            )
            record["result_summary"] = record["error"]
            write_record(deliverables, record)

        _on_parent_gone.append(orphaned)

        ctx = ToolContext(
            workspace=Path(spec.workspace),
            settings=settings,
            claim_write=channel.claim,
            agent_label=f"sub-agent {spec.agent_id}",
            process_mark=spec.process_mark,
        )
        engine = Engine(
            model=LLMClient(settings),
            registry=registry,
            conversation=conv,
            ctx=ctx,
            hooks=hooks,
            save=save,
            max_turns=settings.subagent_max_turns,
            on_tool_call=lambda name, action: channel.send(
                ("progress", _progress_row(conv, action))
            ),
        )
        save(conv)
        outcome = engine.run()
        engine.close()
        if hooks.finished is not None:
            success, result_summary = hooks.finished
            status = "completed" if success else "failed"
            if not success:
                error = result_summary
        elif hooks.gave_up:
            error = prompts.phrase(language, "nudges_exhausted", count=hooks.nudges)
            result_summary = outcome.final_text or error
        else:
            error = outcome.error or outcome.status
            result_summary = outcome.final_text or error
    except BaseException as exc:  # the worker must report, whatever happened
        error = f"{type(exc).__name__}: {exc}"
        result_summary = result_summary or error
    record = build_record(
        spec,
        conv,
        status,
        started,
        completed_at=utc_now(),
        result_summary=result_summary,
        error=error,
    )
    try:
        writer.submit(record)
        writer.flush()
    except OSError as exc:
        error = f"{error or ''} (record not written: {exc})".strip()
    channel.send(
        (
            "result",
            {
                "status": status,
                "result_summary": result_summary,
                "error": error,
                **_progress_row(conv, ""),
                "runtime_seconds": record["stats"]["runtime_seconds"],
            },
        )
    )
    # Leftover commands (started with & and never waited for) end with the agent.
    from agentkit.proctree import kill_tree

    kill_tree(None, spec.process_mark, grace=0.5)
    try:
        conn.close()
    except OSError:
        pass
