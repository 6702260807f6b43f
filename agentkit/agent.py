"""The main agent: the public Python API of docs/architecture.md §3.

    from agentkit import Agent, Settings
    with Agent(workspace="proj", settings=Settings(model="...")) as agent:
        result = agent.run("task", on_event=print)

An Agent owns one conversation at a time (saved under
``<workspace>/.agentkit/conversations/<id>.json`` after every turn) and the
sub-agents created in it. Starting a new conversation, loading another one,
``close()`` and leaving the ``with`` block terminate every running sub-agent
(docs/specification.md §8.5).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit import events as ev
from agentkit import prompts
from agentkit.conversation import Conversation, conversations_dir, utc_now
from agentkit.engine import Engine, Hooks, Model
from agentkit.environment import prompt_values
from agentkit.errors import ConfigurationError
from agentkit.jsonfile import JsonFileWriter
from agentkit.settings import Settings
from agentkit.tools.base import Tool, ToolContext, ToolRegistry

if TYPE_CHECKING:
    from agentkit.subagent.manager import SubAgentManager

log = logging.getLogger("agentkit")


@dataclass
class RunResult:
    """What :meth:`Agent.run` returns.

    Attributes:
        final_text: the main agent's last answer (None if it gave none).
        conversation_id: id of the conversation (its file is ``transcript_path``).
        status: ``done``, ``failed`` or ``cancelled``.
        stats: conversation stats (turns, tool_calls by name, token_usage, seed counters).
        error: one line saying why, when status is not ``done``.
        error_kind: the LLMError kind when a model error ended the run (``connection``,
            ``authentication``, ``quota_exhausted``...), else None.
        transcript_path: the conversation JSON file.
    """

    final_text: str | None
    conversation_id: str
    status: str
    stats: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    transcript_path: Path | None = None
    error_kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict (the CLI's ``--json`` output)."""
        return {
            "final_text": self.final_text,
            "conversation_id": self.conversation_id,
            "status": self.status,
            "stats": self.stats,
            "error": self.error,
            "error_kind": self.error_kind,
            "transcript_path": str(self.transcript_path) if self.transcript_path else None,
        }


def check_settings(settings: Settings) -> None:
    """Raise ConfigurationError when the endpoint settings cannot work.

    A model name is required. An API key is required for the default OpenAI
    endpoint; a custom ``base_url`` (Ollama, vLLM, llama.cpp...) may go without,
    and a placeholder key is sent.
    """
    if not settings.model:
        raise ConfigurationError("no model given: pass --model or set AGENTKIT_MODEL")
    if not settings.api_key and not settings.base_url:
        raise ConfigurationError(
            "no API key: set OPENAI_API_KEY (or pass --api-key), or point --base-url / OPENAI_BASE_URL at a local server"
        )


