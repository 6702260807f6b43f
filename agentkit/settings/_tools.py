"""Settings fields: the tools: files and search, commands and their sandbox, the web.

A mixin of :class:`agentkit.settings.Settings` (one group of fields by concern; the
descriptions are the guide's settings table, docs/guide/settings.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agentkit.settings._types import (
    MAX_BYTES,
    MAX_CHARS,
    MAX_COUNT,
    MAX_MIB,
    CommaList,
    MiB,
    NonNegativeInt,
    NonNegativeSeconds,
    PositiveInt,
    Seconds,
)

__all__ = ["ToolFields"]


class ToolFields(BaseModel):
    """The tools: files and search, commands and their sandbox, the web."""

    # --- files and search -----------------------------------------------------
    read_only_roots: CommaList = Field(
        default_factory=list, description="Extra folders outside the workspace that tools may read."
    )
    read_max_lines: PositiveInt = Field(
        default=2000, le=MAX_COUNT, description="read_file: lines returned by default (limit)."
    )
    read_max_line_chars: PositiveInt = Field(
        default=2000,
        le=MAX_CHARS,
        description="read_file: a longer line is cut, with a note on how to read on.",
    )
    read_max_output_chars: PositiveInt = Field(
        default=60_000, le=MAX_CHARS, description="read_file: cap on one result, characters."
    )
    max_file_bytes: PositiveInt = Field(
        default=10 * MiB, le=MAX_BYTES, description="Largest file decoded whole (edit)."
    )
    allow_hard_links: bool = Field(
        default=False,
        description="File tools: open files with several hard links (their other names may be "
        "outside the workspace); refused by default.",
    )
    search_max_results: PositiveInt = Field(
        default=1000, le=MAX_COUNT, description="Upper bound for max_results."
    )
    search_max_output_chars: PositiveInt = Field(
        default=30_000, le=MAX_CHARS, description="search_workspace: cap on one result, characters."
    )
    search_max_file_bytes: PositiveInt = Field(
        default=5 * MiB, le=MAX_BYTES, description="search_workspace: larger files are skipped."
    )
    search_timeout: Seconds = Field(
        default=20.0,
        description="search_workspace: wall-clock limit, seconds; partial results after it.",
    )
    use_ripgrep: bool = Field(default=True, description="Use rg when it is on PATH.")

    # --- commands -------------------------------------------------------------
    command_timeout_max: Seconds = Field(
        default=600.0, description="run_command: the largest timeout_seconds accepted."
    )
    command_kill_grace: NonNegativeSeconds = Field(
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
    command_max_output_chars: PositiveInt = Field(
        default=30_000,
        le=MAX_CHARS,
        description="run_command: output shown (head and tail kept), characters.",
    )
    command_max_processes: int = Field(
        default=2048,
        ge=0,
        le=4_194_304,
        description="run_command: the most processes and threads one command may run at once (a fork bomb stops there): a cgroup pids.max where the agent may create cgroups, else RLIMIT_NPROC in the command's user namespace (never binds root); 0: no limit; at most 4194304, the kernel's largest pid_max. The log says once what is in force (agentkit/process/limits.py).",
    )
    command_max_memory_mb: int | None = Field(
        default=None,
        ge=0,
        le=MAX_MIB,
        description="run_command: memory of one command, MB: a cgroup memory.max (all its processes together, no swap) where a cgroup v2 memory controller is delegated, else RLIMIT_AS (address space of each process). Unset: half the machine's memory with a cgroup, no limit without one; 0: no limit.",
    )
    command_cpu_weight: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="run_command: a command's CPU share against the agent's 100 (cgroup v2 cpu.weight, 1-10000), where a cgroup cpu controller is delegated.",
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
        description="run_command: variable names or patterns (`*`, `?`, any case) always removed from commands' environment, on top of the built-in rule (agentkit/process/secrets.py: names with KEY, TOKEN, SECRET, PASSWORD, PAT, CREDENTIALS...; values that look like keys or URLs with a password).",
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
    web_search_timeout: Seconds = Field(default=20.0, description="Whole web_search call, seconds.")
    web_fetch_timeout: Seconds = Field(
        default=30.0, description="Whole extract_webpage fetch, seconds."
    )
    web_max_bytes: PositiveInt = Field(
        default=5 * MiB, le=MAX_BYTES, description="extract_webpage: bytes read from one response."
    )
    web_max_redirects: NonNegativeInt = Field(
        default=5,
        le=100,
        description="extract_webpage: redirects followed, each re-checked (0-100).",
    )
    web_allow_hosts: CommaList = Field(
        default_factory=list,
        description="Hosts or CIDR networks extract_webpage may reach although private/loopback.",
    )

    # --- command sandbox (agentkit/process/sandbox.py) ----------------------------
    command_sandbox: Literal["auto", "bwrap", "none"] = Field(
        default="auto",
        description="run_command confinement: auto (bubblewrap where it works; otherwise unconfined, said once at the start with how to install bubblewrap), bwrap (required: commands are refused without it), none (unconfined).",
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
