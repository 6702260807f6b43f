"""Which deliverables folder a created sub-agent tries, in order.

One job: :func:`folder_choices`. Sub-agent ids count from 1 in every conversation,
and the seed's default folder is ``sub_agent_results/agent_<id>``
(docs/specification.md §1), so conversations sharing a workspace ask for the same
default folders. The default is used when free; when a running sub-agent of
another conversation holds it (its OS lock, agentkit.subagent.folder_lock, or its
record), the sub-agent takes a folder of its conversation's own,
``sub_agent_results/<conversation id>/agent_<id>``, and every result, notification
and record names that folder. A folder the model names (``deliverables_dir``) is
the only choice: it is refused while another sub-agent holds it, as the seed says.
Pure: nothing here reads or makes a folder.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_PARENT", "default_folder", "folder_choices", "own_folder"]

DEFAULT_PARENT = "sub_agent_results"
"""The folder the default deliverables folders are made in."""

KEY_MAX_CHARS = 64
"""Most characters of a conversation id used as a folder name."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def default_folder(agent_id: int) -> str:
    """The seed's default deliverables folder of sub-agent ``agent_id``:
    ``sub_agent_results/agent_<id>`` (relative to the workspace)."""
    return f"{DEFAULT_PARENT}/agent_{agent_id}"


def own_folder(conversation_id: str, agent_id: int) -> str:
    """The folder of its conversation's own that sub-agent ``agent_id`` takes when
    another conversation's sub-agent holds its default one:
    ``sub_agent_results/<conversation id>/agent_<id>``. Characters of the id outside
    ``[A-Za-z0-9_-]`` become ``_`` and it is cut to :data:`KEY_MAX_CHARS` (an empty
    id becomes ``conversation``), so the result is always one plain folder name
    deep: no ``..``, no hidden or record folder."""
    key = _UNSAFE.sub("_", conversation_id)[:KEY_MAX_CHARS] or "conversation"
    return f"{DEFAULT_PARENT}/{key}/agent_{agent_id}"


def is_named(given: str | None) -> bool:
    """Whether ``deliverables_dir`` was given (not missing, empty or blank)."""
    return bool(given and given.strip())


def folder_choices(given: str | None, agent_id: int, conversation_id: str) -> tuple[str, ...]:
    """The deliverables folders a create_sub_agent request tries, in order:
    ``(given,)`` when the model named one (as it gave it; admission resolves and
    checks it), else ``(default_folder(agent_id), own_folder(conversation_id,
    agent_id))``: the second only when another conversation's sub-agent holds the
    first."""
    if given is not None and is_named(given):
        return (given,)
    return (default_folder(agent_id), own_folder(conversation_id, agent_id))
