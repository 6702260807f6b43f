"""A sub-agent's command sandbox: its mode (narrowed, never widened) and where its
commands may write (its deliverables folder and the files it claimed, seed §8.2).

Used by the worker (agentkit.subagent.worker) when it starts; the sandbox itself is
agentkit.tools._sandbox.
"""

from __future__ import annotations

from pathlib import Path

from agentkit.settings import Settings
from agentkit.subagent.contract import WorkerSpec
from agentkit.tools._sandbox import WriteScope, narrow_mode, set_write_scope
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


def confine_writes(spec: WorkerSpec, claim_write: WriteClaim) -> WriteClaim:
    """Confine the sub-agent's commands to its deliverables folder and the files it has
    claimed (agentkit.tools._sandbox); returns ``claim_write`` wrapped to record each grant."""
    granted: list[Path] = []

    def claim(path: Path) -> None:
        claim_write(path)
        granted.append(path)

    label = (
        f"only your deliverables folder {spec.deliverables_dir} and the files you "
        "already wrote with write_file/edit_file"
    )
    scope = WriteScope((Path(spec.deliverables_path),), lambda: tuple(granted), label)
    set_write_scope(spec.process_mark, scope)
    return claim
