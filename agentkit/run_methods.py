"""The run methods of :class:`agentkit.Agent`: ``run``, ``arun`` and ``stream``.

One job: the three ways to run a task on an Agent, with the overloads that type
``output_type`` (a pydantic model class gives ``RunResult[Model]``, none a plain
``RunResult``). :class:`RunMethods` is a base class of Agent; the state it reads and
sets (the session, settings, tool registry, run lock, cancel flag, last result) is
the Agent's, made in ``Agent.__init__``. The wait behind ``run`` is
agentkit.run_result's, the asyncio form agentkit.agent_run's.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast, overload

from agentkit import events as ev
from agentkit import prompts
from agentkit.agent_run import AgentRun, run_to_end
from agentkit.chat.setup import check_message
from agentkit.errors import ConfigurationError
from agentkit.output import FINAL_RESULT, ModelT, output_spec
from agentkit.run_result import RunResult, wait_for_everything

if TYPE_CHECKING:
    from agentkit.agent import Agent
    from agentkit.chat.session import Session
    from agentkit.settings import Settings
    from agentkit.tools.registry import ToolRegistry

__all__ = ["RunMethods"]


class RunMethods:
    """``run``, ``arun`` and ``stream`` of :class:`agentkit.Agent` (see there)."""

    # The Agent's, set in Agent.__init__.
    session: Session
    registry: ToolRegistry
    last_result: RunResult | None
    _closed: bool
    _run_lock: threading.Lock
    _cancel_asked: threading.Event

    if TYPE_CHECKING:

        @property
        def settings(self) -> Settings: ...

    @overload
    def run(
        self,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        output_type: None = None,
        output_retries: int | None = None,
    ) -> RunResult: ...

    @overload
    def run(
        self,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        output_type: type[ModelT],
        output_retries: int | None = None,
    ) -> RunResult[ModelT]: ...

    def run(
        self,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        output_type: type[Any] | None = None,
        output_retries: int | None = None,
    ) -> RunResult[Any]:
        """Run the main agent on ``task`` until it is done and no sub-agent runs.

        Args:
            task: the user's message.
            on_event: called with each agentkit.events event, one at a time.
            output_type: a pydantic model class: the main agent must finish by calling
                a ``final_result`` tool whose parameters are its JSON schema;
                ``result.output`` is the validated instance (agentkit.output). None:
                a plain answer ends the run, and no ``final_result`` is offered.
            output_retries: wrong answers (a refused final_result, a plain-text
                answer) allowed before the run fails with ``error_kind``
                ``output_invalid``; None: ``Settings.output_retries`` (2).

        Returns a RunResult; model errors after retries give status ``failed`` with
        a one-line error (the conversation is saved). Raises ConfigurationError for
        an empty task, one larger than the context window leaves for it, or a closed
        Agent, or an ``output_type`` beside a tool of the Agent named
        ``final_result``; TypeError for an ``output_type`` that is not a pydantic
        model class, ValueError for a negative ``output_retries``.
        """
        if not task or not task.strip():
            raise ConfigurationError("the task is empty")
        check_message(task, self.settings, self.session.request_overhead)  # too long: refused
        if self._closed:
            raise ConfigurationError(prompts.phrase(self.settings.language, "closed"))
        retries = self.settings.output_retries if output_retries is None else output_retries
        spec = output_spec(output_type, retries)
        if spec is not None and self.registry.get(FINAL_RESULT) is not None:
            raise ConfigurationError(
                f"a tool named {FINAL_RESULT} is registered: rename it to use output_type"
            )
        with self._run_lock:
            self._cancel_asked.clear()  # a cancel() before this run is not for it
            session = self.session
            unsubscribe = session.subscribe(on_event) if on_event is not None else None
            try:
                session.publish(ev.RunStarted(task=task))
                result = wait_for_everything(session, task, spec, self._cancel_asked)
                self.last_result = result
                session.publish(
                    ev.RunFinished(
                        status=result.status,
                        final_text=result.final_text,
                        error=result.error,
                        stats=result.stats,
                    )
                )
                return result
            finally:
                if unsubscribe is not None:
                    unsubscribe()

    @overload
    async def arun(
        self,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        output_type: None = None,
        output_retries: int | None = None,
    ) -> RunResult: ...

    @overload
    async def arun(
        self,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        output_type: type[ModelT],
        output_retries: int | None = None,
    ) -> RunResult[ModelT]: ...

    async def arun(
        self,
        task: str,
        on_event: ev.EventHandler | None = None,
        *,
        output_type: type[Any] | None = None,
        output_retries: int | None = None,
    ) -> RunResult[Any]:
        """Asyncio form of :meth:`run` (``output_type`` and ``output_retries`` too),
        in a thread of the run's own (never the event loop's default executor).
        Cancelling the awaiting task stops the run as :meth:`cancel` does and waits for
        its end: :attr:`last_result` then holds its ``cancelled`` RunResult, and the
        CancelledError goes on."""
        return await run_to_end(
            cast("Agent", self),
            task,
            on_event,
            output_type=output_type,
            output_retries=output_retries,
        )

    @overload
    def stream(
        self, task: str, *, output_type: None = None, output_retries: int | None = None
    ) -> AgentRun: ...

    @overload
    def stream(
        self, task: str, *, output_type: type[ModelT], output_retries: int | None = None
    ) -> AgentRun[ModelT]: ...

    def stream(
        self,
        task: str,
        *,
        output_type: type[Any] | None = None,
        output_retries: int | None = None,
    ) -> AgentRun[Any]:
        """``async with agent.stream(task) as run:`` run ``task`` in a thread of its
        own; ``async for event in run`` yields every event of the run (sub-agents'
        included) and ends with it; ``await run.result()`` gives the RunResult
        (``output_type``, ``output_retries``: as :meth:`run` takes them);
        ``await run.cancel()`` stops it (agentkit.agent_run.AgentRun). Raises
        ConfigurationError at once for an empty task."""
        return AgentRun(
            cast("Agent", self), task, output_type=output_type, output_retries=output_retries
        )
