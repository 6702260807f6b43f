"""The sub-agent process: the shared Engine with the base tools and finish_task.

Everything here runs in the child (docs/architecture.md §4); the parent side is
agentkit.subagent, and agentkit.subagent.launchers starts this process.

- this module: :func:`worker_main`, the process's entry point (launchers and the Ray
  host call it; the forkserver preloads this module), and :class:`Worker`, one
  sub-agent's life: ``run``, ``report`` (final record, Result, no leftovers) and
  ``parent_gone``.
- ``setup``: what is built before the run (settings, opening messages, tools, engine).
- ``hooks``: the sub-agent's role in the engine: finish_task, Progress, wrap-up,
  the finish_task reminder, usage and budgets.
- ``steering``: the control plane's side here: steering messages, ask_parent.
- ``continued``: a continued run's start (its saved history, the new task).
- ``parent_link``: the worker's end of the contract (sends, claims, the parent's
  messages dispatched in one place).
- ``registry``: the worker's tools (built-in, imported, MCP, profile allow-list).
- ``sandbox_scope``: the narrower command sandbox and the write scope.
- ``approvals``: the approval rules and tool hooks of its calls (asks go to the parent).

The contract (agentkit.subagent.contract): Progress before each tool call and after
each batch, ClaimRequest before a write, ApprovalRequest when a call waits for a
person, Result at the end; ClaimAnswer, ApprovalAnswer, WrapUp and Terminate from the
parent. When the link closes (the parent died, even by SIGKILL),
Terminate arrives or SIGTERM/SIGHUP comes, the worker records the end, kills every
process carrying its mark and exits: no orphans.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

# Imported at module level on purpose: the forkserver preloads this module, so
# workers start with openai, the tools and the tokenizer already loaded (import
# openai alone takes ~0.4 s; docs/architecture.md §8).
import httpx  # noqa: F401
import openai  # noqa: F401
import pydantic  # noqa: F401

import agentkit.llm.client  # noqa: F401
import agentkit.tools
import agentkit.tools.files  # noqa: F401
import agentkit.tools.search  # noqa: F401
import agentkit.tools.shell  # noqa: F401
import agentkit.tools.web  # noqa: F401
from agentkit import prompts, tracing
from agentkit.conversation import Conversation, utc_now
from agentkit.cost import warm as warm_prices
from agentkit.engine import Engine
from agentkit.process import sandbox
from agentkit.process.redact import scrub_error
from agentkit.process.tree import AGENT_MARK_VAR
from agentkit.subagent.contract import Endpoint, EndStatus, Result, Status, WorkerSpec
from agentkit.subagent.record import (
    ORPHANED_ERROR,
    Ending,
    build_record,
    record_relpath,
    record_stats,
    transcript_writer,
    write_record,
)
from agentkit.subagent.worker.continued import earlier_runtime
from agentkit.subagent.worker.hooks import SubAgentHooks, progress
from agentkit.subagent.worker.parent_link import ParentLink
from agentkit.subagent.worker.registry import WorkerTools
from agentkit.subagent.worker.setup import prepare
from agentkit.subagent.worker.steering import WorkerControl
from agentkit.tokens import count_text
from agentkit.tools.os_errors import describe_os_error
from agentkit.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agentkit.subagent.transcript import TranscriptWriter

count_text("warm up the tokenizer tables once, in the forkserver")
# Building a client imports the HTTP transport modules (lazily loaded by openai).
openai.OpenAI(api_key="preload", base_url="http://127.0.0.1:9/v1", max_retries=0).close()
# Tool schemas are cached per process; build them once here for both languages.
for _language in ("zh", "en"):
    ToolRegistry(agentkit.tools.base_tools()).schemas(_language)
# The price table (agentkit.cost): loaded once here, shared by every worker forked from
# this server (each would otherwise load it: ~0.15 s and ~9 MB of its own).
warm_prices()

__all__ = ["Worker", "worker_main"]

SIGNAL_SETTLE = 0.3
"""Seconds a SIGTERM waits for the parent's unread messages to be acted on (its
Terminate comes first); under the parent's grace before SIGKILL (0.5 s)."""


def worker_main(spec: WorkerSpec, conn: Endpoint) -> None:
    """Process entry point: run one sub-agent to its end, then exit.

    Never raises: any failure is written to the record and reported as
    ``status: failed`` with the reason.
    """
    worker = Worker(spec, conn)
    worker.handle_signals()
    sandbox.told_at_start()  # the main process said it when it started, not mid-conversation
    os.environ[AGENT_MARK_VAR] = spec.process_mark
    worker.link.start_reader()
    tracing.start_worker(spec)  # the parent traces: so does this process (agentkit.tracing)
    with tracing.subagent_span(worker):
        try:
            worker.run(prepare(worker))
        except BaseException as exc:  # the worker must report, whatever happened
            worker.error = scrub_error(f"{type(exc).__name__}: {exc}")
            worker.result_summary = worker.result_summary or worker.error
    worker.report()
    tracing.worker_flush(tracing.WORKER_FLUSH_SECONDS)


