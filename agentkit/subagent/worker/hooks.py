"""How a sub-agent's run differs from the main agent's: finish_task and the engine hooks.

One job: the sub-agent's role in the shared Engine (docs/architecture.md §1).
:func:`make_finish_tool` is the seed's finish_task (docs/specification.md §1);
:class:`SubAgentHooks` sends the parent a Progress before each tool call and after
each batch, stops the run after finish_task, passes on the parent's wrap-up request
once, and reminds a sub-agent that answers without calling finish_task
(docs/specification.md §4), at most ``subagent_max_nudges`` times. After each model
response it prices it and sends a UsageReport; before each request it ends a run whose
budget is spent (``budget_exhausted``), passes on a budget's one wrap-up, and puts the
steering messages taken since in (docs/control-plane.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agentkit import prompts
from agentkit.cost import Pricer, response_usage
from agentkit.engine import Engine
from agentkit.engine_roles import Hooks, Step
from agentkit.subagent import inputs
from agentkit.subagent.budget import Limits, Meter
from agentkit.subagent.contract import BudgetWarning, Progress, UsageReport
from agentkit.subagent.worker.steering import WorkerControl
from agentkit.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    from agentkit.conversation import Conversation
    from agentkit.llm.turns import AssistantTurn, ToolCall
    from agentkit.settings import Settings
    from agentkit.subagent.contract import WorkerSpec
    from agentkit.subagent.worker.parent_link import ParentLink

__all__ = ["FinishTaskParams", "SubAgentHooks", "make_finish_tool", "progress"]

FINISH = "finish_task"


class FinishTaskParams(BaseModel):
    """Parameters of finish_task (docs/specification.md §1)."""

    success: inputs.Flag
    summary: inputs.FinishSummary


def make_finish_tool(on_finish: Callable[..., str | None], language: str) -> Tool:
    """Return finish_task; ``on_finish(success, summary)`` records the end (the
    worker stops after this batch of tool results) and may return a warning to
    add (commands still running). The result is the seed's JSON."""

    def finish(p: FinishTaskParams, ctx: ToolContext) -> dict[str, Any]:
        warning = on_finish(p.success, p.summary)
        result: dict[str, Any] = {
            "success": True,
            "message": prompts.phrase(language, "finish_ok"),
            "will_terminate": True,
        }
        if warning:
            result["warning"] = warning
        return result

    return Tool(
        FINISH,
        FinishTaskParams,
        finish,
        on_invalid_arguments=inputs.refusal_hook(FINISH, will_terminate=False),
    )


def progress(conv: Conversation, last_action: str, finishing: bool = False) -> Progress:
    """The Progress message for ``conv`` now (the contract's counters, turns, tokens)."""
    stats = conv.stats
    return Progress(
        counters=stats.seed_counts(),
        last_action=last_action,
        turns=stats.turns,
        token_usage=stats.token_usage(),
        finishing=finishing,
    )


