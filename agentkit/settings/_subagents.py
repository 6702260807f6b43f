"""Settings fields: sub-agents: the seed's limits, the control plane, where workers run.

A mixin of :class:`agentkit.settings.Settings` (one group of fields by concern; the
descriptions are the guide's settings table, docs/guide/settings.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agentkit.settings._types import (
    MAX_CHARS,
    MAX_COUNT,
    MAX_MIB,
    MAX_TOKENS,
    MAX_WHOLE_SECONDS,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Seconds,
)

__all__ = ["SubAgentFields"]


class SubAgentFields(BaseModel):
    """Sub-agents: the seed's limits, the control plane, where workers run."""

    # --- sub-agents (docs/specification.md §1, §8) ---------------------------------------------
    max_concurrent_subagents: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Sub-agents running at once (the specification's limit, §8.1; 1-1000).",
    )
    subagent_timeout_min: int = Field(
        default=60,
        ge=1,
        le=MAX_WHOLE_SECONDS,
        description="Smallest timeout_seconds of create_sub_agent (specification §1: 60 s); at most subagent_timeout_max.",
    )
    subagent_timeout_max: int = Field(
        default=3600,
        ge=1,
        le=MAX_WHOLE_SECONDS,
        description="Largest timeout_seconds of create_sub_agent (specification §1: 3600 s).",
    )
    subagent_default_timeout: int = Field(
        default=600,
        ge=1,
        le=MAX_WHOLE_SECONDS,
        description="timeout_seconds of a create_sub_agent call that gives none (specification §1: 600 s); from subagent_timeout_min to subagent_timeout_max.",
    )
    subagent_max_turns: int = Field(
        default=100, ge=1, le=MAX_COUNT, description="Model requests one sub-agent may make."
    )
    subagent_max_nudges: int = Field(
        default=3,
        ge=0,
        le=1000,
        description="Reminders to call finish_task (specification §4) before a sub-agent ends as failed (0-1000).",
    )
    subagent_wrapup_at: PositiveFloat = Field(
        default=0.85,
        gt=0,
        lt=1,
        description="Share of the timeout when the wrap-up message is sent.",
    )
    subagent_start_method: Literal["forkserver", "spawn"] = Field(
        default="forkserver",
        description="How workers start: forkserver (fast, preloaded) or spawn.",
    )
    result_summary_max_chars: PositiveInt = Field(
        default=2000,
        le=MAX_CHARS,
        description="Cap on a sub-agent's result_summary returned to the main agent.",
    )
    deliverables_list_max: NonNegativeInt = Field(
        default=50, le=MAX_COUNT, description="Cap on deliverables_files listed to the main agent."
    )

    max_open_conversations: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="Live conversations one Workspace (agentkit serve) holds at once; to open one more, the least recently used idle one (no round, nothing queued, no sub-agent running, no reader of its events) is closed, and reopened when it is next used. When every one is busy, opening another is refused (HTTP 503). At most 100000.",
    )

    # --- the control plane, budgets and cost (docs/control-plane.md) --------------
    subagent_control: bool = Field(
        default=False,
        description="The two-way control plane: the main agent gets message_sub_agent, continue_sub_agent, wait_for_sub_agents and answer_sub_agent, sub-agents get ask_parent; status rows and notifications show tokens and cost. Off: every request is as without it.",
    )
    subagent_isolation: Literal["off", "available", "always"] = Field(
        default="off",
        description="Isolated sub-agents (docs/isolation.md): off (every request as without it), available (create_sub_agent gains isolation: shared or isolated, default shared; a profile may set its default) or always (every sub-agent works on its own copy of the workspace). An isolated sub-agent's changes reach the workspace only through merge_sub_agent (or are dropped by discard_sub_agent_changes), tools the main agent gets whenever this is not off.",
    )
    ask_parent_max_wait_seconds: Seconds = Field(
        default=900.0,
        gt=0,
        description="ask_parent: seconds a sub-agent waits for its parent's answer (its timeout clock paused meanwhile); then it is told no answer came and goes on.",
    )
    subagent_max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description="Prompt plus completion tokens one sub-agent run may use (a profile's max_tokens wins); past 85 % it is told to wrap up, at 100 % it ends as budget_exhausted. None: no limit.",
    )
    session_max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description="Tokens a whole conversation may use, the main agent and every sub-agent together; a sub-agent is never given more than what remains. None: no limit.",
    )
    session_max_cost_usd: PositiveFloat | None = Field(
        default=None,
        gt=0,
        description="US dollars a whole conversation may spend (priced responses; see model_prices), the main agent and every sub-agent together. None: no limit.",
    )
    model_prices: dict[str, dict[str, NonNegativeFloat]] = Field(
        default_factory=dict,
        description='Prices for models the price library (genai-prices) does not know, or to override it: model name → USD per million tokens (JSON in the environment), e.g. {"my-model": {"input": 0.5, "cached_input": 0.1, "output": 1.5}}.',
    )

    # --- where sub-agent workers run (local processes or a Ray cluster) ----------
    subagent_launcher: Literal["local", "ray"] = Field(
        default="local",
        description="Where workers run: local (forkserver processes) or ray (a Ray cluster; "
        "needs the ray extra and a workspace every node mounts at the same path).",
    )
    ray_address: str = Field(
        default="auto",
        description="Ray cluster to join: auto (RAY_ADDRESS or this node's), host:port, "
        "or ray://host:port. agentkit never starts a cluster itself.",
    )
    ray_num_cpus: NonNegativeFloat = Field(
        default=1.0, ge=0, description="CPUs Ray reserves per sub-agent."
    )
    ray_memory_mb: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MIB,
        description="Memory (MiB) Ray reserves per sub-agent; None: none.",
    )
    ray_resources: dict[str, NonNegativeFloat] = Field(
        default_factory=dict,
        description='Custom Ray resources per sub-agent (JSON in the environment, e.g. {"gpu_box": 1}).',
    )
    ray_label_selector: dict[str, str] = Field(
        default_factory=dict,
        description='Node labels a sub-agent\'s node must have (JSON, e.g. {"pool": "agents"}).',
    )
    ray_scheduling: Literal["SPREAD", "DEFAULT"] = Field(
        default="SPREAD",
        description="Ray placement: SPREAD (over the nodes) or DEFAULT (Ray's packing).",
    )
    ray_pool_size: int = Field(
        default=2,
        ge=0,
        le=1000,
        description="Warm Ray host actors kept ready (each with the worker modules preloaded, "
        "each reserving one sub-agent's resources); more start when all are busy. 0: one "
        "fresh actor per sub-agent.",
    )
    ray_pool_idle_seconds: Seconds = Field(
        default=300.0,
        gt=0,
        description="A warm Ray host actor nobody used for this long ends (seconds).",
    )