def _started_at() -> float | None:
    """This process's start time (seconds since the epoch), as psutil reports it."""
    import psutil

    try:
        return float(psutil.Process().create_time())
    except psutil.Error:
        return None


class Worker:
    """One sub-agent in its own process, from its spec to its last message.

    Args:
        spec: what the parent gave (docs/architecture.md §4).
        endpoint: the worker's end of the link to the parent.

    Attributes:
        workspace: the folder its tools and commands work in: the workspace, or an
            isolated sub-agent's own copy (set by setup.prepare).
        record_root: the real workspace, below which its record is written.
        link: the :class:`ParentLink`; ``transcript``: the record's writer (a
        journal line a save, agentkit.subagent.transcript); conversation: the
        sub-agent's conversation (its record's messages and archive).
        status, result_summary, error: how it ended (``failed`` until it is known).
        final_written: set once the final record is on disk (or handed to the
            parent): from then on the parent-gone path only kills leftovers.
        parent_records: set by Terminate: the parent ends this worker on purpose and
            records how (timeout, terminated, the files left).
    """

    def __init__(self, spec: WorkerSpec, endpoint: Endpoint) -> None:
        self.spec = spec
        self.started = time.monotonic()
        self.started_at = _started_at()
        self.runtime_before = earlier_runtime(spec)  # a continued run's earlier runs
        self.deliverables = Path(spec.deliverables_path)
        self.workspace = Path(spec.workspace)  # an isolated one's copy once prepared
        self.record_root = Path(spec.workspace)  # records: no link below it is followed
        self.link = ParentLink(endpoint, self.parent_gone)
        self.transcript: TranscriptWriter = transcript_writer(self.deliverables, self.record_root)
        self.conversation = Conversation(id=spec.sub_conversation_id)
        self.status: EndStatus = "failed"
        self.result_summary = ""
        self.error: str | None = None
        self.result: Any = None  # finish_task's typed result (output_schema)
        self.control: WorkerControl | None = None
        self.final_written = threading.Event()
        self.parent_records = threading.Event()
        # Set as the worker starts to end (a signal, Terminate, the parent gone): from
        # then on the run may not finish on its own (a command killed on the way out
        # returns, and the next turn could call finish_task before the exit).
        self.ending = threading.Event()
        # The run's cancel (its ToolContext's): set as the worker ends, so no new turn
        # starts and no new command runs while the end is being recorded.
        self.cancel = threading.Event()
        self._gone = threading.Lock()
        self.hooks: SubAgentHooks | None = None  # set by setup.prepare
        self.tools: WorkerTools | None = None

    # ------------------------------------------------------------------ life
    def handle_signals(self) -> None:
        """Ignore SIGINT (Ctrl-C reaches the whole group; the parent decides how its
        sub-agents end); end on SIGTERM or SIGHUP (to the whole group: a supervisor,
        `timeout`, a closed terminal) as when the parent is gone. The handler only
        writes a byte to a pipe; a thread does the work (a handler that wrote the
        record itself could wait for ever on a lock its own thread held)."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        threading.Thread(
            target=self._on_signal, args=(read_end,), name="agentkit-worker-signals", daemon=True
        ).start()

        def wake(signum: int, frame: object) -> None:
            try:
                os.write(write_end, b"\0")
            except OSError:  # the pipe is full: the thread is awake already
                pass

        signal.signal(signal.SIGTERM, wake)
        signal.signal(signal.SIGHUP, wake)

    def _on_signal(self, read_end: int) -> None:
        os.read(read_end, 1)
        # A purposeful end (the parent's Terminate came before its SIGTERM) is
        # recorded with the parent's reason, not as a gone parent.
        self.link.settle(SIGNAL_SETTLE)
        self.parent_gone(False)

    def run(self, engine: Engine) -> None:
        """Run the engine to its end and take how the sub-agent ended from it."""
        hooks, language = self.hooks, engine.settings.language
        assert hooks is not None and self.tools is not None
        self.save(self.conversation)
        outcome = engine.run()
        engine.close()
        self.tools.close()
        if hooks.finished is not None:
            success, self.result_summary = hooks.finished
            self.status = "completed" if success else "failed"
            self.result = hooks.result
            if not success:
                self.error = self.result_summary
        elif hooks.budget_exhausted:
            self.status = "budget_exhausted"
            self.error = prompts.phrase(
                language, "budget_exhausted", **hooks.budget.shown(language)
            )
            self.result_summary = outcome.final_text or self.error
        elif hooks.gave_up:
            self.error = prompts.phrase(language, "nudges_exhausted", count=hooks.nudges)
            self.result_summary = outcome.final_text or self.error
        else:
            self.error = outcome.error or outcome.status
            self.result_summary = outcome.final_text or self.error

    def report(self) -> None:
        """Write the final record, send the Result, end leftover commands, close.

        Once the worker is ending (``ending``), it writes and sends nothing: that end
        is recorded by parent_gone (or by the parent) and the process exits there."""
        if self.ending.is_set():
            threading.Event().wait()  # parent_gone's os._exit ends the process
        unread = self.control.steering.unread() if self.control is not None else ()
        ending = Ending(self.result_summary, self.error, result=self.result)
        record = self.record(self.status, ending)
        unsaved, why = self._write_final(record)
        if why is not None:
            # A sub-agent whose transcript is lost did not complete: say why.
            self.status = "failed"
            self.error = f"{self.error}; {why}" if self.error else why
            unsaved = self.record(self.status, Ending(self.result_summary, self.error))
        self.final_written.set()
        self.link.send(
            Result(
                status=self.status,
                result_summary=self.result_summary,
                error=self.error,
                progress=progress(self.conversation, ""),
                runtime_seconds=record["stats"]["runtime_seconds"],
                record=unsaved,
                result=self.result,
                unread=unread,
            )
        )
        # Leftover commands (started with & and never waited for) end with the agent.
        from agentkit.process.tree import kill_tree

        kill_tree(None, self.spec.process_mark, grace=0.5)
        self.link.channel.close()

    def parent_gone(self, by_parent: bool = False) -> NoReturn:
        """The parent is gone (``by_parent``: it sent Terminate and records the end
        itself): record the end unless that is the parent's or done already, kill
        every process this worker started (by mark), exit with status 3. Runs once; a
        second caller waits for the exit."""
        self.ending.set()
        self.cancel.set()  # a command killed below returns: the engine takes no next turn
        if by_parent:
            self.parent_records.set()
        self._gone.acquire()  # never released: the process ends below
        from agentkit.process.spawn import end_all
        from agentkit.process.tree import kill_tree

        reason = self.link.end_reason or ("terminated" if by_parent else "parent_gone")
        tracing.worker_abort(reason)  # open spans end; their export starts now
        try:
            end_all()  # commands being launched right now too
            self._record_orphaned()
            kill_tree(None, self.spec.process_mark, grace=0.5)
        finally:
            tracing.worker_flush(tracing.ABORT_FLUSH_SECONDS)
            os._exit(3)

    # --------------------------------------------------------------- records
    def record(self, status: Status, ending: Ending | None = None) -> dict[str, Any]:
        """Return this worker's record now (agentkit.subagent.record.build_record)."""
        return build_record(
            self.spec,
            status,
            messages=self.conversation.messages,
            archive=self.conversation.archive,
            stats=record_stats(
                int(time.monotonic() - self.started) + self.runtime_before,
                self.conversation.stats,
            ),
            worker_pid=os.getpid(),
            worker_started=self.started_at,
            ending=ending,
        )

    def save(self, conversation: Conversation) -> None:
        """Save the record as running (the engine's save callback)."""
        # In the engine's thread, at a point where messages and counters agree.
        self.transcript.save(self.record("running"))

    def _record_orphaned(self) -> None:
        """Say in the record that the main process ended (even by SIGKILL), unless the
        record is final already (it stays) or the parent records the end. Runs beside
        the engine's thread: the record is the transcript as last saved, with the
        counters saved with it, so they agree (a live snapshot could catch a command
        counted and its result not yet in the messages)."""
        if self.final_written.is_set() or self.parent_records.is_set():
            return
        why = ORPHANED_ERROR
        ending = {"status": "terminated", "completed_at": utc_now()}
        try:
            runtime = int(time.monotonic() - self.started) + self.runtime_before
            wrote = self.transcript.end(
                {**ending, "result_summary": why, "error": why}, runtime_seconds=runtime
            )
        except OSError:
            return
        if wrote is None:  # nothing saved yet: no turn ran, so nothing disagrees
            write_record(
                self.deliverables,
                self.record("terminated", Ending(why, why)),
                root=self.record_root,
            )

    def _write_final(self, record: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """Write the final record; returns ``(None, None)`` when it is on disk (or a
        final record of the parent's is there first: that one stands), else
        ``(record, why)``: the record for the parent to write or keep, and the reason
        (naming the error kind, e.g. disk_full) the sub-agent then failed with."""
        try:
            self.transcript.final(record)
            return None, None
        except OSError as exc:
            shown = record_relpath(self.spec.deliverables_dir)
            why = f"the sub-agent's record {shown} could not be written: {describe_os_error(exc)}"
            return record, why
