"""A continued sub-agent's start: its saved history, then the new task (docs/control-plane.md §1).

One job: what continue_sub_agent gives a worker, ``WorkerSpec.extra["continued"]``
(``messages``: the record's messages; ``stats``: the record's stats; ``runs``: this
run's number), turned into the conversation it starts from: the system prompt built
afresh (never the saved one), the rest of the saved messages, then one user message
with the new task (``subagent/continue_user.txt``), and the saved counters and usage,
so the record's stats add up over the runs. Its budget and its timeout are this run's
own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agentkit import prompts
from agentkit.conversation import Stats
from agentkit.subagent.contract import WorkerSpec

__all__ = ["continued_start", "earlier_runtime"]

_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: [+-]\d{4})?")
"""prompts.current_time's shape, the one value of the system prompt that changes."""


def continued_start(
    spec: WorkerSpec, language: str, system: Callable[[str | None], dict[str, Any]]
) -> tuple[list[dict[str, Any]], Stats] | None:
    """The messages and stats a continued run starts from, or None for a first run.

    ``system(when)``: the system message built afresh with ``{current_time}`` ``when``
    (None: now). It takes the place of the saved one, which came from a file on disk
    and is not trusted (a forged record must not give the sub-agent another prompt);
    only the time the saved one states is kept, so an untouched history's prefix stays
    byte for byte (the provider's prompt cache)."""
    continued = spec.extra.get("continued")
    if not isinstance(continued, dict):
        return None
    saved = [m for m in continued.get("messages") or [] if isinstance(m, dict)]
    first = saved[0] if saved and saved[0].get("role") == "system" else None
    saved = [_system_message(first, system), *(saved[1:] if first is not None else saved)]
    task = prompts.render(
        language,
        "subagent/continue_user.txt",
        agent_id=spec.agent_id,
        summary=spec.summary,
        task=spec.task,
        deliverables_dir=spec.deliverables_dir,
        timeout_seconds=spec.timeout_seconds,
    )
    return [*saved, {"role": "user", "content": task}], _stats(continued.get("stats"))


def _system_message(
    saved: dict[str, Any] | None, build: Callable[[str | None], dict[str, Any]]
) -> dict[str, Any]:
    """The rebuilt system message, with the time the saved prompt states (a value of
    the time's shape, harmless whoever wrote it), else with the time now."""
    content = saved.get("content") if saved is not None else None
    found = _TIME.search(content) if isinstance(content, str) else None
    return build(found.group(0) if found is not None else None)


def earlier_runtime(spec: WorkerSpec) -> int:
    """Seconds the earlier runs took (0 for a first run)."""
    continued = spec.extra.get("continued")
    stats = continued.get("stats") if isinstance(continued, dict) else None
    runtime = stats.get("runtime_seconds") if isinstance(stats, dict) else None
    return runtime if isinstance(runtime, int) and runtime > 0 else 0


def _stats(saved: Any) -> Stats:
    """The record's stats (seed shape: ``token_usage`` as prompt/completion/total) as Stats."""
    if not isinstance(saved, dict):
        return Stats()
    stats = Stats.from_dict({k: v for k, v in saved.items() if k != "runtime_seconds"})
    usage = saved.get("token_usage")
    if isinstance(usage, dict):
        for field, key in (
            ("prompt_tokens", "prompt"),
            ("completion_tokens", "completion"),
            ("total_tokens", "total"),
        ):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(stats, field, value)
    if saved.get("cost_usd") is None and stats.turns:
        stats.unpriced_responses = max(stats.unpriced_responses, 1)
    return stats
