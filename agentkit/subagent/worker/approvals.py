"""A sub-agent's approval rules and tool hooks, in its own process.

One job: the worker's :class:`~agentkit.tools.gate.ToolGate` (docs/approvals.md §3):
the rules of ``Settings.approvals`` with the profile's ``approvals`` over them, the
PreToolUse/PostToolUse command hooks its parent put in the spec (run here, for the
sub-agent's own calls, with its agent id), and asks that travel to the parent as
ApprovalRequest (agentkit.subagent.worker.parent_link). None when there is nothing to
check, so calls run as they always did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.policy.approvals import ApprovalPolicy
from agentkit.policy.hook_config import HookConfig
from agentkit.policy.hooks import HookRunner
from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.subagent.record import record_path
from agentkit.subagent.worker.isolated import workspace_of
from agentkit.tools.gate import Asker, ToolGate

__all__ = ["worker_gate"]


def worker_gate(spec: WorkerSpec, settings: Settings, profile: Any, ask: Asker) -> ToolGate | None:
    """Return the sub-agent's gate, or None (no rules, no tool hooks). ``profile``: its
    AgentProfile or None; ``ask``: how an ask reaches the parent. Raises
    HookConfigError for a spec whose hooks are malformed (the parent checked them)."""
    rules = dict(settings.approvals)
    if profile is not None:
        rules.update(profile.approvals)
    hooks = None
    given = spec.extra.get("hooks")
    if isinstance(given, dict) and given.get("config"):
        base = dict(given.get("base") or {})
        name = (spec.extra.get("profile") or {}).get("name")
        base.update(
            agent_id=spec.agent_id,
            agent_type=name or "default",
            agent_transcript_path=str(record_path(Path(spec.deliverables_path))),
        )
        hooks = HookRunner(
            HookConfig.from_dict(given["config"]),
            workspace=workspace_of(spec),  # an isolated sub-agent's hooks: its copy
            settings=settings,
            base=base,
        )
    gate = ToolGate(
        ApprovalPolicy(rules), ask, hooks, settings.language, settings.approval_timeout_seconds
    )
    return gate if gate.active else None
