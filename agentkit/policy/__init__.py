"""Approvals and hooks: the parts both the main process and a sub-agent's worker use.

docs/approvals.md is the contract. The map:

- ``approvals.py``: the ``approvals`` rules (a tool name, a glob over names,
  ``run_command:<glob on the command line>``, path, URL and query globs; the most
  specific key wins, unlisted tools are allowed) and ``ApprovalPolicy.decide``;
- ``hook_config.py``: hooks in Claude Code's shape, from ``~/.config/agentkit/hooks.json``,
  ``.agentkit/hooks.json`` and ``Settings.hooks``, checked (errors name file and field);
- ``hooks.py``: ``HookRunner``, which runs command hooks (owned processes, the workspace
  as working directory, a timeout, the scrubbed environment) and Python hooks.

The gate a tool call passes is agentkit.tools.gate (it builds tool results); the broker
of a conversation's pending requests is agentkit.chat.approvals; a worker's gate,
agentkit.subagent.worker.approvals.
"""
