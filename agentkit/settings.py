"""Settings: every knob of agentkit, read from arguments first, then the environment.

Environment fallbacks, and ONLY these exact (case-sensitive) names (docs/architecture.md §6):
every field as ``AGENTKIT_<FIELD_NAME>`` (for example ``AGENTKIT_MODEL``,
``AGENTKIT_LANGUAGE``, ``AGENTKIT_MAX_CONCURRENT_SUBAGENTS``), plus ``OPENAI_API_KEY`` and
``OPENAI_BASE_URL`` (the openai package's own names; ``AGENTKIT_*`` wins when both are
set). A generic ``API_KEY``, ``BASE_URL``, ``api_key`` or ``model`` in the environment is
ignored, so that a key meant for another service never goes to this endpoint, nor this
key to another host. Constructor arguments take field names (and, as before, the alias
spellings such as ``OPENAI_API_KEY=``). List fields accept a comma-separated string from
the environment.
Defaults for sub-agent limits come from the seed specification
(docs/specification.md §1 and §8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agentkit._settings_env import (  # ENV_PREFIX, env_names re-exported
    ENV_PREFIX,
    OPENAI_ENV_NAMES,
    DocumentedEnvSource,
    env_names,
)

CommaList = Annotated[list[str], NoDecode]

MiB = 1024 * 1024

__all__ = ["ENV_PREFIX", "OPENAI_ENV_NAMES", "MiB", "Settings", "env_names"]


class Settings(BaseSettings):
    """All configuration of an Agent and its sub-agents (pydantic model).

    Units: durations in seconds, sizes in bytes, lengths in characters unless a
    name says lines or tokens. Raises ``pydantic.ValidationError`` on bad values.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        populate_by_name=True,
        extra="ignore",
        validate_default=True,
    )

    # --- model endpoint -------------------------------------------------------
    model: str | None = Field(default=None, description="Model name sent to the endpoint.")
    base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("base_url", "AGENTKIT_BASE_URL", "OPENAI_BASE_URL"),
        description="OpenAI-compatible base URL, e.g. http://localhost:11434/v1.",
    )
    api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("api_key", "AGENTKIT_API_KEY", "OPENAI_API_KEY"),
        description="API key; local servers accept any non-empty string.",
    )
    language: Literal["zh", "en"] = Field(
        default="zh", description="Language of prompts, templates and last_action texts."
    )
    stream: bool = Field(
        default=True, description="Stream replies (SSE); false sends plain requests."
    )
    temperature: float | None = Field(
        default=None,
        description="Sampling temperature sent with each request (None: the server's default).",
    )
    max_output_tokens: int | None = Field(
        default=None, description="max_tokens sent with each request (None: the server's default)."
    )
    request_timeout: float = Field(default=120.0, gt=0, description="Seconds per model request.")
    max_retries: int = Field(default=4, ge=0, description="Retries of a transient model error.")
    retry_base_delay: float = Field(default=1.0, ge=0, description="First backoff delay, seconds.")
    retry_max_delay: float = Field(
        default=60.0, ge=0, description="Cap on one wait, seconds; a longer Retry-After fails fast."
    )
    retry_total_seconds: float = Field(
        default=120.0,
        ge=0,
        description="A model outage (5xx, timeouts, dropped connections) is retried beyond max_retries until this many seconds since its first failure have passed (0: max_retries only; a server never reached still fails after one retry).",
    )
    tool_choice: str | None = Field(
        default=None,
        description="tool_choice sent with tools: auto, required, none, or tool names separated by commas: the first one offered is forced (e.g. create_sub_agent,finish_task forces the first on the main agent and the second on its sub-agents; None: the server's default).",
    )
    text_tool_call_fallback: bool = Field(
        default=False,
        description="Read tool calls that a model wrote as text (JSON or <tool_call> tags) when it sent none; for small local models.",
    )
    replay_reasoning: bool = Field(
        default=False,
        description="Send reasoning_content back on assistant tool-call messages (DeepSeek thinking mode with tools).",
    )
    system_role_after_start: bool = Field(
        default=True,
        description="Whether mid-conversation system messages may be sent; turned off for the session when a server refuses one.",
    )

    # --- conversation loop ----------------------------------------------------
    max_turns: int = Field(default=100, ge=1, description="Model requests per run (main agent).")
    context_window: int = Field(default=128_000, ge=1024, description="Model context, tokens.")
    context_budget: float = Field(
        default=0.8, gt=0, le=1, description="Share of context_window a request may use."
    )
    tool_workers: int = Field(
        default=8,
        ge=1,
        description="Tool calls of one message run at once, this many at most; calls naming the same path run one after another, in order.",
    )

    # --- files and search -----------------------------------------------------
    read_only_roots: CommaList = Field(
        default_factory=list, description="Extra folders outside the workspace that tools may read."
    )
    read_max_lines: int = Field(
        default=2000, description="read_file: lines returned by default (limit)."
    )
    read_max_line_chars: int = Field(
        default=2000, description="read_file: a longer line is cut, with a note on how to read on."
    )
    read_max_output_chars: int = Field(
        default=60_000, description="read_file: cap on one result, characters."
    )
    max_file_bytes: int = Field(default=10 * MiB, description="Largest file decoded whole (edit).")
    allow_hard_links: bool = Field(
        default=False,
        description="File tools: open files with several hard links (their other names may be "
        "outside the workspace); refused by default.",
    )
    search_max_results: int = Field(default=1000, description="Upper bound for max_results.")
    search_max_output_chars: int = Field(
        default=30_000, description="search_workspace: cap on one result, characters."
    )
    search_max_file_bytes: int = Field(
        default=5 * MiB, description="search_workspace: larger files are skipped."
    )
    search_timeout: float = Field(
        default=20.0,
        description="search_workspace: wall-clock limit, seconds; partial results after it.",
    )
    use_ripgrep: bool = Field(default=True, description="Use rg when it is on PATH.")

    # --- commands -------------------------------------------------------------
    command_timeout_max: float = Field(
        default=600.0, description="run_command: the largest timeout_seconds accepted."
    )
    command_kill_grace: float = Field(
        default=3.0,
        description="run_command: seconds between SIGTERM and SIGKILL of a timed-out command.",
    )
    command_background_services: bool = Field(
        default=False,
        description=(
            "run_command: let processes a command leaves running in the background (servers "
            "started with &, nohup, setsid) outlive the command; they end when the "
            "conversation is closed, and with the agent's process. Off: they are killed when "
            "the command ends. In the sandbox, later commands cannot reach them over the "
            "network unless command_network is all."
        ),
    )
    command_max_output_chars: int = Field(
        default=30_000, description="run_command: output shown (head and tail kept), characters."
    )
    command_allow: CommaList = Field(
        default_factory=list,
        description="If set, only commands starting with one of these run. Steers a model's habits; NOT a security boundary (`sh -c`, `$(...)`, `<(...)`, interpreters get past it): confinement is the command sandbox's job (command_sandbox).",
    )
    command_deny: CommaList = Field(
        default_factory=list,
        description="Commands starting with one of these are refused. Steers a model's habits; NOT a security boundary (`sh -c`, `eval`, variables, `xargs`, interpreters get past it): confinement is the command sandbox's job (command_sandbox).",
    )
    command_env_passthrough: CommaList = Field(
        default_factory=list,
        description="run_command: variable names or patterns (`*`, `?`, any case) passed to commands although their name or value looks secret, e.g. `GITHUB_TOKEN,NPM_*`. OPENAI_API_KEY, AGENTKIT_API_KEY and any value holding api_key are never passed.",
    )
    command_env_drop: CommaList = Field(
        default_factory=list,
        description="run_command: variable names or patterns (`*`, `?`, any case) always removed from commands' environment, on top of the built-in rule (agentkit/secrets.py: names with KEY, TOKEN, SECRET, PASSWORD, PAT, CREDENTIALS...; values that look like keys or URLs with a password).",
    )

    # --- web ------------------------------------------------------------------
    web_search_provider: str = Field(
        default="ddgs",
        description="web_search engine: ddgs, searxng:<base url>, or module:attribute naming a SearchProvider (or a factory of one), imported in every worker.",
    )
    web_search_backend: str = Field(
        default="auto",
        description="ddgs backend for web_search (auto, duckduckgo, bing, brave...).",
    )
    web_search_region: str = Field(
        default="wt-wt", description="ddgs region, e.g. wt-wt, us-en, cn-zh."
    )
    web_search_safesearch: str = Field(
        default="moderate", description="ddgs safesearch: on, moderate or off."
    )
    web_search_timeout: float = Field(default=20.0, description="Whole web_search call, seconds.")
    web_fetch_timeout: float = Field(
        default=30.0, description="Whole extract_webpage fetch, seconds."
    )
    web_max_bytes: int = Field(
        default=5 * MiB, description="extract_webpage: bytes read from one response."
    )
    web_max_redirects: int = Field(
        default=5, description="extract_webpage: redirects followed, each re-checked."
    )
    web_allow_hosts: CommaList = Field(
        default_factory=list,
        description="Hosts or CIDR networks extract_webpage may reach although private/loopback.",
    )

    # --- sub-agents (docs/specification.md §1, §8) ---------------------------------------------
    max_concurrent_subagents: int = Field(
        default=5, ge=1, description="Sub-agents running at once (the specification's limit, §8.1)."
    )
    subagent_timeout_min: int = Field(
        default=60,
        ge=1,
        description="Smallest timeout_seconds of create_sub_agent (specification §1: 60 s).",
    )
    subagent_timeout_max: int = Field(
        default=3600,
        ge=1,
        description="Largest timeout_seconds of create_sub_agent (specification §1: 3600 s).",
    )
    subagent_max_turns: int = Field(
        default=100, ge=1, description="Model requests one sub-agent may make."
    )
    subagent_max_nudges: int = Field(
        default=3,
        ge=0,
        description="Reminders to call finish_task (specification §4) before a sub-agent ends as failed.",
    )
    subagent_wrapup_at: float = Field(
        default=0.85,
        gt=0,
        lt=1,
        description="Share of the timeout when the wrap-up message is sent.",
    )
    subagent_start_method: Literal["forkserver", "spawn"] = Field(
        default="forkserver",
        description="How workers start: forkserver (fast, preloaded) or spawn.",
    )
    result_summary_max_chars: int = Field(
        default=2000, description="Cap on a sub-agent's result_summary returned to the main agent."
    )
    deliverables_list_max: int = Field(
        default=50, description="Cap on deliverables_files listed to the main agent."
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
    ray_num_cpus: float = Field(default=1.0, ge=0, description="CPUs Ray reserves per sub-agent.")
    ray_memory_mb: int | None = Field(
        default=None, ge=1, description="Memory (MiB) Ray reserves per sub-agent; None: none."
    )
    ray_resources: dict[str, float] = Field(
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

    # --- command sandbox (agentkit/tools/_sandbox.py) ----------------------------
    command_sandbox: Literal["auto", "bwrap", "none"] = Field(
        default="auto",
        description="run_command confinement: auto (bubblewrap where it works; otherwise unconfined, said once in the log), bwrap (required: commands are refused without it), none (unconfined).",
    )
    command_sandbox_mode: Literal["read-only", "workspace-write", "full"] = Field(
        default="workspace-write",
        description="What sandboxed commands may write: read-only (nothing that persists), workspace-write (the workspace; a sub-agent only its deliverables folder and the files it claimed), full (no sandbox at all: at the user's risk). read-only is never run unconfined.",
    )
    subagent_command_sandbox_mode: Literal["read-only", "workspace-write", "full"] | None = Field(
        default=None,
        description="A narrower command_sandbox_mode for sub-agents (e.g. read-only for review agents); a wider one is ignored: a sub-agent never gets more than the main agent.",
    )
    command_network: Literal["none", "loopback", "all"] = Field(
        default="none",
        description="Network of sandboxed commands: none (a private loopback only: the host, its 127.0.0.1 services and the internet are unreachable), loopback (also the TCP services listening on the host's loopback when the command starts, e.g. a dev database; no other host, no internet) or all. web_search and extract_webpage run in the agent and are not affected.",
    )
    command_writable_paths: CommaList = Field(
        default_factory=list,
        description="Folders outside the workspace that sandboxed commands may write (a cache such as ~/.cache/pip), in workspace-write mode.",
    )
    command_bwrap_path: str = Field(
        default="bwrap", description="The bubblewrap program (a name looked up on PATH, or a path)."
    )

    # --- user tools, MCP servers and agent profiles (reach every worker) ---------
    tools: CommaList = Field(
        default_factory=list,
        description="Custom tools by import reference, module:attribute (a Tool, a list of them or a function) or a module; imported in every agent, each offered where its `agents` field says (functions: both).",
    )
    mcp_servers: dict[str, Any] = Field(
        default_factory=dict,
        description='MCP servers in the mcpServers shape (JSON in the environment), added to .agentkit/mcp.json and ~/.config/agentkit/mcp.json; e.g. {"time": {"command": "mcp-server-time"}}.',
    )
    mcp_config_files: bool = Field(
        default=True,
        description="Read MCP servers from <workspace>/.agentkit/mcp.json and the user's config folder.",
    )
    mcp_start_timeout: float = Field(
        default=30.0, gt=0, description="MCP: seconds for a server to start and list its tools."
    )
    mcp_call_timeout: float = Field(
        default=120.0, gt=0, description="MCP: seconds one tool call may take."
    )
    mcp_max_output_chars: int = Field(
        default=30_000, ge=1000, description="MCP: cap on one tool result, characters."
    )
    agent_profiles: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Agent profiles given in Python (AgentProfile.to_dict()), beside the files in .agentkit/agents/ and ~/.config/agentkit/agents/.",
    )

    # --- tool calling on servers without native tool calls ------------------------
    tool_calling: Literal["native", "prompted", "auto"] = Field(
        default="native",
        description="How tools reach the model: native (the tools parameter), prompted (described in the system prompt, calls read from the reply, results sent as user messages; for servers or models without working native tool calls), or auto (native, switching to prompted for the session when the first attempt shows the server cannot do it). Transcripts keep the standard shape either way.",
    )
    tool_call_constraint: Literal["auto", "json_schema", "grammar", "none"] = Field(
        default="auto",
        description="Prompted tool calls: constrain the reply to a valid call of an offered tool or a final answer: json_schema (the standard response_format: vLLM, llama-server, Ollama, LM Studio, SGLang), grammar (llama.cpp's grammar field: llama-cpp-python), none, or auto (json_schema, then grammar when the server refuses it). A refused constraint is dropped for the session.",
    )
    tool_call_grammar: bool = Field(
        default=True,
        description="Older switch: false means tool_call_constraint = none.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments first, then only the documented environment names (no .env, no
        secrets folder: neither was ever configured)."""
        return init_settings, DocumentedEnvSource(settings_cls)

    @field_validator(
        "read_only_roots",
        "command_allow",
        "command_deny",
        "command_env_passthrough",
        "command_env_drop",
        "web_allow_hosts",
        "command_writable_paths",
        "tools",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, (list, tuple)):
            return [str(part) for part in value]
        return value

    @field_validator(
        "ray_resources", "ray_label_selector", "mcp_servers", "agent_profiles", mode="before"
    )
    @classmethod
    def _json_mapping(cls, value: Any) -> Any:
        # From the environment these come as JSON text.
        if isinstance(value, (list, tuple)):  # agent_profiles: AgentProfile objects too
            return [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
        if isinstance(value, str):
            import json

            try:
                return json.loads(value) if value.strip() else {}
            except ValueError as exc:
                raise ValueError(f"must be JSON (got {value!r})") from exc
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value and not value.strip().lower().startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {value!r})")
        return value.strip() if value else value

    def read_only_paths(self) -> list[Path]:
        """Return ``read_only_roots`` as resolved absolute paths."""
        return [Path(p).expanduser().resolve() for p in self.read_only_roots]