class SubAgentHooks(Hooks):
    """Sub-agent behaviour (see the module docstring).

    Args:
        spec: the worker's spec (its deliverables folder, for the wrap-up text; its
            budget, ``extra["budget"]``).
        settings: the worker's Settings (language, nudges, model prices).
        link: the link to the parent (Progress goes there; its wrap-up request).
        control: the control plane's messages (steering, the conversation's wrap-up).

    Attributes:
        finished: ``(success, summary)`` once finish_task was called (the first wins);
            ``result``: its typed result (output_schema), else None.
        nudges: reminders sent; ``gave_up``: they ran out and the run stopped.
        budget: this run's :class:`Meter`; ``budget_exhausted``: it ran out and the run
            stopped.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        settings: Settings,
        link: ParentLink,
        control: WorkerControl | None = None,
    ) -> None:
        self.spec = spec
        self.settings = settings
        self.link = link
        self.control = control
        self.finished: tuple[bool, str] | None = None
        self.result: Any = None
        self.nudges = 0
        self.gave_up = False
        self.budget = Meter(Limits.from_dict(spec.extra.get("budget")))
        self.budget_exhausted = False
        self._pricer = Pricer(settings.model_prices)
        self._wrapup_sent = False
        self._budget_wrapup_sent = False
        self._last_call = ""

    def on_finish(self, success: bool, summary: str, result: Any = None) -> str | None:
        """finish_task's callback: record the first call's end (two in one message:
        the first wins); from now on no steering message is taken. No warning."""
        if self.finished is None:
            self.finished = (success, summary)
            self.result = result
            if self.control is not None:
                self.control.steering.close()
        return None

    def after_response(self, engine: Engine, turn: AssistantTurn) -> None:
        """Price the response, count it against the budget, tell the parent."""
        usage = response_usage(turn.usage)
        settings = self.settings
        cost = self._pricer.price(settings.model, settings.base_url, usage)
        stats = engine.conversation.stats
        stats.add_cost(usage.cached, cost)
        self.budget.add(usage.prompt + usage.completion, cost)
        self.link.send(
            UsageReport(
                prompt=usage.prompt,
                cached=usage.cached,
                completion=usage.completion,
                cost_usd=cost,
                estimated=usage.estimated,
                tokens_total=self.budget.tokens,
                cost_usd_total=stats.cost(),
            )
        )

    def before_request(self, engine: Engine) -> Step:
        """End the run when its budget is spent; else the budget's one wrap-up, then
        the steering messages taken since the last request."""
        state = self.budget.state() if self.budget.limits else "ok"
        if state == "exhausted":
            self.budget_exhausted = True
            self._warn(exhausted=True)
            return Step(stop=True)
        messages: list[dict[str, Any]] = []
        session_over = self.control is not None and self.control.session_wrapup.is_set()
        if not self._budget_wrapup_sent and (state == "wrap_up" or session_over):
            self._budget_wrapup_sent = True
            if state == "wrap_up":
                self._warn(exhausted=False)
            text = prompts.phrase(
                self.settings.language,
                "budget_wrapup" if state == "wrap_up" else "session_budget_wrapup",
                deliverables_dir=self.spec.deliverables_dir,
            )
            messages.append({"role": "user", "content": text})
        if self.control is not None:
            messages += self.control.steering.take(self.settings.language)
        return Step(messages=messages)

    def _warn(self, exhausted: bool) -> None:
        used = self.budget.used()
        self.link.send(
            BudgetWarning(
                tokens_used=used["tokens"],
                max_tokens=used["max_tokens"],
                cost_usd=used["cost_usd"],
                max_cost_usd=used["max_cost_usd"],
                exhausted=exhausted,
            )
        )

    def before_tool_call(self, engine: Engine, call: ToolCall) -> None:
        """Tell the parent what runs now (``finishing``: it is finish_task)."""
        self._last_call = call.name
        self.link.send(progress(engine.conversation, engine.last_action, call.name == FINISH))

    def after_tool_results(self, engine: Engine) -> Step:
        """Send the counters after the batch; stop after finish_task, else pass on a
        wrap-up request."""
        # Finishing only once finish_task was taken: a refused one (a wrong typed
        # result) leaves the sub-agent at work, and open to messages.
        finishing = self._last_call == FINISH and self.finished is not None
        self.link.send(progress(engine.conversation, engine.last_action, finishing))
        if self.finished is not None:
            return Step(stop=True)
        return Step(messages=self._wrapup())

    def on_final_answer(self, engine: Engine, turn: AssistantTurn) -> Step:
        """Remind it to call finish_task, or stop once the reminders ran out."""
        if self.nudges >= self.settings.subagent_max_nudges:
            self.gave_up = True
            return Step(stop=True)
        self.nudges += 1
        nudge = prompts.render(self.settings.language, "subagent/nudge.txt")
        return Step(messages=[*self._wrapup(), {"role": "user", "content": nudge}])

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