class Agent:
    """The main agent over one workspace.

    Args:
        workspace: folder the tools work in (created if missing? no: it must exist).
        settings: Settings; default reads the environment.
        tools: extra tools to offer besides the built-in ones.
        conversation_id: load and continue this saved conversation.
        model: an object with the engine's ``complete()`` (tests, custom clients);
            default is agentkit.llm.LLMClient(settings).
        subagents: offer the three sub-agent tools (default True).

    Raises ConfigurationError for a missing workspace, model or key, and
    FileNotFoundError for an unknown conversation_id.
    """

    def __init__(
        self,
        workspace: str | Path = ".",
        settings: Settings | None = None,
        *,
        tools: list[Tool] | None = None,
        conversation_id: str | None = None,
        model: Model | None = None,
        subagents: bool = True,
    ) -> None:
        self.settings = settings or Settings()
        root = Path(workspace).expanduser()
        if not root.is_dir():
            raise ConfigurationError(f"workspace {str(root)!r} is not a folder")
        self.workspace = root.resolve()
        if model is None:
            check_settings(self.settings)
        self._model = model
        self._extra_tools = list(tools or [])
        self._subagents_enabled = subagents
        self._manager: SubAgentManager | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._manager_lock = threading.Lock()
        self._emit_lock = threading.RLock()
        self._closed = False
        self._file_state: dict[str, Any] = {}
        self._writer: JsonFileWriter | None = None
        self.registry = self._build_registry()
        self.conversation = Conversation(model=self.settings.model)
        if conversation_id:
            self.load_conversation(conversation_id)

    # ---------------------------------------------------------------- set-up
    def _build_registry(self) -> ToolRegistry:
        from agentkit.tools import base_tools

        registry = ToolRegistry(base_tools())
        if self._subagents_enabled:
            from agentkit.subagent.tools import make_main_tools

            for tool in make_main_tools(lambda: self.manager):
                registry.register(tool)
        for tool in self._extra_tools:
            registry.register(tool)
        return registry

    def tool(self, func: Any = None, **kwargs: Any) -> Any:
        """Decorator registering a user tool; see ToolRegistry.tool."""
        return self.registry.tool(func, **kwargs)

    @property
    def model(self) -> Model:
        """The LLM client (created on first use)."""
        if self._model is None:
            from agentkit.llm import LLMClient

            self._model = LLMClient(self.settings)
        return self._model

    @property
    def manager(self) -> SubAgentManager:
        """The sub-agent manager of the current conversation (created on first use)."""
        with self._manager_lock:  # parallel create_sub_agent calls must share one manager
            if self._manager is None:
                self._manager = self._new_manager()
            return self._manager

    def _new_manager(self) -> SubAgentManager:
        from agentkit.subagent.manager import SubAgentManager

        return SubAgentManager(
            workspace=self.workspace,
            settings=self.settings,
            conversation=self.conversation,
            emit=self._emit,
        )

    @property
    def transcript_path(self) -> Path:
        """``<workspace>/.agentkit/conversations/<conversation id>.json``."""
        return conversations_dir(self.workspace) / f"{self.conversation.id}.json"

    def _save(self, conversation: Conversation) -> None:
        if self._manager is not None:
            conversation.subagents = self._manager.records()
        path = conversations_dir(self.workspace) / f"{conversation.id}.json"
        if self._writer is None or self._writer.path != path:
            self._flush()
            self._writer = JsonFileWriter(path)
        conversation.updated_at = utc_now()
        self._writer.submit(conversation.to_dict())

    def _flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    # ------------------------------------------------------- conversations
    def _end_subagents(self) -> None:
        if self._manager is not None:
            self._manager.shutdown()
            self._save(self.conversation)
            self._manager = None
        self._flush()

    def new_conversation(self) -> str:
        """Terminate running sub-agents and start an empty conversation; returns its id."""
        self._end_subagents()
        self.conversation = Conversation(model=self.settings.model)
        self._file_state.clear()
        return self.conversation.id

    def load_conversation(self, conversation_id: str) -> Conversation:
        """Terminate running sub-agents and load a saved conversation to continue it.

        Raises FileNotFoundError when no such conversation is saved in this workspace.
        """
        path = conversations_dir(self.workspace) / f"{conversation_id}.json"
        if not path.is_file():
            raise FileNotFoundError(f"no saved conversation {conversation_id!r} in {path.parent}")
        self._end_subagents()
        try:
            self.conversation = Conversation.load(path)
        except ValueError as exc:  # bad JSON or not a conversation
            raise ConfigurationError(f"conversation file {path} is damaged: {exc}") from exc
        self._file_state.clear()
        from agentkit.subagent.sweep import sweep_rows

        # Records a killed process group left "running" are finished now.
        sweep_rows(self.workspace, self.conversation.subagents)
        return self.conversation

    # ----------------------------------------------------------------- runs
    def _emit(self, event: ev.Event) -> None:
        handler = self._on_event
        if handler is not None:
            # Events come from the run's thread and the sub-agent monitors: one at a
            # time, so a UI callback need not be thread-safe.
            with self._emit_lock:
                try:
                    handler(event)
                except Exception:  # a UI callback must not break the run
                    log.warning("on_event callback failed on %s", event.type, exc_info=True)

    _on_event: ev.EventHandler | None = None

    def _system_prompt(self) -> str:
        return prompts.render(
            self.settings.language,
            "main_system.txt",
            max_concurrent=self.settings.max_concurrent_subagents,
            **prompt_values(self.workspace),
        )

    def run(self, task: str, on_event: ev.EventHandler | None = None) -> RunResult:
        """Run the main agent on ``task`` until it is done and no sub-agent runs.

        Args:
            task: the user's message.
            on_event: called with each agentkit.events event (from the run's thread
                and, for sub-agent events, from monitor threads).

        Returns a RunResult; model errors after retries give status ``failed`` with
        a one-line error (the conversation is saved). Raises ConfigurationError for
        an empty task.
        """
        if not task or not task.strip():
            raise ConfigurationError("the task is empty")
        with self._lock:
            self._on_event = on_event
            self._cancel.clear()
            conv = self.conversation
            if self._closed:
                raise ConfigurationError(prompts.phrase(self.settings.language, "closed"))
            if not conv.messages:
                conv.messages.append({"role": "system", "content": self._system_prompt()})
            for note in self._pending_notes():
                conv.messages.append({"role": "system", "content": note})
            conv.messages.append({"role": "user", "content": task})
            conv.final_text = None
            self._emit(ev.RunStarted(conversation_id=conv.id, task=task))
            hooks: Hooks = Hooks()
            if self._subagents_enabled:
                from agentkit.subagent.notify import MainHooks

                hooks = MainHooks(lambda: self._manager)
            ctx = ToolContext(
                workspace=self.workspace,
                settings=self.settings,
                cancel=self._cancel,
                claim_write=self._claim_write,
                file_state=self._file_state,
            )
            engine = Engine(
                model=self.model,
                registry=self.registry,
                conversation=conv,
                ctx=ctx,
                hooks=hooks,
                emit=self._emit,
                save=self._save,
            )
            try:
                outcome = engine.run()
            except BaseException:
                # KeyboardInterrupt or another exception raised into this thread (a
                # signal handler): stop running tools and sub-agents, keep the record.
                self._cancel.set()
                conv.state, conv.error = "idle", "interrupted"
                raise
            finally:
                engine.close()
                # Cancelled, failed or out of turns with sub-agents still at work:
                # nobody would hear of them, so end them (no orphans).
                if self._manager is not None and self._manager.running():
                    self._manager.terminate_all(interrupted=self._cancel.is_set())
                self._save(conv)
                save_error = None
                try:
                    self._flush()
                except OSError as exc:
                    save_error = f"the conversation could not be saved: {exc}"
            result = RunResult(
                final_text=outcome.final_text,
                conversation_id=conv.id,
                status="failed" if save_error else outcome.status,
                stats=conv.stats.to_dict(),
                error=outcome.error or save_error,
                transcript_path=self.transcript_path,
                error_kind=outcome.error_kind,
            )
            self._emit(
                ev.RunFinished(
                    status=result.status,
                    final_text=result.final_text,
                    error=result.error,
                    stats=result.stats,
                )
            )
            self._on_event = None
            return result

    def _pending_notes(self) -> list[str]:
        """What the model must hear before the next task: background sub-agents that
        ended after the previous run was interrupted, and sub-agents a loaded
        conversation still listed as running (their processes ended with that run)."""
        language = self.settings.language
        notes: list[str] = []
        conv = self.conversation
        if (
            conv.error in ("cancelled", "interrupted")
            and conv.messages[-1:]
            and conv.messages[-1]["role"] == "user"
        ):
            notes.append(prompts.phrase(language, "interrupted_request"))
        if self._manager is not None:
            done = self._manager.take_finished()
            if done:
                from agentkit.subagent.notify import render_notifications

                notes.append(
                    render_notifications(
                        language, done, "notify_system", self._manager.capped_summary
                    )
                )
        elif any(r.get("status") == "running" for r in self.conversation.subagents):
            stale = [r for r in self.conversation.subagents if r.get("status") == "running"]
            for row in stale:
                row["status"] = "terminated"
            names = ", ".join(
                f"{r.get('agent_id')} ({r.get('summary', '')})"
                + (f": {r['error']}" if r.get("error") else "")
                for r in stale
            )
            notes.append(prompts.phrase(language, "previous_subagents", agents=names))
        return notes

    async def arun(self, task: str, on_event: ev.EventHandler | None = None) -> RunResult:
        """Asyncio form of :meth:`run`: runs it in a worker thread; cancelling the
        awaiting task cancels the run."""
        try:
            return await asyncio.to_thread(self.run, task, on_event)
        except asyncio.CancelledError:
            self.cancel()
            raise

    def cancel(self) -> None:
        """Ask the current run to stop (safe from any thread or a signal handler).

        Running tools are interrupted, sub-agents terminated, the conversation saved;
        run() then returns with status ``cancelled``.
        """
        self._cancel.set()
        if self._manager is not None:
            self._manager.wake()

    def _claim_write(self, path: Path) -> None:
        if self._manager is not None:
            self._manager.check_main_write(path)

    def close(self) -> None:
        """Terminate every sub-agent and release the model client. Idempotent; a
        closed Agent refuses new runs (ConfigurationError)."""
        self._closed = True
        self._cancel.set()
        self._end_subagents()
        close = getattr(self._model, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
