"""A sub-agent's command sandbox: its mode (narrowed, never widened) and where its
commands may write (its deliverables folder and the files it claimed, seed §8.2).

Used by the worker (agentkit.subagent.worker) when it starts: the scope travels in
``ToolContext.write_scope`` to run_command, which hands it to the sandbox
(agentkit.process.sandbox.confine).
"""

from __future__ import annotations

from pathlib import Path

from agentkit.process.sandbox import WriteScope, narrow_mode
from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.tools.base import WriteClaim


def command_settings(spec: WorkerSpec, settings: Settings) -> Settings:
    """Return ``settings`` with the sub-agent's command sandbox mode: the narrowest of the
    main agent's ``command_sandbox_mode``, ``subagent_command_sandbox_mode`` and
    ``spec.extra["command_sandbox_mode"]`` (a launcher's or profile's request), so a
    request narrows but never widens. Raises ValueError on an unknown mode."""
    mode = narrow_mode(
        settings.command_sandbox_mode,
        settings.subagent_command_sandbox_mode,
        spec.extra.get("command_sandbox_mode"),
    )
    return settings.model_copy(update={"command_sandbox_mode": mode})


def confine_writes(spec: WorkerSpec, claim_write: WriteClaim) -> tuple[WriteClaim, WriteScope]:
    """Confine the sub-agent's commands to its deliverables folder and the files it has
    claimed.

    Returns:
        ``(claim, scope)``: ``claim_write`` wrapped to record each grant, for
        ``ToolContext.claim_write``, and the :class:`~agentkit.process.sandbox.WriteScope`
        that lists the deliverables folder and those grants, for
        ``ToolContext.write_scope``.
    """
    granted: list[Path] = []

    def claim(path: Path) -> None:
        claim_write(path)
        granted.append(path)

    label = (
        f"only your deliverables folder {spec.deliverables_dir} and the files you "
        "already wrote with write_file/edit_file"
    )
    return claim, WriteScope((Path(spec.deliverables_path),), lambda: tuple(granted), label)
