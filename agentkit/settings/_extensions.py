"""Settings fields: user tools, MCP servers, profiles, AGENTS.md and skills, approvals and hooks.

A mixin of :class:`agentkit.settings.Settings` (one group of fields by concern; the
descriptions are the guide's settings table, docs/guide/settings.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, Field

from agentkit.settings._types import MAX_CHARS, CommaList, Seconds

if TYPE_CHECKING:
    from agentkit.profiles import AgentProfile

    # What Settings(agent_profiles=[...]) accepts: AgentProfile objects or their dicts.
    # At run time the field holds dicts only (Settings turns each profile into
    # AgentProfile.to_dict() before validating), and pydantic sees that type.
    ProfileEntry: TypeAlias = dict[str, Any] | AgentProfile
else:
    ProfileEntry = dict[str, Any]

__all__ = ["ExtensionFields"]


class ExtensionFields(BaseModel):
    """User tools, MCP servers, profiles, AGENTS.md and skills, approvals and hooks."""

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
    mcp_start_timeout: Seconds = Field(
        default=30.0, gt=0, description="MCP: seconds for a server to start and list its tools."
    )
    mcp_call_timeout: Seconds = Field(
        default=120.0, gt=0, description="MCP: seconds one tool call may take."
    )
    mcp_max_output_chars: int = Field(
        default=30_000,
        ge=1000,
        le=MAX_CHARS,
        description="MCP: cap on one tool result, characters.",
    )
    agent_profiles: list[ProfileEntry] = Field(
        default_factory=list,
        description="Agent profiles given in Python (AgentProfile.to_dict()), beside the files in .agentkit/agents/ and ~/.config/agentkit/agents/.",
    )

    user_files: bool = Field(
        default=True,
        description="Read the user's own files in ~/.config/agentkit ($XDG_CONFIG_HOME/agentkit): AGENTS.md, skills, agent profiles, mcp.json and hooks.json; false reads nothing from the home folder (a server).",
    )

    # --- project conventions: AGENTS.md and Agent Skills (agentkit/conventions/) --------
    agents_md: bool = Field(
        default=True,
        description="Add AGENTS.md files to the agents' instructions: ~/.config/agentkit/AGENTS.md and the workspace's; for a sub-agent also those of the folders down to its deliverables folder (nearest last). Read again at each round.",
    )
    agents_md_max_chars: int = Field(
        default=16_000,
        ge=1,
        le=MAX_CHARS,
        description="Cap on one agent's AGENTS.md text, characters; the farthest files are cut first, and the cut is said in the text.",
    )
    skills: bool = Field(
        default=True,
        description="Offer Agent Skills (.agents/skills/*/SKILL.md, .agentkit/skills/*/SKILL.md, ~/.config/agentkit/skills/*/SKILL.md): a list of names and descriptions in the instructions and the load_skill tool.",
    )
    skills_list_max_chars: int = Field(
        default=1300,
        ge=200,
        le=MAX_CHARS,
        description="Cap on the skill list in the instructions, characters: long descriptions are shortened first, then the last skills are left out (said in the list).",
    )

    # --- approvals and hooks (agentkit/policy/, docs/approvals.md) ------------------
    approvals: dict[str, Literal["allow", "ask", "deny"]] = Field(
        default_factory=dict,
        description='Approval rules, a JSON object: keys are tool names (write_file), globs over them (mcp__github__*) or run_command:<glob on the command line> (run_command:git push*; also read_file/write_file/edit_file:<path glob>); values allow, ask (the call waits for a person) or deny. The most specific key wins; unlisted tools are allowed. E.g. {"run_command:git push*": "ask", "write_file:*.env": "deny"}.',
    )
    approvals_default: Literal["deny", "allow"] = Field(
        default="deny",
        description='What an ask becomes where no one can answer it (agentkit run without a terminal, a script that gave no on_approval): deny, with the reason "no one to ask", or allow (agentkit run --yes).',
    )
    approval_timeout_seconds: Seconds | None = Field(
        default=None,
        gt=0,
        description="Seconds an approval request waits for an answer before the call is denied (None: as long as it takes; a waiting sub-agent's timeout clock is paused meanwhile).",
    )
    hooks: dict[str, Any] = Field(
        default_factory=dict,
        description='Hooks in Claude Code\'s shape (JSON in the environment), added to .agentkit/hooks.json and ~/.config/agentkit/hooks.json: {"hooks": {"PreToolUse": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "./check.sh"}]}]}}.',
    )
    hook_timeout_seconds: Seconds = Field(
        default=30.0,
        gt=0,
        description="Seconds a hook command may run (a hook's own timeout wins); then it is killed and reported, and does not block.",
    )
