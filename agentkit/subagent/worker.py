"""The sub-agent process: the shared Engine with the base tools and finish_task.

One job: the worker's entry point (:func:`worker_main`) and its side of the
contract (agentkit.subagent.contract, docs/architecture.md §4): Progress after every tool
call, ClaimRequest before a write, Result at the end; ClaimAnswer, WrapUp and
Terminate from the parent. When the link closes (the parent died, even by
SIGKILL) or Terminate arrives, the worker records the end, kills every process
carrying its mark and exits: no orphans.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

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
from agentkit import prompts
from agentkit.confined import folder as confined_folder
from agentkit.conversation import Conversation
from agentkit.engine import Engine, Hooks, Step
from agentkit.environment import prompt_values
from agentkit.llm.turns import AssistantTurn
from agentkit.settings import Settings
from agentkit.subagent import parent_link
from agentkit.subagent.contract import Endpoint, Progress, Result, WorkerSpec
from agentkit.subagent.parent_link import ParentLink, parent_gone
from agentkit.subagent.record import (
    ORPHANED_ERROR,
    Ending,
    build_record,
    record_relpath,
    record_stats,
    record_writer,
    write_record,
)
from agentkit.subagent.sandbox_scope import command_settings, confine_writes
from agentkit.subagent.state import EndStatus, Status
from agentkit.subagent.tools import make_finish_tool
from agentkit.subagent.worker_tools import worker_profile, worker_tools
from agentkit.tokens import count_text
from agentkit.tools.base import ToolContext, ToolRegistry
from agentkit.tools.os_errors import describe_os_error

count_text("warm up the tokenizer tables once, in the forkserver")
# Building a client imports the HTTP transport modules (lazily loaded by openai).
openai.OpenAI(api_key="preload", base_url="http://127.0.0.1:9/v1", max_retries=0).close()
# Tool schemas are cached per process; build them once here for both languages.
for _language in ("zh", "en"):
    ToolRegistry(agentkit.tools.base_tools()).schemas(_language)

MARK_VARIABLE = "AGENTKIT_PROCESS_MARK"


class SubAgentHooks(Hooks):
    """Sub-agent behaviour: stop after finish_task; nudge (docs/specification.md §4) on an answer
    without tool calls; pass on the parent's wrap-up request once."""

    def __init__(self, spec: WorkerSpec, settings: Settings, link: ParentLink) -> None:
        self.spec = spec
        self.settings = settings
        self.link = link
        self.finished: tuple[bool, str] | None = None
        self.nudges = 0
        self.gave_up = False
        self._wrapup_sent = False

    def _wrapup(self) -> list[dict[str, Any]]:
        if self._wrapup_sent or not self.link.wrapup.is_set():
            return []
        self._wrapup_sent = True
        text = prompts.phrase(
            self.settings.language,
            "wrapup",
            remaining=self.link.wrapup_seconds,
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


def _progress(conv: Conversation, last_action: str, finishing: bool = False) -> Progress:
    stats = conv.stats
    return Progress(
        counters=stats.seed_counts(),
        last_action=last_action,
        turns=stats.turns,
        token_usage=stats.token_usage(),
        finishing=finishing,
    )


def _started_at() -> float | None:
    """This process's start time (seconds since the epoch), as psutil reports it."""
    import psutil

    try:
        return float(psutil.Process().create_time())
    except psutil.Error:
        return None


def _record(
    spec: WorkerSpec,
    conv: Conversation,
    status: Status,
    started: float,
    ending: Ending | None = None,
) -> dict[str, Any]:
    """Return this worker's record (agentkit.subagent.record.build_record)."""
    return build_record(
        spec,
        status,
        messages=conv.messages,
        stats=record_stats(int(time.monotonic() - started), conv.stats),
        worker_pid=os.getpid(),
        worker_started=_START_TIME,
        ending=ending,
    )


_START_TIME: float | None = None


def _write_final(
    spec: WorkerSpec, writer: Any, record: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """Write the final record; returns ``(None, None)`` when it is on disk, else
    ``(record, why)``: the record for the parent to write or keep, and the reason
    (naming the error kind, e.g. disk_full) the sub-agent then failed with."""
    deliverables = Path(spec.deliverables_path)
    try:
        writer.submit(record)
        writer.flush()
        return None, None
    except OSError:
        pass
    try:  # the flush may report an earlier turn's failure: try this one directly
        write_record(deliverables, record, root=Path(spec.workspace))
        return None, None
    except OSError as exc:
        shown = record_relpath(spec.deliverables_dir)
        return (
            record,
            f"the sub-agent's record {shown} could not be written: {describe_os_error(exc)}",
        )


def worker_main(spec: WorkerSpec, conn: Endpoint) -> None:
    """Process entry point: run one sub-agent to its end, then exit.

    Never raises: any failure is written to the record and reported as
    ``status: failed`` with the reason.
    """
    global _START_TIME
    started = time.monotonic()
    _START_TIME = _started_at()
    # Ctrl-C on a terminal reaches the whole process group; the parent decides how
    # its sub-agents end (terminated), so the worker ignores SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM or SIGHUP (to the whole group: a supervisor, `timeout`, a closed terminal): end like an
    # orphan, recording it and killing the commands it started.
    signal.signal(signal.SIGTERM, lambda signum, frame: parent_gone(spec.process_mark))
    signal.signal(signal.SIGHUP, lambda signum, frame: parent_gone(spec.process_mark))
    os.environ[MARK_VARIABLE] = spec.process_mark
    link = ParentLink(conn, spec.process_mark)
    link.start_reader()
    deliverables = Path(spec.deliverables_path)
    writer = record_writer(deliverables, Path(spec.workspace))
    conv = Conversation(id=spec.sub_conversation_id)
    status: EndStatus = "failed"
    result_summary = ""
    error: str | None = None
    try:
        # Validated by the parent already; constructing skips re-reading the environment.
        settings = command_settings(spec, Settings.model_construct(**spec.settings))
        profile = worker_profile(spec)
        if profile is not None:
            settings = profile.apply(settings)
        conv.model = settings.model
        language = settings.language
        with confined_folder(Path(spec.workspace), deliverables, create=True):
            pass  # through no link below the workspace (a command may have planted one)
        values = prompt_values(Path(spec.workspace))
        conv.messages = [
            {
                "role": "system",
                # A profile's text comes after the seed's prompt, which stays word for word.
                "content": prompts.render(language, "subagent/system.txt", **values)
                + (f"\n\n{profile.prompt}" if profile is not None and profile.prompt else ""),
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
        hooks = SubAgentHooks(spec, settings, link)

        def on_finish(success: bool, summary: str) -> str | None:
            if hooks.finished is None:  # a second finish_task in one message: the first wins
                hooks.finished = (success, summary)
            return None

        from agentkit.llm import LLMClient
        from agentkit.tools import base_tools

        extra = worker_tools(spec, settings, base_tools(), make_finish_tool(on_finish, language))
        registry = extra.registry

        def save(c: Conversation) -> None:
            writer.submit(_record(spec, c, "running", started))

        def orphaned() -> None:
            # The main process died (even by SIGKILL): say so in the record, unless
            # the record is final already (then it stays as it is) or the parent
            # asked this worker to stop (then the parent records it).
            if parent_link.final_written.is_set() or parent_link.parent_records.is_set():
                return
            try:
                writer.flush(1.0)
            except OSError:
                pass
            why = ORPHANED_ERROR
            record = _record(spec, conv, "terminated", started, Ending(why, why))
            write_record(deliverables, record, root=Path(spec.workspace))

        parent_link.on_parent_gone.append(orphaned)

        ctx = ToolContext(
            workspace=Path(spec.workspace),
            settings=settings,
            claim_write=confine_writes(spec, link.claim),
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
            on_tool_call=lambda name, action: link.send(
                _progress(conv, action, finishing=name == "finish_task")
            ),
        )
        save(conv)
        outcome = engine.run()
        engine.close()
        extra.close()
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
    record = _record(spec, conv, status, started, Ending(result_summary, error))
    unsaved, why = _write_final(spec, writer, record)
    if why is not None:
        # A sub-agent whose transcript is lost did not complete: say why.
        status, error = "failed", f"{error}; {why}" if error else why
        unsaved = _record(spec, conv, status, started, Ending(result_summary, error))
    parent_link.final_written.set()
    link.send(
        Result(
            status=status,
            result_summary=result_summary,
            error=error,
            progress=_progress(conv, ""),
            runtime_seconds=record["stats"]["runtime_seconds"],
            record=unsaved,
        )
    )
    # Leftover commands (started with & and never waited for) end with the agent.
    from agentkit.proctree import kill_tree

    kill_tree(None, spec.process_mark, grace=0.5)
    link.channel.close()
