"""A sub-agent's run built from its spec, in the worker process.

One job: :func:`prepare`, everything the worker builds before its engine runs: the
settings (the profile's, the narrower command sandbox), the opening messages
(:func:`opening`: the seed's system prompt and first user message, or a continued
run's saved history and new task), finish_task (:func:`finish_tool`: the seed's, or
typed under a profile's output_schema), the tools, the tool context (write scope,
approval gate) and the Engine; an isolated sub-agent's own copy (agentkit.subagent.worker.
isolated) becomes its workspace. The worker's life (signals, run, report, parent_gone)
is agentkit.subagent.worker's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentkit.tools
from agentkit import prompts
from agentkit.confined import folder as confined_folder
from agentkit.conventions.gather import spec_section
from agentkit.engine import Engine
from agentkit.prompts import prompt_values
from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.worker.approvals import worker_gate
from agentkit.subagent.worker.continued import continued_start
from agentkit.subagent.worker.hooks import SubAgentHooks, make_finish_tool
from agentkit.subagent.worker.isolated import (
    check_deliverables_link,
    isolated_writes,
    own_copy,
    workspace_of,
)
from agentkit.subagent.worker.registry import worker_profile, worker_tools
from agentkit.subagent.worker.sandbox_scope import command_settings, confine_writes
from agentkit.subagent.worker.steering import WorkerControl, make_ask_parent_tool
from agentkit.tools.base import ToolContext

if TYPE_CHECKING:
    from agentkit.subagent.worker import Worker

__all__ = ["finish_tool", "opening", "prepare"]


def prepare(worker: Worker) -> Engine:
    """Build ``worker``'s settings (the profile's, the narrower sandbox), its opening
    messages (docs/specification.md §3, §5), tools and engine; sets its ``control``,
    ``hooks`` and ``tools``. Raises what a broken spec or folder raises (worker_main
    reports it as the sub-agent's failure)."""
    spec = worker.spec
    # Validated by the parent already; constructing skips re-reading the environment.
    settings = command_settings(spec, Settings.model_construct(**spec.settings))
    profile = worker_profile(spec)
    if profile is not None:
        settings = profile.apply(settings)
    worker.conversation.model = settings.model
    copy = own_copy(spec)
    with confined_folder(worker.record_root, worker.deliverables, create=True):
        pass  # through no link below the workspace (a command may have planted one)
    if copy is not None:  # it works in its own copy; its deliverables folder is shared
        check_deliverables_link(spec, copy)
        worker.workspace = Path(copy.root)
    continued = continued_start(
        spec, settings.language, lambda when: opening(spec, settings, profile, when)[0]
    )
    if continued is not None:
        worker.conversation.messages, worker.conversation.stats = continued
    else:
        worker.conversation.messages = opening(spec, settings, profile)
    control = worker.control = WorkerControl(worker.link.send, settings)
    worker.link.set_control(control.receive)
    hooks = worker.hooks = SubAgentHooks(spec, settings, worker.link, control)
    from agentkit.llm import LLMClient

    extra = [make_ask_parent_tool(control.asker, settings.language)]
    tools = agentkit.tools.base_tools() + (extra if settings.subagent_control else [])
    finish = finish_tool(hooks, settings, profile)
    worker.tools = worker_tools(spec, settings, tools, finish, worker.workspace)
    if copy is None:
        claim, scope = confine_writes(spec, worker.link.claim)
    else:
        claim, scope = isolated_writes(spec, copy)
    ctx = ToolContext(
        workspace=worker.workspace,
        settings=settings,
        cancel=worker.cancel,
        claim_write=claim,
        process_mark=spec.process_mark,
        write_scope=scope,
        gate=worker_gate(spec, settings, profile, worker.link.ask_approval),
        shared_roots=() if copy is None else (worker.deliverables,),
    )
    return Engine(
        model=LLMClient(settings),
        registry=worker.tools.registry,
        conversation=worker.conversation,
        ctx=ctx,
        hooks=hooks,
        save=worker.save,
        max_turns=settings.subagent_max_turns,
    )


def finish_tool(hooks: SubAgentHooks, settings: Settings, profile: Any) -> Any:
    """finish_task: the seed's, or with a typed ``result`` under the profile's output_schema."""
    schema = getattr(profile, "output_schema", None)
    if schema:
        from agentkit.subagent.typed_result import make_typed_finish_tool

        return make_typed_finish_tool(
            hooks.on_finish, schema, settings.language, settings.subagent_max_nudges
        )
    return make_finish_tool(hooks.on_finish, settings.language)


def opening(
    spec: WorkerSpec, settings: Settings, profile: Any, when: str | None = None
) -> list[dict[str, Any]]:
    """The sub-agent's system prompt and first user message (docs/specification.md §3,
    §5); a profile's text comes after the seed's prompt, which stays word for word, then
    for an isolated sub-agent a paragraph on its own copy (docs/isolation.md §10), then
    AGENTS.md and the skill list the parent resolved (agentkit.conventions). ``when``:
    the prompt's ``{current_time}`` (None: now); its ``{workspace}`` is the folder the
    sub-agent works in (an isolated one's copy)."""
    language = settings.language
    values = prompt_values(workspace_of(spec))
    if when is not None:
        values["current_time"] = when
    system = prompts.render(language, "subagent/system.txt", **values)
    if profile is not None and profile.prompt:
        system += f"\n\n{profile.prompt}"
    if settings.subagent_control:  # the seed's prompt says it asks nothing: now it may
        system += "\n\n" + prompts.render(language, "subagent/control_system.txt")
    if spec.extra.get("isolation"):  # the seed's "you share the workspace" holds no more
        system += "\n\n" + prompts.render(language, "subagent/isolated_system.txt")
    system += spec_section(spec.extra)
    task = prompts.render(
        language,
        "subagent/initial_user.txt",
        agent_id=spec.agent_id,
        summary=spec.summary,
        task=spec.task,
        deliverables_dir=spec.deliverables_dir,
        timeout_seconds=spec.timeout_seconds,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]
