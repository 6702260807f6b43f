"""What a sub-agent waiting for a Ray host says (its record and status row).

One job: :func:`note_waiting` (a running record with ``waiting_for`` and a Progress
whose last action says what it waits for) and the texts (:data:`WAITING`,
:data:`STARTING`), used by agentkit.subagent.launchers.ray until the worker's first
own progress.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agentkit.conversation import SEED_COUNTERS
from agentkit.settings import MiB
from agentkit.subagent.contract import Progress, WorkerSpec
from agentkit.subagent.launchers.ray_channel import RayEndpoint

__all__ = ["STARTING", "WAITING", "note_waiting"]

log = logging.getLogger("agentkit")

# What a sub-agent waiting for a host says (its status row's last_action, its record's
# waiting_for) until its worker's first progress.
WAITING = "Waiting for Ray cluster resources to start its worker ({need} per sub-agent)"
STARTING = Progress(
    counters=dict.fromkeys(SEED_COUNTERS, 0),
    last_action="Starting its worker on a Ray node",
    turns=0,
    token_usage={},
)


def note_waiting(spec: WorkerSpec, endpoint: RayEndpoint, options: dict[str, Any]) -> None:
    """Say that ``spec``'s sub-agent waits for cluster resources: a running record
    with ``waiting_for`` (the worker's own record replaces it) and a Progress whose
    last_action says so. A record that cannot be written is only logged."""
    from agentkit.subagent.launchers.ray_channel import empty_progress
    from agentkit.subagent.record import NO_TOKENS, build_record, write_record

    need = [f"{options.get('num_cpus') or 0:g} CPU"]
    if options.get("memory"):
        need.append(f"{options['memory'] // MiB} MiB")
    need += [f"{v:g} {k}" for k, v in sorted((options.get("resources") or {}).items())]
    text = WAITING.format(need=", ".join(need))
    stats = {"runtime_seconds": 0, **empty_progress().counters, "token_usage": dict(NO_TOKENS)}
    record = build_record(spec, "running", messages=[], stats=stats)
    record["waiting_for"] = text
    try:
        write_record(Path(spec.deliverables_path), record, root=Path(spec.workspace))
    except OSError as exc:
        log.warning("agentkit: could not write sub-agent %s's record: %s", spec.agent_id, exc)
    counters = empty_progress().counters
    endpoint.note(Progress(counters=counters, last_action=text, turns=0, token_usage={}))
